"""A model's config.json without loading it: what the planner and the plan-time checks read.

Converted embedded and tiny models (the model cache), a local folder, the hub cache, or the paper
models' configs bundled in ``models/configs/``. No weights are read and torch is not imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

BUNDLED_CONFIGS = Path(__file__).parent / "configs"


def model_config(entry: Mapping, model_cache_dir: str | Path) -> dict:
    """config.json of a model_table entry: converted embedded/tiny models, the hub cache, or bundled."""
    spec = str(entry["spec"])
    if spec.startswith("tiny:"):
        from depthprune.models.tiny import parse_tiny_spec, tiny_config

        family, n_layers = parse_tiny_spec(spec)
        return tiny_config(family, n_layers).to_dict()
    if spec.startswith("embedded:"):
        path = Path(model_cache_dir) / spec.split(":", 1)[1] / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not converted yet (run `depthprune prepare-model --model {spec}`)")
        return json.loads(path.read_text())
    local = Path(spec) / "config.json"
    if local.is_file():
        return json.loads(local.read_text())
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec, "config.json")
        if isinstance(cached, str):
            return json.loads(Path(cached).read_text())
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        pass
    bundled = BUNDLED_CONFIGS / spec.replace("/", "--") / "config.json"
    if bundled.is_file():
        return json.loads(bundled.read_text())
    raise FileNotFoundError(
        f"model {spec!r}: no config.json in the hub cache or in {BUNDLED_CONFIGS} (download it once)"
    )
