"""Perplexity (WikiText-2, C4): windows, token weighting, capped tokenisation, exported checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from depthprune.evaluation.perplexity import (
    evaluate_perplexity,
    load_corpus_texts,
    perplexity_of_windows,
    split_windows,
    tokenize_corpus,
)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from depthprune.models import load_model

    return load_model(str(tiny_model_dir), dtype="float32", device="cpu")


def test_split_windows_drops_partial_tail_and_rejects_short_text():
    windows = split_windows(torch.arange(10), 4, "toy")
    assert windows.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="toy: only 3 tokens"):
        split_windows(torch.arange(3), 4, "toy")


def test_perplexity_is_exp_of_token_weighted_mean_nll(tiny):
    """Against transformers' own causal-LM loss, window by window."""
    ids = torch.randint(0, 49152, (200,), generator=torch.Generator().manual_seed(0))
    windows = split_windows(ids, 48)  # 4 windows, 8 tokens dropped
    result = perplexity_of_windows(tiny.model, windows, batch_size=3)
    with torch.inference_mode():
        losses = [float(tiny.model(input_ids=w[None], labels=w[None]).loss) for w in windows]
    assert result.n_windows == 4 and result.n_tokens == 4 * 47
    assert result.perplexity == pytest.approx(math.exp(sum(losses) / len(losses)), rel=1e-5)
    assert result.stderr is not None and result.stderr > 0


def test_mirror_layout_and_capped_tokenisation(tiny, data_dir):
    wikitext = load_corpus_texts("wikitext2", data_dir)
    assert len(wikitext) == 4358  # the HF line-level rows, blank lines included
    assert wikitext[0] == "" and wikitext[1] == " = Robert Boulter = \n"
    assert len(load_corpus_texts("c4", data_dir)) == 1000
    texts = wikitext[:400]
    full = tokenize_corpus(tiny.tokenizer, texts)
    capped = tokenize_corpus(tiny.tokenizer, texts, max_tokens=1000)
    assert len(full) > 1000 and torch.equal(capped, full[:1000])
    assert torch.equal(tokenize_corpus(tiny.tokenizer, texts, max_tokens=10**9), full)


def test_missing_mirror_file_is_named(tmp_path, tiny):
    with pytest.raises(FileNotFoundError, match=r"c4/validation\.jsonl"):
        evaluate_perplexity(tiny.model, tiny.tokenizer, "c4", seq_len=64, data_dir=tmp_path)


def test_exported_pruned_checkpoint_has_the_in_memory_perplexity(tiny_model_dir, data_dir, tmp_path):
    from depthprune.models import export_pruned, load_model, remove_blocks

    settings = {"seq_len": 128, "max_tokens": 512, "batch_size": 4, "data_dir": data_dir}
    pruned = load_model(str(tiny_model_dir), dtype="float32", device="cpu")
    dense = evaluate_perplexity(pruned.model, pruned.tokenizer, "wikitext2", **settings)
    remove_blocks(pruned.model, (1, 4, 6))
    in_memory = evaluate_perplexity(pruned.model, pruned.tokenizer, "wikitext2", **settings)
    out_dir = export_pruned(pruned.model, pruned.tokenizer, tmp_path / "pruned")
    exported = load_model(str(out_dir), dtype="float32", device="cpu")

    assert len(exported.model.model.layers) == 5
    reloaded = evaluate_perplexity(exported.model, exported.tokenizer, "wikitext2", **settings)
    assert reloaded.n_tokens == in_memory.n_tokens == 4 * 127
    assert reloaded.perplexity == pytest.approx(in_memory.perplexity, rel=1e-5)
    assert in_memory.perplexity != pytest.approx(dense.perplexity, rel=1e-4)  # removal changed the model


def test_unloadable_hub_dataset_is_named(monkeypatch):
    """Without --data-dir the hub is used; a data set that cannot be loaded is named in the error."""
    import dataclasses

    from depthprune.evaluation import perplexity

    missing = dataclasses.replace(perplexity.CORPORA["wikitext2"], hub_path="depthprune-tests/no-such-dataset")
    monkeypatch.setitem(perplexity.CORPORA, "wikitext2", missing)
    with pytest.raises(FileNotFoundError, match="depthprune-tests/no-such-dataset"):
        load_corpus_texts("wikitext2")
