"""Why CBO's set loses to one-shot's: its energy against the true calibration loss (issues 56, 67).

CBO (search/cbo.py, docs/method.md §4.6) has three stages, and each can fail on its own:

1. the **expansion** behind the energy (``coefficients``): ``gradient`` (``cbo_taylor``), the
   second-order Taylor expansion −gᵀx + ½xᵀHx of the loss in the block gates, predicts
   L(S) ≈ L(∅) + E(x_S); ``fisher`` (``cbo``), Jansen et al.'s per-sample first-order changes
   Δℓ_s ≈ −A_s·x, predicts L(S) ≈ L(∅) − āᵀx (ā: A's mean row), and its energy, the mean of their
   squares, ranks the sets. ``model_error`` measures how far off the prediction is, and the energy's
   rank correlation with the loss, as a function of M, on every single (M = 1), every pair (M = 2,
   with ``all_pairs``) and on ``n_random`` uniformly drawn M-sets otherwise;
2. the **solver**: the lowest-energy sets CBO's own solver returns (exact enumeration, or annealing
   above ``exact_limit``) against the exact k lowest, found here by enumeration whatever the size;
3. the **re-ranking**: the best true loss among the energy's K lowest sets, for several K, beside
   the one-shot set's loss and that set's rank by energy.

With ``all_pairs`` the energy CBO builds with ``coefficients: ablation`` (exact single and pairwise
ablations) is ranked the same way, so the derivative energy's error can be told from the pairwise
model's own truncation.

Every set is evaluated with the true loss on the given evaluator (the memo keeps them), outside any
search: this is a measurement, not a search, and nothing here is charged to CBO's cost.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from depthprune.errors import InputError
from depthprune.io import format_layers, parse_layers
from depthprune.search.cbo import (
    ConstrainedBinaryOptimisation,
    anneal_lowest,
    energies,
    energy_from_derivatives,
    exact_lowest,
    fisher_terms,
)

log = logging.getLogger(__name__)

SET_COLUMNS = ["kind", "budget", "rank", "removed", "energy", "predicted_loss", "loss"]


@dataclass
class Diagnosis:
    """The evaluated sets (one row each) and the three summaries of the module docstring."""

    sets: pd.DataFrame
    model_error: pd.DataFrame
    topk: pd.DataFrame
    solver: pd.DataFrame
    record: dict


def count_below(linear: np.ndarray, quadratic: np.ndarray, budget: int, threshold: float, chunk_size: int) -> int:
    """How many M-subsets of range(n) have an energy strictly below ``threshold`` (full enumeration)."""
    combos_iter = itertools.combinations(range(len(linear)), budget)
    below = 0
    while True:
        flat = np.fromiter(itertools.chain.from_iterable(itertools.islice(combos_iter, chunk_size)), dtype=np.int64)
        if flat.size == 0:
            return below
        below += int(np.count_nonzero(energies(linear, quadratic, flat.reshape(-1, budget)) < threshold))


def random_sets(n_allowed: int, budget: int, n_sets: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``n_sets`` distinct uniformly drawn ``budget``-subsets of range(n_allowed) (all of them if fewer exist)."""
    total = math.comb(n_allowed, budget)
    if total <= n_sets:
        return list(itertools.combinations(range(n_allowed), budget))
    drawn: dict[tuple[int, ...], None] = {}
    while len(drawn) < n_sets:
        drawn.setdefault(tuple(sorted(int(i) for i in rng.choice(n_allowed, size=budget, replace=False))), None)
    return list(drawn)


def spearman(a, b) -> float | None:
    """Spearman ρ, or None when it is undefined (fewer than three values, or a constant)."""
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


