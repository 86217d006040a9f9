"""The held-out calibration draw (disjoint from every seed's calibration sample) and the bounded TLM
control `tlm.loss: cross_entropy` (hand-computed on a fixture)."""

from __future__ import annotations

import math

import pytest
import torch

from depthprune.calibration import data as calib_data
from depthprune.calibration.heldout import EXCLUDED_SEEDS, heldout_indices
from depthprune.calibration.objectives import tlm_objective
from depthprune.calibration.setup import CalibrationSetup
from depthprune.calibration.sources import DATA_SOURCES
from depthprune.calibration.tlm import TLMItem, text_requests

# Sizes the presets draw (config.yaml, config/calibration_size*.yaml): TLM items, C4 documents.
SIZES = {"cs170k": (8, 16, 32, 64, 128), "c4": (8, 64)}


@pytest.fixture(scope="module")
def populations(data_dir):
    return {
        "cs170k": len(calib_data.load_cs170k_rows_located(data_dir)),
        "c4": len(calib_data.load_c4_documents(data_dir)),
    }


@pytest.mark.parametrize("source", ["cs170k", "c4"])
def test_heldout_draw_is_disjoint_from_every_seeds_calibration_draw(source, populations):
    population = populations[source]
    heldout = set(heldout_indices(population, 256 if source == "cs170k" else 64, source))
    for seed in EXCLUDED_SEEDS:
        for size in SIZES[source]:
            calibration = calib_data.sample_indices(population, size, seed, source)
            assert heldout.isdisjoint(calibration), (seed, size)
    assert max(SIZES[source]) <= DATA_SOURCES[source].reserved


def test_heldout_rows_are_not_calibration_rows(data_dir):
    """The same on the loaded data: no held-out item or document is any seed's calibration item."""
    held_tlm = CalibrationSetup("tlm_cs170k", data_dir=data_dir, n_samples=8, seed=0).load_heldout(128)
    held_c4 = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=8, seed=0).load_heldout(64)
    assert len(held_tlm.items) == 128 and len(held_c4.texts) == 64
    for seed in (0, 1, 7):
        tlm = CalibrationSetup("tlm_cs170k", data_dir=data_dir, n_samples=128, seed=seed).load_samples()
        c4 = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=64, seed=seed).load_samples()
        assert set(held_tlm.items).isdisjoint(tlm.items)
        assert set(held_c4.texts).isdisjoint(c4.texts)
    # Fixed: the same rows whatever the calibration's own seed and size.
    again = CalibrationSetup("tlm_cs170k", data_dir=data_dir, n_samples=64, seed=5).load_heldout(128)
    assert again.items == held_tlm.items


def test_overlapping_calibration_or_too_large_heldout_is_refused(data_dir, populations):
    with pytest.raises(ValueError, match=r"shares .* rows with the held-out draw"):
        CalibrationSetup("tlm_cs170k", data_dir=data_dir, n_samples=3000, seed=0).load_heldout(256)
    with pytest.raises(ValueError, match="option --heldout-samples"):
        heldout_indices(populations["c4"], 999, "c4")
    with pytest.raises(ValueError, match="at least 1"):
        heldout_indices(populations["c4"], 0, "c4")


class WordTokenizer:
    """One token per whitespace-separated word (a BOS first with special tokens)."""

    pad_token_id = 0

    def __call__(self, text, add_special_tokens=True):
        ids = [1 + sum(map(ord, word)) % 97 for word in text.split()]
        return {"input_ids": ([98] if add_special_tokens else []) + ids}


# Two items: item 0 has candidates "a b" (2 tokens, gold) and "c"; item 1 has "d", "e" (gold), "f".
ITEMS = [TLMItem("q0", ("a b", "c"), 0), TLMItem("q1", ("d", "e", "f"), 1)]
# Log-probabilities of each candidate's continuation tokens: ℓ = their mean.
TOKEN_LOGPROBS = {(0, 0): [-1.0, -3.0], (0, 1): [-1.0], (1, 0): [-0.5], (1, 1): [-1.0], (1, 2): [-2.0]}
# By hand: item 0: ℓ = (−2, −1), gold 0: log(e^−2 + e^−1) + 2 = 1 + log(1 + e^−1) = 1.3132617;
# item 1: ℓ = (−0.5, −1, −2), gold 1: log(e^−0.5 + e^−1 + e^−2) + 1 = 1.1041306; mean 1.2086961.
CROSS_ENTROPY = 1.2086961
MARGIN = 0.25  # item 0: ℓ_1 − ℓ_0 = 1; item 1: (ℓ_0 − ℓ_1) + (ℓ_2 − ℓ_1) = −0.5; mean 0.25


