"""Errors that help (issue 55 item 6): each is one line naming the option, file or line and saying
what to do, exit 2, not a traceback or a message from deep inside a library."""

from __future__ import annotations

from pathlib import Path

from depthprune.cli import main
from test_validation import _mirror, _prior_argv, no_model_load  # noqa: F401  (no_model_load: a fixture)

REPO = Path(__file__).resolve().parents[1]
PLAN = ["plan", "--throughput", "10"]


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_tiny_model_without_blocks_is_refused_when_its_spec_is_read(tmp_path, capsys):
    """`prepare-model tiny:llama-0` made a model that `prior` then failed on ("not enough values to
    unpack"): the spec is refused, and nothing is written."""
    assert main(["prepare-model", "--model", "tiny:llama-0", "--model-cache-dir", str(tmp_path / "cache")]) == 2
    assert "model 'tiny:llama-0': a tiny model needs at least 1 block" in one_error(capsys)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
