"""The LM head's normaliser: computed a few rows at a time, equal bit for bit to one logsumexp call."""

from __future__ import annotations

import pytest
import torch

from depthprune.engine.scoring import vocabulary_logsumexp


@pytest.fixture
def threads():
    """Set torch's thread count for one test (ATen splits a lone row's sum across threads)."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


# 49,152 (SmolLM2's vocabulary) is past ATen's grain size of 32,768 elements, where reductions go
# parallel; 300 stays below it.
@pytest.mark.parametrize("vocab", [300, 49_152])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_blocked_normaliser_equals_one_logsumexp_bit_for_bit(vocab, dtype, n_threads, threads):
    threads(n_threads)
    generator = torch.Generator().manual_seed(vocab)
    logits = (torch.randn(130, vocab, generator=generator) * 4).to(dtype)
    for rows in (1, 2, 7, 8, 9, 16, 17, 33, 130):  # below, at and past a block; a lone last row (9, 17, 33)
        expected = torch.logsumexp(logits[:rows].float(), dim=-1)
        got = vocabulary_logsumexp(logits[:rows], torch.float32)
        assert got.dtype == torch.float32
        assert torch.equal(got, expected), (rows, (got - expected).abs().max().item())


def test_a_lone_last_row_is_never_reduced_on_its_own(threads):
    """With two threads ATen sums a one-row tensor in two halves, which moves about one row in 40 by
    a rounding step (measured: 5 of 200); the blocks never leave a row alone, so none moves."""
    threads(2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):  # 9 rows: one block of 8 and a lone ninth, unless it joins the block
        logits = torch.randn(9, 49_152, generator=generator) * 4
        assert torch.equal(vocabulary_logsumexp(logits, torch.float32), torch.logsumexp(logits, dim=-1))


def test_blocked_normaliser_keeps_float64():
    logits = torch.randn(20, 50, dtype=torch.float64)
    got = vocabulary_logsumexp(logits, torch.float64)
    assert got.dtype == torch.float64
    assert torch.equal(got, torch.logsumexp(logits, dim=-1))


def test_normaliser_with_a_gradient_is_one_call_and_differentiable():
    logits = torch.randn(20, 50, requires_grad=True)
    vocabulary_logsumexp(logits, torch.float32).sum().backward()
    expected = torch.softmax(logits.detach(), dim=-1)  # d/dx logsumexp = softmax
    torch.testing.assert_close(logits.grad, expected)
