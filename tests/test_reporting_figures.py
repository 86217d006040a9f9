"""Figures 1-3 drawn with seaborn: what each panel shows, and byte-identical files run after run.

The aggregate is synthetic and small: model ``alpha`` (16 layers, so Figure 1 labels every fifth
layer), M = 2, calibrations ppl_c4 and tlm_cs170k, three algorithms, two seeds (Figure 1 shades a
layer by the fraction of seeds that removed it), a dense run, and bootstrap intervals.
"""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection, QuadMesh

from depthprune.reporting.figures import figure1 as figure1_module
from depthprune.reporting.figures import figure2 as figure2_module
from depthprune.reporting.figures import figure3 as figure3_module
from depthprune.reporting.style import CALIBRATION_COLOURS

ALGORITHMS = ("one_shot", "greedy", "beam")
CALIBRATIONS = ("ppl_c4", "tlm_cs170k")
REMOVED = {  # (calibration, algorithm) -> removed set per seed
    ("ppl_c4", "one_shot"): ("3 4", "3 4"),
    ("ppl_c4", "greedy"): ("3 4", "3 9"),
    ("ppl_c4", "beam"): ("10 11", "10 11"),
    ("tlm_cs170k", "one_shot"): ("0 1", "0 1"),
    ("tlm_cs170k", "greedy"): ("0 15", "0 15"),
    ("tlm_cs170k", "beam"): ("1 2", "1 2"),
}
PERPLEXITY = {"ppl_c4": (10.0, 12.0, 14.0), "tlm_cs170k": (100.0, 150.0, 120.0)}
ACCURACY = {"ppl_c4": (0.50, 0.48, 0.46), "tlm_cs170k": (0.40, 0.44, 0.42)}


def synthetic_aggregate() -> dict[str, pd.DataFrame]:
    selections = pd.DataFrame(
        [
            {"model": "alpha", "calibration": c, "budget": 2, "algorithm": a, "removed": sets[seed], "n_layers": 16}
            for (c, a), sets in REMOVED.items()
            for seed in (0, 1)
        ]
    )
    rows = []
    for c in CALIBRATIONS:
        for a, ppl, acc in zip(ALGORITHMS, PERPLEXITY[c], ACCURACY[c]):
            rows.append({"model": "alpha", "calibration": c, "budget": 2, "algorithm": a, "avg_perplexity": ppl})
            rows[-1].update(avg_accuracy=acc, avg_acc_ci_low=acc - 0.02, avg_acc_ci_high=acc + 0.03)
            rows[-1].update(avg_ppl_ci_low=0.9 * ppl, avg_ppl_ci_high=1.2 * ppl)
    rows.append({"model": "alpha", "calibration": "none", "budget": 0, "algorithm": "dense", "avg_perplexity": 5.0})
    rows[-1].update(avg_accuracy=0.6)
    summary = pd.DataFrame(rows)
    spearman = pd.DataFrame(
        [
            {"model": "alpha", "budget": 2, "calibration": "ppl_c4", "rho": -1.0, "p_value": 0.0, "n": 3},
            {"model": "alpha", "budget": 2, "calibration": "tlm_cs170k", "rho": 0.5, "p_value": 0.67, "n": 3},
        ]
    ).assign(rho_ci_low=[-1.0, -0.5], rho_ci_high=[-0.5, 1.0], note="")
    return {"selections": selections, "summary": summary, "spearman": spearman}


def render_all(frames: dict[str, pd.DataFrame], out) -> list:
    return [
        *figure1_module.figure1(frames["selections"], out),
        *figure2_module.figure2(frames["summary"], out),
        *figure3_module.figure3(frames["summary"], frames["spearman"], out),
    ]


RENDER_IN_FRESH_PROCESS = """
import sys
import pandas as pd
from depthprune.reporting.figures.figure1 import figure1
from depthprune.reporting.figures.figure2 import figure2
from depthprune.reporting.figures.figure3 import figure3
folder, out = sys.argv[1], sys.argv[2]
frames = {name: pd.read_pickle(f"{folder}/{name}.pkl") for name in ("selections", "summary", "spearman")}
figure1(frames["selections"], out)
figure2(frames["summary"], out)
figure3(frames["summary"], frames["spearman"], out)
"""


