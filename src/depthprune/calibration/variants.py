"""Calibration variants: a calibration at a given size and seed, named by one path-safe label.

A study of calibration sizes and seeds (config keys ``calibration_sizes`` and ``seeds``) runs the same
calibration several times. Each run needs its own prior, memo and searches, so the workflow gives it
its own calibration label, used as the calibration's folder and as the ``calibration`` column of
every output:

    tlm_cs170k            the calibration at the preset's size and seed (default study)
    tlm_cs170k-n16        16 TLM items
    ppl_c4-64x128         64 documents x 128 tokens
    ppl_c4-64x128-s2      ... drawn (and searched) with seed 2

Labels begin with the calibration's name: ``parse_label(label).base`` is its ``CALIBRATIONS`` entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from depthprune.calibration.specs import calibration_spec
from depthprune.errors import InputError

_LABEL = re.compile(r"^(?P<base>[a-z0-9_]+?)(?:-n(?P<items>\d+)|-(?P<docs>\d+)x(?P<tokens>\d+))?(?:-s(?P<seed>\d+))?$")
_SIZE = re.compile(r"^\s*(?:(?P<docs>\d+)\s*x\s*(?P<tokens>\d+)|(?P<items>\d+))\s*$")


@dataclass(frozen=True)
class CalibrationVariant:
    base: str  # ppl_c4, tlm_cs170k, ppl_cs170k
    n_samples: int | None = None  # None: the preset's size
    seq_len: int | None = None  # None: the preset's (for TLM: the token cap per item)
    seed: int | None = None  # None: the preset's seed

    @property
    def label(self) -> str:
        label = self.base
        if self.n_samples is not None:
            label += f"-{self.n_samples}x{self.seq_len}" if self.seq_len is not None else f"-n{self.n_samples}"
        if self.seed is not None:
            label += f"-s{self.seed}"
        return label

    @property
    def size_label(self) -> str:
        """'16 items', '64x128 tokens' or 'default'."""
        if self.n_samples is None:
            return "default"
        return f"{self.n_samples}x{self.seq_len}" if self.seq_len is not None else f"{self.n_samples}"


def parse_size(value, where: str = "calibration_sizes") -> tuple[int, int | None]:
    """``16`` -> (16, None) (items, or documents at the preset's length); ``"64x128"`` -> (64, 128)."""
    match = _SIZE.match(str(value))
    if not match:
        raise InputError(
            f"{where}: {value!r} is not a calibration size (an integer, or 'DOCSxTOKENS' such as '64x128')"
        )
    if match.group("items"):
        n, length = int(match.group("items")), None
    else:
        n, length = int(match.group("docs")), int(match.group("tokens"))
    if n < 1 or (length is not None and length < 2):
        raise InputError(f"{where}: {value!r}: at least 1 sample and 2 tokens per sample")
    return n, length


def parse_label(label: str) -> CalibrationVariant:
    """Inverse of ``CalibrationVariant.label``."""
    match = _LABEL.match(label)
    if not match:
        raise InputError(f"calibration label {label!r}: expected NAME[-nITEMS|-DOCSxTOKENS][-sSEED]")
    seed = int(match.group("seed")) if match.group("seed") else None
    if match.group("items"):
        return CalibrationVariant(match.group("base"), int(match.group("items")), None, seed)
    if match.group("docs"):
        return CalibrationVariant(match.group("base"), int(match.group("docs")), int(match.group("tokens")), seed)
    return CalibrationVariant(match.group("base"), None, None, seed)


def study_variants(calibrations, sizes: dict | None, seeds) -> list[CalibrationVariant]:
    """Every (calibration, size, seed) a study runs.

    ``sizes`` maps an objective kind (``tlm``, ``perplexity``) to its sizes; a kind without sizes runs at
    the preset's size. ``seeds`` None runs the preset's seed and keeps the plain labels.
    """
    variants = []
    for base in calibrations:
        kind = calibration_spec(base).objective
        kind_sizes = (sizes or {}).get(kind) or [None]
        for size in kind_sizes:
            n, length = parse_size(size, f"calibration_sizes.{kind}") if size is not None else (None, None)
            for seed in seeds if seeds else [None]:
                variants.append(CalibrationVariant(base, n, length, seed))
    return variants
