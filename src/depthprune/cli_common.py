"""Command-line arguments shared by every model-touching sub-command, and what they build."""

from __future__ import annotations

import argparse
import logging
import re

from depthprune.budgets import PROTECT_MODES, check_protected, protected_blocks
from depthprune.calibration.setup import CalibrationSetup
from depthprune.calibration.sources import DATA_SOURCES
from depthprune.calibration.specs import C4_PACKINGS, CALIBRATIONS, TLM_CONTEXTS, TLM_FORMATS, TLM_LOSSES
from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.models import DTYPE_CHOICES
from depthprune.paths import MODEL_CACHE_DIR
from depthprune.seeding import seed_option


def device_option(text: str) -> str:
    """argparse ``type`` of --device and --state-device: auto, cpu, cuda or cuda:N (the config schema's
    `device` pattern), and cuda only where CUDA is available: refused at parse time with the option's
    name, not by a traceback from torch once the model is loaded."""
    if not re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected auto, cpu, cuda or cuda:N")
    if text.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: CUDA is not available here; use cpu (or auto)")
    return text


log = logging.getLogger(__name__)


def shared_namespace(**options) -> argparse.Namespace:
    """The shared model, calibration and evaluator options parsed as `depthprune prior` and `search`
    parse them, from keywords: ``n_samples=4`` -> ``--n-samples 4``, True -> a bare flag, None and
    False -> left out (cli_common's default). The timing scripts build their evaluators with it."""
    parser = argparse.ArgumentParser()
    add_model_args(parser)
    add_calibration_args(parser)
    add_evaluator_args(parser)
    argv: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return parser.parse_args(argv)


def add_model_args(parser: argparse.ArgumentParser, default_model: str | None = None) -> None:
    """``--model`` is required unless the caller gives a default (the timing scripts do)."""
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        required=default_model is None,
        default=default_model,
        help="hub id, local folder, gguf:<file>, embedded:smollm2-135m, embedded:gemma3-270m or tiny:<family>-<blocks>",
    )
    group.add_argument("--name", help="short model alias written into outputs (default: from --model)")
    group.add_argument(
        "--dtype",
        default="auto",
        choices=list(DTYPE_CHOICES),
        help="auto: bfloat16 on CUDA and on CPUs with native bfloat16 (AVX512-BF16/AMX), else float32",
    )
    group.add_argument("--device", type=device_option, default="auto", help="auto, cpu, cuda or cuda:N")
    group.add_argument("--model-cache-dir", default=MODEL_CACHE_DIR, help="where converted checkpoints are kept")


def add_calibration_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("calibration")
    group.add_argument("--calibration", required=True, choices=sorted(CALIBRATIONS))
    group.add_argument(
        "--calibration-label",
        help="name written into outputs as the calibration (a calibration-size study's variant, "
        "e.g. tlm_cs170k-n16; default: --calibration)",
    )
    mirror_files = ", ".join(source.mirror_file for source in DATA_SOURCES.values())
    group.add_argument("--data-dir", help=f"offline mirror with {mirror_files} (default: hub)")
    group.add_argument("--n-samples", type=int, default=64, help="calibration samples (paper: 64)")
    group.add_argument("--seq-len", type=int, default=2048, help="max tokens per sample (paper: 2048)")
    group.add_argument("--seed", type=seed_option, default=0, help="sampling seed (also seeds the searches)")
    group.add_argument(
        "--tlm-format", default="text", choices=list(TLM_FORMATS), help="TLM candidate scoring (docs/method.md §2)"
    )
    group.add_argument(
        "--c4-packing",
        default="exact",
        choices=list(C4_PACKINGS),
        help="C4 sequences: exact (every one --seq-len tokens, a short document continued by the next "
        "ones, as the field packs C4) or truncate (each document cut at --seq-len; docs/method.md §2)",
    )
    group.add_argument(
        "--tlm-loss",
        default="margin",
        choices=list(TLM_LOSSES),
        help="TLM loss: margin (the paper's [22]: summed likelihood margin, unbounded below) or "
        "cross_entropy (-log softmax of the gold candidate over the candidates' mean log-probs, >= 0; "
        "a sensitivity control; docs/method.md §2)",
    )
    group.add_argument(
        "--tlm-context",
        default="shared",
        choices=list(TLM_CONTEXTS),
        help="TLM items: the context once, candidates as branches of one tree-masked row "
        "(shared; same losses, less compute) or one sequence per candidate (separate)",
    )
    for source in DATA_SOURCES.values():  # one hub option per data source (calibration/sources.py)
        group.add_argument(source.hub_option, help=f"hub id of the {source.rows} (default: {source.hub_dataset})")


