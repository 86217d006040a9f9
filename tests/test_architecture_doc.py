"""docs/architecture.md is true to the code: every module of its package map exists, and every
function, class or constant it names in a module's row is defined in that module."""

from __future__ import annotations

import ast
import builtins
import fnmatch
import json
import re
import sys
from pathlib import Path

from depthprune.config_schema import SCHEMA_FILE, load_schema

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "depthprune"
DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def package_map() -> list[tuple[list[Path], str]]:
    """(module files, description) per row of the package map table."""
    section = DOC.split("## Package map", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        files, folder = [], None
        for name in names:
            if "/" in name:
                folder = name.rsplit("/", 1)[0] if not name.endswith("/") else name.rstrip("/")
                files.append(PACKAGE / name)
            else:  # `greedy.py` after `search/one_shot.py`: the same folder
                files.append(PACKAGE / folder / name if folder else PACKAGE / name)
        rows.append((files, "|".join(cells[1:])))
    return rows


def defined_names(path: Path) -> set[str]:
    """Top-level functions, classes and assignments of a module, and the methods of its classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for element in ast.walk(target):
                    if isinstance(element, ast.Name):
                        names.add(element.id)
        elif isinstance(node, (ast.ImportFrom, ast.Import)):  # re-exports (models/__init__.py)
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def used_words(path: Path) -> set[str]:
    """Words a module uses without defining them: attributes, parameters, keywords and the words
    of its string constants (registry keys such as `ppl_c4`, printed fields such as
    `losses_equal`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            words.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return words


def test_every_module_in_the_package_map_exists():
    rows = package_map()
    assert len(rows) > 40
    missing = [str(f.relative_to(PACKAGE)) for files, _ in rows for f in files if not f.exists()]
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


IDENTIFIER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\(.*?\))?`")


def test_every_name_a_row_cites_is_defined_in_its_modules():
    """A backticked Python name in a module's row (`compute_prior`, `SubsetEvaluator(...)`) must be
    defined in one of the row's modules (or the package, for names of other modules)."""
    everything = set().union(*(defined_names(p) for p in PACKAGE.rglob("*.py")))
    # the schema as the workflow loads it: its file and the registries' names filled in
    schema = set(re.findall(r"[A-Za-z_]+", json.dumps(load_schema(REPO / SCHEMA_FILE))))
    wrong = []
    for files, description in package_map():
        modules = [f for f in files if f.is_file() and f.suffix == ".py"]
        local = set().union(*(defined_names(f) | used_words(f) for f in modules))
        for name in IDENTIFIER.findall(description):
            if name.islower() and "_" not in name and name not in local:
                continue  # plain words in code font (`auto`, `none`, `wal`, `text`): option values
            if hasattr(builtins, name) or name in schema:
                continue  # ValueError; the schema's own names
            if name not in local and name not in everything:
                wrong.append(f"{files[0].relative_to(PACKAGE)}: {name}")
    assert wrong == [], f"docs/architecture.md names what the code does not define: {wrong}"


def test_cited_paths_exist():
    """Every `path/file.ext` the document cites outside the package map exists in the repository."""
    cited = set(
        re.findall(r"`((?:src|tests|workflow|config|docs|scripts)/[A-Za-z0-9_./-]+\.(?:py|smk|yaml|md|sh))`", DOC)
    )
    cited |= set(re.findall(r"`([a-z_]+/[a-z_]+\.py)(?::\w+)?`", DOC))
    missing = []
    for path in sorted(cited):
        if not ((REPO / path).exists() or (PACKAGE / path).exists()):
            missing.append(path)
    assert missing == [], f"docs/architecture.md cites paths that do not exist: {missing}"


def test_handlers_in_the_rule_table_exist():
    """`module.py:function` references (the rule -> CLI -> handler table, cache keys) are defined."""
    wrong = []
    for module, name in re.findall(r"`([a-z_/]+\.py):([A-Za-z_]+)`", DOC):
        path = PACKAGE / module
        if not path.exists():
            candidates = list(PACKAGE.rglob(Path(module).name))
            path = candidates[0] if len(candidates) == 1 else path
        if not path.exists() or name not in defined_names(path):
            wrong.append(f"{module}:{name}")
    assert wrong == [], f"docs/architecture.md names handlers that do not exist: {wrong}"


# The floors of docs/architecture.md ("Layers"), read from its table, lowest first: a module may
# import its own floor and the ones below, never one above.


def floor_patterns() -> list[list[str]]:
    """The module patterns of each floor, lowest first: `io.py`, `search/` (a folder), `*/cli.py`."""
    section = DOC.split("## Layers", 1)[1].split("\n## ", 1)[0]
    floors = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("floor", "---") and "`" in cells[1]:
            floors.append(re.findall(r"`([^`]+)`", cells[1]))
    return floors[::-1]


def module_path(module: str) -> Path:
    """src/depthprune/... file of a dotted module name (packages: their __init__.py)."""
    relative = Path(*module.split(".")[1:])
    return PACKAGE / relative / "__init__.py" if (PACKAGE / relative).is_dir() else PACKAGE / f"{relative}.py"


def floor(module: str, floors: list[list[str]]) -> int | None:
    """The highest floor whose patterns match the module (`search/cli.py` is both in `search/` and
    `*/cli.py`: an entry point); None when no floor names it."""
    relative = module_path(module).relative_to(PACKAGE).as_posix()
    found = None
    for level, patterns in enumerate(floors):
        for pattern in patterns:
            matched = relative.startswith(pattern) if pattern.endswith("/") else fnmatch.fnmatch(relative, pattern)
            if matched:
                found = level
    return found


def package_modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its code (module level, inside functions,
    relative or absolute; `from depthprune.calibration import data` imports the submodule `data`)."""
    modules = package_modules()
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.split(".")[0] == "depthprune")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module
                if base.split(".")[0] != "depthprune":
                    continue
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        graph[module] = targets - {module}
    return graph


def test_the_import_graph_sees_imports_inside_functions_and_relative_ones(tmp_path, monkeypatch):
    package = tmp_path / "depthprune"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "io.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("def f():\n    from depthprune.sub import b\n    from .. import io\n")
    (package / "sub" / "b.py").write_text("from . import a\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    graph = import_graph()
    assert graph["depthprune.sub.a"] == {"depthprune.sub.b", "depthprune.io"}
    assert import_cycles(graph) == [["depthprune.sub.a", "depthprune.sub.b"]]


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_no_import_cycles():
    cycles = import_cycles(import_graph())
    assert cycles == [], f"modules that import each other, directly or through others: {cycles}"


def test_every_module_has_a_floor():
    floors = floor_patterns()
    assert len(floors) == 4, f"docs/architecture.md's Layers table should have four floors: {floors}"
    homeless = [m for m in package_modules() if floor(m, floors) is None]
    assert homeless == [], f"modules that no floor of docs/architecture.md's Layers table names: {homeless}"


def test_no_module_imports_a_higher_floor():
    floors = floor_patterns()
    upward = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if target in package_modules() and (floor(target, floors) or 0) > (floor(module, floors) or 0)
    ]
    assert upward == [], f"imports from a lower floor to a higher one: {upward}"
