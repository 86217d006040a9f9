"""Constrained binary optimisation (Jansen et al. 2026; docs/method.md §4.6).

Every block k gets a gate α_k; removing block k sets α_k: 1 → 0 (x_k = 1). The search minimises an
Ising energy E(x) subject to Σx = M (x_i = 0 for protected layers): by exact, vectorised
enumeration when C(N', M) ≤ ``exact_limit``, otherwise by simulated annealing with swap moves
(which keep Σx = M) and restarts. The ``rerank`` lowest-energy distinct sets are then evaluated with
the true calibration loss (one batch) and the best is returned; the ground state's loss goes to the
diagnostics beside it (the reproduced paper names no rule for choosing among the low-energy states).

``coefficients`` chooses the energy, written E(x) = linearᵀx + ½xᵀQx:

- ``fisher`` (``cbo``, Jansen et al.'s): their gate on both residual branches of each block; row s
  of A is the gradient of calibration sample s's loss with respect to the gates (one first-order
  backward per sample, engine/gate_fisher.py); H = AᵀA/m, E(x) = xᵀHx with no linear term.
- ``gradient`` (the control ``cbo_taylor``, :class:`TaylorCBO`): one gate on the whole block update
  (h ← h + α_k·f_k(h)) and the exact second-order expansion at α = 1,
  E(x) = −gᵀx + ½xᵀHx with g = ∂L/∂α and H = ∂²L/∂α² (engine/gate_derivatives.py).
- ``ablation`` (the control ``cbo_ablation``, :class:`ExactPairsCBO`): exact ablations instead of
  derivatives, linear a_i = L({i}) − L(∅) and pair term b_ij = L({i,j}) − L({i}) − L({j}) + L(∅),
  evaluated in one batch (N'(N'−1)/2 pairs more than the prior).

Diagnostic (``diagnostics`` in selection.json, and the log): the Spearman correlation between the
energy and the true loss over the re-ranked sets, and over ``diagnostic_sets`` (64) uniformly drawn
M-sets. The random sets are evaluated on the shared evaluator but outside this search's trace: they
check the energy, they are not part of the search, so they are not charged to its cost (their
blocks are reported as ``diagnostic_naive_blocks`` for the benchmark's accounting).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time

import numpy as np

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, Range, SearchAlgorithm, SearchProblem, record_key

log = logging.getLogger(__name__)


class ConstrainedBinaryOptimisation(SearchAlgorithm):
    name = "cbo"
    display_name = "CBO"
    marker = "P"  # matplotlib marker in the figures
    defaults = {
        "coefficients": "fisher",
        # Jansen et al. enumerate every state; here 6.9 M sets (C(28, 9)) take 3.3 s on one CPU core,
        # and annealing misses some of the Fisher energy's near-degenerate 16 lowest (method.md §4.6)
        "exact_limit": 100_000_000,
        "rerank": 16,
        "chunk_size": 100_000,
        "sa_restarts": 16,
        "sa_steps": 20_000,
        "sa_final_temperature_ratio": 1e-3,
        "diagnostic_sets": 64,
        # coefficients: gradient only: how g and H are computed (engine/gate_derivatives.py): the
        # same values; blockwise's peak memory is one calibration row's, so it fits a GPU at 8B
        "derivatives": "full_graph",
    }
    ranges = {
        "exact_limit": POSITIVE,
        "rerank": POSITIVE,
        "chunk_size": POSITIVE,
        "sa_restarts": POSITIVE,
        "sa_steps": POSITIVE,
        "sa_final_temperature_ratio": Range(0, 1, exclusive_minimum=True),
        "diagnostic_sets": Range(minimum=0),  # 0 turns the energy-loss diagnostic off
    }
    choices = {"coefficients": ("fisher", "gradient", "ablation"), "derivatives": ("full_graph", "blockwise")}

    requests_exact = False  # simulated annealing (above exact_limit) can find fewer than rerank sets

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        # The rerank lowest-energy sets; ablation coefficients first request ∅, every single and every pair
        # (the energy-loss diagnostic's random sets are outside the search's trace).
        reranked = min(int(params["rerank"]), math.comb(n_allowed, budget))
        if params["coefficients"] == "ablation":
            return 1 + n_allowed + math.comb(n_allowed, 2) + reranked
        return reranked

    def uses_prior(self, params: dict) -> bool:
        return params["coefficients"] == "ablation"  # fisher and gradient coefficients come from gated passes

    def uses_gate_derivatives(self, params: dict) -> bool:
        return params["coefficients"] == "gradient"

    def uses_gate_fisher(self, params: dict) -> bool:
        return params["coefficients"] == "fisher"

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        k = params["rerank"]
        if k < 1:
            raise InputError(f"search algorithm {self.name!r}: rerank must be at least 1, got {k}")
        allowed = np.asarray(problem.allowed)
        if params["coefficients"] == "gradient":
            linear, quadratic = gradient_energy(problem, allowed, params["derivatives"])
        elif params["coefficients"] == "fisher":
            linear, quadratic = fisher_energy_terms(problem, allowed)
        else:
            linear, quadratic = ablation_energy(problem, allowed)
        n_sets = math.comb(len(allowed), problem.budget)
        if n_sets <= params["exact_limit"]:
            log.info("cbo: exact enumeration of %d sets", n_sets)
            lowest = exact_lowest(linear, quadratic, problem.budget, k, params["chunk_size"])
        else:
            log.info("cbo: %d sets > exact_limit; simulated annealing", n_sets)
            lowest = anneal_lowest(
                linear,
                quadratic,
                problem.budget,
                k,
                rng=np.random.default_rng(problem.seed),
                restarts=params["sa_restarts"],
                steps=params["sa_steps"],
                final_ratio=params["sa_final_temperature_ratio"],
            )
        candidates = [parse_layers(allowed[list(c)]) for _, c in lowest]
        records = problem.evaluator.evaluate(candidates)
        problem.diagnostics.update(ground_state(lowest, records))
        problem.diagnostics.update(
            energy_loss_diagnostics(problem, allowed, linear, quadratic, lowest, records, params["diagnostic_sets"])
        )
        return parse_layers(min(records, key=record_key).removed)


class TaylorCBO(ConstrainedBinaryOptimisation):
    """The second-order-expansion control (issue 67; docs/method.md §4.6): ``cbo`` with
    ``coefficients: gradient``, the energy −gᵀx + ½xᵀHx of the exact gate derivatives.

    This was the repository's ``cbo`` until issue 67 read Jansen et al.'s code: one gate on the whole
    block, a linear term and the exact (possibly indefinite) Hessian of the mean loss, none of which
    is theirs. Kept under its own name so that its results are never mistaken for the faithful
    ``cbo``'s, and so that a study can tell the Fisher energy's effect from the expansion's.
    """

    name = "cbo_taylor"
    display_name = "CBO (Taylor)"
    marker = "d"  # matplotlib marker in the figures
    in_paper = False  # a control: kept out of the statistics behind the paper's claims
    # exact_limit: the value its committed runs (as `cbo`) used, so their M = 9 sets were annealed
    defaults = {**ConstrainedBinaryOptimisation.defaults, "coefficients": "gradient", "exact_limit": 5_000_000}


class ExactPairsCBO(ConstrainedBinaryOptimisation):
    """The exact-pairs control (issue 56; docs/method.md §4.6): ``cbo`` with ``coefficients: ablation``.

    The energy's terms are exact single and pair ablations instead of gate derivatives, which
    miss blocks whose removal is catastrophic (§4.6, "What the diagnosis found"). Not Jansen et
    al.'s method, so a control beside the faithful ``cbo``, never a replacement of it.
    """

    name = "cbo_ablation"
    display_name = "CBO (exact pairs)"
    marker = "h"  # matplotlib marker in the figures
    in_paper = False  # a control: kept out of the statistics behind the paper's claims
    defaults = {**ConstrainedBinaryOptimisation.defaults, "coefficients": "ablation", "exact_limit": 5_000_000}


def ground_state(lowest, records) -> dict:
    """The lowest-energy set's true loss (``lowest[0]``, evaluated first among the re-ranked sets):
    what choosing the ground state, with no re-ranking, would have returned."""
    energy, _ = lowest[0]
    return {
        "ground_state_removed": list(parse_layers(records[0].removed)),
        "ground_state_energy": float(energy),
        "ground_state_loss": float(records[0].loss),
    }


def energy_loss_diagnostics(problem, allowed, linear, quadratic, lowest, records, n_random: int) -> dict:
    """Spearman ρ(energy, true loss) over the re-ranked sets and over ``n_random`` random M-sets."""
    from scipy.stats import spearmanr

    def rho(energy, loss) -> float | None:
        if len(energy) < 3 or np.ptp(energy) == 0 or np.ptp(loss) == 0:
            return None
        return float(spearmanr(energy, loss).statistic)

    out = {
        "energy_loss_spearman_reranked": rho([e for e, _ in lowest], [r.loss for r in records]),
        "n_reranked": len(records),
    }
    if n_random > 0:
        rng = np.random.default_rng([problem.seed, 64])
        combos = np.stack(
            [np.sort(rng.choice(len(allowed), size=problem.budget, replace=False)) for _ in range(n_random)]
        )
        inner = getattr(problem.evaluator, "inner", problem.evaluator)  # outside the search's trace
        started = time.perf_counter()
        # ... and outside the search's progress, whose total is the search's own requests
        progress, inner.progress = getattr(inner, "progress", None), None
        try:
            random_records = inner.evaluate([parse_layers(allowed[c]) for c in combos])
        finally:
            inner.progress = progress
        # Not the search's cost: run_search takes it out of search_seconds (Table 4).
        out["diagnostic_seconds"] = time.perf_counter() - started
        out["energy_loss_spearman_random"] = rho(energies(linear, quadratic, combos), [r.loss for r in random_records])
        out["n_random"] = n_random
        out["diagnostic_naive_blocks"] = int(n_random * (problem.n_layers - problem.budget))
    log.info(
        "cbo: Spearman(energy, true loss) = %s over the %d re-ranked sets, %s over %d random sets",
        out["energy_loss_spearman_reranked"],
        len(records),
        out.get("energy_loss_spearman_random"),
        n_random,
    )
    return out


def gradient_energy(
    problem: SearchProblem, allowed: np.ndarray, derivatives: str = "full_graph"
) -> tuple[np.ndarray, np.ndarray]:
    """(linear, quadratic) of E(x) = linearᵀx + ½xᵀQx from the gate derivatives: −g and H."""
    g, h = problem.evaluator.gate_derivatives(derivatives)
    n = problem.n_layers
    if g.shape != (n,) or h.shape != (n, n):
        raise ValueError(f"gate_derivatives: expected shapes ({n},) and ({n}, {n}), got {g.shape} and {h.shape}")
    return energy_from_derivatives(g, h, allowed)


def fisher_energy_terms(problem: SearchProblem, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(linear, quadratic) of Jansen et al.'s energy from the evaluator's per-sample gate gradients;
    A's size and rank go to the diagnostics."""
    a = problem.evaluator.gate_fisher_rows()
    if a.ndim != 2 or a.shape[1] != problem.n_layers:
        raise ValueError(f"gate_fisher_rows: expected shape (samples, {problem.n_layers}), got {a.shape}")
    linear, quadratic, record = fisher_terms(a, allowed)
    problem.diagnostics.update(record)
    return linear, quadratic


