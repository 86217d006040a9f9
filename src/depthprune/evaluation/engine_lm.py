"""lm-eval model class that scores log-likelihood requests through depthprune's engine.

``DepthpruneLM`` is lm-eval's own ``HFLM`` (``@register_model("depthprune")``) with one method
replaced: ``_loglikelihood_tokens``, where every request's tokens have already been made by
lm-eval (its ``_encode_pair``, rolling windows, truncation). Tasks, prompts, filters and metrics
stay lm-eval's; only the scoring differs:

- requests sharing a context are one tree (depthprune.engine.tree_attention): the context is computed
  once and every continuation branches off it; short trees share rows, so little is padding;
- the LM head runs only at continuation positions, in chunks (never a [batch, length, vocab] tensor).

For a group of removed sets (``use_set_group``), the unpruned model scores every request once per
set through the batch trie of depthprune.engine.set_group: blocks that sets share below their first
difference run once for all of them. lm-eval then runs each set's tasks as usual, and the class
answers from the group's scores (``active_set`` says whose).

The log-likelihoods equal HFLM's to float error (``depthprune bench evaluate --compare`` prints the
largest difference). From the ``lm_eval`` command line::

    python -m depthprune.evaluation.engine_lm --model depthprune \
        --model_args pretrained=PATH,removed="3 5 7",dtype=float32 --tasks hellaswag
"""

from __future__ import annotations

import logging

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

log = logging.getLogger(__name__)


def score_trees(model, groups, pad_id: int, token_budget: int = 2048, head_chunk: int = 2048):
    """Σ log p and greedy flags of scored sequences grouped into trees (objectives._Sequence lists).

    Returns (sums float64 [n], greedy bool [n]) indexed by ``sequence_id``: the model as it is, as
    the group of the one set ``()`` (``score_trees_for_sets``).
    """
    scores, _ = score_trees_for_sets(model, groups, pad_id, [()], token_budget, head_chunk)
    return scores[()]


@torch.no_grad()
def score_trees_for_sets(model, groups, pad_id: int, sets, token_budget: int = 2048, head_chunk: int = 2048):
    """Σ log p and greedy flags of scored sequences grouped into trees, for the unpruned ``model``
    without each of ``sets``, sharing the blocks the sets have in common (depthprune.engine.set_group).

    The rows hold one tree per item (depthprune.engine.tree_attention), the model's own forward
    builds every block's arguments with the tree mask installed by hooks, and the engine's LM head
    runs at the continuation positions only. Returns ({set: (sums float64 [n], greedy bool [n])},
    stats), indexed by ``sequence_id``."""
    from depthprune.calibration.objectives import _pack_trees
    from depthprune.engine.set_group import SetGroupScorer
    from depthprune.engine.tree_attention import backbone_forward, tree_masks

    scorer = SetGroupScorer(model, sets, head_chunk)
    family, device = scorer.family, scorer.device
    n = 1 + max(seq.sequence_id for group in groups for seq in group)
    scores = {key: (torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.bool)) for key in scorer.sets}
    batches = _pack_trees(groups, pad_id, token_budget)
    with tree_masks(model, family, family.blocks(model), batches) as tree:
        for batch in batches:
            per_set = scorer.score(
                lambda batch=batch: backbone_forward(family.backbone(model), batch, device, tree),
                batch.flat_positions,
                batch.targets,
                batch.n_tokens,
            )
            for key, (picked, is_max) in per_set.items():
                sums, greedy = scores[key]
                sums.index_add_(0, batch.sequence_ids, picked)
                greedy[batch.sequence_ids[~is_max]] = False
    return scores, scorer.stats


@register_model("depthprune")
class DepthpruneLM(HFLM):
    """HFLM whose log-likelihoods come from the shared-context engine (see the module doc).

    ``removed``: blocks to remove (e.g. "3 5 7") when loading from a path on the command line;
    ``token_budget``: padded tokens per forward micro-batch (a longer tree gets a micro-batch of its
    own). 2048 rather than more: on SmolLM2 (CPU, float32) LAMBADA, HellaSwag and BoolQ took 18.4 s
    at 2048 against 20.2 s at 8192, whose activations no longer fit the caches.
    """

    def __init__(self, pretrained, removed: str | None = None, token_budget: int = 2048, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.token_budget = int(token_budget)
        if removed:
            from depthprune.io import parse_layers
            from depthprune.models.pruning import remove_blocks

            remove_blocks(self.model, parse_layers(str(removed)))
        self.set_group: list[tuple[int, ...]] | None = None
        self.active_set: tuple[int, ...] | None = None
        self.group_stats = None
        self._group_answers: tuple[int, dict] | None = None  # (requests' hash, {set: answers})

    def use_set_group(self, sets) -> None:
        """Score every request for all of ``sets`` (the model must be unpruned); set ``active_set``
        to the set whose answers lm-eval gets. The answers of the latest request list are kept, so
        running a task once per set scores its requests once."""
        from depthprune.engine.records import EvaluatorStats

        self.set_group = [tuple(s) for s in sets]
        self.active_set = self.set_group[0]
        self.group_stats = EvaluatorStats()  # blocks run (and what separate models would run), summed
        self._group_answers = None

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        if not requests:
            return []
        if self.set_group is None:
            results = self._score(requests)
        else:
            results = self._group_score(requests)
        for (cache_key, _, _), answer in zip(requests, results):
            if cache_key is not None:
                self.cache_hook.add_partial("loglikelihood", cache_key, answer)
        return results

    def _group_score(self, requests) -> list[tuple[float, bool]]:
        # lm-eval builds the same requests, in the same order, for every set of a task.
        fingerprint = hash(tuple((tuple(context), tuple(continuation)) for _, context, continuation in requests))
        if self._group_answers is None or self._group_answers[0] != fingerprint:
            self._group_answers = (fingerprint, self._score(requests, self.set_group))
        return self._group_answers[1][tuple(sorted(self.active_set))]

    def _score(self, requests, sets=None):
        """Answers for ``requests``: a list, or with ``sets`` a {set: list} from the set group."""
        from depthprune.calibration.objectives import _Sequence

        groups: dict[tuple[int, ...], list] = {}
        for index, (_, context_enc, continuation_enc) in enumerate(requests):
            # As HFLM: the last max_length + 1 tokens; the continuation is always kept whole.
            ids = (list(context_enc) + list(continuation_enc))[-(self.max_length + 1) :]
            first = len(ids) - len(continuation_enc)
            sequence = _Sequence(ids=ids, first_scored=max(first, 1), coefficient_per_token=0.0, sequence_id=index)
            groups.setdefault(tuple(ids[:first]), []).append(sequence)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if sets is None:
            sums, greedy = score_trees(self.model, list(groups.values()), pad_id, self.token_budget)
            return [(float(sums[i]), bool(greedy[i])) for i in range(len(requests))]
        scores, stats = score_trees_for_sets(self.model, list(groups.values()), pad_id, sets, self.token_budget)
        self.group_stats.blocks_run += stats.blocks_run
        self.group_stats.naive_blocks += stats.naive_blocks
        return {
            key: [(float(sums[i]), bool(greedy[i])) for i in range(len(requests))]
            for key, (sums, greedy) in scores.items()
        }


if __name__ == "__main__":  # the lm_eval command line, with the "depthprune" model registered
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
