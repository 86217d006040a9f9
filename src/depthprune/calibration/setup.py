"""One calibration setup: everything that decides a calibration sample and its loss, in one frozen
object built once (``cli_common.calibration_setup`` at the CLI's edge, ``from_config`` in the workflow
and the planner).

It knows its samples (``load_samples``), its held-out draw (``load_heldout``), the objective it
builds (``build_objective``), the record it writes into prior.json and the memo key (``record``)
and the command-line options that rebuild it (``cli_options``). A light module: no torch (the
objective's module is imported only when an objective or a sample is asked for).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from depthprune.calibration.sources import DataSource
from depthprune.calibration.specs import (
    C4_PACKINGS,
    TLM_CONTEXTS,
    TLM_FORMATS,
    TLM_LOSSES,
    CalibrationSpec,
    calibration_spec,
)
from depthprune.errors import InputError

# Fields of ``record()`` written only when not at this default, so that the records (and memo keys)
# of studies made before the field existed stay as they were. Absent means the default.
RECORD_DEFAULTS = {"tlm_loss": "margin"}


@dataclass(frozen=True)
class CalibrationSetup:
    calibration: str  # the registry name (calibration/specs.py)
    n_samples: int = 64
    seq_len: int = 2048
    seed: int = 0
    tlm_format: str = "text"  # TLM candidate scoring (docs/method.md §2); unused by perplexity
    tlm_loss: str = "margin"  # TLM only: margin or cross_entropy
    tlm_context: str = "shared"  # TLM only: candidates as branches of one row, or one row each
    c4_packing: str = "exact"  # C4 only: exact or truncate
    data_dir: str | None = None  # the offline mirror; None: the hub
    hub_dataset: str | None = None  # the hub id of its data source (--<source>-dataset); None: the source's own
    label: str | None = None  # the name in outputs (a calibration-size variant); None: ``calibration``

    def __post_init__(self) -> None:
        calibration_spec(self.calibration).data_source()  # an unknown name or source: one line naming it
        for what, option, value, allowed in (
            ("tlm_format", "--tlm-format / calibration.tlm.format", self.tlm_format, TLM_FORMATS),
            ("tlm loss", "--tlm-loss / calibration.tlm.loss", self.tlm_loss, TLM_LOSSES),
            ("tlm context", "--tlm-context", self.tlm_context, TLM_CONTEXTS),
            ("c4 packing", "--c4-packing / calibration.perplexity.packing", self.c4_packing, C4_PACKINGS),
        ):
            if value not in allowed:
                raise InputError(f"{what} {value!r} (option {option}): expected one of {', '.join(allowed)}")

    # ------------------------------------------------------------------ built from

    @classmethod
    def from_config(cls, config: Mapping, label: str, seed: int, data_dir: str | None = None) -> CalibrationSetup:
        """The setup of the calibration label ``label`` (a registry name or a calibration-size
        variant, ``tlm_cs170k-n16``) and ``seed`` under a study's config (its ``calibration.<objective>``
        section, after the schema's defaults; a variant's own size and seed win)."""
        from depthprune.calibration.variants import parse_label

        variant = parse_label(label)
        spec = calibration_spec(variant.base)
        sizes = config["calibration"][spec.objective]
        return cls(
            calibration=variant.base,
            n_samples=int(variant.n_samples or sizes["n_samples"]),
            seq_len=int(variant.seq_len or sizes["seq_len"]),
            seed=int(seed if variant.seed is None else variant.seed),
            tlm_format=sizes.get("format", "text"),
            tlm_loss=sizes.get("loss", "margin"),
            c4_packing=sizes.get("packing", "exact"),
            data_dir=data_dir,
            label=label if label != variant.base else None,
        )

    # ------------------------------------------------------------------ what it is

    @property
    def spec(self) -> CalibrationSpec:
        return calibration_spec(self.calibration)

    @property
    def source(self) -> DataSource:
        """Its data source (calibration/sources.py)."""
        return self.spec.data_source()

    @property
    def dataset(self) -> str:
        """The hub dataset id its source is read from without data_dir."""
        return self.hub_dataset or self.source.hub_dataset

    @property
    def name(self) -> str:
        """The calibration's name in outputs: the label, else the registry name."""
        return self.label or self.calibration

    @property
    def is_tlm(self) -> bool:
        return self.spec.objective == "tlm"

    @property
    def loss(self) -> str:
        """The TLM loss of a TLM calibration; margin for the others (they have no candidates)."""
        return self.tlm_loss if self.is_tlm else "margin"

    @property
    def packing(self) -> str:
        """The C4 packing of a perplexity calibration; exact for the others (a TLM has no packing)."""
        return self.c4_packing if self.spec.objective == "perplexity" else "exact"

    def record(self) -> dict[str, Any]:
        """What decides the calibration loss beyond the calibration's name and data: recorded in
        prior.json's ``evaluator`` and hashed into the memo key. ``tlm_format`` is None for a
        calibration without candidates; ``tlm_loss`` is written only when not margin (RECORD_DEFAULTS:
        margin studies keep their keys)."""
        record = {
            "n_samples": self.n_samples,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "tlm_format": self.tlm_format if self.is_tlm else None,
            "data_source": "mirror" if self.data_dir else "hub",
            "tlm_loss": self.loss,
        }
        return {k: v for k, v in record.items() if RECORD_DEFAULTS.get(k, object()) != v}

    def cli_options(self) -> dict[str, Any]:
        """The `depthprune prior/search` calibration options that rebuild this setup, as config-style
        keys (``workflow.cli_args`` writes them; CLI_FLAGS names the flags that differ). Only this
        calibration's own options, and the TLM loss and C4 packing only when not their defaults, so
        a change of another objective's settings does not change the command (nor rerun the job).
        ``data_dir`` is not among them (the workflow passes it apart: moving the mirror reruns nothing)."""
        return {
            "calibration": self.calibration,
            "n_samples": self.n_samples,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "calibration_label": self.label,
            "format": self.tlm_format if self.is_tlm else None,
            "loss": self.loss if self.loss != "margin" else None,
            "packing": self.packing if self.packing != "exact" else None,
        }

    CLI_FLAGS = {"format": "--tlm-format", "loss": "--tlm-loss", "packing": "--c4-packing"}

    # ------------------------------------------------------------------ what it builds

    def check_sizes(self) -> None:
        """Sizes that cannot make a sample, refused before any data is read."""
        if self.n_samples < 1:
            raise InputError(
                f"n_samples (option --n-samples / calibration n_samples) must be at least 1 (got {self.n_samples})"
            )
        if self.seq_len < 2:
            raise InputError(
                f"seq_len (option --seq-len / calibration seq_len) must be at least 2 (got {self.seq_len})"
            )

    def load_samples(self):
        """The calibration sample (objectives.CalibrationSamples): read, sampled and checked, no
        tokenizer needed; errors name file, 1-based line and field."""
        from depthprune.calibration.objectives import load_calibration_samples

        return load_calibration_samples(self)

    def load_heldout(self, n_heldout: int):
        """``n_heldout`` rows of the fixed held-out draw of this calibration's source, after checking
        that this setup's sample shares none of them (calibration/heldout.py)."""
        from depthprune.calibration.objectives import load_calibration_samples

        return load_calibration_samples(self, heldout=n_heldout)

    def build_objective(self, tokenizer, token_budget: int = 8192, samples=None):
        """The calibration objective on ``samples`` (from ``load_samples`` or ``load_heldout``; read
        here when None), packed into micro-batches of at most ``token_budget`` padded tokens."""
        from depthprune.calibration.objectives import build_objective

        return build_objective(self, tokenizer, token_budget, samples)
