"""C4 calibration sequences of exactly seq_len tokens (the paper's 64 x 2048), and today's draw kept
token for token wherever its documents were long enough (calibration/objectives.exact_length_ids)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from depthprune.calibration import data as calib_data
from depthprune.calibration.objectives import exact_length_ids
from depthprune.calibration.setup import CalibrationSetup


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)  # SmolLM2's tokenizer


def test_paper_size_gives_64_sequences_of_2048_tokens(tokenizer, data_dir):
    setup = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=64, seq_len=2048, seed=0)
    samples = setup.load_samples()
    ids = exact_length_ids(samples.texts, samples.reserve, tokenizer, 2048)
    assert len(ids) == 64 and {len(row) for row in ids} == {2048}
    objective = setup.build_objective(tokenizer, samples=samples)
    assert objective.n_tokens == 64 * 2048
    # Cut at seq_len, most of these documents are shorter than 2048 tokens: the old draw gave far fewer.
    assert sum(min(len(tokenizer(t)["input_ids"]), 2048) for t in samples.texts) < 64 * 2048 // 2


@pytest.mark.parametrize("n_samples,seq_len,seed", [(8, 64, 0), (8, 64, 1), (8, 64, 2)])
def test_long_enough_draws_are_unchanged(tokenizer, data_dir, n_samples, seq_len, seed):
    """The committed 8 x 64 studies (default, two_families, calibration_size's 8x64): every drawn
    document has 64 tokens (Gemma 3's tokenizer too, checked once by hand), so nothing moves."""
    samples = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=n_samples, seed=seed).load_samples()
    docs = calib_data.load_c4_documents(data_dir)
    before = [
        tokenizer(docs[i], add_special_tokens=True)["input_ids"][:seq_len]
        for i in calib_data.sample_indices(len(docs), n_samples, seed, "C4 documents")
    ]
    assert exact_length_ids(samples.texts, samples.reserve, tokenizer, seq_len) == before


def test_short_document_is_continued_from_the_reserve(tokenizer):
    ids = exact_length_ids(["a b", "word " * 50], ["c d e f " * 20, "unused"], tokenizer, 16)
    assert [len(row) for row in ids] == [16, 16]
    assert ids[0][: len(tokenizer("a b")["input_ids"])] == tokenizer("a b")["input_ids"]
    with pytest.raises(ValueError, match="seq_len=4096"):
        exact_length_ids(["a b"], ["c d"], tokenizer, 4096)


def test_reserve_excludes_the_draw():
    drawn, reserve = calib_data.sample_indices_and_reserve(100, 10, 3, "rows")
    assert drawn == calib_data.sample_indices(100, 10, 3, "rows")
    assert sorted(drawn + reserve) == list(range(100))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_truncate_packing_is_the_committed_calibration_size_draw(tokenizer, data_dir, seed):
    """calibration_size's 64 x 32 variant was cut at 32 tokens (2035, 2040 and 2047 tokens for seeds
    0-2): config/calibration_size.yaml keeps packing: truncate; exact gives 2048."""
    docs = calib_data.load_c4_documents(data_dir)
    cut = [
        tokenizer(docs[i], add_special_tokens=True)["input_ids"][:32]
        for i in calib_data.sample_indices(len(docs), 64, seed, "C4 documents")
    ]
    setup = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=64, seq_len=32, seed=seed)
    truncated = replace(setup, c4_packing="truncate").build_objective(tokenizer)
    assert truncated.n_tokens == sum(len(ids) for ids in cut) < 2048
    exact = setup.build_objective(tokenizer)
    assert exact.n_tokens == 2048 and exact.data_hash != truncated.data_hash
    with pytest.raises(ValueError, match=r"calibration\.perplexity\.packing"):
        replace(setup, c4_packing="windows")


def test_packing_reaches_the_command_line_only_when_not_exact():
    from types import SimpleNamespace

    from depthprune import workflow

    config = {"calibration": {"perplexity": {"n_samples": 8, "seq_len": 64, "packing": "exact"}}}
    wildcards = SimpleNamespace(calibration="ppl_c4", seed="0")
    assert "--c4-packing" not in workflow.calibration_args(config, wildcards)
    config["calibration"]["perplexity"]["packing"] = "truncate"
    assert "--c4-packing truncate" in workflow.calibration_args(config, wildcards)