def ablation_terms(dense: float, single: np.ndarray, pair: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(linear, quadratic) of ``coefficients: ablation`` (cbo.ablation_energy) from the losses of ∅,
    every single (``single[i]``) and every pair (``pair[i, j]``) of allowed positions."""
    linear = single - dense
    quadratic = pair - single[:, None] - single[None, :] + dense
    np.fill_diagonal(quadratic, 0.0)
    return linear, quadratic


def diagnose(
    evaluator,
    *,
    seed: int,
    budgets: list[int],
    model_error_budgets: list[int],
    ks: list[int],
    n_random: int,
    all_pairs: bool = False,
    params: dict | None = None,
) -> Diagnosis:
    """Evaluate CBO's energy against the true loss (module docstring). ``params``: CBO's
    hyper-parameters (defaults: ``cbo``'s), which decide the derivatives and the solver checked."""
    params = ConstrainedBinaryOptimisation().resolve_params(params or {})
    if not ks or min(ks) < 1:
        raise InputError(f"cbo diagnosis: every K must be at least 1, got {ks}")
    n_layers = int(evaluator.n_layers)
    protected = frozenset(int(i) for i in evaluator.protected)
    allowed = np.array([i for i in range(n_layers) if i not in protected])
    n_allowed = len(allowed)
    for budget in sorted(set(budgets) | set(model_error_budgets)):
        if not 1 <= budget <= n_allowed:
            raise InputError(f"cbo diagnosis: M={budget} outside 1..{n_allowed} (the removable blocks)")
    started = time.perf_counter()
    linear, quadratic, prediction, coefficient_record = energy_terms(evaluator, allowed, params)
    derivative_seconds = time.perf_counter() - started
    eval_started = time.perf_counter()
    scored = ScoredSets(evaluator, allowed, linear, quadratic, prediction)
    # Every single: the prior (one-shot's ranking) and the expansion's error at M = 1.
    single = np.array(scored.evaluate("single", 1, [(p,) for p in range(n_allowed)]))
    pair = scored.all_pairs() if all_pairs else None
    for budget in model_error_budgets:
        if budget == 1 or (budget == 2 and all_pairs):
            continue  # every set of this size is already evaluated
        combos = random_sets(n_allowed, budget, n_random, np.random.default_rng([seed, 56, budget]))
        scored.evaluate("random", budget, combos)
    # Named as cbo's `coefficients`; the rows of their K lowest sets are kind "lowest_<name>".
    energies_to_rank = {params["coefficients"]: (linear, quadratic)}
    if pair is not None:
        energies_to_rank["ablation"] = ablation_terms(scored.dense, single, pair)
    ranking = sorted(range(n_allowed), key=lambda p: (single[p], int(allowed[p])))  # as SearchProblem.ranking
    solver_rows = [
        row
        for budget in budgets
        for row in rank_lowest(scored, energies_to_rank, ranking, budget, max(ks), params, seed)
    ]
    sets = pd.DataFrame(scored.rows)
    rank_columns = [c for c in sets.columns if c.startswith("one_shot_rank_")]
    sets = sets[SET_COLUMNS + rank_columns]
    record = {
        "n_layers": n_layers,
        "protected": sorted(protected),
        "dense_loss": scored.dense,
        "derivative_seconds": derivative_seconds,
        "evaluation_seconds": time.perf_counter() - eval_started,
        "n_evaluated": len(sets),
        "cbo_params": params,
        **coefficient_record,
    }
    return Diagnosis(sets, model_error_table(sets), topk_table(sets, ks), pd.DataFrame(solver_rows), record)


def energy_terms(evaluator, allowed: np.ndarray, params: dict) -> tuple[np.ndarray, np.ndarray, tuple, dict]:
    """CBO's energy by ``params["coefficients"]`` (cbo.py): (linear, quadratic, the expansion's
    prediction of L(S) − L(∅) as (linear, quadratic) terms, a record of the coefficients).

    ``gradient``: the energy is the prediction, −gᵀx + ½xᵀHx. ``fisher``: the energy xᵀHx is the
    mean over samples of the squared first-order change (A_s·x)², not a loss; the expansion behind it
    predicts the mean loss change −āᵀx, ā the mean row of A (the mean loss's gradient)."""
    coefficients = params["coefficients"]
    if coefficients == "gradient":
        g, h = evaluator.gate_derivatives(params["derivatives"])
        linear, quadratic = energy_from_derivatives(np.asarray(g, np.float64), np.asarray(h, np.float64), allowed)
        return linear, quadratic, (linear, quadratic), {}
    if coefficients == "fisher":
        a = np.asarray(evaluator.gate_fisher_rows(), np.float64)
        linear, quadratic, record = fisher_terms(a, allowed)
        first_order = -a[:, allowed].mean(axis=0)
        return linear, quadratic, (first_order, np.zeros_like(quadratic)), record
    raise InputError(f"cbo diagnosis: coefficients {coefficients!r} has no expansion to check (fisher or gradient)")


class ScoredSets:
    """The sets the diagnosis evaluates, one row each (``rows``: kind, budget, rank, removed, energy,
    the expansion's predicted loss and the true loss); sets are positions among the ``allowed`` blocks."""

    def __init__(self, evaluator, allowed, linear, quadratic, prediction=None):
        self.evaluator, self.allowed, self.linear, self.quadratic = evaluator, allowed, linear, quadratic
        self.prediction = (linear, quadratic) if prediction is None else prediction
        self.rows: list[dict] = []
        self.dense = float(evaluator.evaluate([()])[0].loss)

    def to_layers(self, combo) -> tuple[int, ...]:
        return parse_layers(self.allowed[list(combo)])

    def evaluate(self, kind: str, budget: int, combos: list[tuple[int, ...]], lin=None, quad=None, ranks=None):
        """The true losses of ``combos``, each recorded with its energy under (``lin``, ``quad``;
        default: the diagnosed energy) and the loss that energy's expansion predicts."""
        if not combos:
            return []
        # another energy given (the ablation energy) is its own loss prediction
        prediction = self.prediction if lin is None else (lin, quad)
        lin = self.linear if lin is None else lin
        quad = self.quadratic if quad is None else quad
        records = self.evaluator.evaluate([self.to_layers(c) for c in combos])
        indices = np.array(combos, dtype=np.int64).reshape(len(combos), -1)
        energy = energies(lin, quad, indices)
        change = energies(*prediction, indices)
        for position, (combo, record, e, d) in enumerate(zip(combos, records, energy, change)):
            self.rows.append(
                {
                    "kind": kind,
                    "budget": budget,
                    "rank": None if ranks is None else ranks[position],
                    "removed": format_layers(self.to_layers(combo)),
                    "energy": float(e),
                    "predicted_loss": self.dense + float(d),
                    "loss": float(record.loss),
                }
            )
        return [float(r.loss) for r in records]

    def all_pairs(self) -> np.ndarray:
        """Every pair's loss, as a symmetric matrix over the allowed positions (the ablation energy's terms)."""
        n_allowed = len(self.allowed)
        pairs = list(itertools.combinations(range(n_allowed), 2))
        losses = self.evaluate("pair", 2, pairs)
        pair = np.zeros((n_allowed, n_allowed))
        for (a, b), loss in zip(pairs, losses):
            pair[a, b] = pair[b, a] = loss
        return pair


def rank_lowest(scored: ScoredSets, energies_to_rank: dict, ranking, budget: int, k_max: int, params, seed) -> list:
    """At ``budget``: one-shot's set, each energy's ``k_max`` lowest sets and one-shot's rank under it,
    evaluated; returns the solver checks (one per energy)."""
    one_shot = tuple(sorted(ranking[:budget]))
    scored.evaluate("one_shot", budget, [one_shot])
    one_shot_row = scored.rows[-1]
    solver_rows = []
    for kind, (lin, quad) in energies_to_rank.items():
        lowest = exact_lowest(lin, quad, budget, k_max, params["chunk_size"])
        ranks = list(range(1, len(lowest) + 1))
        scored.evaluate("lowest_" + kind, budget, [c for _, c in lowest], lin, quad, ranks=ranks)
        one_shot_energy = float(energies(lin, quad, np.array([one_shot]))[0])
        below = count_below(lin, quad, budget, one_shot_energy, params["chunk_size"])
        one_shot_row["one_shot_rank_" + kind] = below + 1
        solver_rows.append(solver_check(kind, budget, lin, quad, lowest, params, seed, below + 1))
    return solver_rows


def solver_check(kind, budget, linear, quadratic, exact, params, seed, one_shot_rank) -> dict:
    """CBO's own solver (as ``cbo.run`` calls it, same seed) against the exact lowest energies."""
    n_sets = math.comb(len(linear), budget)
    rerank = min(int(params["rerank"]), len(exact))
    if n_sets <= params["exact_limit"]:
        solver, found = "exact", exact[:rerank]
    else:
        solver = "anneal"
        found = anneal_lowest(
            linear,
            quadratic,
            budget,
            rerank,
            rng=np.random.default_rng(seed),
            restarts=params["sa_restarts"],
            steps=params["sa_steps"],
            final_ratio=params["sa_final_temperature_ratio"],
        )
    exact_sets = {c for _, c in exact[:rerank]}
    return {
        "energy": kind,
        "budget": budget,
        "n_sets": n_sets,
        "solver": solver,
        "rerank": rerank,
        "solver_lowest_energy": found[0][0],
        "exact_lowest_energy": exact[0][0],
        "solver_sets_in_exact_top": sum(c in exact_sets for _, c in found),
        "one_shot_energy_rank": one_shot_rank,
    }


def model_error_table(sets: pd.DataFrame) -> pd.DataFrame:
    """Per M: the expansion's predicted loss against the true loss, and ρ(energy, loss), over the
    non-ranked sets."""
    rows = []
    sample = sets[sets["kind"].isin(["single", "pair", "random"])]
    for budget, group in sample.groupby("budget", sort=True):
        error = group["predicted_loss"] - group["loss"]
        spread = float(group["loss"].std(ddof=0))
        rows.append(
            {
                "budget": int(budget),
                "n_sets": len(group),
                "sets": ",".join(sorted(set(group["kind"]))),
                "spearman": spearman(group["energy"].to_numpy(), group["loss"].to_numpy()),
                "mean_loss": float(group["loss"].mean()),
                "loss_std": spread,
                "mean_error": float(error.mean()),
                "mean_abs_error": float(error.abs().mean()),
                "max_abs_error": float(error.abs().max()),
                # the error in units of the spread of the true losses it must rank
                "abs_error_over_std": float(error.abs().mean() / spread) if spread > 0 else None,
            }
        )
    return pd.DataFrame(rows)


def topk_table(sets: pd.DataFrame, ks: list[int]) -> pd.DataFrame:
    """Per (energy, M, K): the best true loss among the K lowest-energy sets, beside one-shot's."""
    rows = []
    for (kind, budget), group in sets[sets["rank"].notna()].groupby(["kind", "budget"], sort=True):
        one_shot = sets[(sets["kind"] == "one_shot") & (sets["budget"] == budget)].iloc[0]
        one_shot_rank = int(one_shot["one_shot_rank_" + kind.removeprefix("lowest_")])
        group = group.sort_values("rank")
        for k in sorted(ks):
            top = group[group["rank"] <= k]
            best = top.loc[top["loss"].idxmin()]
            rows.append(
                {
                    "energy": kind.removeprefix("lowest_"),
                    "budget": int(budget),
                    "k": k,
                    "n_evaluated": len(top),
                    "best_loss": float(best["loss"]),
                    "best_rank": int(best["rank"]),
                    "best_set": best["removed"],
                    "spearman": spearman(top["energy"].to_numpy(), top["loss"].to_numpy()),
                    "one_shot_loss": float(one_shot["loss"]),
                    "one_shot_set": one_shot["removed"],
                    "one_shot_energy_rank": one_shot_rank,
                    "beats_one_shot": bool(best["loss"] < one_shot["loss"]),
                }
            )
    return pd.DataFrame(rows)


def committed_runs(aggregates: list[str], runs_root: str | None = None) -> pd.DataFrame:
    """CBO against one-shot in committed studies (their `cbo` rows, made before issue 67 by the
    expansion that is now `cbo_taylor`): each (calibration, seed, M)'s two losses from the
    aggregates' selections.csv (the first aggregate naming a run wins: the studies share the default
    study's runs), and CBO's own energy-loss diagnostic where its selection.json is committed
    (under ``runs_root``; the aggregates do not keep it)."""
    import json
    from pathlib import Path

    frames = []
    for path in aggregates:
        table = pd.read_csv(Path(path) / "selections.csv")
        table = table[table["algorithm"].isin(["cbo", "one_shot"])].assign(source=str(path))
        frames.append(table)
    table = pd.concat(frames).drop_duplicates(["model", "calibration", "seed", "budget", "algorithm"])
    keys = ["model", "calibration", "seed", "budget"]
    wide = table.pivot_table(index=keys, columns="algorithm", values="loss").reset_index()
    wide = wide.rename(columns={"cbo": "cbo_loss", "one_shot": "one_shot_loss"})
    wide["cbo_fails"] = wide["cbo_loss"] > wide["one_shot_loss"]
    wide = wide.merge(table[table["algorithm"] == "cbo"][[*keys, "source"]], on=keys)
    rho_random, rho_reranked = [], []
    for row in wide.itertuples():
        selection = None
        if runs_root is not None:
            selection = Path(runs_root, row.model, row.calibration, f"seed{row.seed}", f"M{row.budget}", "cbo")
            selection = selection / "selection.json"
        diagnostics = json.loads(selection.read_text())["diagnostics"] if selection and selection.is_file() else {}
        rho_random.append(diagnostics.get("energy_loss_spearman_random"))
        rho_reranked.append(diagnostics.get("energy_loss_spearman_reranked"))
    return wide.assign(committed_spearman_random=rho_random, committed_spearman_reranked=rho_reranked)


def run_selections(roots: list[str]) -> pd.DataFrame:
    """Every selection.json under the study folders ``roots`` (results/<study>/<model>/<calibration>/
    seed<k>/M<m>/<algorithm>/), one row each: the cell, the algorithm, its loss and set."""
    import json
    from pathlib import Path

    rows = []
    for root in roots:
        for path in sorted(Path(root).glob("*/*/seed*/M*/*/selection.json")):
            selection = json.loads(path.read_text())
            diagnostics = selection.get("diagnostics") or {}
            rows.append(
                {
                    "model": selection["model"],
                    "calibration": selection["calibration"],
                    "seed": int(selection["seed"]),
                    "budget": int(selection["budget"]),
                    "algorithm": selection["algorithm"],
                    "loss": float(selection["loss"]),
                    "removed": " ".join(map(str, sorted(selection["removed"]))),
                    "spearman_random": diagnostics.get("energy_loss_spearman_random"),
                    "ground_state_loss": diagnostics.get("ground_state_loss"),
                    "fisher_rank": diagnostics.get("fisher_rank"),
                    "source": str(root),
                }
            )
    columns = [
        "model",
        "calibration",
        "seed",
        "budget",
        "algorithm",
        "loss",
        "removed",
        "spearman_random",
        "ground_state_loss",
        "fisher_rank",
        "source",
    ]
    return pd.DataFrame(rows, columns=columns)


def control_table(
    committed: pd.DataFrame, aggregates: list[str], control_roots: list[str], diagnosis_root: str
) -> pd.DataFrame:
    """Issues 56 and 67's table, per committed CBO cell (``committed_runs``). The committed studies'
    `cbo` rows were made by the second-order expansion, now the control `cbo_taylor`: so the
    committed loss is ``cbo_taylor_loss``, and ``cbo_taylor_loss_rerun`` (``cbo_taylor_set_reproduced``:
    the same set) is the control run of it. Beside them, from the control runs: `cbo` (Jansen et al.'s
    Fisher energy) with its ground state's loss and A's rank, and `cbo_ablation`; one-shot; and the
    best loss known on that objective (``best_known_loss``, ``best_known_by``): the lowest over every
    algorithm of the committed studies' aggregates, the control runs and every set a diagnosis
    evaluated (``<diagnosis_root>/*/sets.csv``), which all score sets on the same calibration draw
    (same model, calibration, seed)."""
    from pathlib import Path

    keys = ["model", "calibration", "seed", "budget"]
    candidates = []
    for path in aggregates:
        table = pd.read_csv(Path(path) / "selections.csv")
        candidates.append(table[[*keys, "algorithm", "loss", "removed"]].assign(by=table["algorithm"]))
    control = run_selections(control_roots)
    candidates.append(
        control[[*keys, "algorithm", "loss", "removed"]].assign(by=control["algorithm"] + " (control run)")
    )
    for path in sorted(Path(diagnosis_root).glob("*/sets.csv")):
        sets = pd.read_csv(path)
        candidates.append(sets[[*keys, "loss", "removed"]].assign(algorithm="", by=f"diagnosis ({path.parent.name})"))
    known = pd.concat(candidates, ignore_index=True).dropna(subset=["loss"])
    known[keys[2:]] = known[keys[2:]].astype(int)
    best = known.sort_values("loss", kind="stable").drop_duplicates(keys).set_index(keys)
    reruns = control.set_index([*keys, "algorithm"]) if not control.empty else None
    committed_sets = pd.concat(candidates[: len(aggregates)]).query("algorithm == 'cbo'").drop_duplicates(keys)
    committed_sets = committed_sets.set_index(keys)["removed"].astype(str)
    rows = []
    for row in committed.itertuples(index=False):
        cell = (row.model, row.calibration, int(row.seed), int(row.budget))

        def rerun(algorithm, column, cell=cell):
            if reruns is None or (*cell, algorithm) not in reruns.index:
                return "" if column == "removed" else np.nan
            return reruns.loc[(*cell, algorithm), column]

        rows.append(
            {
                **dict(zip(keys, cell)),
                "one_shot_loss": row.one_shot_loss,
                "cbo_loss": rerun("cbo", "loss"),
                "cbo_set": rerun("cbo", "removed"),
                "cbo_ground_state_loss": rerun("cbo", "ground_state_loss"),
                "cbo_fisher_rank": rerun("cbo", "fisher_rank"),
                "cbo_taylor_loss": row.cbo_loss,  # committed as `cbo`
                "cbo_taylor_loss_rerun": rerun("cbo_taylor", "loss"),
                "cbo_taylor_set_reproduced": (rerun("cbo_taylor", "removed") == committed_sets.get(cell, None))
                if rerun("cbo_taylor", "removed")
                else None,
                "cbo_ablation_loss": rerun("cbo_ablation", "loss"),
                "cbo_ablation_set": rerun("cbo_ablation", "removed"),
                "cbo_spearman_random": rerun("cbo", "spearman_random"),
                # the committed run's diagnostic (seeds 1-3 keep their selection.json), else the re-run's
                "cbo_taylor_spearman_random": row.committed_spearman_random
                if pd.notna(row.committed_spearman_random)
                else rerun("cbo_taylor", "spearman_random"),
                "cbo_ablation_spearman_random": rerun("cbo_ablation", "spearman_random"),
                "best_known_loss": best.loc[cell, "loss"] if cell in best.index else np.nan,
                "best_known_by": best.loc[cell, "by"] if cell in best.index else "",
            }
        )
    out = pd.DataFrame(rows)
    for name in ("cbo", "cbo_taylor", "cbo_ablation"):
        ran = out[f"{name}_loss"].notna()
        out[f"{name}_fails"] = (out[f"{name}_loss"] > out["one_shot_loss"]).where(ran, None)
    return out


def control_markdown(table: pd.DataFrame) -> str:
    """``control_table`` as docs/method.md §4.6 shows it (a test checks that the page carries this
    text made from the committed results/cbo_diagnosis/control.csv)."""

    def number(value, digits: int = 3) -> str:
        return "" if pd.isna(value) else f"{float(value):.{digits}f}"

    def mark(loss, one_shot) -> str:
        return number(loss) + (" ✗" if pd.notna(loss) and loss > one_shot else "")

    lines = [
        "| calibration | seed | M | one-shot | `cbo` (ground state; rank of A) | `cbo_taylor` committed (re-run) "
        "| `cbo_ablation` | best known (by) | ρ(energy, loss), random sets: `cbo` / `cbo_taylor` / `cbo_ablation` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples(index=False):
        fisher = mark(r.cbo_loss, r.one_shot_loss)
        if fisher:
            rank = "" if pd.isna(r.cbo_fisher_rank) else f"; {int(r.cbo_fisher_rank)}"
            fisher += f" ({number(r.cbo_ground_state_loss)}{rank})"
        taylor = mark(r.cbo_taylor_loss, r.one_shot_loss)
        rerun = number(r.cbo_taylor_loss_rerun)
        if rerun and not pd.isna(r.cbo_taylor_set_reproduced):  # a bool, or its text when read from the CSV
            taylor += f" ({rerun}, " + ("same set)" if str(r.cbo_taylor_set_reproduced) == "True" else "another set)")
        lines.append(
            f"| {r.calibration} | {r.seed} | {r.budget} | {number(r.one_shot_loss)} | {fisher} | {taylor} | "
            f"{mark(r.cbo_ablation_loss, r.one_shot_loss)} | {number(r.best_known_loss)} ({r.best_known_by}) | "
            f"{number(r.cbo_spearman_random, 2)} / {number(r.cbo_taylor_spearman_random, 2)} / "
            f"{number(r.cbo_ablation_spearman_random, 2)} |"
        )
    return "\n".join(lines) + "\n"
