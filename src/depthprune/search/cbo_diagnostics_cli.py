"""``depthprune cbo-diagnose``: CBO's energy against the true loss (search/cbo_diagnostics.py, issue 56).

Writes, into ``--out``: ``sets.csv`` (every evaluated set: its energy, the expansion's predicted
loss and the true loss), ``model_error.csv`` (the expansion's error per M), ``topk.csv`` (the best
true loss among the energy's K lowest sets, beside one-shot's), ``solver.csv`` (CBO's solver against
exact enumeration) and ``run.json`` (the command, CPU, dtype, threads, versions and seconds).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
from pathlib import Path

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

log = logging.getLogger(__name__)

OUTPUTS = ("sets.csv", "model_error.csv", "topk.csv", "solver.csv", "run.json")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "cbo-diagnose",
        help="CBO's quadratic energy against the true calibration loss: expansion, solver, re-ranking",
        description="Diagnose CBO (docs/method.md §4.6, 'Diagnosis'): the expansion's error per M, CBO's "
        "solver against exact enumeration, and the true loss of the energy's K lowest sets beside one-shot's.",
    )
    add_model_args(parser)
    add_calibration_args(parser)
    add_evaluator_args(parser)
    group = parser.add_argument_group("diagnosis")
    group.add_argument("--budgets", type=int, nargs="+", default=[7, 9], metavar="M", help="M of the top-K check")
    group.add_argument(
        "--model-error-budgets",
        type=int,
        nargs="*",
        default=[],
        metavar="M",
        help="M of the expansion-error check (1: every single; 2 with --all-pairs: every pair; else random sets)",
    )
    group.add_argument("--k", type=int, nargs="+", default=[16, 64, 256], help="numbers of lowest-energy sets")
    group.add_argument("--random-sets", type=int, default=24, help="random M-sets per M of the expansion check")
    group.add_argument(
        "--all-pairs",
        action="store_true",
        help="evaluate every pair: the exact M = 2 error, and the ablation energy ranked like the gradient one",
    )
    group.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a CBO hyper-parameter (as for search)"
    )
    group.add_argument("--out", required=True, help="folder for the five outputs (created; files replaced)")
    parser.set_defaults(func=run)


def cpu_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform says."""
    try:
        for line in Path(cpuinfo).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(args: argparse.Namespace) -> int:
    import torch

    from depthprune.io import atomic_write_csv, atomic_write_json, check_inputs_outputs, package_versions
    from depthprune.search.cbo import ConstrainedBinaryOptimisation
    from depthprune.search.cbo_diagnostics import diagnose
    from depthprune.search.cli import parse_params

    check_inputs_outputs(model_inputs(args), {"--out": args.out})
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out}: exists and is not a folder; pass a folder for the five outputs")
    params = ConstrainedBinaryOptimisation().resolve_params(parse_params(args.param))
    if args.random_sets < 3:
        raise InputError(f"--random-sets must be at least 3 (a Spearman ρ needs three sets), got {args.random_sets}")
    if min(args.k) < 1:
        raise InputError(f"--k: every K must be at least 1, got {args.k}")
    model, setup, engine = model_setup(args), calibration_setup(args), evaluator_setup(args)
    samples = engine.check(model, setup)
    loaded = model.load()
    evaluator = engine.build(model, setup, loaded, samples=samples)
    result = diagnose(
        evaluator,
        seed=args.seed,
        budgets=args.budgets,
        model_error_budgets=args.model_error_budgets,
        ks=args.k,
        n_random=args.random_sets,
        all_pairs=args.all_pairs,
        params=params,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = {"model": loaded.name, "calibration": setup.name, "seed": args.seed}
    for name, frame in (
        ("sets.csv", result.sets),
        ("model_error.csv", result.model_error),
        ("topk.csv", result.topk),
        ("solver.csv", result.solver),
    ):
        atomic_write_csv(out / name, frame.assign(**label)[list(label) + list(frame.columns)])
    atomic_write_json(
        out / "run.json",
        {
            **label,
            "command": "depthprune " + " ".join(sys.argv[1:]) if sys.argv[1:] else None,
            "cpu": cpu_name(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "dtype": str(next(loaded.model.parameters()).dtype).removeprefix("torch."),
            "device": str(next(loaded.model.parameters()).device),
            "data_hash": evaluator.describe().get("data_hash"),
            **result.record,
            "versions": package_versions(),
        },
    )
    best = result.topk.loc[result.topk["k"] == max(args.k)]
    for row in best.itertuples():
        print(
            f"cbo-diagnose {setup.name} seed={args.seed} M={row.budget} {row.energy}: best of {row.k} lowest "
            f"energies {row.best_loss:.6g} (rank {row.best_rank}), one-shot {row.one_shot_loss:.6g} "
            f"(energy rank {row.one_shot_energy_rank}) -> {out}"
        )
    return 0