def add_evaluator_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("subset evaluator")
    group.add_argument("--token-budget", type=int, default=16384, help="max padded tokens per forward micro-batch")
    group.add_argument(
        "--state-device",
        type=device_option,
        default="auto",
        help="where cached hidden states live: auto (the model's device), cpu, cuda or cuda:N",
    )
    group.add_argument(
        "--state-cache-gib",
        type=float,
        default=None,
        help="state cache size (default: half the free GPU memory, or an eighth of RAM up to 8 GiB)",
    )
    group.add_argument("--memo", help="SQLite file shared by searches of the same model and calibration")
    group.add_argument("--no-cache", action="store_true", help="naive mode: every set from scratch, no memo")
    group.add_argument("--protected", default="", help="layers never removed, e.g. '0 29'")
    group.add_argument(
        "--protect",
        default="none",
        choices=list(PROTECT_MODES),
        help="boundary: also never remove the first and the last block (the search space of the paper's "
        "reference [22]; docs/method.md §4); none: only --protected",
    )
    group.add_argument(
        "--memo-journal",
        default="wal",
        choices=["wal", "delete"],
        help="SQLite journal of --memo: wal (one machine) or delete (network filesystem, several nodes)",
    )
    add_recompute_arg(parser)


def recompute_default() -> bool:
    """``DEPTHPRUNE_RECOMPUTE=1`` in the environment turns --recompute on (how a forced rerun of a
    Snakemake rule recomputes without reading its own cache; see workflow/rules/common.smk)."""
    from depthprune.io import env_flag

    return bool(env_flag("DEPTHPRUNE_RECOMPUTE"))  # a value other than on/off is an error, not "off"


def add_recompute_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recompute",
        action="store_true",
        default=recompute_default(),
        help="compute everything again without reading this command's cache (memo, evaluation cache, BO "
        "study); the new results replace the cached ones (default: on if DEPTHPRUNE_RECOMPUTE=1)",
    )


def model_source_path(spec: str) -> str | None:
    """The user's file or folder that ``--model`` names (a local folder, a gguf: file), for the check
    that no output overwrites an input (``io.check_inputs_outputs``); None for a hub id and for
    tiny: and embedded: specs, whose folders the tool itself makes in --model-cache-dir."""
    from pathlib import Path

    kind, sep, rest = spec.partition(":")
    if sep and kind == "gguf":
        return rest
    if sep and kind in ("tiny", "embedded"):
        return None
    return spec if Path(spec).exists() else None


def model_inputs(args) -> dict:
    """The inputs that the model and calibration options name, for ``io.check_inputs_outputs``."""
    return {
        "--model": model_source_path(args.model),
        "--data-dir": getattr(args, "data_dir", None),
        "--memo": getattr(args, "memo", None),
    }


def model_name_from_args(args) -> str:
    """The model's name in outputs: --name, else the spec's short alias (what ``load_model`` names it)."""
    from depthprune.models.loading import default_name

    return args.name or default_name(args.model)


