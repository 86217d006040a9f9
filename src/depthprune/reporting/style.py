"""One look for every figure: order, names, colours, markers, fonts, and deterministic files.

Colours are the Okabe–Ito palette (safe for the common colour-vision deficiencies). Calibrations are
told apart by colour, algorithms by marker, always in the order of the spec (§2 and §4), so a reader
can compare figures at a glance. Files are byte-identical from run to run: no creation date in the
PDF, fixed PNG metadata, and matplotlib's defaults (not the user's matplotlibrc) as the base.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from depthprune.calibration.specs import CALIBRATIONS as CALIBRATION_SPECS
from depthprune.evaluation_only import RANDOM_SET_PREFIX, is_random_set
from depthprune.io import atomic_path
from depthprune.search import ALGORITHMS as SEARCHES
from depthprune.search import STUDY_ALGORITHMS

# matplotlib's PDF backend subsets fonts with fontTools, which logs every table at INFO level.
logging.getLogger("fontTools").setLevel(logging.WARNING)

# Order, names and markers come from the registries (search.ALGORITHMS, calibration.CALIBRATIONS):
# the paper's seven in its order, then the random-initialisation controls of GA and BO (paper's
# limitation 2); `exhaustive` (not a study search) sorts after them.
PAPER_ALGORITHMS = tuple(name for name, cls in SEARCHES.items() if cls.in_paper)
ALGORITHMS = PAPER_ALGORITHMS + tuple(name for name in STUDY_ALGORITHMS if name not in PAPER_ALGORITHMS)
# Searches that are not among the paper's seven: kept out of the statistics behind its claims.
CONTROL_ALGORITHMS = tuple(name for name, cls in SEARCHES.items() if not cls.in_paper)
ALGORITHM_NAMES = {name: cls.display_name for name, cls in SEARCHES.items()} | {"dense": "Dense"}
EXTRA_MARKERS = ("h", "*", "p", "8", "d", "H")

CALIBRATIONS = tuple(CALIBRATION_SPECS)
PAPER_CALIBRATIONS = tuple(name for name, spec in CALIBRATION_SPECS.items() if spec.in_paper)
CALIBRATION_NAMES = {name: spec.display_name for name, spec in CALIBRATION_SPECS.items()} | {"none": "(none)"}

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}
CALIBRATION_COLOURS = {
    "ppl_c4": OKABE_ITO["blue"],
    "tlm_cs170k": OKABE_ITO["vermillion"],
    "ppl_cs170k": OKABE_ITO["bluish_green"],
}
EXTRA_COLOURS = (OKABE_ITO["reddish_purple"], OKABE_ITO["orange"], OKABE_ITO["sky_blue"], OKABE_ITO["yellow"])
EMPTY_CELL = "#EEEEEE"
NOTE_COLOUR = "#777777"

# Two-column papers: one column is ~3.4 in, the text width ~7.0 in.
COLUMN_WIDTH_IN = 3.4
TEXT_WIDTH_IN = 7.0
PNG_DPI = 200

RC_PARAMS = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: same glyphs (and bytes) everywhere
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "legend.fontsize": 6,
    "legend.title_fontsize": 6,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "lines.markersize": 4,
    "pdf.fonttype": 42,  # TrueType: editable text in the PDF
    "svg.hashsalt": "depthprune",
    "path.simplify": False,
}
# Metadata that would otherwise carry a date or a version string into the files.
PDF_METADATA = {"CreationDate": None, "ModDate": None, "Creator": "depthprune", "Producer": None}
PNG_METADATA = {"Software": None}


def algorithm_sort_key(name: str) -> tuple[int, str]:
    return (ALGORITHMS.index(name), "") if name in ALGORITHMS else (len(ALGORITHMS), name)


def calibration_sort_key(name: str) -> tuple[int, str]:
    return (CALIBRATIONS.index(name), "") if name in CALIBRATIONS else (len(CALIBRATIONS), name)


def algorithm_name(name: str) -> str:
    if is_random_set(name):  # the random-set control's draws: "Random set 03"
        return f"Random set {name.removeprefix(RANDOM_SET_PREFIX)}"
    return ALGORITHM_NAMES.get(name, name)


def is_control(name: str) -> bool:
    """Not one of the paper's seven searches: a registered control (in_paper False) or a draw of
    the random-set control (docs/method.md §11); kept out of the statistics behind its claims."""
    return name in CONTROL_ALGORITHMS or is_random_set(name)


def calibration_name(name: str) -> str:
    return CALIBRATION_NAMES.get(name, name)


def ordered_algorithms(names) -> list[str]:
    """The paper's seven (always, in its order), then the controls and any others present."""
    return sorted(set(names) | set(PAPER_ALGORITHMS), key=algorithm_sort_key)


def ordered_calibrations(names) -> list[str]:
    return sorted(set(names), key=calibration_sort_key)


def calibration_colour(name: str, known: list[str] | None = None) -> str:
    """Fixed colours for the spec's calibrations; further ones cycle through the rest of the palette."""
    if name in CALIBRATION_COLOURS:
        return CALIBRATION_COLOURS[name]
    extras = [c for c in ordered_calibrations(known or [name]) if c not in CALIBRATION_COLOURS]
    index = extras.index(name) if name in extras else 0
    return EXTRA_COLOURS[index % len(EXTRA_COLOURS)]


RANDOM_SET_MARKER = "."  # every draw of the random-set control: one marker, one legend entry
DENSE_MARKER = "*"  # the dense model in Figure 2 (no search may take it: tests/test_search_controls.py)


def algorithm_marker(name: str) -> str:
    """The search's own marker (read from the registry when drawn, so a search registered after this
    module's import is drawn with its marker; filled, search/base.py's check_marker), else an extra one."""
    if is_random_set(name):
        return RANDOM_SET_MARKER
    if name in SEARCHES:
        return SEARCHES[name].marker
    return EXTRA_MARKERS[sum(map(ord, name)) % len(EXTRA_MARKERS)]


def panel_title(model: str, budget: int, calibration: str | None = None) -> str:
    parts = [calibration_name(calibration)] if calibration else []
    return " · ".join(parts + [f"{model} (M={budget})"])


def slug(text: str) -> str:
    """A file-name-safe form of a model name (for per-model tables)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """matplotlib defaults plus the project's sizes, whatever the user's matplotlibrc says."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(RC_PARAMS)
        yield


def new_figure(width_in: float, height_in: float) -> Figure:
    # A bare Figure (no pyplot): no global figure registry, no GUI backend, nothing left open.
    return Figure(figsize=(width_in, height_in), layout="constrained")


def note_panel(ax, text: str) -> None:
    """An empty panel that says why it is empty (missing run, too few values)."""
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_color(EMPTY_CELL)
    ax.text(0.5, 0.5, text, ha="center", va="center", color=NOTE_COLOUR, transform=ax.transAxes, wrap=True)


def save_figure(fig: Figure, out_dir: str | Path, stem: str) -> list[Path]:
    """Write ``<stem>.pdf`` and ``<stem>.png`` atomically, with deterministic metadata."""
    paths = []
    for fmt, metadata in (("pdf", PDF_METADATA), ("png", PNG_METADATA)):
        path = Path(out_dir) / f"{stem}.{fmt}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=PNG_DPI, metadata=metadata)
        paths.append(path)
    return paths
