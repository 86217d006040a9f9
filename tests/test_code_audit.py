"""Code shape (issue 59 items 3 and 4), from the AST (scripts/audit_code.py): no function in src/ over
100 lines, and no module below the CLI's edge reads an argparse namespace (the CLI builds setups)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 100


@pytest.fixture(scope="module")
def audit():
    spec = importlib.util.spec_from_file_location("audit_code", REPO / "scripts" / "audit_code.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_no_function_in_src_is_over_100_lines(audit):
    long = {f"{f.module}:{f.name}": f.lines for f in audit.functions() if f.lines > MAX_FUNCTION_LINES}
    assert long == {}, long


def test_no_module_below_the_cli_edge_reads_an_argparse_namespace(audit):
    assert audit.namespace_readers() == {}


def test_the_audit_finds_a_long_function_and_each_kind_of_namespace_reader(audit, tmp_path):
    """The checks above can fail: a planted long function and planted readers are found, the edge's
    and a forward hook's ``args`` are not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text(f"def long_one():\n{body}\n")
    (package / "reads.py").write_text("def run(args):\n    return args.model\n")
    (package / "typed.py").write_text("import argparse\n\ndef run(options: argparse.Namespace):\n    return 0\n")
    (package / "builds.py").write_text("import argparse\n\nNS = argparse.Namespace(model='m')\n")
    (package / "getattr_reader.py").write_text("def run(ns):\n    return getattr(ns, 'model')\n")
    (package / "hook.py").write_text("def hook(module, args, output):\n    return args[0]\n")
    (package / "cli.py").write_text("def run(args):\n    return args.model\n")
    (package / "sub" / "cli.py").write_text("def run(args):\n    return args.model\n")
    (package / "thing_cli.py").write_text("def run(args):\n    return args.model\n")
    longest = audit.functions(package)[0]
    assert (longest.module, longest.name, longest.lines) == ("long.py", "long_one", MAX_FUNCTION_LINES + 1)
    assert set(audit.namespace_readers(package)) == {"reads.py", "typed.py", "builds.py", "getattr_reader.py"}


def test_the_audit_script_prints_both_figures(audit, capsys):
    assert audit.main(["--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "longest functions in depthprune/" in out
    assert "modules below the CLI's edge that read an argparse namespace: 0" in out
