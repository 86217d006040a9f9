"""The held-out calibration draw: the same source and format as a calibration sample, disjoint from
every seed's calibration sample (docs/method.md §2, "Held-out calibration loss").

A search only ever sees the loss on the items it was chosen on; scoring its set on other items of the
same distribution separates over-fitting (calibration loss down, held-out loss up) from a flat
landscape. The held-out draw is fixed: it does not depend on the calibration's size or seed, so the
sets of every seed and size are scored on the same items.

Calibration samples are ``random.Random(seed).sample(range(P), n)``, which for the sizes used here
draws the same leading indices whatever ``n`` (a draw of 8 is the first 8 of a draw of 64). The
held-out draw therefore excludes, for each seed in ``EXCLUDED_SEEDS``, that seed's first
``reserved`` indices of its source (``DataSource.reserved``, calibration/sources.py), and draws from
the rest with its own seed. ``check_disjoint`` proves
the property for the calibration a job actually uses (any seed or size): an overlap is an error
naming the seed and size, never a silently leaked item.
"""

from __future__ import annotations

import random

from depthprune.calibration import data as calib_data
from depthprune.calibration.sources import data_source
from depthprune.errors import InputError

# Seeds whose calibration draws are kept out of the held-out draw (the studies use 0..7).
EXCLUDED_SEEDS = range(16)
HELDOUT_SEED = 20260424  # the held-out draw's own random stream (the paper's arXiv month)


def reserved_indices(population: int, source: str) -> set[int]:
    """Every index a calibration sample of a seed in ``EXCLUDED_SEEDS`` at up to the source's
    ``reserved`` samples can contain."""
    size = min(data_source(source).reserved, population)
    return {i for seed in EXCLUDED_SEEDS for i in random.Random(seed).sample(range(population), size)}


def heldout_indices(population: int, n_heldout: int, source: str) -> list[int]:
    """The held-out draw: ``n_heldout`` indices outside ``reserved_indices``, in draw order."""
    if n_heldout < 1:
        raise InputError(f"heldout n_samples (option --heldout-samples) must be at least 1 (got {n_heldout})")
    free = sorted(set(range(population)) - reserved_indices(population, source))
    if n_heldout > len(free):
        raise InputError(
            f"heldout n_samples={n_heldout} (option --heldout-samples) exceeds the {len(free)} {source} rows "
            f"outside every calibration draw of seeds {EXCLUDED_SEEDS.start}..{EXCLUDED_SEEDS.stop - 1}"
        )
    return random.Random(HELDOUT_SEED).sample(free, n_heldout)


def check_disjoint(population: int, n_samples: int, seed: int, heldout: list[int], source: str) -> None:
    """Refuse a calibration sample (``seed``, ``n_samples``) that shares a row with the held-out draw."""
    calibration = calib_data.sample_indices(population, n_samples, seed, f"{source} rows")
    shared = sorted(set(calibration) & set(heldout))
    if shared:
        raise InputError(
            f"the calibration sample (seed {seed}, n_samples {n_samples}) shares {len(shared)} {source} rows with "
            f"the held-out draw (reserved: seeds {EXCLUDED_SEEDS.start}..{EXCLUDED_SEEDS.stop - 1} at up to "
            f"{data_source(source).reserved} samples); use such a seed and size or no held-out scoring"
        )
