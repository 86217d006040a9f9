"""Command-line arguments shared by every model-touching sub-command, and the setups they build.

The CLI's edge: the options become a ``ModelSetup``, a ``CalibrationSetup`` and an ``EvaluatorSetup``
here (``model_setup``, ``calibration_setup``, ``evaluator_setup``), once, and everything below takes
those; no module outside the CLI modules reads the argparse namespace (scripts/audit_code.py).
"""

from __future__ import annotations

import argparse
import logging
import re

from depthprune.budgets import PROTECT_MODES
from depthprune.calibration.setup import CalibrationSetup
from depthprune.calibration.sources import DATA_SOURCES
from depthprune.calibration.specs import (
    C4_PACKINGS,
    CALIBRATIONS,
    TLM_CONTEXTS,
    TLM_FORMATS,
    TLM_LOSSES,
    calibration_spec,
)
from depthprune.engine.setup import EvaluatorSetup
from depthprune.models import DTYPE_CHOICES
from depthprune.models.setup import ModelSetup, model_source_path
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
    False -> left out (cli_common's default). scripts/gpu_check.py builds its evaluators with it."""
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


def model_setup(args) -> ModelSetup:
    """The model options of ``add_model_args`` as one ``ModelSetup`` (models/setup.py)."""
    return ModelSetup(
        model=args.model,
        name=getattr(args, "name", None),
        dtype=getattr(args, "dtype", "auto"),
        device=getattr(args, "device", "auto"),
        cache_dir=getattr(args, "model_cache_dir", None) or MODEL_CACHE_DIR,
    )


def calibration_setup(args) -> CalibrationSetup:
    """The options of ``add_calibration_args`` as the one object that builds the sample, the objective
    and the record (calibration/setup.py); a namespace built without the later options (e.g.
    --c4-packing) gets their defaults."""
    source = calibration_spec(args.calibration).data_source()
    return CalibrationSetup(
        calibration=args.calibration,
        n_samples=args.n_samples,
        seq_len=args.seq_len,
        seed=args.seed,
        tlm_format=args.tlm_format,
        tlm_loss=getattr(args, "tlm_loss", "margin"),
        tlm_context=getattr(args, "tlm_context", "shared"),
        c4_packing=getattr(args, "c4_packing", "exact"),
        data_dir=args.data_dir,
        hub_dataset=getattr(args, source.hub_option_dest, None),
        label=getattr(args, "calibration_label", None),
    )


def evaluator_setup(args) -> EvaluatorSetup:
    """The options of ``add_evaluator_args`` as one ``EvaluatorSetup`` (engine/setup.py)."""
    return EvaluatorSetup(
        token_budget=args.token_budget,
        state_device=args.state_device,
        state_cache_gib=args.state_cache_gib,
        memo=args.memo,
        no_cache=args.no_cache,
        protected=args.protected,
        protect=getattr(args, "protect", "none"),
        memo_journal=getattr(args, "memo_journal", "wal"),
        recompute=getattr(args, "recompute", False),
    )


def model_inputs(args) -> dict:
    """The inputs that the model and calibration options name, for ``io.check_inputs_outputs``."""
    return {
        "--model": model_source_path(args.model),
        "--data-dir": getattr(args, "data_dir", None),
        "--memo": getattr(args, "memo", None),
    }


def read_selection(path, model_name: str, applying: str = "evaluating it on") -> dict:
    """A selection.json, to be applied to the model ``model_name`` (evaluate, export): it must have a
    'removed' field, and one selected on another model is warned about before anything is loaded."""
    from depthprune.results_schema import read_selection_json

    selection = read_selection_json(path, required=("removed",))
    if selection.get("model") not in (None, model_name):
        log.warning("%s was selected on model %r; %s %r", path, selection["model"], applying, model_name)
    return selection


def check_calibration_inputs(args, n_layers: int | None = None, setup: CalibrationSetup | None = None):
    """``EvaluatorSetup.check`` of the arguments' setups (``setup``: their calibration setup, if
    already built): the data read and every option checked before any model is loaded."""
    return evaluator_setup(args).check(model_setup(args), setup or calibration_setup(args), n_layers)


def build_evaluator(args, loaded=None, samples=None, setup: CalibrationSetup | None = None):
    """``EvaluatorSetup.build`` of the arguments' setups (``samples``: from ``check_calibration_inputs``)."""
    return evaluator_setup(args).build(model_setup(args), setup or calibration_setup(args), loaded, samples)
