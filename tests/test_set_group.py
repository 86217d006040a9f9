"""Many pruned models per evaluation pass (depthprune.engine.set_group): each set's scores equal the
physically pruned model's, shared blocks run once, and cached sets are never recomputed."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from depthprune.calibration.objectives import _Sequence
from depthprune.evaluation.benchmarks import EvalSettings
from depthprune.evaluation.cache import EvalCache
from depthprune.evaluation.engine_lm import score_trees_for_sets
from depthprune.evaluation.perplexity import engine_window_nll_sums_for_sets, window_nll_sums
from depthprune.evaluation.run import Labels, evaluate_model, evaluate_removed_sets, evaluate_sets, samples_frame
from depthprune.models import FAMILIES, load_model, remove_blocks
from depthprune.models.tiny import tiny_config

SETS = [(), (1, 3), (1, 4), (0, 5), (4, 5)]  # dense; a shared prefix; a first-block removal; a tail
SMALL = {
    "benchmarks": ("wikitext2", "hellaswag"),  # windows; shared contexts with several choices
    "limit": 3,
    "ppl_seq_len": 64,
    "ppl_max_tokens": 256,
    "batch_size": 4,
}
IDENTITY = {"spec": "tiny:llama-8", "dtype": "float32", "device": "cpu"}


def tiny_family_model(family, vocab_size):
    config = tiny_config(family, n_layers=6, vocab_size=vocab_size)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():  # residual branches large enough that removing a block matters
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.mul_(8.0)
    return model


def requests(vocab_size, n_items=5, seed=0):
    """Multiple-choice-like trees: 48-token contexts (past the tiny sliding window of 32) with
    continuations of different lengths."""
    generator = torch.Generator().manual_seed(seed)
    groups, index = [], 0
    for _ in range(n_items):
        context = torch.randint(3, vocab_size, (48,), generator=generator).tolist()
        group = []
        for length in (2, 5, 3):
            ids = context + torch.randint(3, vocab_size, (length,), generator=generator).tolist()
            group.append(_Sequence(ids=ids, first_scored=len(context), coefficient_per_token=0.0, sequence_id=index))
            index += 1
        groups.append(group)
    return groups


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_group_scores_equal_each_pruned_model(family):
    vocab_size = 97
    model = tiny_family_model(family, vocab_size)
    groups = requests(vocab_size)
    windows = torch.randint(3, vocab_size, (3, 40), generator=torch.Generator().manual_seed(1))
    grouped, stats = score_trees_for_sets(model, groups, pad_id=0, sets=SETS, token_budget=128)
    grouped_windows, _ = engine_window_nll_sums_for_sets(model, windows, batch_size=2, sets=SETS)
    for removed in SETS:
        pruned = copy.deepcopy(model)
        if removed:
            remove_blocks(pruned, removed)
        sums, greedy = separate_sequence_scores(pruned, groups)
        assert torch.allclose(grouped[removed][0], sums, rtol=0, atol=1e-4), (family, removed)
        assert torch.equal(grouped[removed][1], greedy), (family, removed)
        reference = window_nll_sums(pruned, windows, 2, engine="hflm")  # the model's own full logits
        assert torch.allclose(grouped_windows[removed], reference, rtol=0, atol=1e-4), (family, removed)
    # Each (prefix, block) node of a batch's trie runs once: per batch, the distinct nodes of the
    # five sets (15) instead of the blocks of five separate models (26).
    n_batches, rest = divmod(stats.naive_blocks, sum(6 - len(s) for s in SETS))
    assert rest == 0 and n_batches >= 1
    assert stats.blocks_run == n_batches * trie_nodes(SETS, 6) == n_batches * 15


@torch.no_grad()
def separate_sequence_scores(model, groups):
    """Σ log p of each sequence's scored tokens and whether each is the argmax, from the model's own
    forward on the sequence alone (float64 log-softmax): the reference, independent of the engine."""
    n = 1 + max(seq.sequence_id for group in groups for seq in group)
    sums, greedy = torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.bool)
    for seq in (seq for group in groups for seq in group):
        logprobs = torch.log_softmax(model(torch.tensor([seq.ids])).logits[0].double(), dim=-1)
        scored = torch.arange(seq.first_scored, len(seq.ids))
        targets = torch.tensor(seq.ids)[scored]
        sums[seq.sequence_id] = logprobs[scored - 1, targets].sum()
        greedy[seq.sequence_id] = bool((logprobs[scored - 1].argmax(dim=-1) == targets).all())
    return sums, greedy


def trie_nodes(sets, n_layers):
    """Distinct (removed prefix, kept block) nodes: what one batch's walk runs."""
    return len({(tuple(x for x in s if x < j), j) for s in sets for j in range(n_layers) if j not in s})


