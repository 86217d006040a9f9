"""Calibration data and objectives (spec §2)."""

from depthprune.calibration.objectives import CALIBRATIONS, Objective, build_objective, calibration_spec

__all__ = ["CALIBRATIONS", "Objective", "build_objective", "calibration_spec"]
