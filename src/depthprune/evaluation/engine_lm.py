"""lm-eval model class that scores log-likelihood requests through depthprune's engine.

``DepthpruneLM`` is lm-eval's own ``HFLM`` (``@register_model("depthprune")``) with one method
replaced: ``_loglikelihood_tokens``, where every request's tokens have already been made by
lm-eval (its ``_encode_pair``, rolling windows, truncation). Tasks, prompts, filters and metrics
stay lm-eval's; only the scoring differs:

- requests sharing a context are one tree (depthprune.engine.tree_attention): the context is computed
  once and every continuation branches off it; short trees share rows, so little is padding;
- the LM head runs only at continuation positions, in chunks (never a [batch, length, vocab] tensor).

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


@torch.no_grad()
def score_trees(model, groups, pad_id: int, token_budget: int = 8192, head_chunk: int = 2048):
    """Σ log p and greedy flags of scored sequences grouped into trees (objectives._Sequence lists).

    Returns (sums float64 [n], greedy bool [n]) indexed by ``sequence_id``. The model's own forward
    runs every row, with the tree mask installed by hooks (depthprune.engine.tree_attention), and
    the engine's LM-head scoring runs at the continuation positions only.
    """
    from depthprune.calibration.objectives import _pack_trees
    from depthprune.engine.scoring import head_log_softmax
    from depthprune.engine.tree_attention import backbone_forward, tree_masks
    from depthprune.models.families import family_for

    family = family_for(model)
    device = next(model.parameters()).device
    n = 1 + max(seq.sequence_id for group in groups for seq in group)
    sums = torch.zeros(n, dtype=torch.float64)
    greedy = torch.ones(n, dtype=torch.bool)
    batches = _pack_trees(groups, pad_id, token_budget)
    with tree_masks(model, family, family.blocks(model), batches) as tree:
        for batch in batches:
            hidden = backbone_forward(family.backbone(model), batch, device, tree).last_hidden_state
            targets = batch.targets.to(device)
            chunks = head_log_softmax(model, family, hidden, batch.flat_positions, device, head_chunk, normed=True)
            for start, logprobs in chunks:
                chunk_targets = targets[start : start + len(logprobs)]
                picked = logprobs.gather(1, chunk_targets[:, None]).squeeze(1).double().cpu()
                is_max = (logprobs.argmax(dim=-1) == chunk_targets).cpu()
                ids = batch.sequence_ids[start : start + len(logprobs)]
                sums.index_add_(0, ids, picked)
                greedy[ids[~is_max]] = False  # greedy: every token of the sequence is the argmax
    return sums, greedy


@register_model("depthprune")
class DepthpruneLM(HFLM):
    """HFLM whose log-likelihoods come from the shared-context engine (see the module doc).

    ``removed``: blocks to remove (e.g. "3 5 7") when loading from a path on the command line;
    ``token_budget``: padded tokens per forward micro-batch.
    """

    def __init__(self, pretrained, removed: str | None = None, token_budget: int = 8192, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        self.token_budget = int(token_budget)
        if removed:
            from depthprune.io import parse_layers
            from depthprune.models.pruning import remove_blocks

            remove_blocks(self.model, parse_layers(str(removed)))

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        from depthprune.calibration.objectives import _Sequence

        groups: dict[tuple[int, ...], list] = {}
        for index, (_, context_enc, continuation_enc) in enumerate(requests):
            # As HFLM: the last max_length + 1 tokens; the continuation is always kept whole.
            ids = (list(context_enc) + list(continuation_enc))[-(self.max_length + 1) :]
            first = len(ids) - len(continuation_enc)
            sequence = _Sequence(ids=ids, first_scored=max(first, 1), coefficient_per_token=0.0, sequence_id=index)
            groups.setdefault(tuple(ids[:first]), []).append(sequence)
        if not requests:
            return []
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        sums, greedy = score_trees(
            self.model, list(groups.values()), pad_id, max(self.token_budget, self.max_length + 1)
        )
        results = [(float(sums[i]), bool(greedy[i])) for i in range(len(requests))]
        for (cache_key, _, _), answer in zip(requests, results):
            if cache_key is not None:
                self.cache_hook.add_partial("loglikelihood", cache_key, answer)
        return results


if __name__ == "__main__":  # the lm_eval command line, with the "depthprune" model registered
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
