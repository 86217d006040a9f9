"""The scoring engine: the calibration loss L(S) of any removed set S, as cheaply as exactness allows
(docs/method.md §5). One job per module:

- ``records``: what an evaluator answers (``EvalRecord``, ``EvaluatorStats``, ``MemoEntry``) and the
  interface searches rely on (``Evaluator``); no torch import, so the tests' synthetic evaluator
  (tests/synthetic.py) reuses them;
- ``memo``: a set's loss is computed once (``Memo`` in memory over an optional ``SqliteMemo`` shared
  by jobs; ``NullMemo`` for ``--no-cache``), keyed by ``memo_key``;
- ``states``: the hidden states entering block j of pruned models, cached under (S ∩ [0, j), j)
  (``StateCache``; ``NullStateCache`` for ``--no-cache``), and the batch trie (``PrefixStates``);
- ``dense_capture``: one forward pass of the model recording what each block receives;
- ``scoring``: the LM head at scored positions only (``head_target_logprobs``, ``scored_logprobs``) and
  the plain-forward reference ``forward_loss``;
- ``tree_attention``: shared-context rows (tree masks, ``tree_masks``, ``backbone_forward``);
- ``gate_derivatives``: CBO's g and H (§4.6);
- ``evaluator``: ``SubsetEvaluator``, which puts them together.

This package is not ``depthprune.evaluation`` (benchmark evaluation of pruned models), which uses
the engine's scoring and tree attention through ``evaluation/engine_lm.py``.
"""
