"""Language-model perplexity on WikiText-2 (raw, test) and C4 (en, validation) (docs/method.md §6).

Protocol (the GPTQ/SparseGPT/SLEB one, so figures compare with the depth-pruning literature):
the corpus rows are joined by ``"\\n\\n"`` into one text, tokenised once with the model's tokenizer
(default special tokens, so a model whose tokenizer adds BOS gets one at the very start), cut into
non-overlapping windows of ``seq_len`` tokens (the trailing partial window is dropped), and each
window is scored on its own. Perplexity = exp(token-weighted mean next-token NLL over all windows).

WikiText-2 rows are the Hugging Face line-level rows (one per line of ``wiki.test.raw``, blank lines
as ``""``, others ending in ``" \\n"``). Joining them with ``"\\n\\n"`` is what the literature does
with exactly these rows (``"\\n\\n".join(testdata["text"])``), so we keep it although it doubles the
line breaks of the raw file; the offline mirror holds the same rows, so hub and mirror agree.

``max_tokens`` caps the evaluated tokens (rounded down to whole windows) for quick runs; only enough
leading documents to fill it are tokenised, which matches tokenising the whole text except possibly
in the last word of that prefix, which is never scored.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from depthprune.errors import InputError

log = logging.getLogger(__name__)

SEPARATOR = "\n\n"


@dataclass(frozen=True)
class TextCorpus:
    """Where a perplexity benchmark's text comes from, on the hub and in a ``data_dir`` mirror."""

    benchmark: str
    hub_path: str
    hub_name: str | None
    hub_data_files: dict[str, str] | None
    split: str
    local_file: str  # relative to data_dir

    def describe_hub(self) -> str:
        files = f", data_files={self.hub_data_files}" if self.hub_data_files else ""
        name = f"/{self.hub_name}" if self.hub_name else ""
        return f"{self.hub_path}{name} ({self.split}{files})"


CORPORA = {
    "wikitext2": TextCorpus(
        benchmark="wikitext2",
        hub_path="Salesforce/wikitext",
        hub_name="wikitext-2-raw-v1",
        hub_data_files=None,
        split="test",
        local_file="wikitext-2-raw-v1/test.jsonl",
    ),
    # The first validation shard, as in SparseGPT/Wanda's C4 evaluation.
    "c4": TextCorpus(
        benchmark="c4",
        hub_path="allenai/c4",
        hub_name=None,
        hub_data_files={"validation": "en/c4-validation.00000-of-00008.json.gz"},
        split="validation",
        local_file="c4/validation.jsonl",
    ),
}


@dataclass(frozen=True)
class PerplexityResult:
    benchmark: str
    perplexity: float
    mean_nll: float
    stderr: float | None  # delta-method standard error of the perplexity over windows
    n_tokens: int  # scored (predicted) tokens
    n_windows: int
    seq_len: int
    seconds: float
    # Summed NLL of each window (per-window perplexities for the bootstrap); kept out of to_dict()
    # so the raw JSON stays small: the samples table stores them.
    window_nll: tuple[float, ...] = ()

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("window_nll")
        return out

    def sample_rows(self) -> list[dict]:
        """One ``nll_sum`` and one ``n_tokens`` row per window (``harness.SAMPLE_COLUMNS``)."""
        per_window = self.seq_len - 1
        rows = []
        for i, nll in enumerate(self.window_nll):
            rows.append({"benchmark": self.benchmark, "unit": i, "metric": "nll_sum", "value": float(nll)})
            rows.append({"benchmark": self.benchmark, "unit": i, "metric": "n_tokens", "value": float(per_window)})
        return rows


def local_corpus_file(benchmark: str, data_dir: str | Path) -> Path:
    """The mirror file of a perplexity benchmark; FileNotFoundError naming it if it is missing."""
    path = Path(data_dir) / CORPORA[benchmark].local_file
    if not path.is_file():
        raise FileNotFoundError(f"{path}: offline data for benchmark {benchmark!r} not found (--data-dir {data_dir})")
    return path


def load_corpus_texts(benchmark: str, data_dir: str | Path | None = None) -> list[str]:
    """The documents (rows) of a perplexity benchmark, from the ``data_dir`` mirror or the hub."""
    corpus = CORPORA[benchmark]
    if data_dir is not None:
        path = local_corpus_file(benchmark, data_dir)
        # Plain JSONL with a "text" field (HF layout); read directly: no arrow cache, no type inference.
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line)["text"] for line in fh if line.strip()]
    import datasets

    try:
        dataset = datasets.load_dataset(
            corpus.hub_path, corpus.hub_name, data_files=corpus.hub_data_files, split=corpus.split
        )
    except Exception as err:  # network, missing repo, gated: say which data set it was
        raise FileNotFoundError(
            f"dataset {corpus.describe_hub()} for benchmark {benchmark!r} could not be loaded from the "
            f"Hugging Face hub ({type(err).__name__}: {err}); pass --data-dir for an offline mirror"
        ) from err
    return list(dataset["text"])


