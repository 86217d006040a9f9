"""Keep freed memory in the process (glibc): large tensors are reused instead of page-faulted anew.

glibc serves every allocation above its mmap threshold (at most 32 MiB) with a fresh ``mmap`` and
gives it back with ``munmap`` when it is freed. The kernel then zero-fills each page of the next
such allocation on first touch. The engine makes tensors of that size all the time: the LM head's
float32 logits for a chunk of 2048 positions are 400 MB on SmolLM2 (2 GB on Gemma 3), the head of a
calibration evaluation 100 MB, a batch of perplexity windows 100 MB per activation. On the 2-core
VMs this project runs on, calibration took 0.69 (bfloat16) to 0.79 (float32) of the time without
those page faults, evaluation 0.88 to 0.90 (README, "Freed memory kept"; ``depthprune timing
allocator`` measures it on your machine).

``keep_freed_memory`` tells glibc (``mallopt``) to serve large allocations from its heap and to keep
freed heap memory instead of trimming it, so a freed 400 MB block is reused by the next one. The
computation is unchanged, bit for bit: the same kernels run on the same numbers, only the memory
comes from elsewhere (``depthprune timing allocator`` checks the losses are equal). The process's
resident memory then stays at its peak instead of shrinking between peaks. A long search fragments
the kept heap, so ``give_back_free_memory`` (called by the subset evaluator) returns the free pages
to the kernel each time they have grown by ``FREE_LIMIT_BYTES``. Set ``DEPTHPRUNE_MALLOC=system`` to keep glibc's default behaviour.
Elsewhere than Linux with glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import sys

from depthprune.errors import InputError

log = logging.getLogger(__name__)

ENV_VAR = "DEPTHPRUNE_MALLOC"
# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_KEEP_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: trim only beyond 2 GiB of free heap top
_in_force = False


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc >= 2.33)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


@functools.lru_cache(maxsize=1)
def _glibc():
    """The C library when it is glibc (Linux), else None (looked up once per process)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return None
    except (ValueError, OSError):  # musl and others do not know the name
        return None
    return ctypes.CDLL(None)


def _mallopt(libc, settings: dict[int, int]) -> bool:
    return all(libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) == 1 for param, value in settings.items())


def keep_freed_memory(environ=os.environ) -> bool:
    """Serve large allocations from the heap and keep freed memory (see the module doc), unless
    ``DEPTHPRUNE_MALLOC=system``. Returns whether the setting is now in force."""
    choice = environ.get(ENV_VAR, "keep")
    if choice not in ("keep", "system"):
        raise InputError(f"{ENV_VAR}={choice!r}: choose keep or system")
    libc = _glibc()
    if choice == "system" or libc is None:
        return False
    if not _mallopt(libc, {_M_MMAP_MAX: 0, _M_TRIM_THRESHOLD: _KEEP_TRIM_THRESHOLD}):
        log.warning("allocator: glibc refused mallopt; freed memory goes back to the kernel as usual")
        return False
    global _in_force
    _in_force = True
    log.debug("allocator: large allocations from the heap, freed memory kept (%s=system to turn off)", ENV_VAR)
    return True


# A long search with freed memory kept fragments the heap: tensors of many sizes leave free chunks
# that later tensors do not fit, and the heap grows (measured: beam at M = 9 on 16 TLM items, float32,
# 7.1 GB after 4 min against 4.0 GB with glibc's default, 18.6 GB and killed at the end). Past this
# much free heap, the free pages go back to the kernel (malloc_trim), so kept memory stays bounded
# (that search with the bound: 6.3 GiB at its end; docs/method.md §8).
FREE_LIMIT_BYTES = 1 << 30
_free_at_last_trim = 0


def give_back_free_memory(limit: int = FREE_LIMIT_BYTES) -> int:
    """With freed memory kept, return the heap's free pages to the kernel when its free bytes have
    grown by more than ``limit`` since the last time (trimmed pages still count as free heap; the
    next use of one faults it in anew). Returns the free bytes found when it trimmed, else 0. Does
    nothing unless :func:`keep_freed_memory` is in force."""
    global _free_at_last_trim
    if not _in_force:
        return 0
    info = mallinfo()
    if info is None or info.fordblks - _free_at_last_trim <= limit:
        return 0
    _glibc().malloc_trim(ctypes.c_size_t(0))
    _free_at_last_trim = info.fordblks
    log.debug("allocator: %.2f GB free in the heap, given back to the kernel", info.fordblks / 1e9)
    return int(info.fordblks)


def in_force() -> bool:
    """Whether ``keep_freed_memory`` took effect in this process."""
    return _in_force


def mallinfo() -> MallInfo2 | None:
    """glibc's allocation statistics (``mallinfo2``), or None without glibc >= 2.33."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2()
