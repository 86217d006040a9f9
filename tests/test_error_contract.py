"""One error contract (issue 59 item 2, errors.py): bad input is an InputError, said in one line
naming the key or file, exit 2, no traceback; any other exception is a bug, said as such, with its
traceback on stderr and in --log-file, exit 1."""

from __future__ import annotations

import pytest

from depthprune import plan_cli
from depthprune.cli import main
from depthprune.errors import InputError
from depthprune.workflow import ConfigError

PLAN = ["plan", "--configfile", "config/smoke.yaml", "--throughput", "10"]


def test_a_config_error_is_one_line_without_traceback(tmp_path, capsys):
    log_file = tmp_path / "run.log"
    assert main(["--log-file", str(log_file), *PLAN, "--config", "no_such_key=1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "no_such_key" in lines[0], err
    assert "Traceback" not in log_file.read_text()


@pytest.mark.parametrize(
    "bug",
    [KeyError("threads"), ValueError("could not convert string to float: 'abc'"), TypeError("unhashable type")],
)
def test_an_internal_error_keeps_its_traceback(bug, tmp_path, monkeypatch, capsys):
    """A plain ValueError or KeyError (from a library or from our own code) is a bug, not bad input:
    exit 1, the traceback on stderr and in the log, and the message says it is a bug."""

    def run(args):
        raise bug

    monkeypatch.setattr(plan_cli, "run", run)
    log_file = tmp_path / "run.log"
    assert main(["--log-file", str(log_file), *PLAN]) == 1
    err = capsys.readouterr().err
    for text in (err, log_file.read_text()):
        assert "internal error (a bug, not bad input" in text, text
        assert "Traceback (most recent call last)" in text and f"{type(bug).__name__}: " in text, text


def test_input_errors_stay_value_errors():
    """Callers (and tests) that catch a ValueError for a bad value keep working."""
    assert issubclass(InputError, ValueError) and issubclass(ConfigError, InputError)