def read_selection(path, model_name: str, applying: str = "evaluating it on") -> dict:
    """A selection.json, to be applied to the model ``model_name`` (evaluate, export): it must have a
    'removed' field, and one selected on another model is warned about before anything is loaded."""
    from depthprune.results_schema import read_selection_json

    selection = read_selection_json(path, required=("removed",))
    if selection.get("model") not in (None, model_name):
        log.warning("%s was selected on model %r; %s %r", path, selection["model"], applying, model_name)
    return selection


def load_model_from_args(args):
    from depthprune.models.loading import load_model

    return load_model(args.model, dtype=args.dtype, device=args.device, cache_dir=args.model_cache_dir, name=args.name)


def calibration_setup(args) -> CalibrationSetup:
    """The calibration options of ``args`` as the one object that builds the sample, the objective and
    the record (calibration/setup.py)."""
    return CalibrationSetup.from_args(args)


def model_layers_without_loading(args) -> int | None:
    """Number of decoder blocks from the model's config file (no weights are read); None if unknown."""
    from pathlib import Path

    from depthprune.models.loading import resolve_local

    path = resolve_local(args.model, args.model_cache_dir)
    if not Path(path, "config.json").is_file():
        return None
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text_config.num_hidden_layers)


def protected_from_args(args, n_layers: int) -> tuple[int, ...]:
    """--protected plus what --protect adds (boundary: blocks 0 and n_layers − 1), for a model of
    ``n_layers`` blocks: the one protected set every search, the prior and the evaluator use."""
    protected = parse_layers(args.protected)
    check_protected(protected, n_layers)
    return protected_blocks(protected, getattr(args, "protect", "none"), n_layers)


def check_calibration_inputs(args, n_layers: int | None = None, setup: CalibrationSetup | None = None):
    """Everything about the calibration and evaluator options that can be wrong, checked before any
    model is loaded (an 8B model takes minutes): sizes, protected layers, and the data itself (read,
    sampled and parsed; errors name file, 1-based line and field). Returns the samples for
    ``build_evaluator`` (``setup``: the arguments' calibration setup, if already built)."""
    setup = setup or calibration_setup(args)
    setup.check_sizes()
    if args.token_budget < 1:
        raise InputError(f"--token-budget must be positive (got {args.token_budget})")
    if not args.no_cache:
        from depthprune.engine.memo import check_memo_file

        check_memo_file(args.memo)  # a corrupt memo: one line naming it, not a traceback after the load
    known_layers = n_layers if n_layers is not None else model_layers_without_loading(args)
    if known_layers is None:
        check_protected(parse_layers(args.protected), None)
    else:
        protected_from_args(args, known_layers)
    return setup.load_samples()


def token_budget(args) -> int:
    """Padded tokens per forward micro-batch: --token-budget, at least one sequence."""
    return max(args.token_budget, args.seq_len)


def build_evaluator(args, loaded=None, samples=None, setup: CalibrationSetup | None = None):
    """Model + calibration objective + evaluator from parsed arguments (``samples``: from
    ``check_calibration_inputs``, which reads and checks the data before the model is loaded)."""
    from depthprune.engine.evaluator import SubsetEvaluator
    from depthprune.models.families import family_for
    from depthprune.seeding import seed_everything

    setup = setup or calibration_setup(args)
    seed_everything(setup.seed)
    if samples is None:
        samples = check_calibration_inputs(args, setup=setup)
    loaded = loaded or load_model_from_args(args)
    objective = setup.build_objective(loaded.tokenizer, token_budget(args), samples)
    return SubsetEvaluator(
        loaded,
        objective,
        calibration=setup.name,
        settings=setup.record(),
        protected=protected_from_args(args, len(family_for(loaded.model).blocks(loaded.model))),
        use_cache=not args.no_cache,
        memo_path=args.memo,
        memo_read=not getattr(args, "recompute", False),
        memo_journal=getattr(args, "memo_journal", "wal"),
        state_device=args.state_device,
        state_cache_gib=args.state_cache_gib,
    )