def fixture_logprobs(objective):
    """Per batch, the log-prob of each scored position, taken in order from TOKEN_LOGPROBS."""
    taken = dict.fromkeys(TOKEN_LOGPROBS, 0)
    per_batch = []
    for batch in objective.batches:
        values = []
        for sequence in batch.sequence_ids.tolist():
            key = objective.candidate_of_sequence[sequence]
            values.append(TOKEN_LOGPROBS[key][taken[key]])
            taken[key] += 1
        per_batch.append(torch.tensor(values, dtype=torch.float32))
    assert all(taken[key] == len(v) for key, v in TOKEN_LOGPROBS.items())
    return per_batch


@pytest.mark.parametrize("shared_context", [True, False])
def test_cross_entropy_hand_computed(shared_context):
    requests = [text_requests(item) for item in ITEMS]
    tokenizer = WordTokenizer()
    ce = tlm_objective(ITEMS, requests, tokenizer, 64, 4096, shared_context=shared_context, loss="cross_entropy")
    margin = tlm_objective(ITEMS, requests, tokenizer, 64, 4096, shared_context=shared_context)
    assert math.isclose(1 + math.log(1 + math.exp(-1)), 1.3132617, rel_tol=1e-7)
    loss, accuracy = ce.reduce(fixture_logprobs(ce))
    assert loss == pytest.approx(CROSS_ENTROPY, abs=1e-7)
    assert accuracy == 0.0  # the best mean is a wrong candidate in both items (−1 > −2; −0.5 > −1)
    assert margin.reduce(fixture_logprobs(margin))[0] == pytest.approx(MARGIN, abs=1e-7)
    assert ce.data_hash != margin.data_hash  # another loss: another memo key
    if shared_context:  # whole items per batch: the batch terms (gate derivatives) add up to L
        total = sum(float(ce.batch_loss(b, lp)) for b, lp in zip(ce.batches, fixture_logprobs(ce)))
        assert total == pytest.approx(CROSS_ENTROPY, abs=1e-7)


def test_unknown_tlm_loss_names_the_option():
    with pytest.raises(ValueError, match=r"tlm\.loss"):
        tlm_objective(ITEMS, [text_requests(i) for i in ITEMS], WordTokenizer(), 64, 4096, loss="hinge")


@pytest.mark.parametrize("calibration,extra", [("ppl_c4", []), ("tlm_cs170k", ["--tlm-loss", "cross_entropy"])])
def test_search_records_the_heldout_loss(calibration, extra, tiny_model_dir, data_dir, tmp_path):
    """`depthprune search --heldout-samples`: selection.json's "heldout" is the selected set's loss on
    the held-out draw, equal to the subset evaluator's (masked) loss of that set on those rows."""
    import json

    from depthprune.cli import build_parser, main
    from depthprune.cli_common import build_evaluator

    common = [
        "--model",
        str(tiny_model_dir),
        "--calibration",
        calibration,
        "--data-dir",
        str(data_dir),
        "--n-samples",
        "4",
        "--seq-len",
        "32",
        *extra,
    ]
    prior = tmp_path / "prior.json"
    assert main(["prior", *common, "--out", str(prior)]) == 0
    selection = tmp_path / "selection.json"
    argv = ["search", *common, "--prior", str(prior), "--workdir", str(tmp_path / "w"), "--heldout-samples", "16"]
    out = ["--out-selection", str(selection), "--out-trace", str(tmp_path / "t.csv")]
    assert main([*argv, "--algorithm", "greedy", "--budget", "3", *out]) == 0
    record = json.loads(selection.read_text())
    heldout = record["heldout"]
    assert heldout["n_samples"] == 16 and heldout["seconds"] > 0
    if calibration == "tlm_cs170k":
        assert record["loss"] >= 0 and heldout["loss"] >= 0  # cross-entropy is bounded below
        assert 0 <= heldout["accuracy"] <= 1
    else:
        assert heldout["accuracy"] is None
    # The same rows through the evaluator: its masked loss of the set is the recorded one.
    samples = CalibrationSetup(calibration, data_dir=data_dir, n_samples=4, seed=0).load_heldout(16)
    args = build_parser().parse_args(["prior", *common, "--out", "unused.json"])
    evaluator = build_evaluator(args, samples=samples)
    assert evaluator.objective.data_hash == heldout["data_hash"]
    assert evaluator.loss(record["removed"]) == pytest.approx(heldout["loss"], rel=1e-4, abs=1e-5)
    # A calibration sample that meets the held-out draw is refused before any model is loaded.
    assert main([*argv, "--heldout-samples", "9999", "--algorithm", "one_shot", "--budget", "3", *out]) == 2
