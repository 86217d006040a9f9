"""``depthprune search``: one algorithm, one budget → selection.json and trace.csv.

Parses and calls: the search is ``search/runner.py:run_search``, the prior checks ``prior.py``.
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import Any

import yaml

from depthprune.calibration.setup import CalibrationSetup
from depthprune.cli_common import (
    add_calibration_args,
    add_evaluator_args,
    add_model_args,
    calibration_setup,
    evaluator_setup,
    model_inputs,
    model_setup,
)
from depthprune.errors import InputError
from depthprune.io import check_inputs_outputs, format_layers
from depthprune.models.setup import ModelSetup
from depthprune.prior import check_prior, load_prior
from depthprune.search import ALGORITHMS, get_algorithm
from depthprune.search.base import validate_budget

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search the removed set of M layers with one algorithm -> selection.json, trace.csv",
        description="Run one layer-subset search algorithm (docs/method.md §4) on the calibration loss.",
    )
    add_model_args(parser)
    add_calibration_args(parser)
    add_evaluator_args(parser)
    group = parser.add_argument_group("search")
    group.add_argument("--algorithm", required=True, choices=list(ALGORITHMS))
    group.add_argument("--budget", type=int, required=True, metavar="M", help="number of blocks to remove")
    group.add_argument("--prior", required=True, help='prior.json from `depthprune prior` (its "scores")')
    group.add_argument(
        "--workdir",
        required=True,
        help="scratch folder kept across restarts (BO's SQLite study); not a Snakemake output",
    )
    group.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="algorithm hyper-parameter, repeatable; VALUE is a YAML scalar (e.g. beam_width=3)",
    )
    group.add_argument(
        "--heldout-samples",
        type=int,
        default=None,
        metavar="N",
        help="also score the selected set on N rows of the fixed held-out draw of the calibration's source, "
        "disjoint from every seed's calibration sample (calibration/heldout.py); recorded as selection.json's "
        '"heldout" (default: none)',
    )
    group.add_argument("--out-selection", required=True, help="selection.json to write")
    group.add_argument("--out-trace", required=True, help="trace.csv to write")
    parser.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, Any]:
    """``["beam_width=3", "coefficients=ablation"]`` → {"beam_width": 3, "coefficients": "ablation"}."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--param {item!r}: expected KEY=VALUE")
        params[key] = parse_scalar(text.strip())
    return params


def parse_scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError as err:
        raise InputError(f"--param value {text!r} is not a YAML scalar ({err})") from err
    if isinstance(value, str):
        # YAML 1.1 reads "5e6" (no dot) as a string; a number is meant.
        for cast in (int, float):
            try:
                return cast(text)
            except ValueError:
                pass
    elif isinstance(value, (list, dict)):
        raise InputError(f"--param value {text!r} must be a scalar")
    return value


def expected_prior_record(
    model: ModelSetup, calibration: CalibrationSetup, protected: tuple[int, ...]
) -> dict[str, Any]:
    """The evaluator record this search's own prior would carry (``engine/evaluator.describe``), as
    far as it is known without loading the model: the model's fingerprint, the calibration setup's
    name and record, the resolved dtype, the protected layers (for the prior's number of blocks, which
    resolves --protect boundary) and the scoring version."""
    from depthprune.versions import SCORING_VERSION

    return {
        "model_fingerprint": model.fingerprint(),
        "calibration": calibration.name,
        **calibration.record(),
        "dtype": model.resolved_dtype_name(),
        "protected": list(protected),
        "scoring_version": SCORING_VERSION,
    }


def run(args: argparse.Namespace) -> int:
    from depthprune.search.runner import WORKDIR_LOCK, WORKDIR_MARKER, workdir_lock

    # Before the workdir is touched: no output may overwrite an input or the other output.
    check_inputs_outputs(
        {**model_inputs(args), "--prior": args.prior, "--workdir": args.workdir},
        {"--out-selection": args.out_selection, "--out-trace": args.out_trace},
    )
    # First of all: a second process on this workdir (an orphaned job of a killed Snakemake still
    # running, say) fails at once instead of sharing its BO study or deleting it (--recompute).
    lock = Path(args.workdir) / WORKDIR_LOCK
    had_lock = lock.exists()
    with workdir_lock(args.workdir):
        try:
            return _run_locked(args)
        except Exception:
            # A search that failed or was refused in a folder that is not its own (`--workdir .`)
            # leaves nothing there: the lock file this process created (and holds) goes with it. A
            # lock another process holds never reaches here (workdir_lock raises first).
            if not had_lock and not (Path(args.workdir) / WORKDIR_MARKER).exists():
                lock.unlink(missing_ok=True)
            raise


