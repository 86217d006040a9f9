"""depthprune.workflow without Snakemake: config -> CLI arguments, provenance, plan-time checks."""

from __future__ import annotations

import copy
import hashlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from depthprune import workflow as wf
from depthprune.config_schema import SCHEMA_FILE, load_schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(REPO / SCHEMA_FILE)  # with the registries' names, as the Snakefile loads it


def smoke_config(**overrides) -> dict:
    """config.yaml with config/smoke.yaml over it (mappings merged, lists replaced), as Snakemake
    layers them, plus the schema defaults the rules read."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())

    def merge(base, extra):
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value

    merge(config, yaml.safe_load((REPO / "config" / "smoke.yaml").read_text()))
    merge(config, overrides)
    for entry in config["model_table"].values():
        entry.setdefault("dtype", "auto")
        entry.setdefault("protected_layers", [])
    return config


WILDCARDS = SimpleNamespace(model="tiny", calibration="tlm_cs170k", seed="0", budget="2", algorithm="beam")


def test_cli_args_quotes_lists_mappings_and_drops_none():
    text = wf.cli_args({"tasks": ["a", "b"], "limit": None, "param": {"b": True, "a": 0.5}, "out": "my dir"})
    assert text == "--tasks a,b --param a=0.5 --param b=true --out 'my dir'"
    assert wf.cli_args({"format": "text"}, flags={"format": "--tlm-format"}) == "--tlm-format text"


def test_rule_arguments_of_the_smoke_preset():
    config = smoke_config(data_dir="../shared/data")
    assert wf.model_args(config, WILDCARDS) == (
        "--model tiny:llama-8 --name tiny --dtype auto --device cpu --model-cache-dir resources/models"
    )
    assert wf.calibration_args(config, WILDCARDS) == (
        "--calibration tlm_cs170k --n-samples 4 --seq-len 128 --seed 0 --tlm-format text"
    )
    # a calibration-size label: its size replaces the config's, and the label is passed on
    sized = SimpleNamespace(model="tiny", calibration="ppl_c4-8x64", seed="1")
    assert wf.calibration_args(config, sized) == (
        "--calibration ppl_c4 --n-samples 8 --seq-len 64 --seed 1 --calibration-label ppl_c4-8x64"
    )
    evaluator = wf.evaluator_args(config, WILDCARDS)
    assert evaluator.startswith("--memo results/smoke/tiny/tlm_cs170k/seed0/memo.sqlite ")
    assert "--state-device auto" in evaluator and "memo-journal" not in evaluator
    assert wf.search_param_args(config, WILDCARDS) == "--param beam_width=3"
    assert wf.search_param_args(config, SimpleNamespace(algorithm="one_shot")) == ""
    evaluation = wf.evaluation_args(config, WILDCARDS)
    assert "--cache-dir results/smoke/tiny/eval_cache" in evaluation and "pass" not in evaluation
    # A preset that overrides `evaluation.limit` moves it first in the merged config; the command must
    # not change with that order, or Snakemake's params trigger reruns every evaluation.
    reordered = {**config, "evaluation": {"limit": config["evaluation"]["limit"], **config["evaluation"]}}
    assert next(iter(reordered["evaluation"])) == "limit"
    assert wf.evaluation_args(reordered, WILDCARDS) == evaluation
    assert evaluation.startswith("--tasks ")
    # The same holds for the other sections whose options are arguments, and their order is the schema's.
    for section, order in wf.SECTION_ORDER.items():
        assert list(order) == list(SCHEMA["properties"][section]["properties"]), section
    flipped = {**config, "evaluator": dict(reversed(list(config["evaluator"].items())))}
    assert wf.evaluator_args(flipped, WILDCARDS) == wf.evaluator_args(config, WILDCARDS)
    flipped = {**config, "analysis": dict(reversed(list(config["analysis"].items())))}
    assert wf.analysis_args(flipped) == wf.analysis_args(config)
    assert wf.data_dir_args(config) == "--data-dir ../shared/data"
    assert wf.data_dir_args({**config, "data_dir": None}) == ""
    assert wf.memo_journal_args(config) == "--memo-journal wal"
    assert wf.selection_and_outputs(["s.json"], ["m.csv"], ["r.json"], ["x.parquet"]) == (
        "--selection s.json --out-metrics m.csv --out-raw r.json --out-samples x.parquet"
    )


def test_protected_layers_and_boundary_reach_the_evaluator():
    config = smoke_config()
    config["model_table"]["tiny"].update(protected_layers=[7, 0], protect="boundary")
    assert "--protected '0 7' --protect boundary" in wf.evaluator_args(config, WILDCARDS)


def test_nested_tlm_priors_derive_the_smaller_sizes_from_the_largest():
    """calibration_sizes.nested_tlm_priors: the largest TLM size's prior keeps its items, the smaller
    sizes' priors are derived from the same seed's; perplexity sizes, and studies without the
    setting, keep their commands."""
    config = smoke_config(calibration_sizes={"tlm": [8, 32], "perplexity": ["8x64"]})
    plain = {
        c: wf.prior_evaluator_args(config, SimpleNamespace(model="tiny", calibration=c, seed="3"))
        for c in ("tlm_cs170k-n8", "tlm_cs170k-n32", "ppl_c4-8x64")
    }
    assert all(
        args == wf.evaluator_args(config, SimpleNamespace(model="tiny", calibration=c, seed="3"))
        for c, args in plain.items()
    )
    config["calibration_sizes"]["nested_tlm_priors"] = True

    def prior(calibration):
        wildcards = SimpleNamespace(model="tiny", calibration=calibration, seed="3")
        return wf.nested_prior_source(config, wildcards), wf.prior_evaluator_args(config, wildcards)

    source, args = prior("tlm_cs170k-n8")
    assert source == "results/smoke/tiny/tlm_cs170k-n32/seed3/prior.json"
    assert args == f"{plain['tlm_cs170k-n8']} --items-from {source}"
    assert prior("tlm_cs170k-n32") == (None, f"{plain['tlm_cs170k-n32']} --keep-items")
    assert prior("ppl_c4-8x64") == (None, plain["ppl_c4-8x64"])


def test_budgets_and_labels():
    config = smoke_config()
    assert wf.model_budgets(config, "tiny") == [2, 3]
    assert wf.calibration_labels(config) == ["ppl_c4", "tlm_cs170k"]
    config["model_table"]["tiny"].update(budgets=["1/4"])
    with pytest.raises(wf.ConfigError, match="n_layers"):
        wf.model_budgets(config, "tiny")  # a fraction of depth needs the model's n_layers


def test_yaml_typed():
    assert wf.yaml_typed({"budgets": ["7", "9"], "x": "null", "y": "abc", "z": ["0.5"]}) == {
        "budgets": [7, 9],
        "x": None,
        "y": "abc",
        "z": [0.5],
    }


def test_corpus_mirror_files_agree_with_the_perplexity_module():
    from depthprune.evaluation.perplexity import CORPORA

    assert {name: corpus.local_file for name, corpus in CORPORA.items()} == wf.CORPUS_MIRROR_FILES


# --------------------------------------------------------------------------- provenance


def test_provenance_changes_with_each_input(data_dir, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    shutil.copytree(data_dir, mirror)
    config = smoke_config(data_dir=str(mirror))
    base = wf.provenance(config, WILDCARDS, "calibration")
    # dtype auto as the jobs resolve it: float32 on the CPU with DEPTHPRUNE_CPU_BF16=0 (tests/conftest.py)
    assert "scoring_version=" in base and "torch=" in base and "dtype=float32" in base
    # the mirror's location does not matter, its content does
    moved = tmp_path / "moved"
    shutil.copytree(mirror, moved)
    assert wf.provenance({**config, "data_dir": str(moved)}, WILDCARDS, "calibration") == base
    assert wf.provenance({**config, "data_dir": None}, WILDCARDS, "calibration") != base
    train = moved / "commonsense_170k" / "train.jsonl"
    train.write_text(train.read_text() + "\n")
    assert wf.provenance({**config, "data_dir": str(moved)}, WILDCARDS, "calibration") != base
    # the evaluation's data are the benchmarks' files, not the calibration's
    evaluation = wf.provenance({**config, "data_dir": str(moved)}, WILDCARDS, "evaluation")
    assert evaluation == wf.provenance(config, WILDCARDS, "evaluation") and "lm_eval=" in evaluation
    hellaswag = moved / "hellaswag" / "validation.jsonl"
    hellaswag.write_text(hellaswag.read_text() + "\n")
    assert wf.provenance({**config, "data_dir": str(moved)}, WILDCARDS, "evaluation") != evaluation
    # dtype: the one computed in, not the option's spelling (issue 55)
    other = copy.deepcopy(config)
    other["model_table"]["tiny"]["dtype"] = "float32"
    assert wf.provenance(other, WILDCARDS, "calibration") == base  # what auto resolves to here
    other["model_table"]["tiny"]["dtype"] = "bfloat16"
    assert wf.provenance(other, WILDCARDS, "calibration") != base
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "1")  # auto now resolves to bfloat16 on this CPU
    assert wf.provenance(config, WILDCARDS, "calibration") == wf.provenance(other, WILDCARDS, "calibration")
    assert wf.provenance(config, WILDCARDS, "evaluation") != evaluation
    monkeypatch.undo()
    # code version, package version, a package's version
    monkeypatch.setattr("depthprune.versions.SCORING_VERSION", 999)
    assert wf.provenance(config, WILDCARDS, "calibration") != base
    monkeypatch.undo()
    monkeypatch.setattr("depthprune.__version__", "9.9.9")
    assert wf.provenance(config, WILDCARDS, "calibration") != base
    monkeypatch.undo()
    real = wf.package_version
    monkeypatch.setattr(wf, "package_version", lambda name: "0.0-other" if name == "torch" else real(name))
    assert wf.provenance(config, WILDCARDS, "calibration") != base
    monkeypatch.undo()
    assert wf.provenance(config, WILDCARDS, "calibration") == base


def test_a_gguf_models_content_is_part_of_its_provenance(tmp_path):
    """Issue 55: another file at a gguf: path reruns the model's jobs (the conversion cache is keyed
    by content too: tests/test_cache_keys.py); other specs keep their provenance strings."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF weights")
    config = smoke_config(model_cache_dir=str(tmp_path / "cache"))
    plain = wf.provenance(config, WILDCARDS, "calibration")
    assert "model_sha256" not in plain
    config["model_table"]["tiny"]["spec"] = f"gguf:{gguf}"
    first = wf.provenance(config, WILDCARDS, "calibration")
    assert first == f"{plain} model_sha256={hashlib.sha256(b'GGUF weights').hexdigest()}"
    gguf.write_bytes(b"GGUF other weights")
    assert wf.provenance(config, WILDCARDS, "evaluation").endswith(hashlib.sha256(b"GGUF other weights").hexdigest())


