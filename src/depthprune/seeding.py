"""One place that seeds every random number generator the pipeline touches."""

from __future__ import annotations

import argparse
import random

import numpy as np

# The largest seed: seeds are stored as signed 64-bit integers (the aggregate's Parquet columns, the
# SQLite memo and BO study) and torch.manual_seed takes no larger one. The config schema's
# $defs.seed (workflow/schemas/config.schema.yaml) says the same; tests/test_errors_that_help.py
# holds them equal.
SEED_MAX = 2**63 - 1


def seed_option(text: str) -> int:
    """argparse ``type`` of a seed option: an integer in 0..SEED_MAX, refused at parse time with the
    option's name (a larger one failed deep in torch: "Overflow when unpacking long long")."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= seed <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{seed} is outside 0..{SEED_MAX} (2^63 - 1)")
    return seed


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass
