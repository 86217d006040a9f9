"""Version of the scoring code, part of every cache key (memo, evaluation cache, prior, BO study).

Bump ``SCORING_VERSION`` whenever a change can alter a calibration loss or an evaluation figure
(the evaluator, calibration objectives and data, perplexity / lm-eval glue, block removal, model
loading): every cached number computed by the old code then stops matching, and the pipeline
recomputes instead of serving a stale result. ``tests/test_versions.py`` fails when the scoring
modules change without a bump (it records a hash of their code per version).
"""

SCORING_VERSION = 3

# Modules whose code decides a score (paths relative to src/depthprune), hashed by the test above.
SCORING_MODULES = (
    "engine/dense_capture.py",
    "engine/evaluator.py",
    "engine/scoring.py",
    "engine/set_group.py",
    "engine/states.py",
    "engine/tree_attention.py",
    "calibration/data.py",
    "calibration/objectives.py",
    "calibration/setup.py",
    "calibration/sources.py",
    "calibration/specs.py",
    "calibration/tlm.py",
    "evaluation/benchmarks.py",
    "evaluation/engine_lm.py",
    "evaluation/harness.py",
    "evaluation/perplexity.py",
    "evaluation/run.py",
    "evaluation/tasks/*.yaml",
    "models/cpu_dtype.py",  # what dtype auto resolves to (moved out of models/loading.py)
    "models/families.py",
    "models/loading.py",
    "models/pruning.py",
)