def test_trie_nodes_counts_shared_prefixes():
    assert trie_nodes([(), (1, 3)], 6) == 6 + 3  # blocks 0 shared; then 2, 4, 5 apart from the dense 1..5
    assert trie_nodes([(4, 5), ()], 6) == 6  # the tail set is the dense model's first four blocks


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir), dtype="float32", device="cpu")


def test_evaluate_sets_equals_evaluating_each_pruned_model(tiny, tiny_model_dir, data_dir):
    settings = EvalSettings(**SMALL, data_dir=data_dir)
    sets = [(2, 6), ()]
    grouped = evaluate_sets(tiny.model, tiny.tokenizer, settings, sets)
    assert list(grouped) == sets
    for removed in sets:
        pruned = load_model(str(tiny_model_dir), dtype="float32", device="cpu")
        if removed:
            remove_blocks(pruned.model, removed)
        alone = evaluate_model(pruned.model, pruned.tokenizer, settings, removed)
        ours = grouped[removed]
        assert [(m.benchmark, m.metric, m.n) for m in ours.metrics] == [
            (m.benchmark, m.metric, m.n) for m in alone.metrics
        ]
        for a, b in zip(ours.metrics, alone.metrics):
            assert a.value == pytest.approx(b.value, rel=1e-6, abs=1e-9), (removed, a)
        labels = Labels.for_removed("tiny", removed)
        x, y = samples_frame(ours, labels, settings), samples_frame(alone, labels, settings)
        assert x[["benchmark", "unit", "metric"]].equals(y[["benchmark", "unit", "metric"]])
        assert (x["value"] - y["value"]).abs().max() <= 1e-4
        assert ours.raw["depthprune"]["set_group"]["sets"] == [list(s) for s in sets]


class CountingLoader:
    def __init__(self, folder):
        self.folder, self.calls = folder, 0

    def __call__(self):
        self.calls += 1
        return load_model(str(self.folder), dtype="float32", device="cpu")


def test_adding_one_set_computes_one_new_set(tiny_model_dir, data_dir, tmp_path):
    """A group rerun with one more set (one more algorithm) computes that set only: the others are
    evaluation-cache hits, and the one pass evaluates a group of one."""
    settings = EvalSettings(**{**SMALL, "benchmarks": ("wikitext2", "piqa"), "limit": 2}, data_dir=data_dir)
    cache = EvalCache(tmp_path / "cache")
    loader = CountingLoader(tiny_model_dir)
    kwargs = {"model_identity": IDENTITY, "settings": settings, "load": loader, "cache": cache}
    first = evaluate_removed_sets(removed_sets=[(1, 3), (2, 5), (1, 3)], **kwargs)
    assert loader.calls == 1 and [e.cache_hit for e in first] == [False, False, False]
    assert first[0].raw["depthprune"]["set_group"]["sets"] == [[1, 3], [2, 5]]  # a repeat is computed once
    second = evaluate_removed_sets(removed_sets=[(2, 5), (0, 7), (1, 3)], **kwargs)
    assert loader.calls == 2 and [e.cache_hit for e in second] == [True, False, True]
    assert second[1].raw["depthprune"]["set_group"]["sets"] == [[0, 7]]
    assert [m.value for m in second[0].metrics] == [m.value for m in first[1].metrics]
    third = evaluate_removed_sets(removed_sets=[(0, 7), (1, 3)], **kwargs)
    assert loader.calls == 2 and all(e.cache_hit for e in third)  # nothing to compute: nothing loaded
