"""Atomic file output and small shared helpers.

Every result file is written to a temporary sibling and renamed into place, so an interrupted job
never leaves a half-written output that Snakemake (or a user) could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            # mkstemp creates 0600 files; results should get the usual permissions.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def atomic_write_csv(path: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame as CSV (no index) atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def atomic_write_parquet(path: str | os.PathLike, frame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def _json_default(obj: Any) -> Any:
    # numpy scalars/arrays, sets and paths show up in results; make them plain JSON.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err


def format_layers(layers: Iterable[int]) -> str:
    """Canonical text form of a removed set: sorted, space-separated ("" for the dense model)."""
    return " ".join(str(i) for i in sorted(int(x) for x in layers))


def parse_layers(text: str | Iterable[int] | None) -> tuple[int, ...]:
    """Parse "3 5 7", "3,5,7" or an iterable of ints into a sorted tuple of distinct layers."""
    if text is None:
        return ()
    if isinstance(text, str):
        parts = text.replace(",", " ").split()
        try:
            values = [int(p) for p in parts]
        except ValueError as err:
            raise ValueError(f"layer list {text!r}: expected integers separated by spaces or commas") from err
    else:
        values = [int(v) for v in text]
    if len(set(values)) != len(values):
        raise ValueError(f"layer list {text!r} repeats a layer")
    return tuple(sorted(values))


_VERSIONED = ("depthprune", "torch", "transformers", "lm_eval", "datasets", "optuna", "numpy", "pandas")


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change a number in the results."""
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            try:
                out[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                out[name] = "not installed"
    return out