def test_each_figure_is_byte_identical_in_the_same_and_in_a_fresh_process(tmp_path):
    frames = synthetic_aggregate()
    before = dict(matplotlib.rcParams)
    first = render_all(frames, tmp_path / "first")
    render_all(frames, tmp_path / "second")
    assert dict(matplotlib.rcParams) == before  # no seaborn theme or rc change leaks out of a figure
    assert sorted(p.name for p in first) == [f"figure{n}.{ext}" for n in (1, 2, 3) for ext in ("pdf", "png")]
    (tmp_path / "data").mkdir()
    for key, frame in frames.items():
        frame.to_pickle(tmp_path / "data" / f"{key}.pkl")
    done = subprocess.run(
        [sys.executable, "-c", RENDER_IN_FRESH_PROCESS, str(tmp_path / "data"), str(tmp_path / "fresh")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for path in first:
        assert path.read_bytes() == (tmp_path / "second" / path.name).read_bytes(), path.name
        assert path.read_bytes() == (tmp_path / "fresh" / path.name).read_bytes(), path.name


@pytest.fixture
def drawn(monkeypatch):
    """Render with save_figure replaced: the figures' matplotlib objects, by module, instead of files."""
    figures = {}

    def keep(fig, out_dir, stem):
        figures[stem] = fig
        return []

    for module in (figure1_module, figure2_module, figure3_module):
        monkeypatch.setattr(module, "save_figure", keep)
    render_all(synthetic_aggregate(), "unused")
    return figures


def colour_of(rgba) -> str:
    return matplotlib.colors.to_hex(rgba).upper()


def test_figure1_heatmap_cells_are_the_fraction_of_seeds(drawn):
    axes = [ax for ax in drawn["figure1"].axes if ax.collections]
    assert [ax.get_title(loc="left") for ax in axes] == ["PPL · C4 · alpha (M=2)", "TLM · CS170k · alpha (M=2)"]
    # Rows: the paper's seven algorithms, always; those without a result are masked and noted.
    cells = np.ma.asarray(axes[0].findobj(QuadMesh)[0].get_array()).reshape(7, 16)
    assert cells[0].tolist() == [0, 0, 0, 1, 1] + [0] * 11  # one-shot: {3, 4} in both seeds
    assert cells[1, [3, 4, 9]].tolist() == [1.0, 0.5, 0.5]  # greedy: {3, 4} then {3, 9}
    assert cells[2, [10, 11]].tolist() == [1, 1] and cells[:3].sum() == 2 + 2 + 2
    assert cells.mask[3:].all() and not cells.mask[:3].any()
    assert [t.get_text() for t in axes[0].texts] == ["not run"] * 4
    assert [t.get_text() for t in axes[0].get_yticklabels()][:4] == ["One-shot", "Greedy", "Beam", "GA"]
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["0", "5", "10", "15"]  # every fifth of 16
    mesh = axes[1].findobj(QuadMesh)[0]
    assert colour_of(mesh.cmap(1.0)) == CALIBRATION_COLOURS["tlm_cs170k"]


def test_figure2_points_bars_and_dense_star(drawn):
    (ax,) = [ax for ax in drawn["figure2"].axes if ax.collections]
    runs, dense = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert np.allclose(
        runs.get_offsets(), [[p, 100 * a] for c in CALIBRATIONS for p, a in zip(PERPLEXITY[c], ACCURACY[c])]
    )
    colours = [colour_of(rgba) for rgba in runs.get_facecolors()]
    assert colours == [CALIBRATION_COLOURS["ppl_c4"]] * 3 + [CALIBRATION_COLOURS["tlm_cs170k"]] * 3
    assert np.allclose(dense.get_offsets(), [[5.0, 60.0]])
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 2 * 6  # one horizontal and one vertical interval per run
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "average accuracy (%)"
    labels = [t.get_text() for t in drawn["figure2"].legends[0].get_texts()]
    assert labels == ["PPL · C4", "TLM · CS170k", "One-shot", "Greedy", "Beam", "Dense"]


def test_figure3_ranks_and_rho_titles(drawn):
    axes = [ax for ax in drawn["figure3"].axes if ax.collections]
    ppl, tlm = (next(c for c in ax.collections if isinstance(c, PathCollection)) for ax in axes)
    assert ppl.get_offsets().tolist() == [[1, 3], [2, 2], [3, 1]]  # perplexity rank, accuracy rank
    assert tlm.get_offsets().tolist() == [[1, 1], [3, 3], [2, 2]]
    assert "ρ = −1.00 (p < 0.01, n = 3)\n95% CI [−1.00, −0.50]" in axes[0].get_title(loc="left")
    assert "ρ = +0.50 (p = 0.67, n = 3)" in axes[1].get_title(loc="left")
    assert [t.get_text() for t in drawn["figure3"].legends[0].get_texts()] == ["One-shot", "Greedy", "Beam"]


def test_figure3_wraps_many_cells_and_no_title_overlaps_or_leaves_the_figure(monkeypatch):
    """Five (model, M) cells, as the paper's preset has six: rows of at most three panels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    frames = synthetic_aggregate()
    cells = [("alpha", 2), ("alpha", 3), ("beta", 2), ("beta", 3), ("gamma", 2)]
    summary = pd.concat([frames["summary"].query("algorithm != 'dense'").assign(model=m, budget=b) for m, b in cells])
    spearman = pd.concat([frames["spearman"].assign(model=m, budget=b) for m, b in cells])
    kept = {}
    monkeypatch.setattr(figure3_module, "save_figure", lambda fig, out_dir, stem: kept.setdefault("fig", fig) and [])
    figure3_module.figure3(summary, spearman, "unused")
    fig = kept["fig"]
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 2 * len(cells) and len(fig.axes) == 2 * 2 * 3  # two rows of three per calibration
    titles = [t for t in fig.findobj(Text) if "(M=" in t.get_text()]
    assert len(titles) == 2 * len(cells)
    boxes = [t.get_window_extent(renderer) for t in titles]
    figure_box = fig.bbox
    for i, box in enumerate(boxes):
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1 + 0.5, titles[i].get_text()
        for other in boxes[i + 1 :]:
            assert not box.overlaps(other), titles[i].get_text()
