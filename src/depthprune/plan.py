"""`depthprune plan`: what a study costs before it runs (jobs, forward FLOPs, peak memory, wall time).

Everything is counted from the merged config (config.yaml and the presets, merged as Snakemake
merges them: mappings key by key, lists replaced) and each model's ``config.json`` (the hub cache,
the converted embedded models under ``model_cache_dir``, or the bundled copies of the paper's three
models in ``depthprune/models/configs/``; no weights are read). Per rule:

* jobs: as the workflow plans them (one prior per model x calibration x seed, one search per
  algorithm and budget on top, the evaluation passes of ``evaluation.pass_per``);
* forward FLOPs: 2 per weight and token in the blocks and the LM head, plus the attention's
  4 * context * (heads * head_dim) per token and block, counted at the length the kernels run;
* evaluations per search from its hyper-parameters, as the search's class counts them
  (``search_evaluations`` asks ``SearchAlgorithm.expected_requests``: greedy's and beam's steps, the
  GA's population and children, BO's trials, ...), each running the blocks the
  engine runs for it (``ENGINE_BLOCK_FRACTION``: measured blocks per evaluation of the committed
  default study, results/aggregate/selections.csv, when present);
* peak memory per job: weights + activations of one forward batch + the state cache at its cap;
* wall time = FLOPs / throughput (``--throughput`` TFLOP/s) + loading the weights.

Token counts come from the model's own tokenizer when it is local, else from the embedded SmolLM2
tokenizer on the same data (the paper models' tokenizers are not reachable offline), and the
lm-eval token counts from ``models/configs/evaluation_tokens.json`` (measured on the offline mirror
with that tokenizer; scripts in its header).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from depthprune.budgets import protected_blocks
from depthprune.errors import InputError
from depthprune.memory import bootstrap_bytes, check_resamples_fit
from depthprune.models.config_files import BUNDLED_CONFIGS, model_config  # noqa: F401 (BUNDLED_CONFIGS: read by scripts/gpu_check.py as plan.BUNDLED_CONFIGS)
from depthprune.workflow import EVALUATION_TOKENS

log = logging.getLogger(__name__)
GIB = 1 << 30
PERPLEXITY_CORPORA = ("wikitext2", "c4")
TOKEN_BUDGET = 16384  # the CLI's --token-budget default (cli_common.add_evaluator_args)


# --------------------------------------------------------------------------- config


def merge(base: Mapping, override: Mapping) -> dict:
    """Snakemake's merge of config files: mappings merged key by key, everything else replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(configfiles: Sequence[str | Path], base: str | Path | None = "config.yaml") -> dict:
    """``base`` (the repository's config.yaml) with the presets ``configfiles`` merged over it, as the
    Snakefile merges them; each file must hold a mapping of config keys."""
    config: dict = {}
    for option, path in ([("--base", base)] if base else []) + [("--configfile", path) for path in configfiles]:
        try:
            with open(path, encoding="utf-8") as handle:
                layer = yaml.safe_load(handle)
        except FileNotFoundError:
            if option == "--base":
                raise FileNotFoundError(
                    f"--base {path}: no such file in {Path.cwd()}; plan layers the --configfile presets over "
                    "the repository's config.yaml, as the Snakefile does: run it from the repository root, "
                    "or pass --base /path/to/the/repository/config.yaml"
                ) from None
            raise FileNotFoundError(f"--configfile {path}: no such file") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise InputError(f"{option} {where}: not valid YAML ({problem})") from None
        if layer is None:  # an empty file
            continue
        if not isinstance(layer, dict):
            raise InputError(
                f"{option} {path}: holds a YAML {type(layer).__name__}, not a mapping of config keys "
                "(lines such as `budgets: [7]`)"
            )
        config = merge(config, layer)
    if not config.get("models"):
        raise InputError("config: models: no model to plan")
    return config


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelShape:
    """What the FLOPs and memory depend on, from a model's config.json."""

    name: str
    n_layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    @classmethod
    def from_config(cls, name: str, cfg: Mapping) -> ModelShape:
        if "text_config" in cfg:  # multimodal wrappers (Gemma 3) keep the decoder's values inside
            cfg = {**cfg, **cfg["text_config"]}
        heads = int(cfg["num_attention_heads"])
        return cls(
            name=name,
            n_layers=int(cfg["num_hidden_layers"]),
            hidden=int(cfg["hidden_size"]),
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
            intermediate=int(cfg["intermediate_size"]),
            vocab=int(cfg["vocab_size"]),
            tied=bool(cfg.get("tie_word_embeddings", False)),
        )

    @property
    def block_params(self) -> int:
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)  # q, o; k, v
        return attention + 3 * self.hidden * self.intermediate  # gated MLP: gate, up, down

    @property
    def head_params(self) -> int:
        return self.hidden * self.vocab

    @property
    def params(self) -> int:
        return self.n_layers * self.block_params + self.head_params * (1 if self.tied else 2)

    def block_flops(self, tokens: int, context: int) -> float:
        """Forward FLOPs of one block over ``tokens`` tokens attending over ``context`` positions."""
        return tokens * (2.0 * self.block_params + 4.0 * context * self.heads * self.head_dim)

    def head_flops(self, tokens: int) -> float:
        return 2.0 * tokens * self.head_params


