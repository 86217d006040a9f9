"""The figure check that does not depend on how a font is subset (reporting/pdf_drawing.py, issue 65):
a re-packed font program leaves a PDF's drawing equal; a moved point, a changed label or a missing
panel changes it."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest

from depthprune.reporting import render as render_module
from depthprune.reporting.pdf_drawing import drawing, drawing_difference

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "figures" / "figure2.pdf"
AGGREGATE = REPO / "results" / "aggregate"


def render_figure2(out: Path, monkeypatch, change=None) -> Path:
    """figure2 of the committed default study, its summary first passed through ``change``."""
    if change is not None:
        original = render_module.figure2
        monkeypatch.setattr(render_module, "figure2", lambda summary, out_dir: original(change(summary), out_dir))
    render_module.render(AGGREGATE, out, only=["figure2"])
    return out / "figure2.pdf"


@pytest.fixture(scope="module")
def repacked_font(tmp_path_factory) -> Path:
    """The committed figure with every embedded font program replaced by other bytes (as a newer
    fontTools' subset is), its lengths and offsets following."""
    data = COMMITTED.read_bytes()

    def repack(match: re.Match) -> bytes:
        program = zlib.decompress(match.group(2)) + b"\0" * 4096  # a larger program, as fontTools 4.69's
        packed = zlib.compress(program)
        head = re.sub(rb"/Length1 \d+", b"/Length1 %d" % len(program), match.group(1))
        head = re.sub(rb"/Length \d+", b"/Length %d" % len(packed), head)
        return head + b"stream\n" + packed + b"\nendstream"

    changed, count = re.subn(rb"(<< /Length1 [^>]*>>\s*)stream\r?\n(.*?)\r?\nendstream", repack, data, flags=re.S)
    assert count >= 1, "the committed figure embeds no TrueType font program"
    path = tmp_path_factory.mktemp("repacked") / "figure2.pdf"
    path.write_bytes(changed)
    return path


def test_a_repacked_font_program_leaves_the_drawing_equal(repacked_font):
    assert repacked_font.read_bytes() != COMMITTED.read_bytes()
    assert drawing_difference(repacked_font, COMMITTED) is None


def test_the_committed_figure_re_renders_to_the_same_drawing(tmp_path, monkeypatch):
    assert drawing_difference(render_figure2(tmp_path, monkeypatch), COMMITTED) is None


def moved_point(summary):
    summary = summary.copy()
    pruned = summary.index[summary["algorithm"] != "dense"][0]
    summary.loc[pruned, "avg_accuracy"] += 0.02  # two points up on the accuracy axis
    return summary


def changed_label(summary):
    return summary.assign(model=summary["model"].str.replace("smollm2", "smolLM2"))  # the panel titles


def missing_panel(summary):
    return summary[summary["budget"] != summary["budget"].max()]  # one M's row of panels


@pytest.mark.parametrize("change", [moved_point, changed_label, missing_panel], ids=lambda f: f.__name__)
def test_a_changed_figure_draws_differently(tmp_path, monkeypatch, change, repacked_font):
    changed = render_figure2(tmp_path, monkeypatch, change)
    assert drawing_difference(changed, COMMITTED) is not None
    assert drawing_difference(changed, repacked_font) is not None


def test_not_a_pdf_is_an_error(tmp_path):
    path = tmp_path / "figure.pdf"
    path.write_text("not a pdf\n")
    with pytest.raises(ValueError, match="not a PDF"):
        drawing(path)
