"""calibration/setup.py: one object per calibration setup, built from argparse or from the config,
writing the record prior.json and the memo key have always held, and checked against a prior's."""

from __future__ import annotations

import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from depthprune import workflow as wf
from depthprune.calibration.setup import CalibrationSetup
from depthprune.cli import build_parser
from depthprune.cli_common import calibration_setup
from depthprune.prior import check_prior
from test_workflow_args import smoke_config


def setup_of(*options: str) -> CalibrationSetup:
    args = build_parser().parse_args(["prior", "--model", "m", "--out", "o.json", *options])
    return calibration_setup(args)


def test_the_record_is_the_one_priors_and_memo_keys_hold():
    """Key for key what `cli_common.calibration_settings` wrote: tlm_format only for a TLM
    calibration, tlm_loss only when not margin (so a margin study's memo keys never moved)."""
    assert setup_of("--calibration", "ppl_c4").record() == {
        "n_samples": 64,
        "seq_len": 2048,
        "seed": 0,
        "tlm_format": None,
        "data_source": "hub",
    }
    # a TLM option on a perplexity calibration changes nothing it records
    ppl = setup_of("--calibration", "ppl_c4", "--tlm-loss", "cross_entropy", "--tlm-format", "labels")
    assert ppl.record() == setup_of("--calibration", "ppl_c4").record()
    tlm = setup_of("--calibration", "tlm_cs170k", "--n-samples", "8", "--seq-len", "128", "--seed", "3")
    assert tlm.record() == {
        "n_samples": 8,
        "seq_len": 128,
        "seed": 3,
        "tlm_format": "text",
        "data_source": "hub",
    }
    entropy = setup_of("--calibration", "tlm_cs170k", "--tlm-loss", "cross_entropy", "--data-dir", "mirror")
    assert list(entropy.record()) == ["n_samples", "seq_len", "seed", "tlm_format", "data_source", "tlm_loss"]
    assert entropy.record()["tlm_loss"] == "cross_entropy" and entropy.record()["data_source"] == "mirror"
    assert setup_of("--calibration", "tlm_cs170k", "--calibration-label", "tlm_cs170k-n16").name == "tlm_cs170k-n16"


@pytest.mark.parametrize(
    "label, sizes",
    [
        ("tlm_cs170k", {}),
        ("ppl_c4", {"perplexity": {"packing": "truncate"}}),
        ("tlm_cs170k", {"tlm": {"loss": "cross_entropy", "format": "labels"}}),
        ("tlm_cs170k-n16", {}),
        ("ppl_c4-8x64", {}),
    ],
)
def test_the_workflows_command_rebuilds_the_configs_setup(label, sizes):
    """The workflow writes a calibration's options from its setup (`cli_options`), and the CLI parses
    them back into the very same setup: one object on both sides of the command line."""
    config = smoke_config(calibration=sizes)
    wildcards = SimpleNamespace(model="tiny", calibration=label, seed="2")
    from_config = CalibrationSetup.from_config(config, label, 2)
    command = shlex.split(wf.calibration_args(config, wildcards))
    assert setup_of(*command) == from_config


def test_a_bad_option_value_is_named():
    with pytest.raises(ValueError, match=r"calibration 'nope' \(option calibration\)"):
        CalibrationSetup("nope")
    with pytest.raises(ValueError, match=r"c4 packing 'windows' \(option --c4-packing"):
        CalibrationSetup("ppl_c4", c4_packing="windows")
    with pytest.raises(ValueError, match=r"n_samples \(option --n-samples"):
        CalibrationSetup("ppl_c4", n_samples=0).check_sizes()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            ("ppl_new", "perplexity", "c4val"),
            r"calibration 'ppl_new': calibration data source 'c4val' is not registered",
        ),
        (("tlm_c4", "tlm", "c4"), r"calibration 'tlm_c4': a TLM objective needs multiple-choice items"),
    ],
)
def test_a_calibration_reads_only_a_registered_source(spec, message, monkeypatch):
    """A source is read through its registry entry (calibration/sources.py) or not at all: an
    unregistered one, or a TLM on a source without items, is refused by the setup (CLI, planner)
    and by the workflow's mirror check, naming it and the known sources; never another source's data."""
    from depthprune.calibration import specs

    monkeypatch.setitem(specs.CALIBRATIONS, spec[0], specs.CalibrationSpec(*spec, "new", "New", False))
    with pytest.raises(ValueError, match=message) as refused:
        CalibrationSetup(spec[0], data_dir="unused")
    if "not registered" in message:
        assert "expected one of c4, cs170k" in str(refused.value)
    with pytest.raises(ValueError, match=message):
        wf.calibration_files(smoke_config(), spec[0])


def test_the_setup_module_imports_no_torch():
    code = "import sys, depthprune.calibration.setup; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


RECORD = {
    "model_fingerprint": "abc",
    "calibration": "tlm_cs170k",
    "n_samples": 4,
    "seq_len": 128,
    "seed": 0,
    "tlm_format": "text",
    "data_source": "mirror",
    "dtype": "float32",
    "protected": [],
    "scoring_version": 3,
}


@pytest.mark.parametrize("prior_loss, search_loss", [("cross_entropy", None), (None, "cross_entropy")])
def test_a_search_refuses_a_prior_of_the_other_tlm_loss(prior_loss, search_loss):
    """tlm_loss is recorded only when not margin: absent on either side means margin, so a margin
    search and a cross-entropy prior (or the other way round) differ."""
    prior = {**RECORD, **({"tlm_loss": prior_loss} if prior_loss else {})}
    search = {**RECORD, **({"tlm_loss": search_loss} if search_loss else {})}
    with pytest.raises(ValueError, match="prior computed with tlm_loss="):
        check_prior("prior.json", {"scores": [1.0] * 8, "evaluator": prior}, search)
    check_prior("prior.json", {"scores": [1.0] * 8, "evaluator": search}, search)
    # where the rows were read is not compared (their data_hash is, after the load)
    check_prior("prior.json", {"scores": [1.0] * 8, "evaluator": {**search, "data_source": "hub"}}, search)
