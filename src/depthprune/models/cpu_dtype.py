"""The rule of ``dtype: auto`` and the CPU's bfloat16 probes, without importing torch up front.

models/loading.resolve_dtype applies it when a model is loaded; the workflow's plan
(depthprune.workflow.resolved_dtype) applies the same rule to put the resolved dtype into every
model job's provenance, so that a change of it (``DEPTHPRUNE_CPU_BF16``, another CPU) reruns them.
torch is imported only where the answer needs it (no ``DEPTHPRUNE_CPU_BF16`` and a CPU with the
bfloat16 flags, or no flags to read).
"""

from __future__ import annotations

import os
from pathlib import Path

from depthprune.errors import InputError

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 /proc/cpuinfo flags of native bfloat16 math
CPU_BF16_ENV = "DEPTHPRUNE_CPU_BF16"


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str] | None:
    """The CPU feature flags the kernel reports, or None where there is no /proc/cpuinfo (macOS, Windows)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):  # x86 / aarch64
            flags.update(value.split())
    return flags


def kernel_cap(environ=os.environ, capability: str | None = None) -> str | None:
    """Why PyTorch will not use the CPU's bfloat16 instructions although the CPU has them, or None.

    ``ATEN_CPU_CAPABILITY`` below avx512 caps PyTorch's own kernels and ``ONEDNN_MAX_CPU_ISA`` below
    AVX512_CORE_BF16 caps oneDNN's matrix products; either makes bfloat16 emulated (a forward pass of
    SmolLM2 on 4 x 256 tokens took 12.7 s in bfloat16 against 2.9 s in float32 with both capped at AVX2
    on an AVX512-BF16 CPU). ``capability`` defaults to ``torch.backends.cpu.get_cpu_capability()``.
    """
    if capability is None:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    if not capability.upper().startswith("AVX512"):
        return f"PyTorch's CPU kernels are capped at {capability} (ATEN_CPU_CAPABILITY)"
    onednn = environ.get("ONEDNN_MAX_CPU_ISA", environ.get("DNNL_MAX_CPU_ISA", "")).strip().upper()
    if onednn and onednn != "ALL" and not onednn.startswith(("AVX512_CORE_BF16", "AVX512_CORE_AMX", "AVX10")):
        return f"oneDNN is capped at {onednn} (ONEDNN_MAX_CPU_ISA)"
    return None


def cpu_native_bf16(
    flags: set[str] | None = None, torch_probe=None, *, environ=os.environ, capability: str | None = None
) -> tuple[bool, str]:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX), and why we think so.

    Without native support PyTorch emulates bfloat16 by converting to float32, and a forward pass is
    about 6x slower than in float32 (measured on an AVX2 CPU), so ``dtype: auto`` must not choose it.
    ``flags`` (the CPU flags; default: read /proc/cpuinfo) and ``torch_probe`` (a callable returning
    that answer from PyTorch's own CPU detection) are injectable for tests. Without them, the
    environment variable ``DEPTHPRUNE_CPU_BF16=0|1`` overrides the detection (the test suite sets 0
    so that it computes in float32 on every CPU kind). A CPU with the flags whose kernels are capped
    below them (``kernel_cap``; ``environ`` and ``capability`` are injectable) counts as not native.
    """
    if flags is None and torch_probe is None:
        forced = os.environ.get(CPU_BF16_ENV, "").strip()
        if forced in ("0", "1"):
            return forced == "1", f"{CPU_BF16_ENV}={forced}"
        if forced:
            raise InputError(f"environment variable {CPU_BF16_ENV}={forced!r}: expected 0 or 1")
    if flags is None:
        flags = cpu_flags()
    if flags is not None:
        found = sorted(f for f in NATIVE_BF16_FLAGS if f in flags)
        if found:
            capped = kernel_cap(environ, capability)
            if capped:
                return False, f"CPU flags {', '.join(found)}, but {capped}"
            return True, "CPU flags " + ", ".join(found)
        if flags:
            return False, "CPU flags lack " + " and ".join(NATIVE_BF16_FLAGS)
    import torch

    if torch_probe is None:

        def torch_probe() -> bool:  # private helpers of torch.cpu (x86 only); absent elsewhere
            probes = [getattr(torch.cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
            return any(p() for p in probes if p is not None)

    try:
        native = bool(torch_probe())
    except Exception:
        native = False
    capability = torch.backends.cpu.get_cpu_capability()
    return native, f"PyTorch CPU detection ({capability}): {'native' if native else 'no native'} bfloat16"


def auto_dtype(
    device_type: str,
    flags: set[str] | None = None,
    torch_probe=None,
    *,
    environ=os.environ,
    capability: str | None = None,
) -> tuple[str, str]:
    """(dtype name, why) that ``dtype: auto`` resolves to on a device of type ``device_type``.

    bfloat16 on CUDA (the paper's precision); on a CPU, bfloat16 only where it is native
    (``cpu_native_bf16``), else float32; float32 on any other device.
    """
    if device_type == "cuda":
        return "bfloat16", "CUDA device"
    if device_type == "cpu":
        native, why = cpu_native_bf16(flags, torch_probe, environ=environ, capability=capability)
        return ("bfloat16" if native else "float32"), why
    return "float32", f"{device_type} device"