# --------------------------------------------------------------------------- tokens


@cache
def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def planning_tokenizer(entry: Mapping, model_cache_dir: str | Path):
    """The model's own tokenizer where it is local, else the embedded SmolLM2's."""
    spec = str(entry["spec"])
    for candidate in (Path(model_cache_dir) / spec.split(":", 1)[-1], Path(spec)):
        if (candidate / "tokenizer.json").is_file() or (candidate / "tokenizer_config.json").is_file():
            return _tokenizer(str(candidate))
    fallback = Path(model_cache_dir) / "smollm2-135m"
    if not (fallback / "tokenizer.json").is_file():
        from depthprune.models import materialise

        materialise("embedded:smollm2-135m", model_cache_dir)
    return _tokenizer(str(fallback))


@dataclass(frozen=True)
class CalibrationTokens:
    tokens: int  # real tokens per evaluation (all rows)
    scored: int  # tokens whose log-probability enters the loss (the LM head runs on these)
    seq_len: int  # the longest row (the attention context)
    samples: int = 1  # the samples L averages over: C4 sequences (perplexity) or items (TLM)


# Token counts per (tokenizer, data, settings): the paper's three models share the planning tokenizer,
# and --write-profile plans twice, so each count is tokenised once per process.
_TOKEN_COUNTS: dict[tuple, object] = {}


def _counted(key: tuple, count):
    if key not in _TOKEN_COUNTS:
        _TOKEN_COUNTS[key] = count()
    return _TOKEN_COUNTS[key]


def calibration_tokens(config: Mapping, label: str, tokenizer, seed: int, data_dir) -> CalibrationTokens:
    key = ("calibration", tokenizer.name_or_path, label, seed, str(data_dir))
    key += (
        json.dumps(config["calibration"], sort_keys=True),
        json.dumps(config.get("calibration_sizes"), sort_keys=True),
    )
    return _counted(key, lambda: _calibration_tokens(config, label, tokenizer, seed, data_dir))


def _calibration_tokens(config: Mapping, label: str, tokenizer, seed: int, data_dir) -> CalibrationTokens:
    from depthprune.calibration.setup import CalibrationSetup

    setup = CalibrationSetup.from_config(config, label, seed, data_dir)
    objective = setup.build_objective(tokenizer, token_budget=max(setup.seq_len, 8192))
    longest = max(int(b.attention_mask.sum(dim=1).max()) for b in objective.batches)
    return CalibrationTokens(objective.n_tokens, int(objective.n_scored), longest, int(objective.n_samples))