def tokenize_corpus(tokenizer, texts: Sequence[str], max_tokens: int | None = None) -> torch.Tensor:
    """Token ids of ``SEPARATOR.join(texts)`` (first ``max_tokens`` if given), shape (T,)."""
    if max_tokens is None:
        return _encode(tokenizer, SEPARATOR.join(texts))
    # Tokenise a growing prefix of documents until it yields more than max_tokens tokens, so a
    # capped run on a large corpus (the full C4 shard) does not tokenise megabytes it never scores.
    n_chars_wanted = 8 * max_tokens  # generous: few tokenizers average over 8 characters per token
    while True:
        n_docs, n_chars = 0, 0
        while n_docs < len(texts) and n_chars < n_chars_wanted:
            n_chars += len(texts[n_docs]) + len(SEPARATOR)
            n_docs += 1
        ids = _encode(tokenizer, SEPARATOR.join(texts[:n_docs]))
        if len(ids) > max_tokens or n_docs == len(texts):
            return ids[:max_tokens]
        n_chars_wanted *= 2


def _encode(tokenizer, text: str) -> torch.Tensor:
    # verbose=False: the "sequence longer than model max length" warning is expected here.
    return torch.tensor(tokenizer(text, verbose=False)["input_ids"], dtype=torch.long)


def split_windows(ids: torch.Tensor, seq_len: int, benchmark: str = "text") -> torch.Tensor:
    """Non-overlapping windows of ``seq_len`` tokens, shape (W, seq_len); the partial tail is dropped."""
    n_windows = ids.numel() // seq_len
    if n_windows == 0:
        raise InputError(f"{benchmark}: only {ids.numel()} tokens, fewer than one window of --ppl-seq-len {seq_len}")
    return ids[: n_windows * seq_len].view(n_windows, seq_len)


def engine_window_nll_sums(model, windows: torch.Tensor, batch_size: int, head_chunk: int = 2048) -> torch.Tensor:
    """As ``window_nll_sums``, the way the scoring engine scores (evaluation/engine_lm.py): the
    model as it is, as the group of the one set ``()`` (``engine_window_nll_sums_for_sets``)."""
    sums, _ = engine_window_nll_sums_for_sets(model, windows, batch_size, [()], head_chunk)
    return sums[()]


@torch.inference_mode()
def engine_window_nll_sums_for_sets(
    model, windows: torch.Tensor, batch_size: int, sets, head_chunk: int = 2048
) -> tuple[dict[tuple[int, ...], torch.Tensor], object]:
    """Summed next-token NLL of each window (as ``window_nll_sums``) for the unpruned ``model``
    without each of ``sets``, sharing the blocks the sets have in common (depthprune.engine.set_group),
    with the engine's LM head in chunks of positions (never the [batch, length, vocab] logits).
    Windows share no context, so they are plain causal rows (no tree mask). Returns ({set: sums},
    stats)."""
    from depthprune.engine.set_group import SetGroupScorer

    scorer = SetGroupScorer(model, sets, head_chunk)
    backbone = scorer.family.backbone(model)
    sums: dict[tuple[int, ...], list[float]] = {key: [] for key in scorer.sets}
    for start in range(0, len(windows), batch_size):
        batch = windows[start : start + batch_size].to(scorer.device)
        # Every position but the last of each row, in the flattened [B*T] states.
        positions = (torch.arange(batch.shape[0])[:, None] * batch.shape[1] + torch.arange(batch.shape[1] - 1)).reshape(
            -1
        )
        targets = batch[:, 1:].reshape(-1)
        per_set = scorer.score(
            lambda batch=batch: backbone(input_ids=batch, use_cache=False),
            positions,
            targets,
            batch.numel(),
            argmax=False,
        )
        for key, (picked, _) in per_set.items():
            sums[key].extend(float(-x) for x in picked.view(batch.shape[0], -1).sum(dim=1))
    return {key: torch.tensor(values, dtype=torch.float64) for key, values in sums.items()}, scorer.stats


