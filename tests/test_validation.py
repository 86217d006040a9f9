"""Inputs are checked before the expensive step (any model load), with file, 1-based line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from depthprune.cli import main
from depthprune.config_schema import SCHEMA_FILE, load_schema, validate, with_registries
from depthprune.prior import check_prior
from depthprune.search import ALGORITHMS, get_algorithm

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / SCHEMA_FILE


@pytest.fixture
def no_model_load(monkeypatch):
    """Any model load fails the test: the error must come before it."""
    import depthprune.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(loading, "load_model", refuse)


def _mirror(tmp_path, data_dir, c4_rows=None, cs_rows=None) -> Path:
    mirror = tmp_path / "mirror"
    for name, rows in (("c4", c4_rows), ("commonsense_170k", cs_rows)):
        (mirror / name).mkdir(parents=True)
        source = data_dir / name / "train.jsonl"
        lines = source.read_text().splitlines()[:20] if rows is None else rows
        (mirror / name / "train.jsonl").write_text("\n".join(lines) + "\n")
    return mirror


def _prior_argv(model, mirror, tmp_path, calibration="ppl_c4", *extra):
    return [
        "prior",
        "--model",
        str(model),
        "--calibration",
        calibration,
        "--data-dir",
        str(mirror),
        "--n-samples",
        "20",
        "--seq-len",
        "16",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "p.json"),
        *extra,
    ]


def test_c4_row_without_text_names_file_line_and_field(tiny_model_dir, data_dir, tmp_path, capsys, no_model_load):
    rows = (data_dir / "c4" / "train.jsonl").read_text().splitlines()[:20]
    rows[4] = json.dumps({"timestamp": "2019"})
    mirror = _mirror(tmp_path, data_dir, c4_rows=rows)
    assert main(_prior_argv(tiny_model_dir, mirror, tmp_path)) == 2
    assert 'c4/train.jsonl:5: missing field "text"' in capsys.readouterr().err


def test_commonsense_rows_are_numbered_from_one(tiny_model_dir, data_dir, tmp_path, capsys, no_model_load):
    rows = (data_dir / "commonsense_170k" / "train.jsonl").read_text().splitlines()[:20]
    rows[0] = json.dumps({"instruction": "no answer here"})
    mirror = _mirror(tmp_path, data_dir, cs_rows=rows)
    assert main(_prior_argv(tiny_model_dir, mirror, tmp_path, "tlm_cs170k")) == 2
    assert 'commonsense_170k/train.jsonl:1: missing field "answer"' in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--protected", "8"], "protected_layers [8]"),
        (["--n-samples", "0"], "n_samples"),
        (["--seq-len", "1"], "seq_len"),
    ],
)
def test_prior_options_fail_before_the_model_load(
    extra, message, tiny_model_dir, data_dir, tmp_path, capsys, no_model_load
):
    mirror = _mirror(tmp_path, data_dir)
    assert main([*_prior_argv(tiny_model_dir, mirror, tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("mutation=5", "'mutation' must be >= 0 and <= 1"),
        ("beam_width=0", "'beam_width' must be >= 1"),
        ("population=1", "'population' must be >= 2"),
    ],
)
def test_hyperparameter_ranges_on_the_cli(param, message, tiny_model_dir, tmp_path, capsys, no_model_load):
    algorithm = "beam" if param.startswith("beam") else "ga"
    prior = tmp_path / "prior.json"
    prior.write_text(json.dumps({"calibration": "ppl_c4", "n_layers": 8, "scores": [1.0] * 8}))
    argv = [
        "search",
        "--model",
        str(tiny_model_dir),
        "--calibration",
        "ppl_c4",
        "--algorithm",
        algorithm,
        "--budget",
        "2",
        "--prior",
        str(prior),
        "--workdir",
        str(tmp_path / "w"),
        "--param",
        param,
        "--out-selection",
        str(tmp_path / "s.json"),
        "--out-trace",
        str(tmp_path / "t.csv"),
    ]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_schema_states_the_ranges_each_algorithm_declares():
    schema = load_schema(SCHEMA_PATH)
    defs = schema["$defs"]
    params = schema["properties"]["search_params"]["properties"]
    for name in ALGORITHMS:
        algorithm = get_algorithm(name)
        declared = params[name].get("properties", {})
        assert set(declared) == set(algorithm.defaults), name
        for key, valid in algorithm.ranges.items():
            entry = declared[key]
            if "$ref" in entry:
                entry = defs[entry["$ref"].split("/")[-1]]
            bounds = {k: v for k, v in entry.items() if k in ("minimum", "maximum", "exclusiveMinimum")}
            assert bounds == valid.schema(), (name, key, bounds, valid.schema())
        numeric = {k for k, v in algorithm.defaults.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert numeric <= set(algorithm.ranges), (name, numeric - set(algorithm.ranges))


def test_empty_tasks_is_an_error(tiny_model_dir, tmp_path, capsys, no_model_load):
    assert (
        main(["evaluate", "--model", str(tiny_model_dir), "--tasks", "", "--out-metrics", str(tmp_path / "m.csv")]) == 2
    )
    assert "--tasks '': no benchmark named" in capsys.readouterr().err


# --------------------------------------------------------------------------- prior checks

EXPECTED = {
    "model_fingerprint": "abc",
    "calibration": "ppl_c4",
    "n_samples": 4,
    "seq_len": 32,
    "seed": 0,
    "tlm_format": None,
    "dtype": "float32",
    "protected": [],
    "scoring_version": 1,
}


@pytest.mark.parametrize(
    "field, other",
    [
        ("model_fingerprint", "def"),
        ("calibration", "ppl_cs170k"),
        ("n_samples", 8),
        ("seq_len", 64),
        ("seed", 1),
        ("dtype", "bfloat16"),
        ("protected", [0]),
    ],
)
def test_search_refuses_a_prior_computed_otherwise(field, other):
    prior = {"scores": [1.0] * 8, "evaluator": {**EXPECTED, field: other}}
    with pytest.raises(ValueError, match=f"prior computed with {field}="):
        check_prior("prior.json", prior, EXPECTED)
    check_prior("prior.json", {"scores": [1.0] * 8, "evaluator": dict(EXPECTED)}, EXPECTED)


def test_search_cli_refuses_another_models_prior_before_loading(
    tiny_model_dir, data_dir, tmp_path, capsys, no_model_load
):
    prior = tmp_path / "prior.json"
    prior.write_text(
        json.dumps(
            {
                "calibration": "ppl_c4",
                "n_layers": 8,
                "scores": [1.0] * 8,
                "evaluator": {**EXPECTED, "model_fingerprint": "from-another-model"},
            }
        )
    )
    argv = [
        "search",
        "--model",
        str(tiny_model_dir),
        "--calibration",
        "ppl_c4",
        "--algorithm",
        "greedy",
        "--budget",
        "2",
        "--prior",
        str(prior),
        "--workdir",
        str(tmp_path / "w"),
        "--data-dir",
        str(data_dir),
        "--n-samples",
        "4",
        "--seq-len",
        "32",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--out-selection",
        str(tmp_path / "s.json"),
        "--out-trace",
        str(tmp_path / "t.csv"),
    ]
    assert main(argv) == 2
    assert "prior computed with model_fingerprint='from-another-model'" in capsys.readouterr().err


def test_the_schema_file_holds_no_copy_of_a_registry():
    """The names are filled in from the registries when the schema is loaded; a hand copy in the
    YAML is refused, naming its place."""
    raw = yaml.safe_load(SCHEMA_PATH.read_text())
    assert "enum" not in raw["$defs"]["calibration_name"] and "properties" not in raw["properties"]["search_params"]
    raw["$defs"]["algorithm_name"]["enum"] = ["greedy"]
    with pytest.raises(ValueError, match=r"config.schema.yaml: \$defs.algorithm_name.enum is filled in"):
        with_registries(raw, str(SCHEMA_PATH))


def test_a_registered_name_is_in_the_loaded_schema(monkeypatch):
    """A calibration registered in the package validates with no edit of the schema file; an
    unregistered one is refused by the schema."""
    import jsonschema

    from depthprune.calibration import specs

    config = {"models": ["m"], "model_table": {"m": {"spec": "tiny:llama-8"}}, "budgets": [1], "algorithms": ["greedy"]}
    with pytest.raises(jsonschema.ValidationError, match="'ppl_new' is not one of"):
        validate({**config, "calibrations": ["ppl_new"]}, load_schema(SCHEMA_PATH))
    monkeypatch.setitem(specs.CALIBRATIONS, "ppl_new", specs.CalibrationSpec("ppl_new", "perplexity", "c4", "", "New"))
    validate({**config, "calibrations": ["ppl_new"]}, load_schema(SCHEMA_PATH))


def test_schema_and_config_match_the_registries():
    """The loaded schema states the registries' names (config_schema fills them in) and config.yaml
    the study's values."""
    from depthprune import paths
    from depthprune.calibration.specs import CALIBRATIONS
    from depthprune.evaluation.benchmarks import BENCHMARK_TABLE, BENCHMARKS, METRICS
    from depthprune.reporting.style import PAPER_ALGORITHMS
    from depthprune.search import STUDY_ALGORITHMS

    schema = load_schema(SCHEMA_PATH)
    defs, properties = schema["$defs"], schema["properties"]
    assert defs["calibration_name"]["enum"] == list(CALIBRATIONS)
    assert defs["algorithm_name"]["enum"] == list(ALGORITHMS)
    assert defs["benchmark_name"]["enum"] == list(BENCHMARKS)
    assert properties["search_params"]["properties"].keys() == ALGORITHMS.keys()
    evaluation = properties["evaluation"]["properties"]
    assert evaluation["tasks"]["default"] == list(BENCHMARKS)
    assert set(evaluation["headline_metrics"]["additionalProperties"]["enum"]) == {
        m for metrics in METRICS.values() for m in metrics
    }
    # Sizes are configured per objective: one section per objective a calibration names.
    objectives = {spec.objective for spec in CALIBRATIONS.values()}
    assert set(properties["calibration"]["properties"]) == objectives
    assert set(properties["calibration_sizes"]["properties"]) - {"nested_tlm_priors"} == objectives
    # The option values of the dtype and of the calibration objectives: one tuple each in the package.
    from depthprune.calibration import specs
    from depthprune.models import DTYPE_CHOICES

    def enums(node, key):
        """Every enum the schema gives an option named ``key``, wherever it is nested."""
        if isinstance(node, dict):
            found = [tuple(node[key]["enum"])] if isinstance(node.get(key), dict) and "enum" in node[key] else []
            return found + [e for value in node.values() for e in enums(value, key)]
        return [e for value in node for e in enums(value, key)] if isinstance(node, list) else []

    assert enums(schema, "dtype") == [DTYPE_CHOICES]
    assert enums(schema, "format") == [specs.TLM_FORMATS]
    assert enums(schema, "loss") == [specs.TLM_LOSSES]
    assert enums(schema, "packing") == [specs.C4_PACKINGS]
    # One constant per default folder.
    for key, value in {
        "results_dir": paths.RESULTS_DIR,
        "figures_dir": paths.FIGURES_DIR,
        "benchmarks_dir": paths.BENCHMARKS_DIR,
        "model_cache_dir": paths.MODEL_CACHE_DIR,
    }.items():
        assert properties[key]["default"] == value, key
    # Every benchmark lm-eval scores has its offline task template.
    for benchmark in BENCHMARK_TABLE:
        if benchmark.lm_eval_task is not None:
            assert (
                REPO / "src" / "depthprune" / "evaluation" / "tasks" / f"{benchmark.lm_eval_task}.yaml"
            ).is_file(), benchmark.name
            assert benchmark.headline in benchmark.metrics

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    # The default runs the paper's seven; every other study algorithm (the random-init controls) runs
    # in the extended preset, and every one has its hyper-parameters in config.yaml.
    assert config["algorithms"] == list(PAPER_ALGORITHMS)
    extended = yaml.safe_load((REPO / "config" / "extended.yaml").read_text())
    assert extended["algorithms"] == list(STUDY_ALGORITHMS)
    assert set(STUDY_ALGORITHMS) <= set(config["search_params"])
    assert config["evaluation"]["tasks"] == list(BENCHMARKS)
    assert config["model_cache_dir"] == paths.MODEL_CACHE_DIR
    # config.yaml states the paper's hyper-parameters: each value is the algorithm's default.
    for name, params in config["search_params"].items():
        defaults = get_algorithm(name).defaults
        assert {key: defaults[key] for key in params or {}} == (params or {}), name
