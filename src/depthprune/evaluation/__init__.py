"""Evaluation of (pruned) models: perplexity and lm-eval zero-shot accuracy (docs/method.md §6).

``benchmarks`` (the nine benchmarks, ``EvalSettings``), ``perplexity`` (WikiText-2, C4), ``harness``
(lm-evaluation-harness glue, offline task YAMLs in ``tasks/``), ``cache`` (content-addressed
evaluation cache), ``run`` (one model × one removed set → tidy metrics), ``cli`` (``depthprune evaluate``).
"""