@torch.inference_mode()
def window_nll_sums(
    model, windows: torch.Tensor, batch_size: int, desc: str = "perplexity", engine: str = "depthprune"
) -> torch.Tensor:
    """Summed next-token NLL of each window (float64, shape (W,)); each window scored on its own.

    ``engine``: "depthprune" (the scoring engine, as lm-eval requests) or "hflm" (the model's
    full logits, as lm-eval's HFLM computes them)."""
    if engine == "depthprune":
        return engine_window_nll_sums(model, windows, batch_size)
    device = next(model.parameters()).device
    sums = []
    for start in tqdm(range(0, len(windows), batch_size), desc=desc, unit="batch", leave=False):
        batch = windows[start : start + batch_size].to(device)
        logits = model(input_ids=batch, use_cache=False).logits
        # One window at a time: the float32 copy and log-softmax of a whole batch of logits would
        # cost several times the logits themselves (2048 x 128k per window for Llama-3).
        for row in range(batch.shape[0]):
            nll = torch.nn.functional.cross_entropy(logits[row, :-1].float(), batch[row, 1:], reduction="sum")
            sums.append(float(nll))
    return torch.tensor(sums, dtype=torch.float64)


def perplexity_of_windows(
    model, windows: torch.Tensor, batch_size: int, benchmark: str = "text", engine: str = "depthprune"
) -> PerplexityResult:
    start = time.perf_counter()
    sums = window_nll_sums(model, windows, batch_size, desc=benchmark, engine=engine)
    return perplexity_from_sums(sums, windows, benchmark, time.perf_counter() - start)


def perplexity_from_sums(sums: torch.Tensor, windows: torch.Tensor, benchmark: str, seconds: float) -> PerplexityResult:
    """Perplexity, its delta-method stderr and the per-window NLLs from the windows' summed NLLs."""
    per_window = windows.shape[1] - 1  # the first token of a window is never predicted
    n_tokens = per_window * len(windows)
    mean_nll = float(sums.sum()) / n_tokens
    ppl = math.exp(mean_nll)
    stderr = None
    if len(windows) > 1:
        # Delta method: d exp(x) = exp(x) dx, with the spread of the per-window mean NLLs.
        stderr = ppl * float((sums / per_window).std(unbiased=True)) / math.sqrt(len(windows))
    return PerplexityResult(
        benchmark=benchmark,
        perplexity=ppl,
        mean_nll=mean_nll,
        stderr=stderr,
        n_tokens=n_tokens,
        n_windows=len(windows),
        seq_len=int(windows.shape[1]),
        seconds=seconds,
        window_nll=tuple(float(v) for v in sums),
    )


def evaluate_perplexity(
    model,
    tokenizer,
    benchmark: str,
    *,
    seq_len: int,
    max_tokens: int | None = None,
    batch_size: int = 8,
    data_dir: str | Path | None = None,
    engine: str = "depthprune",
) -> PerplexityResult:
    """Perplexity of ``model`` on ``benchmark`` ("wikitext2" or "c4"); see the module docstring."""
    start = time.perf_counter()
    windows = corpus_windows(tokenizer, benchmark, seq_len, max_tokens, data_dir)
    result = perplexity_of_windows(model, windows, batch_size, benchmark, engine=engine)
    seconds = time.perf_counter() - start
    _log_result(result, seconds)
    return dataclasses.replace(result, seconds=seconds)  # include loading and tokenising


def evaluate_perplexity_for_sets(
    model,
    tokenizer,
    benchmark: str,
    sets,
    *,
    seq_len: int,
    max_tokens: int | None = None,
    batch_size: int = 8,
    data_dir: str | Path | None = None,
) -> tuple[dict[tuple[int, ...], PerplexityResult], object]:
    """``evaluate_perplexity`` of the unpruned ``model`` without each of ``sets``, sharing the blocks
    the sets have in common (depthprune.engine.set_group). Each result's ``seconds`` is its share
    of the group's wall time. Returns ({set: result}, blocks-run stats)."""
    start = time.perf_counter()
    windows = corpus_windows(tokenizer, benchmark, seq_len, max_tokens, data_dir)
    sums, stats = engine_window_nll_sums_for_sets(model, windows, batch_size, sets)
    seconds = (time.perf_counter() - start) / len(sums)
    results = {key: perplexity_from_sums(values, windows, benchmark, seconds) for key, values in sums.items()}
    for result in results.values():
        _log_result(result, seconds)
    return results, stats


def corpus_windows(tokenizer, benchmark: str, seq_len: int, max_tokens: int | None, data_dir) -> torch.Tensor:
    """The benchmark's token windows [W, seq_len] (see the module docstring)."""
    if benchmark not in CORPORA:
        raise InputError(f"no perplexity corpus named {benchmark!r}; choose from {', '.join(CORPORA)}")
    texts = load_corpus_texts(benchmark, data_dir)
    return split_windows(tokenize_corpus(tokenizer, texts, max_tokens), seq_len, benchmark)


def _log_result(result: PerplexityResult, seconds: float) -> None:
    log.info(
        "%s: perplexity %.4f over %d tokens (%d windows of %d) in %.1fs",
        result.benchmark,
        result.perplexity,
        result.n_tokens,
        result.n_windows,
        result.seq_len,
        seconds,
    )