def test_resolved_dtype_follows_the_device_and_the_cpu(monkeypatch):
    config = smoke_config()
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "0")
    assert wf.resolved_dtype(config, "tiny") == "float32"
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "1")
    assert wf.resolved_dtype(config, "tiny") == "bfloat16"
    assert wf.resolved_dtype({**config, "device": "cuda:1"}, "tiny") == "bfloat16"  # the paper's precision
    config["model_table"]["tiny"]["dtype"] = "float16"
    assert wf.resolved_dtype(config, "tiny") == "float16"  # an explicit dtype is what it says
    config["model_table"]["tiny"]["dtype"] = "auto"
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "yes")
    with pytest.raises(
        wf.ConfigError, match=r"model_table\.tiny\.dtype auto: environment variable DEPTHPRUNE_CPU_BF16"
    ):
        wf.resolved_dtype(config, "tiny")


# --------------------------------------------------------------------------- plan-time checks


def test_misspelt_keys_are_named_with_the_allowed_ones():
    config = smoke_config(bogus_key=1, search_params={"ga": {"populaton": 3}})
    errors = wf.config_key_errors(config, SCHEMA)
    assert any("'bogus_key'" in e and "allowed: models" in e for e in errors)
    assert any("'search_params.ga.populaton'" in e and "population" in e for e in errors)
    assert len(errors) == 2
    assert wf.config_key_errors(smoke_config(), SCHEMA) == []


