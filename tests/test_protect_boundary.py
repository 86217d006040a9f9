"""`protect: boundary` (the first and the last block always stay, as in the paper's reference [22]):
every search, the prior, CBO's enumeration and the exhaustive optimum respect it."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from depthprune.cli import main
from depthprune.io import read_json
from depthprune.models.pruning import protected_blocks
from depthprune.search import ALGORITHMS
from depthprune.search.runner import run_search
from synthetic import random_objective

N = 12
FAST = {
    "bo": {"n_trials": 40},
    "ga": {"generations": 5},
    "bo_random": {"n_trials": 40},
    "ga_random": {"generations": 5},
}


def boundary_objective(seed=1, interaction=0.3):
    """A synthetic objective where blocks 0 and N−1 are by far the most removable: a search that
    ignored the barrier would take them."""
    ev = random_objective(N, seed=seed, interaction=interaction, protected=protected_blocks((), "boundary", N))
    ev.unary[[0, N - 1]] = -5.0
    return ev


def test_protected_blocks():
    assert protected_blocks((), "none", N) == ()
    assert protected_blocks((), "boundary", N) == (0, N - 1)
    assert protected_blocks((4, 0), "boundary", N) == (0, 4, N - 1)
    assert protected_blocks((4,), "none", N) == (4,)
    with pytest.raises(ValueError, match="expected none or boundary"):
        protected_blocks((), "edges", N)
    with pytest.raises(ValueError, match="at least 3 blocks"):
        protected_blocks((), "boundary", 2)


@pytest.mark.parametrize("name", [*ALGORITHMS, "cbo_ablation"])
def test_every_search_keeps_the_first_and_last_block(name, tmp_path):
    algorithm, params = ("cbo", {"coefficients": "ablation"}) if name == "cbo_ablation" else (name, {})
    ev = boundary_objective()
    for budget in (1, 4, N - 3):  # N − 3: every removable block but one
        result = run_search(
            ev,
            algorithm,
            budget,
            ev.prior(),
            seed=0,
            workdir=tmp_path / str(budget),
            params={**FAST.get(algorithm, {}), **params},
        )
        assert len(result.removed) == budget
        assert {0, N - 1}.isdisjoint(result.removed)
        assert all({0, N - 1}.isdisjoint(entry.removed) for entry in result.trace)


def test_prior_leaves_the_boundary_out():
    ev = boundary_objective()
    prior = ev.prior()
    assert np.isnan(prior[0]) and np.isnan(prior[N - 1])
    assert np.isfinite(prior[1 : N - 1]).all()


@pytest.mark.parametrize("budget", [2, 3, 5])
def test_exhaustive_optimum_is_the_barrier_restricted_brute_force(budget, tmp_path):
    ev = boundary_objective(seed=4, interaction=0.5)
    restricted = min(itertools.combinations(range(1, N - 1), budget), key=lambda s: (ev.true_loss(s), s))
    unrestricted = min(itertools.combinations(range(N), budget), key=lambda s: (ev.true_loss(s), s))
    assert restricted != unrestricted  # the barrier matters on this objective
    result = run_search(ev, "exhaustive", budget, ev.prior(), seed=0, workdir=tmp_path)
    assert result.removed == restricted
    assert result.loss == pytest.approx(ev.true_loss(restricted))


def tiny_args(model_dir, data_dir, calibration):
    return [
        "--model",
        str(model_dir),
        "--calibration",
        calibration,
        "--data-dir",
        str(data_dir),
        "--n-samples",
        "4",
        "--seq-len",
        "32",
    ]


def test_cli_prior_and_search_under_boundary(tiny_model_dir, data_dir, tmp_path):
    """The real CLI on the tiny 8-block model: the prior leaves blocks 0 and 7 out, the search never
    removes them, and a search under `--protect none` refuses the boundary prior."""
    common = tiny_args(tiny_model_dir, data_dir, "ppl_c4")
    prior_path = tmp_path / "prior.json"
    assert main(["prior", *common, "--protect", "boundary", "--out", str(prior_path)]) == 0
    prior = read_json(prior_path)
    assert prior["scores"][0] is None and prior["scores"][7] is None
    assert all(s is not None for s in prior["scores"][1:7])
    assert prior["evaluator"]["protected"] == [0, 7]
    search = ["search", *common, "--prior", str(prior_path), "--workdir", str(tmp_path / "work")]
    out = ["--out-selection", str(tmp_path / "sel.json"), "--out-trace", str(tmp_path / "trace.csv")]
    for algorithm in ("one_shot", "greedy"):
        assert main([*search, "--protect", "boundary", "--algorithm", algorithm, "--budget", "5", *out]) == 0
        removed = json.loads((tmp_path / "sel.json").read_text())["removed"]
        assert len(removed) == 5 and {0, 7}.isdisjoint(removed)
    one_shot = sorted(sorted(range(1, 7), key=lambda i: (prior["scores"][i], i))[:5])
    assert main([*search, "--protect", "boundary", "--algorithm", "one_shot", "--budget", "5", *out]) == 0
    assert json.loads((tmp_path / "sel.json").read_text())["removed"] == one_shot
    # 6 would leave no removable block besides the boundary's: refused.
    assert main([*search, "--protect", "boundary", "--algorithm", "greedy", "--budget", "6", *out]) == 2
    assert main([*search, "--algorithm", "one_shot", "--budget", "3", *out]) == 2  # prior says protected [0, 7]


def test_aggregate_records_each_models_search_space(tmp_path):
    """`aggregate --protected MODEL=SPEC` (the aggregate rule passes each model's model_table entry)
    adds the `protected` column the agreement nulls read; a set that removes a protected block is an
    error naming its file; without protection the aggregate keeps its columns."""
    import pandas as pd

    from depthprune.reporting.aggregate import add_protected, protected_layers
    from depthprune.reporting.analysis.frames import depth_of
    from depthprune.workflow import aggregate_protected_args

    assert protected_layers("boundary", 30) == (0, 29)
    assert protected_layers("4,boundary", 30) == (0, 4, 29) and protected_layers("", 30) == ()
    with pytest.raises(ValueError, match="neither a block index"):
        protected_layers("30", 30)
    selections = pd.DataFrame(
        {"model": ["m", "m"], "removed": ["3 5", "4 6"], "n_layers": [12, 12], "source": ["a.json", "b.json"]}
    )
    assert "protected" not in add_protected(selections, {})
    recorded = add_protected(selections, {"m": "boundary"})
    assert list(recorded["protected"]) == ["0 11", "0 11"]
    assert depth_of(recorded.assign(layers=[(3, 5), (4, 6)])) == 10  # 12 blocks less the 2 kept
    assert depth_of(selections.assign(layers=[(3, 5), (4, 6)])) == 12
    with pytest.raises(ValueError, match=r"b\.json: removes protected block\(s\) \[6\]"):
        add_protected(selections, {"m": "6"})

    table = {"a": {"protected_layers": [], "protect": "boundary"}, "b": {"protected_layers": [3], "protect": "none"}}
    assert aggregate_protected_args({"models": ["a", "b"], "model_table": table}) == (
        "--protected a=boundary --protected b=3"
    )
    none = {"models": ["b"], "model_table": {"b": {"protected_layers": [], "protect": "none"}}}
    assert aggregate_protected_args(none) == ""
