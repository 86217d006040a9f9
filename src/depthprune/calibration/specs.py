"""The calibration configurations of docs/method.md §2 (a light module: no torch)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CalibrationSpec:
    name: str
    objective: str  # "perplexity" | "tlm"
    source: str  # "c4" | "cs170k"
    description: str


CALIBRATIONS: dict[str, CalibrationSpec] = {
    spec.name: spec
    for spec in (
        CalibrationSpec("ppl_c4", "perplexity", "c4", "perplexity on C4 en train (paper)"),
        CalibrationSpec("tlm_cs170k", "tlm", "cs170k", "task likelihood margin on Commonsense 170k (paper)"),
        CalibrationSpec("ppl_cs170k", "perplexity", "cs170k", "perplexity on Commonsense 170k text (control)"),
    )
}


def calibration_spec(name: str) -> CalibrationSpec:
    try:
        return CALIBRATIONS[name]
    except KeyError:
        raise ValueError(
            f"calibration {name!r} (option calibration): expected one of {', '.join(CALIBRATIONS)}"
        ) from None
