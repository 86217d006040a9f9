"""Two code-shape figures of ``src/depthprune`` (issue 59 items 3 and 4), from the AST alone:

(a) the longest functions (methods and nested functions included), top ``--top``, with their lines;
(b) the modules below the CLI's edge that read an argparse namespace.

**The CLI's edge** is where argparse lives: ``cli.py`` and ``cli_common.py`` at the package's top,
every ``*_cli.py`` and every ``cli.py`` of a sub-package (``timing/cli.py`` is the edge of
``depthprune timing``: it turns each timing's options into the arguments of that timing's ``run``).
These modules register sub-commands and turn parsed options into setups (``CalibrationSetup``,
``ModelSetup``, ``EvaluatorSetup``) and plain values; every other module takes those and never sees
the namespace, so that a module can be called from the workflow, a test or a script without faking
a command line.

**Reads an argparse namespace**: a function of the module has a parameter annotated
``argparse.Namespace`` (or ``Namespace``), or a parameter named ``args`` or ``ns`` without an
annotation whose attributes it reads (``args.model``, ``getattr(args, ...)``, ``vars(args)``); or the
module builds one (``argparse.Namespace(...)``, ``cli_common.shared_namespace(...)``). A forward hook's
``args`` (a tuple, indexed, never an attribute read) is not a namespace.

Usage: ``python scripts/audit_code.py [--top N] [--root src/depthprune]``; ``tests/test_code_audit.py``
holds the limits.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "depthprune"
NAMESPACE_NAMES = ("args", "ns")


@dataclass(frozen=True)
class Function:
    module: str  # path relative to the package root, e.g. "search/cli.py"
    name: str  # qualified within its module, e.g. "LinearMacs.__init__"
    lines: int  # from the ``def`` line to the last line of its body (decorators excluded)

    def __str__(self) -> str:
        return f"{self.module}:{self.name} {self.lines}"


def is_edge(module: str) -> bool:
    """True for the CLI's edge (see the module doc): ``module`` relative to the package root."""
    path = Path(module)
    return module in ("cli.py", "cli_common.py") or path.name.endswith("_cli.py") or path.name == "cli.py"


def modules(root: Path = ROOT):
    """(relative path, parsed tree) of every module under ``root``."""
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _functions_in(node, module: str, prefix: str = ""):
    """Every function under ``node``, named with its classes' and enclosing functions' names."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield Function(module, name, child.end_lineno - child.lineno + 1)
            yield from _functions_in(child, module, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions_in(child, module, prefix + child.name + ".")
        else:
            yield from _functions_in(child, module, prefix)


def functions(root: Path = ROOT) -> list[Function]:
    """Every function and method under ``root``, longest first."""
    found = [function for module, tree in modules(root) for function in _functions_in(tree, module)]
    return sorted(found, key=lambda f: (-f.lines, f.module, f.name))


def _is_namespace_annotation(annotation) -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return text in ("argparse.Namespace", "Namespace")


def _reads_attributes(function, name: str) -> bool:
    """Whether ``function``'s body reads attributes of ``name`` (``name.x``, getattr/vars of it)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "vars", "hasattr")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == name
        ):
            return True
    return False


def namespace_reasons(tree) -> list[str]:
    """Why a module reads an argparse namespace (empty: it does not)."""
    reasons = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for arg in every:
                if _is_namespace_annotation(arg.annotation):
                    reasons.append(f"{node.name}({arg.arg}: Namespace) line {node.lineno}")
                elif arg.arg in NAMESPACE_NAMES and arg.annotation is None and _reads_attributes(node, arg.arg):
                    reasons.append(f"{node.name}({arg.arg}) reads {arg.arg}.* line {node.lineno}")
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if called in ("argparse.Namespace", "Namespace") or called.endswith("shared_namespace"):
                reasons.append(f"builds a namespace ({called}) line {node.lineno}")
    return reasons


def namespace_readers(root: Path = ROOT) -> dict[str, list[str]]:
    """{module below the edge: why it reads a namespace} (see the module doc)."""
    readers = {}
    for module, tree in modules(root):
        if not is_edge(module):
            reasons = namespace_reasons(tree)
            if reasons:
                readers[module] = reasons
    return readers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the longest functions to print")
    parser.add_argument("--root", type=Path, default=ROOT, help="the package folder (default: src/depthprune)")
    options = parser.parse_args(argv)
    longest = functions(options.root)
    print(f"longest functions in {options.root.name}/ ({len(longest)} functions):")
    for function in longest[: options.top]:
        print(f"  {function}")
    readers = namespace_readers(options.root)
    print(f"modules below the CLI's edge that read an argparse namespace: {len(readers)}")
    for module, reasons in readers.items():
        print(f"  {module}: {'; '.join(reasons)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
