"""docs/architecture.md is true to the code: every module of its package map exists, and every
function, class or constant it names in a module's row is defined in that module."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

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
    schema = set(re.findall(r"[A-Za-z_]+", (REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()))
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


# The layers of docs/architecture.md ("Layers"), lowest first; a module may import its own layer
# and the ones below, never one above.
ENTRY = ("cli", "cli_common", "prior_cli", "plan_cli", "workflow", "__main__")


def layer(module: str) -> int:
    parts = module.split(".")[1:]
    name = ".".join(parts)
    if name in ENTRY or name.endswith(".cli") or parts[:1] == ["timing"]:
        return 3  # entry points: the CLI, its shared options, timing, the workflow's functions
    if parts[:1] in (["search"], ["evaluation"], ["reporting"]) or name in ("prior", "plan"):
        return 2  # the study's stages
    if parts[:1] in (["models"], ["calibration"], ["engine"]):
        return 1  # models, calibration data and objectives, the scoring engine
    return 0  # io, paths, versions, budgets, seeding, progress, allocator, locking, ...


def test_no_module_imports_a_higher_layer():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for target in targets:
                if (
                    target.startswith("depthprune.")
                    and layer(target) > layer(module)
                    and module != "depthprune.__main__"
                ):
                    upward.append(f"{module} -> {target}")
    assert upward == [], f"imports from a lower layer to a higher one: {sorted(set(upward))}"
