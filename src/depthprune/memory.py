"""Memory a command will need, checked before it allocates (torch-free and numpy-free: the Snakefile
and argparse use it). The CPU's physical memory, and the bootstrap's estimate: a size that cannot fit
is refused with the estimate instead of a MemoryError after the data is read (issue 70)."""

from __future__ import annotations

import argparse
import os

from depthprune.errors import InputError

# 10,000 resamples: the Monte-Carlo standard error of a 2.5 % percentile end is then about
# sqrt(0.025 · 0.975 / 10,000) = 0.16 % in quantile level (docs/method.md §7, "Monte-Carlo error").
# Here, not in reporting/statistics/bootstrap.py, so that argparse and the config check read it too.
DEFAULT_RESAMPLES = 10_000
# Peak bytes per resample and document of one benchmark's bootstrap weights (reporting/statistics/
# bootstrap.py ``_weights``: the int64 draws, their flat indices, the counts and the float copy at once).
BYTES_PER_DRAW = 32


def cpu_total_memory() -> int:
    """This machine's physical memory in bytes (8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def bootstrap_bytes(n_resamples: int, n_documents: int = 1, n_runs: int = 0) -> int:
    """Peak bytes of a paired bootstrap: the weights of the benchmark with the most documents, and four
    (resamples, runs) float arrays of replicates."""
    return n_resamples * (BYTES_PER_DRAW * n_documents + 8 * 4 * n_runs)


def check_resamples_fit(
    n_resamples: int, n_documents: int = 1, n_runs: int = 0, option: str = "--bootstrap-resamples"
) -> None:
    """InputError, before anything is allocated, when ``n_resamples`` resamples of ``n_documents``
    documents (and ``n_runs`` runs' replicates) need more memory than this machine has; the message
    gives the estimate. With the defaults (one document, no run) it is the floor of any study: what a
    command line or a config can be checked against before the data is read."""
    if n_resamples < 1:
        raise InputError(f"{option} must be at least 1, got {n_resamples}")
    needed, total = bootstrap_bytes(n_resamples, n_documents, n_runs), cpu_total_memory()
    if needed > total:
        raise InputError(
            f"{option} {n_resamples}: the bootstrap needs about {needed / 2**30:,.1f} GiB ({n_resamples:,} resamples x "
            f"{n_documents:,} documents x {BYTES_PER_DRAW} bytes"
            + (f", plus the replicates of {n_runs} runs" if n_runs else "")
            + f"), this machine has {total / 2**30:,.1f} GiB; use at most {max(1, n_resamples * total // needed):,} "
            f"({DEFAULT_RESAMPLES}, the default, keeps interval ends stable to the seed)"
        )


def resample_count(text: str) -> int:
    """argparse type of --bootstrap-resamples: a positive integer whose floor fits memory."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    try:
        check_resamples_fit(value)
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix(f"--bootstrap-resamples {value}: ")) from None
    return value
