"""The calibration configurations of docs/method.md §2 (a light module: no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from depthprune.calibration.sources import DataSource, data_source
from depthprune.errors import InputError

# The values of the calibration options (cli_common's choices, CalibrationSetup's checks, the objectives').
TLM_FORMATS = ("text", "labels")  # TLM candidate scoring (docs/method.md §2)
TLM_LOSSES = ("margin", "cross_entropy")
TLM_CONTEXTS = ("shared", "separate")  # candidates as branches of one tree-masked row, or one row each
C4_PACKINGS = ("exact", "truncate")


@dataclass(frozen=True)
class CalibrationSpec:
    name: str
    objective: str  # "perplexity" | "tlm": also the config section of its sizes (calibration.<objective>)
    source: str  # a DATA_SOURCES name (calibration/sources.py): "c4" | "cs170k"
    description: str
    display_name: str  # in figures and tables
    in_paper: bool = True  # one of the paper's two; the others are controls

    @property
    def kind(self) -> str:
        """The summary's ``calibration_kind``: ``ppl`` (perplexity pruning) or ``tlm`` (task likelihood)."""
        return "ppl" if self.objective == "perplexity" else "tlm"

    def data_source(self) -> DataSource:
        """Its registered data source; an unregistered one, or a TLM on a source without items, is
        an error naming the calibration and the source (never another source's data)."""
        try:
            source = data_source(self.source)
        except ValueError as err:
            raise InputError(f"calibration {self.name!r}: {err}") from None
        if self.objective == "tlm" and source.tlm_items is None:
            raise InputError(
                f"calibration {self.name!r}: a TLM objective needs multiple-choice items, and data source "
                f"{source.name!r} has none (DataSource.tlm_items in calibration/sources.py)"
            )
        return source


CALIBRATIONS: dict[str, CalibrationSpec] = {
    spec.name: spec
    for spec in (
        CalibrationSpec("ppl_c4", "perplexity", "c4", "perplexity on C4 en train (paper)", "PPL · C4"),
        CalibrationSpec(
            "tlm_cs170k", "tlm", "cs170k", "task likelihood margin on Commonsense 170k (paper)", "TLM · CS170k"
        ),
        CalibrationSpec(
            "ppl_cs170k", "perplexity", "cs170k", "perplexity on Commonsense 170k text (control)", "PPL · CS170k", False
        ),
    )
}


def calibration_spec(name: str) -> CalibrationSpec:
    try:
        return CALIBRATIONS[name]
    except KeyError:
        raise InputError(
            f"calibration {name!r} (option calibration): expected one of {', '.join(CALIBRATIONS)}"
        ) from None


def cross_control() -> tuple[str, str, str]:
    """(paper's perplexity calibration, cross-control, paper's TLM calibration): the control keeps the
    first's objective and takes the second's data, so each step of the decomposition (docs/method.md
    §9) changes one factor. Derived from the registry: ("ppl_c4", "ppl_cs170k", "tlm_cs170k")."""
    paper = {spec.objective: spec for spec in CALIBRATIONS.values() if spec.in_paper}
    perplexity, tlm = paper["perplexity"], paper["tlm"]
    control = next(
        spec
        for spec in CALIBRATIONS.values()
        if not spec.in_paper and spec.objective == perplexity.objective and spec.source == tlm.source
    )
    return perplexity.name, control.name, tlm.name
