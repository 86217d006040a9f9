"""The device decisions of a model job in one place, each with its hardware query injectable, so
that the CUDA branches run in tests on a machine without a GPU (tests/test_devices.py).

* where the prefix-state cache lives (``state_device``) and how large it may grow
  (``state_budget``: half of the free accelerator memory, an eighth of RAM capped at 8 GiB on CPU);
* when the host waits for the device (``synchronize``: before a wall-clock reading; a no-op on CPU);
* freeing cached accelerator memory after a large temporary (``release_cached_memory``).

The dtype decision is models/loading.resolve_dtype (its probes are injectable already).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from depthprune.memory import cpu_total_memory

CUDA_STATE_FRACTION = 0.5  # of the free memory after the model is loaded: the rest for activations
CPU_STATE_FRACTION = 1 / 8  # of RAM
CPU_STATE_CAP = 8 << 30

MemoryQuery = Callable[[torch.device], tuple[int, int]]  # (free, total) bytes, as torch.cuda.mem_get_info


def state_device(device: torch.device, option: str = "auto") -> torch.device:
    """Where cached hidden states live: option evaluator.state_device (auto = the model's device)."""
    return torch.device(device) if option == "auto" else torch.device(option)


def budget_from_free_memory(free_bytes: int) -> int:
    """The state cache's share of an accelerator's free memory."""
    return int(free_bytes * CUDA_STATE_FRACTION)


def state_budget(
    device: torch.device,
    *,
    cuda_memory: MemoryQuery | None = None,
    cpu_memory: Callable[[], int] = cpu_total_memory,
) -> int:
    """Bytes the prefix-state cache may hold on ``device`` (evaluator.state_cache_gib unset)."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = (cuda_memory or torch.cuda.mem_get_info)(device)
        return budget_from_free_memory(free)
    return int(min(cpu_memory() * CPU_STATE_FRACTION, CPU_STATE_CAP))


def synchronize(device: torch.device, cuda_synchronize: Callable[[torch.device], None] | None = None) -> None:
    """Wait for the device's queued kernels (CUDA runs asynchronously; the CPU does not)."""
    device = torch.device(device)
    if device.type == "cuda":
        (cuda_synchronize or torch.cuda.synchronize)(device)


def release_cached_memory(device: torch.device, empty_cache: Callable[[], None] | None = None) -> None:
    """Return the caching allocator's free blocks (after a large temporary, e.g. CBO's float32 copy)."""
    if torch.device(device).type == "cuda":
        (empty_cache or torch.cuda.empty_cache)()