def fisher_terms(a: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """E(x) = xᵀHx, H = AᵀA/m (engine/gate_fisher.py), as (linear, quadratic, record): no linear
    term, Q = 2H on the allowed layers, and the record of A's size and rank (at most the number of
    calibration samples: with fewer samples than free blocks H is singular)."""
    from depthprune.engine.gate_fisher import fisher_matrix

    a = np.asarray(a, dtype=np.float64)
    record = {
        "fisher_samples": int(a.shape[0]),
        "fisher_rank": int(np.linalg.matrix_rank(a[:, allowed])) if a.size else 0,
    }
    return np.zeros(len(allowed)), 2.0 * fisher_matrix(a)[np.ix_(allowed, allowed)], record


def energy_from_derivatives(g: np.ndarray, h: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(linear, quadratic) = (−g, H) on the allowed layers: x_i = 1 moves gate i by Δα_i = −1."""
    h = 0.5 * (h + h.T)  # autograd Hessians are symmetric up to rounding
    return -g[allowed], h[np.ix_(allowed, allowed)]


def ablation_energy(problem: SearchProblem, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(linear, quadratic) from exact single and pairwise ablations, evaluated in one batch."""
    layers = [int(i) for i in allowed]
    pairs = list(itertools.combinations(layers, 2))
    records = problem.evaluator.evaluate([()] + [(i,) for i in layers] + pairs)
    loss = {parse_layers(r.removed): r.loss for r in records}
    dense = loss[()]
    linear = np.array([loss[(i,)] - dense for i in layers])
    position = {layer: p for p, layer in enumerate(layers)}
    quadratic = np.zeros((len(layers), len(layers)))
    for i, j in pairs:
        b = loss[(i, j)] - loss[(i,)] - loss[(j,)] + dense
        quadratic[position[i], position[j]] = quadratic[position[j], position[i]] = b
    return linear, quadratic


def energies(linear: np.ndarray, quadratic: np.ndarray, combos: np.ndarray) -> np.ndarray:
    """E for each row of ``combos`` (indices of the removed layers), vectorised over rows."""
    q = 0.5 * (quadratic + quadratic.T)
    energy = linear[combos].sum(axis=1) + 0.5 * np.diag(q)[combos].sum(axis=1)
    for a, b in itertools.combinations(range(combos.shape[1]), 2):
        energy += q[combos[:, a], combos[:, b]]  # ½·(Q_ab + Q_ba) for a symmetric Q
    return energy


def exact_lowest(
    linear: np.ndarray, quadratic: np.ndarray, budget: int, k: int, chunk_size: int
) -> list[tuple[float, tuple[int, ...]]]:
    """The k lowest-energy M-subsets of range(n), by chunked enumeration; ties by lexicographic order."""
    n = len(linear)
    combos_iter = itertools.combinations(range(n), budget)
    best_e = np.empty(0)
    best_c = np.empty((0, budget), dtype=np.int64)
    while True:
        flat = np.fromiter(itertools.chain.from_iterable(itertools.islice(combos_iter, chunk_size)), dtype=np.int64)
        if flat.size == 0:
            break
        combos = flat.reshape(-1, budget)
        energy = energies(linear, quadratic, combos)
        if len(energy) > k:
            keep = np.argpartition(energy, k - 1)[:k]
            keep.sort()  # keep enumeration order, so the stable sort below breaks ties lexicographically
            combos, energy = combos[keep], energy[keep]
        # Earlier chunks come first: lexicographically smaller sets win ties.
        merged_e = np.concatenate([best_e, energy])
        merged_c = np.concatenate([best_c, combos])
        order = np.argsort(merged_e, kind="stable")[:k]
        best_e, best_c = merged_e[order], merged_c[order]
    return [(float(e), tuple(int(i) for i in c)) for e, c in zip(best_e, best_c)]


def anneal_lowest(
    linear: np.ndarray,
    quadratic: np.ndarray,
    budget: int,
    k: int,
    rng: np.random.Generator,
    restarts: int,
    steps: int,
    final_ratio: float,
) -> list[tuple[float, tuple[int, ...]]]:
    """Simulated annealing with swap moves, ``restarts`` chains run side by side (vectorised).

    A swap takes removed layer i out and kept layer j in, so Σx = M always holds. With local fields
    h = Qx the energy change is ΔE = l_j − l_i + h_j − h_i + ½(Q_ii + Q_jj) − Q_ij. The schedule is
    geometric from T0 (the spread of ΔE over random swaps) down to T0·final_ratio. Every distinct
    state visited, and every one-swap neighbour of the k best of them, is a candidate; the k lowest
    (energies recomputed exactly) are returned.
    """
    n = len(linear)
    if restarts < 1 or steps < 1:
        raise InputError("search algorithm 'cbo': sa_restarts and sa_steps must be at least 1")
    q = 0.5 * (quadratic + quadratic.T)
    diag = np.diag(q)
    chains = np.arange(restarts)
    # removed[r] and kept[r] partition range(n) for chain r.
    perms = np.stack([rng.permutation(n) for _ in range(restarts)])
    removed, kept = perms[:, :budget].copy(), perms[:, budget:].copy()
    x = np.zeros((restarts, n))
    x[chains[:, None], removed] = 1.0
    fields = x @ q

    def swap_delta(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return linear[j] - linear[i] + fields[chains, j] - fields[chains, i] + 0.5 * (diag[i] + diag[j]) - q[i, j]

    # Temperature scale from the typical size of a move at the random starting states.
    probe = np.concatenate(
        [
            swap_delta(
                removed[chains, rng.integers(budget, size=restarts)],
                kept[chains, rng.integers(n - budget, size=restarts)],
            )
            for _ in range(32)
        ]
    )
    t_start = float(np.std(probe)) or 1.0
    temperatures = t_start * final_ratio ** (np.arange(steps) / max(steps - 1, 1))

    found: set[tuple[int, ...]] = {parse_layers(row) for row in removed}
    for temperature in temperatures:
        a = rng.integers(budget, size=restarts)
        b = rng.integers(n - budget, size=restarts)
        i, j = removed[chains, a], kept[chains, b]
        delta = swap_delta(i, j)
        accept = (delta <= 0) | (rng.random(restarts) < np.exp(-np.clip(delta, 0, None) / temperature))
        for r in np.flatnonzero(accept):
            fields[r] += q[j[r]] - q[i[r]]
            removed[r, a[r]], kept[r, b[r]] = j[r], i[r]
            found.add(parse_layers(removed[r]))
    # The k lowest distinct sets sit close to the minimum: add every one-swap neighbour of the
    # best states found, so the rerank list does not depend on what the cold chains happened to visit.
    sets = sorted(found)
    best = [sets[p] for p in np.argsort(energies(linear, q, np.array(sets)), kind="stable")[:k]]
    for state in best:
        for out, into in itertools.product(state, sorted(set(range(n)) - set(state))):
            found.add(tuple(sorted(set(state) - {out} | {into})))
    sets = sorted(found)
    exact = energies(linear, q, np.array(sets, dtype=np.int64))
    return heapq.nsmallest(k, zip(exact.tolist(), sets))