def test_study_checks_name_the_key(data_dir, tmp_path):
    wf.check_study(smoke_config(data_dir=str(data_dir)))  # the smoke preset passes
    config = smoke_config(models=["tiny", "nosuch"])
    with pytest.raises(wf.ConfigError, match="models: nosuch not in model_table"):
        wf.check_study(config)
    config = smoke_config(data_dir=None)
    config["model_table"]["tiny"].update(n_layers=8, protected_layers=[8])
    with pytest.raises(wf.ConfigError, match=r"model_table.tiny.protected_layers \[8\] outside 0..7"):
        wf.check_study(config)
    config["model_table"]["tiny"].update(protected_layers=[], budgets=[8])
    with pytest.raises(wf.ConfigError, match=r"model_table.tiny.budgets: budget 8 would remove all 8 blocks"):
        wf.check_study(config)
    config["model_table"]["tiny"].update(budgets=[5], protect="boundary", protected_layers=[3])
    # M equal to the removable blocks leaves no block to choose: refused at plan time, as the search does
    with pytest.raises(wf.ConfigError, match=r"budgets \[5\] of model tiny .* below the 5 removable blocks"):
        wf.check_study(config)
    # a mirror without one benchmark's file
    mirror = tmp_path / "mirror"
    shutil.copytree(data_dir, mirror)
    (mirror / "piqa" / "validation.jsonl").unlink()
    with pytest.raises(wf.ConfigError, match=r"lacks piqa/validation\.jsonl"):
        wf.check_study(smoke_config(data_dir=str(mirror)))
    (mirror / "c4" / "train.jsonl").unlink()
    with pytest.raises(wf.ConfigError, match=r"c4/train\.jsonl, piqa/validation\.jsonl"):
        wf.check_study(smoke_config(data_dir=str(mirror)))


