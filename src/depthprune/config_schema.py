"""The workflow's config schema: workflow/schemas/config.schema.yaml with the registries' names
filled in when it is loaded, so the YAML holds no copy of them that could drift.

Filled in: the calibrations (calibration/specs.py ``CALIBRATIONS``), the search algorithms and the
hyper-parameters of each (search/ ``ALGORITHMS``: their ``defaults``, ``ranges`` and ``choices``),
the benchmarks and their metrics (evaluation/benchmarks.py), and the option values of the dtype and
of the calibration objectives. The Snakefile (workflow/rules/common.smk) and ``depthprune plan``
validate with the schema ``load_schema`` returns; a YAML that states one of these itself is refused,
naming the place. A light module: no torch.
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import yaml

from depthprune.errors import InputError

SCHEMA_FILE = Path("workflow") / "schemas" / "config.schema.yaml"  # relative to the repository root


def load_schema(path: str | Path) -> dict:
    """The schema file at ``path`` with the registries' names filled in (``with_registries``)."""
    with open(path, encoding="utf-8") as handle:
        return with_registries(yaml.safe_load(handle), str(path))


def algorithm_params_schema(algorithm) -> dict:
    """``search_params.<name>``: one property per default of the search ``algorithm``, its JSON type
    from the default's, its bounds from ``ranges`` and its values from ``choices``."""
    properties: dict[str, dict] = {}
    for key, default in algorithm.defaults.items():
        if key in algorithm.choices:
            entry: dict[str, Any] = {"enum": list(algorithm.choices[key])}
        elif isinstance(default, bool):
            entry = {"type": "boolean"}
        elif isinstance(default, int):
            entry = {"type": "integer"}
        elif isinstance(default, float):
            entry = {"type": "number"}
        else:
            raise TypeError(
                f"search algorithm {algorithm.name!r}: default {key}={default!r} has no schema type "
                "(bool, int, float, or a str with its `choices`)"
            )
        if key in algorithm.ranges:
            entry.update(algorithm.ranges[key].schema())
        properties[key] = entry
    return {"type": "object", "additionalProperties": False, "default": {}, "properties": properties}


def with_registries(schema: dict, where: str = str(SCHEMA_FILE)) -> dict:
    """``schema`` (loaded from ``where``) with every name a registry holds filled in, in place."""
    from depthprune.calibration import specs
    from depthprune.evaluation.benchmarks import BENCHMARKS, METRICS
    from depthprune.models import DTYPE_CHOICES
    from depthprune.search import ALGORITHMS, get_algorithm

    def fill(path: str, key: str, value: Any) -> None:
        node: Any = schema
        for part in path.split("."):
            node = node[part]
        if key in node:
            raise InputError(
                f"{where}: {path}.{key} is filled in from the package's registry when the schema is "
                "loaded (depthprune/config_schema.py); remove it from the file"
            )
        node[key] = value

    metrics = sorted({metric for names in METRICS.values() for metric in names})
    fill("$defs.calibration_name", "enum", list(specs.CALIBRATIONS))
    fill("$defs.algorithm_name", "enum", list(ALGORITHMS))
    fill("$defs.benchmark_name", "enum", list(BENCHMARKS))
    fill("properties.search_params", "properties", {n: algorithm_params_schema(get_algorithm(n)) for n in ALGORITHMS})
    fill("properties.evaluation.properties.tasks", "default", list(BENCHMARKS))
    fill("properties.evaluation.properties.headline_metrics.additionalProperties", "enum", metrics)
    fill("properties.model_table.additionalProperties.properties.dtype", "enum", list(DTYPE_CHOICES))
    fill("properties.calibration.properties.perplexity.properties.packing", "enum", list(specs.C4_PACKINGS))
    fill("properties.calibration.properties.tlm.properties.format", "enum", list(specs.TLM_FORMATS))
    fill("properties.calibration.properties.tlm.properties.loss", "enum", list(specs.TLM_LOSSES))
    return schema


def validate(config: MutableMapping, schema: dict) -> None:
    """Validate ``config`` against ``schema`` and fill in the schema's defaults for the keys it
    leaves out, as ``snakemake.utils.validate`` does (which reads a schema file only, so it cannot
    take the filled-in schema): jsonschema's ``ValidationError`` on a bad value."""
    from jsonschema import Draft202012Validator, validators

    properties_check = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, node):
        if isinstance(instance, MutableMapping):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from properties_check(validator, properties, instance, node)

    filling = validators.extend(Draft202012Validator, {"properties": set_defaults})
    filling(schema).validate(config)