def _run_locked(args: argparse.Namespace) -> int:
    from depthprune.engine.scoring import score_heldout
    from depthprune.search.runner import (  # pandas: only when a search runs
        claim_workdir,
        clear_workdir,
        run_search,
        write_outputs,
    )

    # Cheap checks first: a typo in --param, a mismatched prior or bad data must not cost a model load.
    params = get_algorithm(args.algorithm).resolve_params(parse_params(args.param))
    model, calibration, engine = model_setup(args), calibration_setup(args), evaluator_setup(args)
    prior = load_prior(args.prior, calibration.name)
    n_layers = prior.get("n_layers", len(prior["scores"]))
    protected = engine.protected_for(n_layers)
    validate_budget(args.budget, n_layers, protected)
    check_prior(args.prior, prior, expected_prior_record(model, calibration, protected))
    samples = engine.check(model, calibration)
    heldout_samples = None
    if args.heldout_samples is not None:  # read and checked (disjoint from this sample) before the model loads
        heldout_samples = calibration.load_heldout(args.heldout_samples)
    if args.recompute:
        clear_workdir(args.workdir)  # the BO study: this search's own cache (refused if not its folder)
    claim_workdir(args.workdir)
    loaded = model.load()
    evaluator = engine.build(model, calibration, loaded, samples=samples)
    validate_budget(args.budget, evaluator.n_layers, evaluator.protected)
    recorded_data = (prior.get("evaluator") or {}).get("data_hash")
    if recorded_data is not None and recorded_data != evaluator.describe()["data_hash"]:
        raise InputError(
            f"{args.prior}: prior computed on other calibration data (data_hash={recorded_data!r}, this search: "
            f"{evaluator.describe()['data_hash']!r}); recompute the prior"
        )
    result = run_search(
        evaluator,
        args.algorithm,
        args.budget,
        prior["scores"],
        seed=args.seed,
        workdir=args.workdir,
        params=params,
        prior_seconds=float(prior.get("cost", {}).get("seconds", 0.0)),
    )
    if heldout_samples is not None:
        objective = calibration.build_objective(
            loaded.tokenizer, engine.batch_tokens(calibration.seq_len), heldout_samples
        )
        result.heldout = {"n_samples": args.heldout_samples, **score_heldout(loaded, objective, result.removed)}
        log.info(
            "held-out loss %.6g on %d samples (%.1f s)",
            result.heldout["loss"],
            args.heldout_samples,
            result.heldout["seconds"],
        )
    check_finite(result, loaded.name)
    write_outputs(result, loaded.name, calibration.name, args.out_selection, args.out_trace)
    print(
        f"{args.algorithm} M={args.budget}: removed [{format_layers(result.removed)}] loss={result.loss:.6g} "
        f"distinct={result.distinct_evaluations} memo_hits={result.memo_hits} blocks={result.blocks_run} "
        f"seconds={result.search_seconds:.1f} -> {args.out_selection}"
    )
    return 0


def check_finite(result, model_name: str) -> None:
    """A non-finite selected or held-out loss is the model's breakage: refused before anything is written."""
    losses = {"selected set's loss": result.loss}
    if result.heldout is not None:
        losses["held-out loss"] = result.heldout["loss"]
    bad = [f"{what} {value}" for what, value in losses.items() if not math.isfinite(value)]
    if bad:
        raise InputError(
            f"search: model {model_name!r} gives a non-finite {', '.join(bad)} for removed set "
            f"[{format_layers(result.removed)}]: its weights or computation are broken (NaN/inf); nothing was written"
        )