def test_memo_journal_follows_where_the_jobs_run(tmp_path):
    """delete on a cluster executor or a network filesystem, whatever evaluator.memo_journal says;
    wal only on one machine's own disk (issue 48)."""
    results = tmp_path / "nfs share" / "results"
    results.parent.mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path / 'nfs share'} nfs4 rw 0 0\n".replace(
            "nfs share", "nfs\\040share", 1
        )
    )
    config = {"evaluator": {"memo_journal": "wal"}, "results_dir": str(tmp_path / "local")}
    assert wf.memo_journal(config, jobs_elsewhere=False, mounts=str(mounts)) == "wal"
    assert wf.memo_journal(config, jobs_elsewhere=True, mounts=str(mounts)) == "delete"
    assert wf.memo_journal({**config, "evaluator": {"memo_journal": "delete"}}, False, str(mounts)) == "delete"
    assert wf.filesystem_type(str(results), str(mounts)) == "nfs4"  # not created yet: its parent decides
    assert wf.memo_journal({**config, "results_dir": str(results)}, False, str(mounts)) == "delete"
    assert wf.filesystem_type(str(results), str(tmp_path / "no such table")) is None


def test_job_resources_follow_the_work():
    config = smoke_config()
    assert config["device"] == "cpu" and config["evaluation"]["pass_per"] == "model"
    assert {rule: wf.job_gpus(config, rule) for rule in ("prior", "search", "evaluate_pass")} == dict.fromkeys(
        ("prior", "search", "evaluate_pass"), 0
    )
    gpu = {**config, "device": "cuda", "resources": {"gpu": 1, "mem_mb": 64000}, "threads": 8, "search_threads": None}
    assert [wf.job_gpus(gpu, r) for r in ("prepare_model", "prior", "search", "evaluate_pass")] == [0, 1, 1, 1]
    assert [wf.job_gpus(gpu, r) for r in ("evaluate_selections", "evaluate_dense")] == [0, 0]  # copy jobs
    assert [wf.job_mem_mb(gpu, r) for r in ("evaluate_pass", "evaluate_selections")] == [64000, wf.COPY_JOB_MEM_MB]
    assert [wf.job_threads(gpu, r) for r in ("search", "evaluate_pass", "evaluate_dense")] == [8, 8, 1]
    cell = {**gpu, "evaluation": {**gpu["evaluation"], "pass_per": "cell"}}
    assert [wf.job_gpus(cell, r) for r in ("evaluate_selections", "evaluate_dense")] == [1, 1]


def test_seeds_missing_from_an_aggregate(tmp_path):
    """`snakemake figures` refuses a config whose seeds (its own and base_study's) the aggregate has
    no run of, rather than redrawing from fewer seeds than it names."""
    summary = tmp_path / "summary.csv"
    summary.write_text("model,calibration,seed,loss\nm,none,0,\nm,ppl_c4,0,1.5\nm,ppl_c4,3,1.4\n")
    assert wf.study_seeds({"seeds": [3, 1]}) == [1, 3]
    assert wf.seeds_missing_from({"seeds": [0, 3]}, str(summary)) == []
    assert wf.seeds_missing_from({"seeds": [0, 1, 2]}, str(summary)) == [1, 2]
    reused = {"seeds": [3], "base_study": {"aggregate": "x", "calibrations": ["ppl_c4"], "seeds": [0, 5]}}
    assert wf.study_seeds(reused) == [0, 3, 5]
    assert wf.seeds_missing_from(reused, str(summary)) == [5]
    (tmp_path / "placeholder.csv").write_text("")
    assert wf.seeds_missing_from({"seeds": [0, 1]}, str(tmp_path / "placeholder.csv")) == []
