"""Calibration data and objectives (docs/method.md §2)."""

from depthprune.calibration.setup import CalibrationSetup
from depthprune.calibration.specs import CALIBRATIONS, CalibrationSpec, calibration_spec

__all__ = ["CALIBRATIONS", "CalibrationSetup", "CalibrationSpec", "build_objective", "calibration_spec"]


def __getattr__(name):
    if name in ("build_objective", "Objective"):
        from depthprune.calibration import objectives

        return getattr(objectives, name)
    raise AttributeError(f"module 'depthprune.calibration' has no attribute {name!r}")
