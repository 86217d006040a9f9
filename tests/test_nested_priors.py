"""Nested TLM priors (docs/method.md §3): a seed's draws are nested, so the prior of its first n
items is the mean of a larger draw's per-item losses; `depthprune prior --items-from` derives it
without running a block, and refuses a source that is not a prefix of the same computation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from depthprune.calibration import data as calib_data


def test_a_seeds_draws_are_nested(data_dir):
    """What derivation relies on (and checks item by item at run time): seed k's n rows are the first
    n of its 128, for every size of the calibration-size presets."""
    population = len(calib_data.load_cs170k_rows_located(data_dir))
    for seed in range(8):
        largest = calib_data.sample_indices(population, 128, seed, "cs170k")
        for n in (8, 16, 32, 64):
            assert calib_data.sample_indices(population, n, seed, "cs170k") == largest[:n], (seed, n)


def _args(tiny_model_dir, data_dir, n_samples, seed=1, loss="margin"):
    return [
        "--model",
        str(tiny_model_dir),
        "--name",
        "tiny",
        "--calibration",
        "tlm_cs170k",
        "--data-dir",
        str(data_dir),
        "--n-samples",
        str(n_samples),
        "--seq-len",
        "48",
        "--seed",
        str(seed),
        "--tlm-loss",
        loss,
        "--calibration-label",
        f"tlm_cs170k-n{n_samples}",
    ]


@pytest.mark.parametrize("loss", ["margin", "cross_entropy"])
def test_item_scores_average_to_the_loss_and_the_accuracy(loss, tiny_model_dir, data_dir):
    from depthprune.cli import build_parser
    from depthprune.cli_common import build_evaluator

    args = build_parser().parse_args(["prior", *_args(tiny_model_dir, data_dir, 6, loss=loss), "--out", "x.json"])
    evaluator = build_evaluator(args)
    for record in [evaluator.empty_record(), *evaluator.evaluate([(2,), (3, 5)])]:
        assert record.items is not None and len(record.items.losses) == 6
        assert np.mean(record.items.losses) == pytest.approx(record.loss, rel=1e-9, abs=1e-12)
        assert np.mean(record.items.correct) == record.accuracy
    assert evaluator.evaluate([(2,)])[0].items is None  # a memo hit keeps totals only
    recomputed = evaluator.recompute([(2,)])[0]
    assert recomputed.items is not None and not recomputed.memo_hit


def test_a_prior_that_keeps_items_computes_again_what_the_memo_holds(tiny_model_dir, data_dir, tmp_path):
    """A rerun of a prior over a shared memo gets every loss from it; with --keep-items the
    single-layer sets are computed again, and the totals are those the memo held."""
    from depthprune.cli import main

    argv = ["prior", *_args(tiny_model_dir, data_dir, 4), "--memo", str(tmp_path / "memo.sqlite")]
    assert main([*argv, "--out", str(tmp_path / "first.json")]) == 0
    assert main([*argv, "--keep-items", "--out", str(tmp_path / "again.json")]) == 0
    first, again = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("first", "again"))
    assert again["scores"] == first["scores"]
    kept = [layer for layer in again["items"]["layers"] if layer is not None]
    assert len(kept) == 8 and all(len(layer["losses"]) == 4 for layer in kept)
    assert [np.mean(layer["losses"]) for layer in kept] == pytest.approx(first["scores"], rel=1e-9)


def test_derived_prior_equals_the_directly_computed_one(tiny_model_dir, data_dir, tmp_path):
    from depthprune.cli import main

    large, derived, direct = (tmp_path / name for name in ("n8.json", "n3_derived.json", "n3_direct.json"))
    assert main(["prior", *_args(tiny_model_dir, data_dir, 8), "--keep-items", "--out", str(large)]) == 0
    items = json.loads(large.read_text())["items"]
    assert len(items["keys"]) == 8 and len(items["layers"]) == 8 and len(items["empty"]["losses"]) == 8

    small = _args(tiny_model_dir, data_dir, 3)
    assert main(["prior", *small, "--items-from", str(large), "--out", str(derived)]) == 0
    assert main(["prior", *small, "--out", str(direct)]) == 0
    got, want = json.loads(derived.read_text()), json.loads(direct.read_text())
    # The same items through other batches: equal up to float32 rounding of the log-probabilities.
    assert got["scores"] == pytest.approx(want["scores"], rel=1e-5, abs=1e-6)
    assert got["empty_loss"] == pytest.approx(want["empty_loss"], rel=1e-5, abs=1e-6)
    assert got["accuracies"] == want["accuracies"] and got["empty_accuracy"] == want["empty_accuracy"]
    assert got["evaluator"] == want["evaluator"]  # so a search checks it like a computed one
    assert got["derived_from"]["n_items"] == 8 and got["cost"]["evaluations"] == 1

    # The one-shot search takes the derived prior as it takes a computed one.
    selection = tmp_path / "selection.json"
    search = ["search", *small, "--algorithm", "one_shot", "--budget", "2", "--prior", str(derived)]
    out = ["--workdir", str(tmp_path / "w"), "--out-selection", str(selection), "--out-trace", str(tmp_path / "t.csv")]
    assert main([*search, *out]) == 0
    assert json.loads(selection.read_text())["removed"] == sorted(got["ranking"][:2])


def test_derivation_refuses_what_is_not_the_same_draw(tiny_model_dir, data_dir, tmp_path, capsys):
    from depthprune.cli import main

    large = tmp_path / "n6.json"
    assert main(["prior", *_args(tiny_model_dir, data_dir, 6), "--keep-items", "--out", str(large)]) == 0
    out = ["--out", str(tmp_path / "never.json")]

    # another seed: other items
    assert main(["prior", *_args(tiny_model_dir, data_dir, 3, seed=2), "--items-from", str(large), *out]) == 2
    assert "do not begin with this draw's 3" in capsys.readouterr().err
    # another loss: the item keys name it
    assert (
        main(["prior", *_args(tiny_model_dir, data_dir, 3, loss="cross_entropy"), "--items-from", str(large), *out])
        == 2
    )
    assert "do not begin with this draw's 3" in capsys.readouterr().err
    # other settings beside the items (the protected blocks)
    argv = ["prior", *_args(tiny_model_dir, data_dir, 3), "--protected", "0", "--items-from", str(large), *out]
    assert main(argv) == 2
    assert "computed with other settings (protected)" in capsys.readouterr().err
    # a prior computed without --keep-items
    plain = tmp_path / "plain.json"
    assert main(["prior", *_args(tiny_model_dir, data_dir, 6), "--out", str(plain)]) == 0
    assert "items" not in json.loads(plain.read_text())
    assert main(["prior", *_args(tiny_model_dir, data_dir, 3), "--items-from", str(plain), *out]) == 2
    assert "keeps no per-item losses" in capsys.readouterr().err
    assert not (tmp_path / "never.json").exists()
