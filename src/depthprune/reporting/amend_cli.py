"""``depthprune relabel-algorithm`` and ``depthprune add-runs``: amend a committed study without
recomputing it (science: reporting/amend.py; docs/method.md §9)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from depthprune.reporting.cli import add_protected_option, parse_protected

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    relabel = subparsers.add_parser(
        "relabel-algorithm",
        help="rename an algorithm in a committed study's aggregate or run files (its name now means other code)",
        description=(
            "Rename algorithm --from to --to in each PATH: an aggregate folder (its tables and per-document "
            "scores; recorded in relabelled.json) or a runs folder (each search folder named --from, and the "
            "algorithm its files record). Refused where --to is already present."
        ),
    )
    relabel.add_argument("--from", dest="old", required=True, metavar="NAME", help="the name the rows carry now")
    relabel.add_argument("--to", dest="new", required=True, metavar="NAME", help="the name of the code that made them")
    relabel.add_argument("paths", nargs="+", metavar="PATH", help="aggregate folders and runs folders")
    relabel.set_defaults(func=run_relabel)

    add = subparsers.add_parser(
        "add-runs",
        help="add the runs of one more algorithm to a committed study's aggregate",
        description=(
            "Join the searched runs found under --results (with their own dense evaluation, which must agree "
            "with the study's) to the committed aggregate --aggregate, keeping every committed row; recorded "
            "in added_runs.json. Refused for a run the study holds, a cell it lacks, or another precision, "
            "depth or search space."
        ),
    )
    add.add_argument("--aggregate", required=True, metavar="DIR", help="the committed study's aggregate folder")
    add.add_argument("--results", required=True, metavar="DIR", help="the added runs (results layout, dense included)")
    add_protected_option(add)  # the study's own setting, as for `aggregate`
    add.add_argument("--out", default=None, metavar="DIR", help="output folder (default: --aggregate, in place)")
    add.set_defaults(func=run_add_runs)


def run_relabel(args: argparse.Namespace) -> int:
    from depthprune.reporting.amend import relabel_aggregate, relabel_runs, write_relabelled

    for path in map(Path, args.paths):
        if (path / "summary.parquet").is_file():
            agg, samples, renamed = relabel_aggregate(path, args.old, args.new)
            write_relabelled(agg, samples, path, args.old, args.new)
            print(f"relabel-algorithm: {renamed} {args.old} runs of {path} are {args.new}")
        elif path.is_dir():
            moved = relabel_runs(path, args.old, args.new)
            print(f"relabel-algorithm: {len(moved)} {args.old} run folders under {path} are {args.new}")
        else:
            raise FileNotFoundError(f"{path}: neither an aggregate folder (summary.parquet) nor a runs folder")
    return 0


def run_add_runs(args: argparse.Namespace) -> int:
    from depthprune.io import check_inputs_outputs
    from depthprune.reporting.aggregate import aggregate, collect_samples, discover_result_files, discover_samples
    from depthprune.reporting.amend import add_runs, write_added

    out = args.out or args.aggregate
    check_inputs_outputs({"--results": args.results}, {"--out": out})
    protected = parse_protected(args.protected)
    selection_files, metrics_files = discover_result_files(args.results)
    if not selection_files:
        raise FileNotFoundError(f"--results {args.results}: no selection.json files")
    added = aggregate(selection_files, metrics_files, protected)
    samples = collect_samples(discover_samples(args.results), added.selections)
    agg, merged, record = add_runs(args.aggregate, added, samples)
    write_added(agg, merged, record, args.aggregate, out)
    print(
        f"add-runs: {record.runs} runs of {', '.join(record.algorithms)} -> {out} (dense answers differ on "
        f"{record.answers_differ} of {record.answered_documents} documents)"
    )
    return 0
