"""The ``depthprune`` command line: one sub-command per pipeline stage.

Each stage keeps its argument parsing next to its science: a module listed in ``COMMANDS`` exposes
``register(subparsers)``, which adds its sub-command(s) and sets ``func(args) -> int``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

from depthprune import allocator, parent_exit
from depthprune.errors import InputError
from depthprune.locking import LockHeld

COMMANDS = (
    "depthprune.models.cli",  # prepare-model, export
    "depthprune.prior_cli",  # prior
    "depthprune.search.cli",  # search
    "depthprune.search.cbo_diagnostics_cli",  # cbo-diagnose (CBO's energy against the true loss)
    "depthprune.evaluation.cli",  # evaluate
    "depthprune.reporting.cli",  # aggregate, render
    "depthprune.reporting.amend_cli",  # relabel-algorithm, add-runs (amend a committed study)
    "depthprune.timing.cli",  # timing {evaluator,search,evaluate,stages} (alias: bench)
    "depthprune.plan_cli",  # plan (a study's jobs, FLOPs, memory and GPU-hours before it runs)
    "depthprune.evaluation_only_cli",  # source-selection, random-sets (evaluation-only studies, the random-set control)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthprune",
        description="Depth pruning of LLMs as subset selection: prior, search, evaluation, figures.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--log-file", help="also write the log to this file")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMANDS:
        importlib.import_module(module_name).register(subparsers)
    return parser


@contextlib.contextmanager
def scoped_logging(verbose: bool = False, log_file: str | None = None) -> Iterator[None]:
    """Log to stderr (and ``log_file``) for one invocation only.

    The handlers are attached to the root logger for the duration of the command and removed and
    closed afterwards, with the previous level restored: a later log call (another ``main()`` in
    the same process, as in the tests) never writes to a stream that has since been closed.
    """
    root = logging.getLogger()
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        # Its folder is made, as Snakemake makes a rule's log folder; one that cannot be is an OSError.
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    previous_level = root.level
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    try:
        yield
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(previous_level)


def main(argv: list[str] | None = None) -> int:
    try:
        parent_exit.exit_with_parent()  # a job of a Snakemake killed with -9 must not run on (parent_exit.py)
        parser = build_parser()  # reads DEPTHPRUNE_RECOMPUTE
    except InputError as err:  # an environment variable with a value it does not accept
        print(f"depthprune: error: {err}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(scoped_logging(args.verbose, args.log_file))
        except OSError as err:  # --log-file in a folder that cannot be made, or not writable
            print(f"depthprune {args.command}: error: --log-file: {describe_os_error(err)}", file=sys.stderr)
            return 2
        return _run(args)


# SQLite errors that are the disk's, a limit's or a permission's (an SQLite file written while the
# disk fills): one line like an OSError, not a traceback.
_SQLITE_ENVIRONMENT = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")


def _run(args) -> int:
    log = logging.getLogger("depthprune")
    try:
        allocator.keep_freed_memory()  # reuse freed memory, not page-fault large tensors anew (allocator.py)
        return int(args.func(args) or 0)
    except (InputError, FileNotFoundError, LockHeld) as err:
        # Bad input (or a workdir another process holds): one clear line naming the key or file (on
        # stderr and in --log-file), exit 2. The error contract is in errors.py.
        log.debug("error details", exc_info=True)
        log.error("depthprune %s: error: %s", args.command, err)
        return 2
    except OSError as err:
        # The disk, a limit or a permission (no space left, `ulimit -f`, a read-only folder, a folder
        # where a file belongs): said as such in one line, exit 2; the traceback only with --verbose.
        log.debug("error details", exc_info=True)
        log.error("depthprune %s: error: %s", args.command, describe_os_error(err))
        return 2
    except Exception as err:
        if _is_weights_io_error(err):
            # safetensors reports a failed write of model weights (a converted or tiny model, an
            # export) as its own error type, not an OSError: the same one line, exit 2.
            log.debug("error details", exc_info=True)
            log.error("depthprune %s: error: I/O error while writing model weights: %s", args.command, err)
            return 2
        if isinstance(err, sqlite3.Error) and str(getattr(err, "sqlite_errorname", "")).startswith(_SQLITE_ENVIRONMENT):
            log.debug("error details", exc_info=True)
            log.error("depthprune %s: error: I/O error on an SQLite file (memo, BO study): %s", args.command, err)
            return 2
        # A bug, not bad input (a plain ValueError or KeyError included: bad input is an InputError,
        # errors.py): said as such, with the traceback on stderr and in --log-file, exit 1.
        log.exception(
            "depthprune %s: internal error (a bug, not bad input; the traceback follows): %s: %s",
            args.command,
            type(err).__name__,
            err,
        )
        return 1


def _is_weights_io_error(err: Exception) -> bool:
    """safetensors' SafetensorError for an I/O failure ("... I/O error: File too large (os error 27)"),
    recognised by name so that this module never imports safetensors."""
    return type(err).__name__ == "SafetensorError" and "I/O error" in str(err)


def describe_os_error(err: OSError) -> str:
    """'I/O error on PATH: No space left on device [errno 28]' rather than a traceback."""
    if err.strerror is None:  # raised with a message of ours
        return str(err)
    where = f" on {err.filename}" + (f" -> {err.filename2}" if err.filename2 else "") if err.filename else ""
    return f"I/O error{where}: {err.strerror} [errno {err.errno}]"