def evaluation_tokens(config: Mapping, tokenizer, data_dir) -> dict[str, tuple[int, int]]:
    """Per benchmark: (tokens per evaluated set, attention context); ``data_dir``: where the
    planner reads the data (the study's mirror, or one standing in for the hub)."""
    settings = config["evaluation"]
    seq_len = int(settings["ppl_seq_len"])
    counts = json.loads(EVALUATION_TOKENS.read_text())["tasks"]
    out = {}
    for task in settings["tasks"]:
        if task in PERPLEXITY_CORPORA:
            tokens = corpus_tokens(task, tokenizer, data_dir)
            if task == "c4" and config.get("data_dir") is None:
                tokens = counts["c4"]["tokens"]  # the hub's whole validation shard (the mirror has 1000 documents)
            cap = settings.get("ppl_max_tokens")
            tokens = min(tokens, cap) if cap else tokens
            out[task] = ((tokens // seq_len) * seq_len, seq_len)
        else:
            entry = counts[task]
            limit = (settings.get("limit_per_task") or {}).get(task, settings.get("limit"))
            share = min(1.0, limit / entry["docs"]) if limit else 1.0
            out[task] = (int(entry["tokens"] * share), int(entry["context"]))
    return out


def corpus_tokens(task: str, tokenizer, data_dir) -> int:
    from depthprune.evaluation.perplexity import load_corpus_texts, tokenize_corpus

    def count() -> int:
        return int(tokenize_corpus(tokenizer, load_corpus_texts(task, data_dir)).numel())

    return _counted(("corpus", tokenizer.name_or_path, task, str(data_dir)), count)


# --------------------------------------------------------------------------- searches


def search_evaluations(algorithm: str, params: Mapping, n_allowed: int, m: int) -> int:
    """Sets a search requests beyond the prior it reads, as the search's own class counts them
    (``SearchAlgorithm.expected_requests``, with its defaults for the parameters not given): an upper
    bound of its distinct evaluations (repeated proposals are answered by the memo)."""
    from depthprune.search import get_algorithm

    search = get_algorithm(algorithm)
    return search.expected_requests(n_allowed, m, search.resolve_params(dict(params)))


def engine_block_fraction(selections_csv: str | Path = "results/aggregate/selections.csv") -> dict[str, float]:
    """Blocks the engine ran per evaluation / the blocks of a pruned forward (N - M), per algorithm,
    measured on the committed default study (prefix-state cache and memo); 1.0 where unmeasured."""
    path = Path(selections_csv)
    if not path.is_file():
        return {}
    from depthprune.results_schema import AGGREGATE_SELECTIONS, read_csv

    frame = read_csv(path, AGGREGATE_SELECTIONS)
    naive = frame["distinct_evaluations"] * (frame["n_layers"] - frame["budget"])
    frame = frame.assign(naive=naive)
    sums = frame.groupby("algorithm")[["blocks_run", "naive"]].sum()
    return {name: float(row.blocks_run / row.naive) for name, row in sums.iterrows() if row.naive > 0}


# --------------------------------------------------------------------------- plan


@dataclass
class RulePlan:
    rule: str
    jobs: int = 0
    flops: float = 0.0
    peak_gib: float = 0.0
    max_job_seconds: float = 0.0
    seconds: float = 0.0
    gpu: bool = True


@dataclass
class Plan:
    rules: dict[str, RulePlan] = field(default_factory=dict)
    throughput_tflops: float = 1.0

    def add(self, rule: str, flops: float, peak_bytes: float, load_seconds: float, gpu: bool = True) -> None:
        entry = self.rules.setdefault(rule, RulePlan(rule, gpu=gpu))
        seconds = flops / (self.throughput_tflops * 1e12) + load_seconds
        entry.jobs += 1
        entry.flops += flops
        entry.seconds += seconds
        entry.max_job_seconds = max(entry.max_job_seconds, seconds)
        entry.peak_gib = max(entry.peak_gib, peak_bytes / GIB)

    @property
    def jobs(self) -> int:
        return sum(r.jobs for r in self.rules.values())

    @property
    def gpu_hours(self) -> float:
        return sum(r.seconds for r in self.rules.values() if r.gpu) / 3600

    @property
    def peak_gpu_gib(self) -> float:
        return max((r.peak_gib for r in self.rules.values() if r.gpu), default=0.0)


def dtype_bytes(entry: Mapping, device: str) -> int:
    dtype = entry.get("dtype", "auto")
    if dtype == "auto":  # models/loading.resolve_dtype: bfloat16 on CUDA, float32 on an AVX2 CPU
        return 2 if device == "cuda" else 4
    return {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


def activation_bytes(shape: ModelShape, tokens: int, context: int, nbytes: int, head_chunk: int = 2048) -> float:
    """One forward batch of ``tokens`` tokens: the residual stream, the MLP's three intermediates,
    the attention scores of ``tokens / context`` rows (math kernel) and one LM-head chunk (float32)."""
    rows = max(1, tokens // max(context, 1))
    stream = 4 * tokens * shape.hidden * nbytes
    mlp = 3 * tokens * shape.intermediate * nbytes
    scores = 2 * rows * shape.heads * context * context * nbytes
    head = 2 * min(tokens, head_chunk) * shape.vocab * 4
    return stream + mlp + scores + head


def state_cache_bytes(
    config: Mapping, shape: ModelShape, tokens: int, nbytes: int, weights: float, gpu_gib: float
) -> float:
    """The prefix-state cache at its cap: every block's output state (N states of the calibration
    tokens), capped by evaluator.state_cache_gib or default_state_budget (half the memory left)."""
    from depthprune.devices import budget_from_free_memory

    wanted = shape.n_layers * tokens * shape.hidden * nbytes
    cap_gib = (config.get("evaluator") or {}).get("state_cache_gib")
    if cap_gib is not None:
        return min(wanted, float(cap_gib) * GIB)
    free = max(gpu_gib * GIB - weights, 0)
    return min(wanted, budget_from_free_memory(int(free)))


@dataclass(frozen=True)
class StudyPlanning:
    """What every model of a study is planned with: the config and the options of ``build_plan``."""

    config: Mapping
    plan: Plan
    cache_dir: str | Path
    data_dir: str | Path
    gpu_gib: float
    load_gbps: float
    device: str  # cuda or cpu: the default dtype's size
    fraction: Mapping[str, float]  # engine_block_fraction: blocks run per evaluation, per algorithm
    labels: Sequence[str]  # the calibration labels
    per_model: bool  # evaluation.pass_per: model (one evaluation pass per model and seed)
    searches: bool  # False: an evaluation-only study copies its sets (no prior, no search)
    random_sets: int  # the random-set control's sets per seed and M (docs/method.md §11)


@dataclass(frozen=True)
class ModelPlanning:
    """One model of the study, as its jobs are costed."""

    name: str
    model_cfg: Mapping  # its config.json
    shape: ModelShape
    nbytes: int  # bytes per weight and activation
    weights: float  # bytes of the weights
    load: float  # seconds to load them
    tokenizer: object
    budgets: Sequence[int]
    n_allowed: int  # blocks a search may remove
    eval_tokens: Mapping  # evaluation_tokens: benchmark -> (tokens, context)
    eval_peak: float  # peak bytes of an evaluation job


def build_plan(
    config: Mapping,
    throughput_tflops: float,
    *,
    model_cache_dir: str | Path | None = None,
    gpu_gib: float = 80.0,
    load_gbps: float = 2.0,
    selections_csv: str | Path = "results/aggregate/selections.csv",
    data_dir: str | Path | None = None,
) -> Plan:
    """The study's plan at ``throughput_tflops`` (see the module docstring)."""
    from depthprune import workflow

    for option, value in (("--throughput", throughput_tflops), ("--gpu-gib", gpu_gib), ("--load-gbps", load_gbps)):
        if not value > 0:
            raise InputError(f"{option} must be positive (got {value})")
    plan = Plan(throughput_tflops=throughput_tflops)
    data_dir = data_dir or config.get("data_dir")
    if data_dir is None:
        raise InputError(
            "plan: token counts need the data: pass --data-dir (e.g. ../shared/data; a study on the hub "
            "is planned with the mirror's documents and the hub's C4 shard size)"
        )
    study = StudyPlanning(
        config=config,
        plan=plan,
        cache_dir=model_cache_dir or config.get("model_cache_dir", "resources/models"),
        data_dir=data_dir,
        gpu_gib=gpu_gib,
        load_gbps=load_gbps,
        device="cuda" if config.get("device") == "cuda" else "cpu",
        fraction=engine_block_fraction(selections_csv),
        labels=workflow.calibration_labels(config),
        per_model=config["evaluation"].get("pass_per", "model") == "model",
        searches=not workflow.evaluation_only(config),
        random_sets=len(workflow.random_set_algorithms(config)),
    )
    check_calibration_data(config, study.labels, data_dir)
    # The render's bootstrap over the documents of the largest task, refused before any model is read.
    resamples, documents = int(config["analysis"]["bootstrap_resamples"]), largest_task_documents(config)
    check_resamples_fit(resamples, documents, option="analysis.bootstrap_resamples")
    for model in config["models"]:
        plan_model(study, model)
    plan.add("aggregate_tables", 0.0, 0.0, 0.0, gpu=False)
    plan.add("render", 0.0, bootstrap_bytes(resamples, documents), 0.0, gpu=False)
    plan.add("all", 0.0, 0.0, 0.0, gpu=False)
    return plan


def largest_task_documents(config: Mapping) -> int:
    """The most documents any zero-shot task of the study is scored on (its limit, else the task's size)."""
    settings = config["evaluation"]
    counts = json.loads(EVALUATION_TOKENS.read_text())["tasks"]
    sizes = []
    for task in settings["tasks"]:
        if task in PERPLEXITY_CORPORA or task not in counts:
            continue
        limit = (settings.get("limit_per_task") or {}).get(task, settings.get("limit"))
        sizes.append(min(counts[task]["docs"], limit) if limit else counts[task]["docs"])
    return max(sizes, default=1)


def check_calibration_data(config: Mapping, labels, data_dir) -> None:
    """Every calibration's sample drawn from the data (sizes against the rows there) before any model
    is read or converted: a size the data cannot give is refused first, not after minutes of work."""
    from depthprune.calibration.setup import CalibrationSetup

    seed = int(config["seeds"][0]) if config.get("seeds") else 0
    for label in labels:
        setup = CalibrationSetup.from_config(config, label, seed, data_dir)
        section = "calibration.tlm" if setup.is_tlm else "calibration.perplexity"
        try:
            setup.check_sizes()
            setup.load_samples()
        except InputError as err:
            raise InputError(f"config: {section} (calibration {label}): {err}") from None


def model_planning(study: StudyPlanning, model: str) -> ModelPlanning:
    """The model's shape, sizes and evaluation tokens; its budgets checked against its depth."""
    from depthprune import workflow

    config = study.config
    entry = config["model_table"][model]
    model_cfg = model_config(entry, study.cache_dir)
    shape = ModelShape.from_config(model, model_cfg)
    nbytes = dtype_bytes(entry, study.device)
    weights = shape.params * nbytes
    tokenizer = planning_tokenizer(entry, study.cache_dir)
    n, budgets = shape.n_layers, workflow.model_budgets(config, model)
    n_allowed = n - len(protected_blocks(entry.get("protected_layers") or (), entry.get("protect", "none"), n))
    workflow.check_budgets(model, entry, n, budgets)  # the depth from config.json: fail here, not after the prior
    eval_tokens = evaluation_tokens(config, tokenizer, study.data_dir)
    batch_size = int(config["evaluation"].get("batch_size") or 8)  # windows / requests per forward
    eval_peak = weights + max(
        activation_bytes(shape, min(t, batch_size * c), c, nbytes) for t, c in eval_tokens.values()
    )
    return ModelPlanning(
        name=model,
        model_cfg=model_cfg,
        shape=shape,
        nbytes=nbytes,
        weights=weights,
        load=weights / (study.load_gbps * 1e9),
        tokenizer=tokenizer,
        budgets=budgets,
        n_allowed=n_allowed,
        eval_tokens=eval_tokens,
        eval_peak=eval_peak,
    )


def plan_model(study: StudyPlanning, model: str) -> None:
    """Every job of one model: preparation, then per seed its priors, searches and evaluations."""
    plan = study.plan
    m = model_planning(study, model)
    params = m.shape.params
    plan.add("prepare_model", 0.0, params * 4, params * 4 / (study.load_gbps * 1e9), gpu=False)
    plan.add("evaluation_settings", 0.0, 0.0, 0.0, gpu=False)  # the evaluation options' stamp file
    for seed in study.config["seeds"]:
        plan_seed(study, m, seed)
    n = m.shape.n_layers
    if study.per_model:
        plan.add("evaluate_dense", 0.0, 0.0, 0.0, gpu=False)
    else:
        plan.add("evaluate_dense", _eval_flops(m.shape, m.eval_tokens, 1, n), m.eval_peak, m.load)


def plan_seed(study: StudyPlanning, m: ModelPlanning, seed) -> None:
    """One seed of one model: each calibration's prior and searches, the random sets, the evaluations."""
    config, plan, shape, n, budgets = study.config, study.plan, m.shape, m.shape.n_layers, m.budgets
    sets = sum(plan_calibration(study, m, label, seed) for label in study.labels)
    for budget in budgets if study.random_sets else ():
        plan.add("random_sets", 0.0, 0.0, 0.0, gpu=False)
        if not study.per_model:
            flops = _eval_flops(shape, m.eval_tokens, study.random_sets, n - budget)
            plan.add("evaluate_random_sets", flops, m.eval_peak, m.load)
    if study.per_model:
        dense_sets = 1 if seed == config["seeds"][0] else 0
        flops = sum(_eval_flops(shape, m.eval_tokens, sets // len(budgets) + study.random_sets, n - b) for b in budgets)
        flops += _eval_flops(shape, m.eval_tokens, dense_sets, n)
        plan.add("evaluate_pass", flops, m.eval_peak, m.load)
        for _ in range(len(study.labels) * len(budgets)):
            plan.add("evaluate_selections", 0.0, 0.0, 0.0, gpu=False)
        for _ in budgets if study.random_sets else ():
            plan.add("evaluate_random_sets", 0.0, 0.0, 0.0, gpu=False)


def plan_calibration(study: StudyPlanning, m: ModelPlanning, label: str, seed) -> int:
    """One calibration of one seed: its prior, then per budget its searches (or copied sets) and, unless
    evaluated per model, their evaluation. Returns the number of sets it selects."""
    config, plan, shape, n = study.config, study.plan, m.shape, m.shape.n_layers
    cal = calibration_tokens(config, label, m.tokenizer, int(seed), study.data_dir)
    per_block = shape.block_flops(cal.tokens, cal.seq_len)
    batch = min(cal.tokens, max(cal.seq_len, int((config.get("evaluator") or {}).get("token_budget") or TOKEN_BUDGET)))
    peak = m.weights + activation_bytes(shape, batch, cal.seq_len, m.nbytes)
    peak += state_cache_bytes(config, shape, cal.tokens, m.nbytes, m.weights, study.gpu_gib)
    # prior: the dense model, then each single ablation from the cached state below it
    prior_blocks = n + n * (n - 1) / 2
    if study.searches:
        plan.add("prior", prior_blocks * per_block + (n + 1) * shape.head_flops(cal.scored), peak, m.load)
    sets = 0
    for budget in m.budgets:
        for algorithm in config["algorithms"]:
            if not study.searches:
                plan.add("source_selection", 0.0, 0.0, 0.0, gpu=False)
                continue
            flops, job_peak = search_cost(study, m, cal, per_block, peak, algorithm, budget)
            plan.add("search", flops, job_peak, m.load)
        cell_sets = len(config["algorithms"])
        sets += cell_sets
        if not study.per_model:
            plan.add(
                "evaluate_selections", _eval_flops(shape, m.eval_tokens, cell_sets, n - budget), m.eval_peak, m.load
            )
    return sets


def search_cost(
    study: StudyPlanning, m: ModelPlanning, cal, per_block: float, peak: float, algorithm: str, budget: int
) -> tuple[float, float]:
    """One search job's forward FLOPs and peak bytes (``peak``: the calibration's evaluator peak)."""
    from depthprune.search import get_algorithm

    n, shape = m.shape.n_layers, m.shape
    given = dict(study.config["search_params"].get(algorithm) or {})
    evals = search_evaluations(algorithm, given, m.n_allowed, budget)
    search = get_algorithm(algorithm)
    params = search.resolve_params(given)  # with its defaults: cbo_ablation's coefficients, say
    blocks = evals * (n - budget) * study.fraction.get(algorithm, 1.0)
    flops = blocks * per_block + evals * shape.head_flops(cal.scored)
    job_peak = peak
    if search.uses_gate_derivatives(params):
        # gate derivatives: forward, backward, and a double backward per Hessian row
        dense = n * per_block + shape.head_flops(cal.scored)
        flops += (3 + 4 * n) * dense
        method = params["derivatives"]
        rows = max(1, min(cal.tokens, TOKEN_BUDGET) // max(cal.seq_len, 1))
        job_peak = max(peak, derivative_peak(m.model_cfg, cal.seq_len, m.nbytes, method, rows))
    if search.uses_gate_fisher(params):
        # per-sample gate gradients (engine/gate_fisher.py): one gated forward of every row, and per
        # sample one first-order backward (about twice a forward) through its row, at most seq_len tokens
        row = n * shape.block_flops(cal.seq_len, cal.seq_len) + shape.head_flops(cal.seq_len)
        flops += n * per_block + shape.head_flops(cal.scored) + 2 * cal.samples * row
        job_peak = max(peak, fisher_peak(m.model_cfg, cal.seq_len, m.nbytes))
    return flops, job_peak


@cache
def _meta_peak(counter: str, config_json: str, *args) -> float:
    from depthprune.engine import gate_memory

    return float(getattr(gate_memory, counter)(json.loads(config_json), *args))


def meta_peak(counter: str, config: Mapping, *args) -> float:
    """``engine/gate_memory.<counter>(config, *args)``, a peak counted on the meta device, once per
    argument set; 0 (not counted, logged) for an architecture the meta-device count cannot build."""
    try:
        return _meta_peak(counter, json.dumps(config, sort_keys=True), *args)
    except Exception as err:  # an architecture whose decoder layer takes other arguments
        log.warning("plan: CBO memory (%s) not counted for %s (%s)", counter, config.get("model_type"), err)
        return 0.0


def derivative_peak(config: Mapping, seq_len: int, nbytes: int, method: str = "full_graph", rows: int = 1) -> float:
    """cbo_taylor's gate derivatives' peak by ``method``: the whole graph of a micro-batch of
    ``rows`` rows, or one row block by block."""
    if method == "blockwise":
        return meta_peak("blockwise_peak_bytes", config, seq_len, nbytes)
    return meta_peak("whole_graph_bytes", config, rows, seq_len, nbytes)


def fisher_peak(config: Mapping, seq_len: int, nbytes: int) -> float:
    """cbo's per-sample gate gradients' peak: one row's first-order graph."""
    return meta_peak("fisher_peak_bytes", config, seq_len, nbytes)


def _eval_flops(shape: ModelShape, eval_tokens: Mapping[str, tuple[int, int]], sets: int, blocks: int) -> float:
    return sets * sum(blocks * shape.block_flops(t, c) + shape.head_flops(t) for t, c in eval_tokens.values())


def format_plan(plan: Plan) -> str:
    lines = [f"{'rule':<20} {'jobs':>5} {'PFLOP':>12} {'peak GiB':>9} {'max job h':>10} {'GPU h':>9}"]
    for rule in plan.rules.values():
        gpu_hours = rule.seconds / 3600 if rule.gpu else 0.0
        lines.append(
            f"{rule.rule:<20} {rule.jobs:>5} {rule.flops / 1e15:>12.4g} {rule.peak_gib:>9.1f} "
            f"{rule.max_job_seconds / 3600:>10.3f} {gpu_hours:>9.2f}"
        )
    total_flops = sum(r.flops for r in plan.rules.values())
    total_hours = sum(r.seconds for r in plan.rules.values()) / 3600
    lines.append(f"{'total':<20} {plan.jobs:>5} {total_flops / 1e15:>12.4g} {'':>9} {'':>10} {plan.gpu_hours:>9.2f}")
    lines.append(f"wall time of all jobs one after another at {plan.throughput_tflops:g} TFLOP/s: {total_hours:.3f} h")
    lines.append(f"plan: jobs={plan.jobs} gpu_hours={plan.gpu_hours:.1f} peak_gpu_gib={plan.peak_gpu_gib:.1f}")
    return "\n".join(lines)
