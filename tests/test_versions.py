"""SCORING_VERSION must be bumped whenever the code that decides a score changes.

Every cache key (memo, evaluation cache, prior check, BO study) holds SCORING_VERSION, so a fix to
the scoring code invalidates the numbers the old code cached, but only if the version is bumped.
This test hashes the scoring modules (their syntax tree without docstrings, so comments, docstrings
and formatting do not count) and compares with the hash recorded for the current version.

When it fails after a change to scoring code: bump SCORING_VERSION in src/depthprune/versions.py and
add the printed hash under the new version in RECORDED below. (If the change cannot alter any
score, e.g. an error message, bumping is still the safe choice: it only costs a recomputation.)
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from depthprune import versions

PACKAGE = Path(versions.__file__).resolve().parent

# Hashes accepted per version. A version may hold more than one hash only for rewrites that cannot
# change what the code computes, each named here with why it cannot.
RECORDED = {
    1: ("6c3163327b7417f7",),
    2: (
        "ab8fcaac796ceee0",  # shared-context TLM scoring, the engine lm-eval class
        # the ruff rewrite: typing -> collections.abc imports, unquoted annotations, set literals, round() without int()
        "3d4efa4520557ae4",
        # issue 14 registries: the benchmark table (derived constants, METRICS_COLUMNS and
        # SAMPLES_COLUMNS moved into evaluation/benchmarks.py), io.parse_layers in run.py and
        # pruning.py, the tiny-model settings on Family (rotary/extra removed), paths.MODEL_CACHE_DIR,
        # calibration display names. Verified: prior.json (ppl_c4 and tlm_cs170k, embedded SmolLM2,
        # float32, 2 x 48 tokens) and evaluate --removed "3 7 11" (wikitext2, lambada_openai, piqa)
        # give identical scores, metrics.csv and samples.parquet before (062fef9) and after.
        "a729f6ddec0b98c0",
        # the engine split (evaluator.py, tree_attention.py -> engine/ package: evaluator, states, dense_capture,
        # scoring, tree_attention; one LM-head path for evaluator, forward_loss, engine_lm and perplexity windows).
        # Verified identical on embedded:smollm2-135m (bfloat16, CPU): prior.json of `depthprune prior` for
        # ppl_c4 (--n-samples 4 --seq-len 64) and tlm_cs170k (--n-samples 8) gives the same empty_loss, scores,
        # accuracies and ranking bit for bit before and after; on tiny:llama-8 (float32 and bfloat16, one thread)
        # gate derivatives g and H, losses and sequence log-likelihoods (ppl_c4, tlm_cs170k), engine_lm.score_trees
        # (head_chunk 7) and the perplexity windows (head_chunk 16) are bitwise equal before and after.
        "1fdd6d6e59e2a340",
        # the three rewrites above merged (registries + engine split + lint). Verified: recomputed with
        # this code (--no-cache), the default study's ppl_c4 prior (8 x 64, seed 0, bfloat16), computed by
        # 1b81beb, equals its prior.json bit for bit (scores, empty loss, ranking).
        "888d91879065a41a",
        # many removed sets per evaluation pass (engine/set_group.py, evaluation/run.py:evaluate_sets,
        # DepthpruneLM.use_set_group, perplexity windows for sets). Verified: on SmolLM2 in float32 (limit
        # 30, 2 x 2048-token windows, all nine benchmarks, three M = 7 sets) every metric and every
        # per-document value of the one-pass path equals the physically pruned model's bit for bit;
        # so do the tree and window scores of every family's tiny model (tests/test_set_group.py).
        "e00ad38720d7fc30",
    ),
    # The LM head's normaliser is logsumexp instead of torch.log_softmax, whose float32 CPU kernel
    # sums the vocabulary's exponentials in running sums that drop the small terms: +9e-6 nat per
    # token on SmolLM2 against float64, +4.8e-4 on a long PIQA answer; logsumexp is within 2e-5
    # (`depthprune timing evaluate --compare` prints both against a float64 referee).
    # Also in 3 (no result was made with 3 before them): shared-context rows up to 4x wider than the
    # longest tree when that saves padding (calibration/objectives.py:_row_width; LAMBADA 43 % -> 10 %
    # padding), 2048-token evaluation micro-batches (faster on CPU than 8192), the head returning only
    # the targets' log-probabilities and, for lm-eval's greedy flags only, argmax flags (head_target_logprobs), and one-model engine
    # scoring (score_trees, engine_window_nll_sums, evaluate_model) as the group of the one set ().
    3: (
        "370676569684e8f4",
        # CBO's gate derivatives kept in the memo (SubsetEvaluator.gate_derivatives reads them before
        # computing them): the same function computes them; only where they are kept changed, and no
        # loss, log-likelihood or derivative passes through the changed lines.
        "ae5eaa702d71971e",
        # dtype auto on a CPU whose bfloat16 kernels are capped (models/loading.py:kernel_cap): it only
        # changes which dtype `auto` resolves to, and the resolved dtype is part of every cache key, so
        # no number cached under a dtype can be served under another or change at the same dtype.
        "9475d6aa0608cf9a",
        # lm-eval's Task objects built once per task and run for every set of a pass, and lm-eval's
        # environment summary (add_env_info) computed once per process (evaluation/run.py,
        # evaluation/harness.py): no score passes through them. Verified: two sets in one pass
        # (SmolLM2, bfloat16, wikitext2, lambada_openai, hellaswag, boolq, winogrande at limit 30)
        # give identical metrics.csv and samples.parquet for both sets before and after.
        "f3e27c566c698a4f",
        # SubsetEvaluator.evaluate calls allocator.give_back_free_memory (malloc_trim once the heap's
        # free bytes grow by 1 GiB): it returns free pages to the kernel and touches no live tensor, so
        # no score can change; the committed CI suite's engine tests pass unchanged with it.
        "97e9381c7dc67195",
        # The LM head's normaliser a few rows at a time on a CPU (engine/scoring.py:vocabulary_logsumexp):
        # every row's logsumexp equals the one-call value bit for bit (a lone last row, which ATen would
        # sum in two halves, joins the block before; tests/test_scoring.py), and the upcast of bfloat16
        # logits is exact wherever it happens. Verified: the default study's two priors recomputed with
        # --no-cache on one thread, float32 under the AVX2 cap and native bfloat16, equal the prior.json
        # of the two cold runs of e3213b3 bit for bit (scores, empty loss); 30 subset losses (ppl_c4, tlm_cs170k; bfloat16 and float32) and
        # WikiText-2 window sums for two sets are bitwise equal with and without the blocks.
        "2e0a5948cc6a7364",  # the same, its one-call condition written as one test (f22baa3's hash 90f45c2d0fbc9665)
        # Options whose defaults compute what 3 computed (issues 33, 37, 38): protect: boundary (which
        # sets are allowed, not their losses; protected_blocks moved to budgets.py), the held-out loss
        # (a second objective built and scored the same way), tlm loss cross_entropy (in the memo key
        # when chosen), C4 packing exact (it changes the tokens only where a drawn document is shorter
        # than seq_len, and data_hash, part of every memo key, changes with them; the committed 8 x 64
        # draws are unchanged, tests/test_calibration_exact_length.py), calibration_tokens in describe()
        # (kept out of the memo key), the state budget through devices.state_budget (the same
        # arithmetic) and StateCache.clear (before blockwise derivatives only). Verified: the default
        # study's ppl_c4 and tlm_cs170k priors (embedded SmolLM2, float32, 8 x 64 tokens and 8 items,
        # seed 0, --no-cache, one thread) and a greedy M = 3 search under ppl_c4 are bitwise equal at
        # e0547fb and at this code (scores, empty loss, ranking; the set and every trace loss).
        "0387f51efe9be48b",
        # Per-item TLM scores (Objective.item_scores, EvalRecord.items, SubsetEvaluator.recompute; issue
        # 33's nested priors): the loss is reduced as before, and the calibration accuracy is the same
        # first-best-candidate rule over the same per-candidate means, now taken from item_scores.
        # Verified: the calibration-size v2 prior tlm_cs170k-n8 seed 3 (embedded SmolLM2, float32, one
        # thread) computed by the workflow through its memo at c797b81 and at this code with --no-cache is
        # bitwise equal (scores, empty loss, accuracies, empty accuracy, ranking).
        "3ce321c98a252738",
        # The same scores computed once per evaluation (Objective.scores gives the loss, the accuracy
        # and the item scores it is taken from; Objective.accuracy folded into it). Verified as above,
        # the same prior at this code: bitwise equal.
        "26ede7445b16c7d2",
        # score_heldout moved from calibration/heldout.py into engine/scoring.py beside forward_loss, which
        # it calls (issue 49: calibration/heldout imported the engine, which imports calibration/objectives,
        # which imports calibration/heldout); its code is unchanged. Verified on tiny:llama-8 (float32,
        # one thread, --no-cache): the ppl_c4 (4 x 32) and tlm_cs170k (4 items) priors, one search per
        # registered algorithm at M = 2 under ppl_c4 and greedy M = 3 under tlm_cs170k, each with 8
        # held-out samples, are bitwise equal before (95416a3) and after: scores, empty loss, accuracies,
        # ranking, every trace loss, the selected sets and their held-out losses (89 comparisons).
        "f5399a208f27e0c3",
        # Dead code removed (issue 49): calibration/data.py read_jsonl and load_cs170k_rows, and
        # evaluation/run.py evaluate_removed, none of which any package code called. Verified as above
        # (the same 89 comparisons against 95416a3): bitwise equal.
        "c53b4903e2d2a6eb",
        # calibration/specs.py gains cross_control() (issue 50: the three calibrations of the
        # objective-or-data decomposition, derived from the registry; no scoring code calls it).
        # Verified as above (the same 89 comparisons against 95416a3): bitwise equal.
        "7d6712bc329d4b4d",
        # Issue 45: non-finite losses, scores and perplexities stop prior and evaluate with an error
        # (prior.check_finite_losses, evaluation.run.check_finite), and error messages changed (memo,
        # offline lm-eval data). Every finite result is computed and written exactly as before: the
        # checks only read the numbers, so nothing a finished run wrote can differ.
        "d81c7d1043545aff",
        # The merge of issues 45, 46, 48, 49 and 50 on main: the finite-result checks and the moved
        # held-out scoring together. Verified as above (the same 89 comparisons against 95416a3, on the
        # merged main): bitwise equal.
        "59988aaa42a81d45",
        # Issue 49 item 1: one CalibrationSetup (calibration/setup.py, now a scoring module) carries the
        # calibration options; load_calibration_samples and build_objective read them from it instead of
        # keywords, the option values live in calibration/specs.py, and models/loading.resolve_dtype
        # checks the name against models.DTYPE_CHOICES and returns getattr(torch, name) (the same
        # dtypes). Verified as above (the same 89 comparisons against 95416a3 with /tmp/i49/bitwise.sh
        # on this branch, plus the priors' evaluator records and every selection.json but timings):
        # bitwise equal.
        "7fe847ca3efe0f81",
        # Issue 59: a calibration data source has one home (calibration/sources.py, now a scoring
        # module: DataSource loader, texts, TLM items, held-out reservation, mirror file, hub id);
        # load_calibration_samples and heldout.py read it instead of branching on "c4" (cs170k_text
        # moved there unchanged). Verified on tiny:llama-8 (float32, one thread, --no-cache, /tmp/h5/bitwise.sh):
        # the ppl_c4, ppl_cs170k and tlm_cs170k priors (4 x 32), a greedy M = 2 search under each with
        # 8 held-out samples, and every sample's texts, reserve, TLM items, requests and data_hash
        # (6 x 64 and 10 held-out, seed 3, both C4 packings) are bitwise equal before (b3bb975) and after
        # (70 comparisons).
        "195ee6c4f1e9db4b",
        # Issue 59 item 2 and issue 55 item 6: bad-input errors raised as errors.InputError (a ValueError)
        # instead of ValueError/KeyError, a tiny spec of 0 blocks refused, a truncated GGUF or safetensors
        # file reported as such, and the calibration mirror read with errors="surrogateescape" to name a
        # non-UTF-8 line (valid UTF-8 decodes exactly as before; a folder is named as one): only error
        # paths changed. Verified on tiny:llama-8 (float32, one thread, --no-cache, 4 x 32): the ppl_c4 and
        # tlm_cs170k priors and a greedy M = 3 search under ppl_c4 are equal before (b3bb975) and after
        # (scores, empty loss, ranking, data_hash, the selected set and every trace loss).
        "9f8d5b8d064f58ab",
        # Issue 55: dtype auto's rule and CPU probes moved verbatim from models/loading.py into
        # models/cpu_dtype.py (now a scoring module; torch imported inside the two functions that use
        # it), resolve_dtype maps auto through cpu_dtype.auto_dtype to the same names, and a gguf: file
        # converts into a folder named by its content (the same conversion code). Verified on
        # tiny:llama-8 (dtype auto on the CPU with DEPTHPRUNE_CPU_BF16=0 and =1, one thread, --no-cache):
        # the ppl_c4 (4 x 32) and tlm_cs170k (4 items) priors and a greedy M = 2 search under ppl_c4 at
        # b3bb975 and at this code are bitwise equal (scores, empty loss, ranking, accuracies, the
        # resolved dtype, the set, its loss and every trace loss).
        "49f2de12d567bf45",
        # The merge of issues 55, 56 and 59's branches (the three hashes above, each checked on its own,
        # plus cbo.py's energy terms moved into energy_from_derivatives and cpu_dtype's env error as
        # InputError). Verified on tiny:llama-8 (float32, one thread, --no-cache) against b3bb975:
        # /tmp/h5/bitwise.sh's ppl_c4, ppl_cs170k and tlm_cs170k priors, greedy searches and samples
        # (120 comparisons), and CBO searches at M = 2 and 3 under ppl_c4 (set, loss, trace losses,
        # diagnostics but their seconds): bitwise equal.
        "c233be99ffebc868",
        # Issue 59 item 3: calibration/setup.py (CalibrationSetup built in cli_common, no namespace) and
        # evaluation/run.py (evaluate_sets in named steps). Verified on tiny:llama-8 (float32, CPU)
        # against 58e40f1: /tmp/h5/bitwise.sh's priors, greedy searches and samples for the three
        # calibrations, and evaluate / cbo-diagnose outputs (3 sets in one pass on wikitext2, hellaswag,
        # boolq): identical but their seconds and output paths.
        "b4517d6e4cbb89f7",
        # Issue 67, first part: Objective.sample_shares / n_samples (L split by calibration sample),
        # Family.residual_branches / branches and SubsetEvaluator.gate_fisher_rows, all new and read by
        # cbo's `coefficients: fisher` only. Verified on tiny:llama-8 (float32, one thread, CPU) against
        # c55be0f with /tmp/bitwise.py: the ppl_c4, tlm_cs170k and ppl_cs170k priors (4 samples, seed 3),
        # five sets' losses and accuracies, data_hash, and greedy and cbo (gradient) searches at M = 3
        # (set, loss, every trace loss): the JSON dumps are byte for byte equal.
        "846eb0be706ea8fc",
    ),
}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


def scoring_code_hash() -> str:
    digest = hashlib.sha256()
    for pattern in versions.SCORING_MODULES:
        paths = sorted(PACKAGE.glob(pattern))
        assert paths, f"SCORING_MODULES names {pattern!r}, which matches no file"
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".py":
                text = ast.dump(_strip_docstrings(ast.parse(text)), include_attributes=False)
            digest.update(f"{path.relative_to(PACKAGE).as_posix()}\0{text}\n".encode())
    return digest.hexdigest()[:16]


def test_scoring_code_changes_bump_the_version():
    current = scoring_code_hash()
    recorded = RECORDED.get(versions.SCORING_VERSION, ())
    assert current in recorded, (
        f"the scoring code changed (hash {current}) but SCORING_VERSION is still {versions.SCORING_VERSION} "
        f"(recorded hashes {recorded}): bump SCORING_VERSION in src/depthprune/versions.py and record "
        f"{current!r} for it in tests/test_versions.py"
    )


def test_the_hash_ignores_comments_and_docstrings(tmp_path, monkeypatch):
    module = tmp_path / "m.py"
    module.write_text('"""doc"""\n\ndef f(x):\n    """doc"""\n    return x + 1  # one\n')
    first = ast.dump(_strip_docstrings(ast.parse(module.read_text())))
    module.write_text('"""other doc"""\n\n\ndef f(x):\n    # a comment\n    return x + 1\n')
    assert ast.dump(_strip_docstrings(ast.parse(module.read_text()))) == first
    module.write_text("def f(x):\n    return x + 2\n")
    assert ast.dump(_strip_docstrings(ast.parse(module.read_text()))) != first
