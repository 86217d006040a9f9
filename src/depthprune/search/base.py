"""The interface every search algorithm implements, and the evaluator wrapper that traces a search.

An algorithm sees a :class:`SearchProblem` (budget M, the single-layer ablation prior, a seed, the
protected layers, a scratch folder) and talks to the model only through the evaluator interface of
docs/architecture.md: ``evaluate(sets)``, ``loss(removed)``, ``n_layers``, ``protected``, ``stats``
and, for cbo, ``gate_derivatives()`` or ``gate_fisher_rows()``. The evaluator it gets is a :class:`TracingEvaluator`, which
records every evaluation of this search in order and counts what this search cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from depthprune.engine.records import Evaluator
from depthprune.errors import InputError
from depthprune.io import parse_layers


@dataclass(frozen=True)
class TraceEntry:
    """One evaluation request of a search, in the order the search made it."""

    order: int
    removed: tuple[int, ...]
    loss: float
    accuracy: float | None
    seconds: float
    # True when this search had already asked for this set: answered from the memo, not a new
    # distinct evaluation (the count in selection.json uses the same definition).
    memo_hit: bool


class TracingEvaluator(Evaluator):
    """Wraps an evaluator (SubsetEvaluator, SyntheticEvaluator); records the trace and the cost of one search.

    Counting is per search: a set evaluated earlier in the same search is a memo hit, whatever the
    shared memo underneath knew; ``distinct_evaluations`` is the number of distinct sets this search
    asked for. ``blocks_run`` is the decoder blocks the wrapped evaluator actually ran for this
    search (from its cumulative ``stats``), ``naive_blocks`` what a naive implementation would have
    run for the same requests (N - |S| per request, repeats included).
    """

    def __init__(self, evaluator: Evaluator):
        self.inner = evaluator
        self.entries: list[TraceEntry] = []
        self._records: dict[tuple[int, ...], Any] = {}
        self.blocks_run = 0
        self.naive_blocks = 0
        # Compute spent on this search by earlier, interrupted processes (set by BO on resume);
        # added to the search time, which thus counts compute, not the downtime in between.
        self.resumed_seconds = 0.0
        # Seconds that sets first requested by this search, but answered by the shared memo (another
        # job computed them first), cost when they were computed. Added to the search time so that
        # Table 4 does not depend on the order in which jobs happened to run.
        self.shared_memo_seconds = 0.0
        # Sets whose cost is already charged another way (the prior's sets, when the search is
        # charged the prior's cost): a memo hit on them adds nothing to shared_memo_seconds.
        self.prepaid: frozenset[tuple[int, ...]] = frozenset()

    # --- the evaluator interface -------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return int(self.inner.n_layers)

    @property
    def protected(self) -> frozenset[int]:
        return frozenset(int(i) for i in self.inner.protected)

    @property
    def objective_kind(self) -> str:
        return getattr(self.inner, "objective_kind", "perplexity")

    @property
    def stats(self) -> Any:
        return self.inner.stats

    def describe(self) -> dict:
        return self.inner.describe() if hasattr(self.inner, "describe") else {}

    def evaluate(self, sets: Sequence[Iterable[int]]) -> list:
        """Evaluate a batch in one call to the wrapped evaluator (which shares work inside it)."""
        keys = [parse_layers(s) for s in sets]
        if not keys:
            return []
        blocks_before = self._inner_blocks()
        records = self.inner.evaluate(keys)
        self.blocks_run += self._inner_blocks() - blocks_before
        for key, record in zip(keys, records):
            if record.memo_hit and key not in self._records and key not in self.prepaid:
                self.shared_memo_seconds += float(getattr(record, "cost_seconds", 0.0))
            self._append(key, record.loss, record.accuracy, record.seconds)
            self._records.setdefault(key, record)
        return list(records)

    def gate_derivatives(self, method: str = "full_graph") -> tuple[np.ndarray, np.ndarray]:
        blocks_before = self._inner_blocks()
        g, h = self.inner.gate_derivatives(method)
        self.blocks_run += self._inner_blocks() - blocks_before
        # Read from the memo (another budget's CBO computed them): charged as computed here.
        self.shared_memo_seconds += float(getattr(self.inner, "gate_derivatives_memo_seconds", 0.0))
        return np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64)

    def gate_fisher_rows(self) -> np.ndarray:
        blocks_before = self._inner_blocks()
        a = self.inner.gate_fisher_rows()
        self.blocks_run += self._inner_blocks() - blocks_before
        return np.asarray(a, dtype=np.float64)

    # --- search bookkeeping ------------------------------------------------------------------
    def replay(
        self,
        removed: Iterable[int],
        loss: float,
        accuracy: float | None,
        seconds: float,
        blocks_run: int,
    ) -> None:
        """Re-enter an evaluation that an earlier, interrupted process of this search made."""
        key = parse_layers(removed)
        self._append(key, float(loss), accuracy, float(seconds))
        self._records.setdefault(key, _ReplayedRecord(key, float(loss), accuracy))
        self.blocks_run += int(blocks_run)

    def lookup(self, removed: Iterable[int]) -> Any | None:
        """The record of a set this search already evaluated, or None."""
        return self._records.get(parse_layers(removed))

    def best(self, size: int | None = None) -> Any | None:
        """Lowest-loss record this search has seen (of the given size); ties go to the smaller set."""
        candidates = [r for k, r in self._records.items() if size is None or len(k) == size]
        if not candidates:
            return None
        return min(candidates, key=record_key)

    @property
    def distinct_evaluations(self) -> int:
        return len(self._records)

    @property
    def memo_hits(self) -> int:
        return sum(entry.memo_hit for entry in self.entries)

    def _append(self, key: tuple[int, ...], loss: float, accuracy: float | None, seconds: float) -> None:
        self.entries.append(
            TraceEntry(
                order=len(self.entries),
                removed=key,
                loss=float(loss),
                accuracy=None if accuracy is None else float(accuracy),
                seconds=float(seconds),
                memo_hit=key in self._records,
            )
        )
        self.naive_blocks += self.n_layers - len(key)

    def _inner_blocks(self) -> int:
        return int(getattr(self.inner.stats, "blocks_run", 0))


@dataclass(frozen=True)
class _ReplayedRecord:
    removed: tuple[int, ...]
    loss: float
    accuracy: float | None
    memo_hit: bool = True
    blocks_run: int = 0
    seconds: float = 0.0


def _sort_loss(loss: float) -> float:
    # NaN losses (a diverged pruned model) must rank last, not poison min().
    return math.inf if math.isnan(loss) else loss


def loss_key(loss: float, removed: Iterable[int]) -> tuple[float, tuple[int, ...]]:
    """Sort key that ranks sets by loss, ties broken by the sorted set: deterministic."""
    return (_sort_loss(loss), parse_layers(removed))


def record_key(record: Any) -> tuple[float, tuple[int, ...]]:
    """``loss_key`` of an evaluation record."""
    return loss_key(record.loss, record.removed)


@dataclass
class SearchProblem:
    evaluator: TracingEvaluator
    budget: int
    prior: np.ndarray
    seed: int
    protected: frozenset[int]
    workdir: Path
    # What the search wants on record beside its result (BO's repeat count, CBO's energy-loss
    # correlations); written to selection.json as "diagnostics".
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return self.evaluator.n_layers

    @property
    def allowed(self) -> tuple[int, ...]:
        """Layers a search may remove (every layer that is not protected), ascending."""
        return tuple(i for i in range(self.n_layers) if i not in self.protected)

    @property
    def ranking(self) -> tuple[int, ...]:
        """Allowed layers by prior score, most removable (lowest s_i) first; ties by index."""
        return tuple(sorted(self.allowed, key=lambda i: (float(self.prior[i]), i)))

    def prior_top(self) -> tuple[int, ...]:
        """The one-shot set: the M allowed layers with the smallest s_i."""
        return parse_layers(self.ranking[: self.budget])

    def prior_weights(self) -> np.ndarray:
        """w_i proportional to exp(-z_i), z = standardised s over the allowed layers; 0 if protected."""
        allowed = np.asarray(self.allowed)
        scores = self.prior[allowed].astype(np.float64)
        spread = scores.std()
        z = (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)
        weights = np.zeros(self.n_layers)
        weights[allowed] = np.exp(-(z - z.min()))  # shift: same distribution, no overflow
        return weights / weights.sum()


@dataclass(frozen=True)
class Range:
    """Valid values of a numeric hyper-parameter, declared next to its default.

    ``resolve_params`` (CLI, before any model is loaded) enforces it; the config schema states the
    same bounds and tests/test_validation.py checks that both agree.
    """

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False

    def contains(self, value: float) -> bool:
        if self.minimum is not None and (value <= self.minimum if self.exclusive_minimum else value < self.minimum):
            return False
        return self.maximum is None or value <= self.maximum

    def describe(self) -> str:
        low = "" if self.minimum is None else f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}"
        high = "" if self.maximum is None else f"<= {self.maximum:g}"
        return " and ".join(part for part in (low, high) if part)

    def schema(self) -> dict:
        out: dict[str, Any] = {}
        if self.minimum is not None:
            out["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


POSITIVE = Range(minimum=1)


# matplotlib's filled markers (``Line2D.filled_markers``), written out so that importing the registry
# (every `depthprune` start) does not import matplotlib; tests/test_extending.py holds them equal.
FILLED_MARKERS = (".", "o", "v", "^", "<", ">", "8", "s", "p", "*", "h", "H", "D", "d", "P", "X")


def check_marker(cls: type) -> None:
    """An algorithm's ``marker`` must be one of matplotlib's filled markers: seaborn draws all
    algorithms of a figure in one call, which refuses to mix filled markers with line-art ones ('x',
    '+', '|', '1', ...: "Filled and line art markers cannot be mixed")."""
    if cls.marker not in FILLED_MARKERS:
        raise InputError(
            f"search algorithm {getattr(cls, 'name', cls.__name__)!r} ({cls.__module__}.{cls.__qualname__}): "
            f"marker {cls.marker!r} is not a filled matplotlib marker, as the figures need; one of "
            f"{' '.join(FILLED_MARKERS)}"
        )


class SearchAlgorithm:
    """One subclass per module; ``defaults`` are the paper's hyper-parameters.

    The class is the single record of an algorithm: its config name, how figures and tables show it
    (``display_name``, ``marker``) and whether it is one of the paper's seven (``in_paper``; the
    others are controls). ``reporting.style`` reads these through ``search.ALGORITHMS``.
    """

    name: ClassVar[str]
    display_name: ClassVar[str]
    marker: ClassVar[str]
    in_paper: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {}
    # Allowed values of string-valued parameters (checked by resolve_params).
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    # Valid range of each numeric parameter (checked by resolve_params, mirrored in the schema).
    ranges: ClassVar[dict[str, Range]] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        # Registration checks what the figures will need of the class, when it is defined (a bad
        # marker would otherwise surface only in `depthprune render`, far from its cause).
        super().__init_subclass__(**kwargs)
        if "marker" in cls.__dict__:
            check_marker(cls)

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        raise NotImplementedError

    # Whether ``expected_requests`` is the exact count (True) or an upper bound, for a search that can
    # stop early or whose candidates can coincide (False). tests/test_search_cost.py holds each
    # registered search to it on synthetic objectives.
    requests_exact: ClassVar[bool] = True

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        """The sets a search job requests from its evaluator (memo hits included, and the runner's
        evaluation of the chosen set where the search did not request it), with ``params`` resolved
        (``resolve_params``) and ``n_allowed`` layers removable in one contiguous run. The single
        record of a search's cost: the progress log's ETA and ``depthprune plan`` read it."""
        raise NotImplementedError(f"search algorithm {self.name!r} does not state its expected_requests")

    def uses_prior(self, params: dict) -> bool:
        """Whether the search reads the single-layer prior; if so its search time includes the
        prior's cost (spec: one-shot's cost *is* the prior). Searches that do not override this
        read it."""
        return True

    def uses_gate_derivatives(self, params: dict) -> bool:
        """Whether the search asks the evaluator for the gate derivatives (``cbo_taylor``'s energy):
        ``depthprune plan`` then adds their FLOPs and peak memory to the job."""
        return False

    def uses_gate_fisher(self, params: dict) -> bool:
        """Whether the search asks the evaluator for the per-sample gate gradients (``cbo``'s
        Fisher energy): ``depthprune plan`` then adds their FLOPs and peak memory to the job."""
        return False

    def resolve_params(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults updated by ``overrides``; an unknown key or a wrong type is a clear error."""
        params = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in self.defaults:
                valid = ", ".join(sorted(self.defaults)) or "none"
                raise InputError(f"search algorithm {self.name!r} has no parameter {key!r} (valid parameters: {valid})")
            params[key] = _coerce(self.name, key, self.defaults[key], value)
            if key in self.choices and params[key] not in self.choices[key]:
                raise InputError(
                    f"search algorithm {self.name!r}: parameter {key!r} must be one of "
                    f"{', '.join(self.choices[key])}, got {value!r}"
                )
            valid = self.ranges.get(key)
            if valid is not None and not valid.contains(params[key]):
                raise InputError(
                    f"search algorithm {self.name!r}: parameter {key!r} must be {valid.describe()}, got {value!r}"
                )
        return params


def _coerce(algorithm: str, key: str, default: Any, value: Any) -> Any:
    """Give an override the type of its default (YAML parsing makes 5 an int, 0.2 a float)."""
    expected = type(default)
    if expected is int and isinstance(value, float) and value.is_integer():
        value = int(value)  # "exact_limit=5e6" parses as a float
    ok = (
        default is None
        or (expected is bool and isinstance(value, bool))
        or (expected is int and isinstance(value, int) and not isinstance(value, bool))
        or (expected is float and isinstance(value, (int, float)) and not isinstance(value, bool))
        or (expected is str and isinstance(value, str))
    )
    if not ok:
        raise InputError(
            f"search algorithm {algorithm!r}: parameter {key!r} expects {expected.__name__}, got {value!r}"
        )
    return float(value) if expected is float else value


def validate_budget(budget: int, n_layers: int, protected: Iterable[int]) -> None:
    n_allowed = n_layers - len(set(protected))
    if budget < 1 or budget >= n_allowed:
        raise InputError(
            f"--budget {budget}: must be at least 1 and below the {n_allowed} removable layers "
            f"({n_layers} blocks, {n_layers - n_allowed} protected)"
        )


def validate_prior(prior: Sequence[float | None], n_layers: int, protected: Iterable[int]) -> np.ndarray:
    """Prior scores as a float array; protected layers may be missing (null), the others not."""
    values = np.array([np.nan if s is None else float(s) for s in prior], dtype=np.float64)
    if values.shape != (n_layers,):
        raise InputError(f"prior: {len(values)} scores for a model with {n_layers} blocks")
    protected = set(protected)
    bad = [i for i in range(n_layers) if i not in protected and not np.isfinite(values[i])]
    if bad:
        raise InputError(f"prior: scores of layers {bad} are missing or not finite")
    return values
