"""Shared-context (tree) scoring equals separate-sequence scoring, for every supported family.

Contexts are longer than the tiny models' sliding window (32 tokens), so sliding-window layers
(Gemma 2/3, Qwen2, Mistral) really clip attention; the winogrande-style item has different contexts
per candidate (only a common prefix is shared).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from depthprune.calibration.data import load_c4_documents
from depthprune.calibration.objectives import tlm_objective
from depthprune.calibration.tlm import TLMItem, text_requests
from depthprune.engine.evaluator import SubsetEvaluator
from depthprune.engine.scoring import forward_loss
from depthprune.engine.tree_attention import tree_attention_mask
from depthprune.models import FAMILIES, load_model, remove_blocks
from depthprune.models.loading import LoadedModel
from depthprune.models.tiny import tiny_config


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return load_model(str(tiny_model_dir), device="cpu").tokenizer


def long_items(data_dir):
    docs = load_c4_documents(str(data_dir), "unused")
    items, requests = [], []
    for k in range(3):
        words = docs[k].split()
        question = " ".join(words[:45])  # ~60 tokens: beyond the 32-token window
        candidates = tuple(" ".join(words[45 + 3 * c : 45 + 3 * c + 2 + c]) for c in range(3 + k % 2))
        item = TLMItem(question=question, candidates=candidates, gold=k % len(candidates))
        items.append(item)
        requests.append(text_requests(item))
    blank = TLMItem(
        question=" ".join(docs[5].split()[:30]) + " _ " + " ".join(docs[5].split()[30:50]),
        candidates=("the river", "a mountain"),
        gold=1,
        blank=True,
    )
    items.append(blank)
    requests.append(text_requests(blank))
    return items, requests


def family_model(family, vocab_size):
    config = tiny_config(family, n_layers=5, vocab_size=vocab_size)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():  # larger block updates, so that a wrong mask shows in the losses
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.mul_(8.0)
    return model


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_shared_context_equals_separate_sequences(family, tokenizer, data_dir):
    items, requests = long_items(data_dir)
    shared = tlm_objective(items, requests, tokenizer, seq_len=256, token_budget=512, shared_context=True)
    separate = tlm_objective(items, requests, tokenizer, seq_len=256, token_budget=512, shared_context=False)
    assert shared.data_hash != separate.data_hash  # never the same memo entry
    assert sum(b.n_tokens for b in shared.batches) < 0.6 * sum(b.n_tokens for b in separate.batches)
    assert any(bool((b.root_ids > 0).any()) for b in shared.batches)  # a row holds two trees
    model = family_model(family, len(tokenizer))
    loaded = LoadedModel(model=model, tokenizer=tokenizer, spec=f"test:{family}", name=family, path="-")
    ev_shared = SubsetEvaluator(loaded, shared, calibration="tlm_cs170k", use_cache=True)
    ev_separate = SubsetEvaluator(loaded, separate, calibration="tlm_cs170k", use_cache=True)
    for removed in [(), (1,), (0, 3)]:
        a, b = ev_shared.sequence_logliks(removed), ev_separate.sequence_logliks(removed)
        assert np.abs(a - b).max() <= 1e-4, (family, removed, np.abs(a - b).max())
        ra, rb = ev_shared.evaluate([removed])[0], ev_separate.evaluate([removed])[0]
        assert abs(ra.loss - rb.loss) <= 1e-4 and ra.accuracy == rb.accuracy
    # The plain forward of the physically pruned model agrees too (the tree mask by hooks only).
    remove_blocks(model, (1,))
    assert abs(forward_loss(model, shared)[0] - forward_loss(model, separate)[0]) <= 1e-4


def test_tree_mask_shape_and_rules():
    branch = torch.tensor([[0, 0, 1, 1, 2, -1]])
    position = torch.tensor([[0, 1, 2, 3, 2, 0]])
    mask = tree_attention_mask(position, branch)[0, 0]
    assert mask[4].tolist() == [True, True, False, False, True, False]  # branch 2 skips branch 1
    assert mask[3].tolist() == [True, True, True, True, False, False]
    assert mask[5].tolist() == [False] * 5 + [True]  # padding attends to itself only
    windowed = tree_attention_mask(position, branch, sliding_window=2)[0, 0]
    assert windowed[4].tolist() == [False, True, False, False, True, False]  # by position: 2-1 < 2, 2-0 ≮ 2


def test_two_trees_in_one_row_do_not_see_each_other():
    branch = torch.tensor([[0, 0, 1, 2, 3, 4, 5]])
    root = torch.tensor([[0, 0, 0, 0, 3, 3, 3]])
    position = torch.tensor([[0, 1, 2, 2, 0, 1, 1]])
    mask = tree_attention_mask(position, branch, root)[0, 0]
    assert mask[4].tolist() == [False] * 4 + [True, False, False]  # second tree's prefix: itself only
    assert mask[6].tolist() == [False] * 4 + [True, False, True]  # its branch 5: its prefix and itself
    assert mask[3].tolist() == [True, True, False, True, False, False, False]


def test_rows_wider_than_the_longest_tree_when_that_saves_padding():
    """LAMBADA-like trees, most between half and all of the longest: rows as wide as the longest
    hold one tree each (about 40 % padding); the chosen width lets two share a row. Every tree is
    placed once and no row overflows."""
    from depthprune.calibration.objectives import _first_fit_decreasing, _row_width

    sizes = [116] + [70 + (i % 30) for i in range(49)]
    width = _row_width(sizes, token_budget=2048)
    rows, room = _first_fit_decreasing(sizes, width)
    assert width > max(sizes)
    assert sorted(i for row in rows for i in row) == list(range(len(sizes)))
    assert min(room) >= 0
    padding = 1 - sum(sizes) / (len(rows) * width)
    narrow_rows, _ = _first_fit_decreasing(sizes, max(sizes))
    assert padding < 1 - sum(sizes) / (len(narrow_rows) * max(sizes)) - 0.2
    assert _row_width([50] * 10, token_budget=2048) == 50  # equal trees: no wider row pays
    assert _row_width([300, 200], token_budget=100) == 300  # a tree wider than the budget: its own width
