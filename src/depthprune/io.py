"""Atomic file output and small shared helpers.

Every result file is written to a temporary sibling and renamed into place, so an interrupted job
never leaves a half-written output that Snakemake (or a user) could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.errors import InputError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: exists and is {_kind_of(path)}, not a regular file; refusing to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_owner_tag()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            # mkstemp creates 0600 files; results should get the usual permissions.
            os.chmod(tmp_path, 0o666 & ~current_umask())
        os.replace(tmp_path, path)
    except OSError as err:
        if err.filename is None:  # a write into an open file (disk full, ulimit -f) names no file
            err.filename = str(path)
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


TMP_DIR_SUFFIX = ".tmpdir"


@contextlib.contextmanager
def atomic_dir(
    path: str | os.PathLike, replace: bool = False, before_replace: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; move it onto ``path`` only if the block succeeds.

    The one helper for every folder output (exported and converted checkpoints): the result appears
    complete or not at all. ``replace=False``: if ``path`` exists when the block ends (a concurrent
    job finished first), the new folder is dropped and the existing one kept. ``replace=True``: the
    old folder is swapped out by two renames (old -> backup sibling, new -> path) and only then
    deleted, so at no point is there neither. The caller decides whether replacing is allowed:
    ``before_replace(path)`` runs just before the old folder is moved aside, and an exception from it
    (``OwnedFolder.check_only_ours``: a file appeared that the tool did not write) keeps the old folder.
    Permissions follow the user's umask (mkdtemp creates 0700). Leftovers of a killed run are
    removed by :func:`remove_stale_temporaries`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{_owner_tag()}.", suffix=TMP_DIR_SUFFIX, dir=path.parent))
    backup = None
    try:
        os.chmod(tmp, 0o777 & ~current_umask())
        yield tmp
        _apply_umask(tmp)
        if path.exists() or path.is_symlink():
            if not replace:
                return
            if before_replace is not None:
                before_replace(path)
            backup = Path(
                tempfile.mkdtemp(prefix=f".{path.name}.{_owner_tag()}.old.", suffix=TMP_DIR_SUFFIX, dir=path.parent)
            )
            os.rmdir(backup)
            os.replace(path, backup)
        try:
            os.replace(tmp, path)
        except OSError:
            if backup is not None:
                os.replace(backup, path)  # put the old folder back
            if not path.exists():
                raise
    finally:
        for leftover in (tmp, backup):
            if leftover is None or not (leftover.exists() or leftover.is_symlink()):
                continue
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:  # the replaced path was a file (or a link): its backup is one too
                leftover.unlink(missing_ok=True)


@dataclass(frozen=True)
class OwnedFolder:
    """A folder a command creates and may later empty or replace (a search's workdir, an export).

    It may hold only what that command wrote, so emptying or replacing it never loses a user's file.
    What the command wrote: the ``marker`` file, regular files whose names match ``reserved`` (files
    made under fixed names, such as the BO study's SQLite side files) and, with ``manifest=True``,
    the regular files the marker lists with the SHA-256 of their content when the command wrote them
    (JSON, key "files": name -> digest; written by :meth:`write_manifest`). A name alone proves
    nothing: a folder named like a reserved file, a link, or a listed file whose content is not the
    one recorded is foreign. Any foreign entry refuses the folder with InputError naming the
    entries, and nothing in it is deleted; emptying deletes regular files only, never a folder.
    """

    marker: str
    command: str  # who writes the folder, for the errors: "`depthprune search`"
    reserved: re.Pattern[str] | None = None
    manifest: bool = False

    def is_marked(self, folder: str | os.PathLike) -> bool:
        return _regular_file(Path(folder) / self.marker)

    def listed(self, folder: str | os.PathLike) -> dict[str, str] | None:
        """The files the marker lists, name -> SHA-256; None without a marker, a manifest or a
        "files" mapping of names to digests (an earlier version listed names alone)."""
        if not self.manifest or not self.is_marked(folder):
            return None
        try:
            record = json.loads((Path(folder) / self.marker).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        files = record.get("files") if isinstance(record, dict) else None
        if not isinstance(files, dict) or not all(
            isinstance(name, str) and isinstance(digest, str) for name, digest in files.items()
        ):
            return None
        return files

    def foreign_entries(self, folder: str | os.PathLike) -> list[str]:
        """Names of the entries of ``folder`` the command did not write, sorted (a folder ends in /)."""
        listed = self.listed(folder) or {}
        return [
            entry.name + ("/" if entry.is_dir() and not entry.is_symlink() else "")
            for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name)
            if not self._written(entry, listed)
        ]

    def _written(self, entry: Path, listed: Mapping[str, str]) -> bool:
        if not _regular_file(entry):
            return False
        if entry.name == self.marker or (self.reserved is not None and self.reserved.fullmatch(entry.name)):
            return True
        return entry.name in listed and file_sha256(entry) == listed[entry.name]

    def check_only_ours(
        self,
        folder: str | os.PathLike,
        option: str,
        doing: str,
        remedy: str = "move them away or pass another folder",
    ) -> None:
        """Raise InputError (one line: ``option``, the folder, the foreign entries) unless ``folder``
        holds only what the command wrote. ``doing``: what would happen to it ("--recompute would
        empty this folder")."""
        foreign = self.foreign_entries(folder)
        if not foreign:
            return
        if not self.is_marked(folder):
            whose = f"it has no {self.marker} file (not created by {self.command}) and holds"
        elif self.manifest and self.listed(folder) is None:
            whose = (
                f"its {self.marker} records no file contents (written by an earlier version, or not by "
                f"{self.command}), so these may not be its own:"
            )
        else:
            changed = ", or whose contents changed since" if self.manifest else ""
            whose = f"it holds files {self.command} did not write{changed}:"
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise InputError(f"{option} {folder}: {doing}, but {whose} {shown}; {remedy}")

    def write_manifest(self, folder: str | os.PathLike, record: Mapping[str, Any] | None = None) -> None:
        """Write the marker into ``folder`` (complete: call it last), listing every regular file now
        in it with the SHA-256 of its content."""
        folder = Path(folder)
        files = {
            entry.name: file_sha256(entry)
            for entry in sorted(folder.iterdir(), key=lambda p: p.name)
            if entry.name != self.marker and _regular_file(entry)
        }
        atomic_write_json(folder / self.marker, {**(record or {}), "files": files})

    def empty(self, folder: str | os.PathLike, option: str, doing: str, keep: Iterable[str] = ()) -> None:
        """Delete the command's files in ``folder`` but ``keep`` (and the marker), after
        :meth:`check_only_ours` found nothing else in it. Only regular files are deleted."""
        folder = Path(folder)
        if not folder.is_dir():
            return
        self.check_only_ours(folder, option, doing)
        listed = self.listed(folder) or {}
        for entry in folder.iterdir():
            # judged again entry by entry: an entry that appeared since the check is not ours either
            if entry.name == self.marker or entry.name in keep or not self._written(entry, listed):
                continue
            entry.unlink(missing_ok=True)


def _regular_file(path: Path) -> bool:
    """A regular file itself (not a link to one, a folder, a device or a pipe)."""
    return path.is_file() and not path.is_symlink()


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's content, read in blocks (checkpoints run to gigabytes)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _apply_umask(folder: Path) -> None:
    """Give files and folders made by mkstemp/mkdtemp (0600/0700) the permissions the umask allows."""
    umask = current_umask()
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o777 & ~umask)
        for name in files:
            full = os.path.join(root, name)
            mode = os.stat(full).st_mode & 0o777
            if mode in (0o600, 0o700):  # a temp-file default, not a mode someone chose
                os.chmod(full, (0o777 if mode & 0o100 else 0o666) & ~umask)


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Delete temporary siblings of ``path`` left by a process that no longer runs (killed)."""
    path = Path(path)
    if not path.parent.is_dir():
        return
    for candidate in path.parent.glob(f".{glob_escape(path.name)}.*"):
        match = re.match(rf"^\.{re.escape(path.name)}\.(?P<host>[A-Za-z0-9_-]*)~(?P<pid>\d+)\.", candidate.name)
        if not match or not (candidate.name.endswith(TMP_DIR_SUFFIX) or candidate.name.endswith(".tmp")):
            continue
        # Only this machine's processes can be checked; another node's temporaries are left alone.
        if match.group("host") != _host() or _pid_alive(int(match.group("pid"))):
            continue
        if candidate.is_dir():
            shutil.rmtree(candidate, ignore_errors=True)
        else:
            candidate.unlink(missing_ok=True)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", os.uname().nodename)[:40]


def _owner_tag() -> str:
    """``host~pid`` in temporary names: lets a later run tell a killed process's leftovers from a live one's."""
    return f"{_host()}~{os.getpid()}"


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


# Report tables (figures/**/tables/*.csv) keep this many significant digits, so that every CPU kind
# renders the same bytes. numpy and torch round vectorised sums differently on AVX2, AVX512 and ARM
# kernels (a relative change near 1e-16, amplified where a statistic subtracts close numbers), which
# full round-trip precision prints. Eight digits are far above any statistical meaning of a number in
# these tables, and put the rounding boundaries 1e-8..1e-7 apart in relative terms: a 1e-14 change
# crosses one with a probability near 1e-6 per number, about 0.6 % over the ~6,000 numbers of the
# committed tables (ten digits would make it about 60 %).
REPORT_SIGNIFICANT_DIGITS = 8
# Relative precision cannot hide a cancellation: an average accuracy of exactly chance minus chance
# is 0 on one CPU and 3.8e-15 on another. Report numbers (accuracies, losses, Jaccards, ratios,
# p-values from at most a few thousand permutations) mean nothing below this magnitude, so it prints as 0.
REPORT_ZERO_BELOW = 1e-12
# Before that rounding every number is first snapped to this many significant digits. A number that
# sits exactly on a rounding boundary (the aggregate rounds accuracies to 9 decimals, so an average of
# k/116 can end in a 5 in its ninth decimal) is then rounded from one float whatever the CPU's
# last-digit noise: otherwise a 1e-14 change decides the eighth digit.
REPORT_SNAP_DIGITS = 12


def atomic_write_csv(path: str | os.PathLike, frame, significant_digits: int | None = None) -> None:
    """Write a pandas DataFrame as CSV (no index) atomically.

    ``significant_digits`` bounds the printed precision of float columns (None: full round-trip
    precision, for data that is read back, such as the aggregate).
    """
    float_format = None if significant_digits is None else f"%.{significant_digits}g"
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format=float_format)


def atomic_write_report_csv(path: str | os.PathLike, frame) -> None:
    """A report table as CSV at ``REPORT_SIGNIFICANT_DIGITS``, magnitudes below ``REPORT_ZERO_BELOW``
    as 0: the same bytes on every CPU kind."""
    atomic_write_csv(path, report_precision(frame), significant_digits=REPORT_SIGNIFICANT_DIGITS)


def report_precision(frame):
    """A copy of ``frame`` with every float column snapped to ``REPORT_SNAP_DIGITS`` significant
    digits and magnitudes below ``REPORT_ZERO_BELOW`` set to 0, ready to print at
    ``REPORT_SIGNIFICANT_DIGITS``."""
    frame = frame.copy()
    for column in frame.select_dtypes("float").columns:
        snapped = frame[column].map(lambda v: float(f"{v:.{REPORT_SNAP_DIGITS}g}"), na_action="ignore")
        # + 0.0 turns -0.0 into 0.0, which would otherwise print as "-0"
        frame[column] = snapped.mask(snapped.abs() < REPORT_ZERO_BELOW, 0.0) + 0.0
    return frame


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
        raise InputError(f"{path}: not valid JSON ({err})") from err


_ENV_TRUE = ("1", "true", "yes", "on")
_ENV_FALSE = ("0", "false", "no", "off")


def env_flag(name: str, default: bool | str = False, others: tuple[str, ...] = ()) -> bool | str:
    """The environment variable ``name`` as a switch: unset or empty -> ``default``; 1/true/yes/on
    -> True; 0/false/no/off -> False; one of ``others`` (e.g. "auto") -> itself. Anything else is a
    ValueError naming the variable: a typo such as ``maybe`` must not silently mean off."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _ENV_TRUE:
        return True
    if value in _ENV_FALSE:
        return False
    if value in others:
        return value
    allowed = "/".join((*_ENV_TRUE, *_ENV_FALSE, *others))
    raise InputError(f"environment variable {name}={os.environ[name]!r}: expected one of {allowed}")


def format_layers(layers: Iterable[int]) -> str:
    """Canonical text form of a removed set: sorted, space-separated ("" for the dense model)."""
    return " ".join(str(i) for i in parse_layers(layers))


def parse_layers(text: str | Iterable[int] | None) -> tuple[int, ...]:
    """The one parser of removed-layer sets: "3 5 7", "3,5,7" or an iterable of ints (NumPy's too)
    -> the canonical sorted tuple of plain ints; None -> (). A repeated layer is an error."""
    if text is None:
        return ()
    if isinstance(text, str):
        parts = text.replace(",", " ").split()
        try:
            values = [int(p) for p in parts]
        except ValueError as err:
            raise InputError(f"layer list {text!r}: expected integers separated by spaces or commas") from err
    else:
        values = [int(v) for v in text]
    if len(set(values)) != len(values):
        raise InputError(f"layer list {text!r} repeats a layer")
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


PathArgument = str | os.PathLike | Iterable[str | os.PathLike] | None


def check_inputs_outputs(
    inputs: Mapping[str, PathArgument],
    outputs: Mapping[str, PathArgument],
    outputs_may_lie_inside: Iterable[str] = (),
) -> None:
    """Refuse, before any work, a command line whose outputs would overwrite its inputs.

    ``inputs`` and ``outputs`` map an option ("--memo") to its path, a list of paths (a repeated
    option) or None (not given). No output may equal, contain or lie inside an input, and no two
    outputs may equal or contain one another; paths are compared resolved (symlinks followed,
    relative paths made absolute). ``outputs_may_lie_inside``: input folders whose outputs are meant
    to lie inside them (aggregate's --results holds results/aggregate). InputError names both options.
    """
    allowed_parents = set(outputs_may_lie_inside)
    given_inputs = list(_named_paths(inputs))
    given_outputs = list(_named_paths(outputs))
    for out_option, out_path, out_resolved in given_outputs:
        # A file or a folder is replaced or written into; anything else (a device, a pipe) is not ours.
        if out_resolved.exists() and not (out_resolved.is_file() or out_resolved.is_dir()):
            raise InputError(
                f"{out_option} {out_path}: exists and is {_kind_of(out_resolved)}, not a file or a folder; "
                f"pass another {out_option}"
            )
    for out_option, out_path, out_resolved in given_outputs:
        for in_option, in_path, in_resolved in given_inputs:
            if out_resolved == in_resolved:
                relation = "is the same path as"
            elif out_resolved in in_resolved.parents:
                relation = "contains"
            elif in_resolved in out_resolved.parents and in_option not in allowed_parents:
                relation = "lies inside"
            else:
                continue
            raise InputError(
                f"{out_option} {out_path} {relation} {in_option} {in_path} ({in_resolved}): an output must not "
                f"overwrite an input; pass another {out_option}"
            )
    for index, (first_option, first_path, first_resolved) in enumerate(given_outputs):
        for second_option, second_path, second_resolved in given_outputs[index + 1 :]:
            if first_resolved == second_resolved:
                relation = "is the same path as"
            elif first_resolved in second_resolved.parents:
                relation = "contains"
            elif second_resolved in first_resolved.parents:
                relation = "lies inside"
            else:
                continue
            raise InputError(
                f"{first_option} {first_path} {relation} {second_option} {second_path} ({second_resolved}): "
                "one output would overwrite the other; give each output its own path"
            )


def _kind_of(path: Path) -> str:
    """What a path that is not a regular file is, for an error message."""
    mode = path.stat().st_mode
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _named_paths(options: Mapping[str, PathArgument]) -> Iterator[tuple[str, str, Path]]:
    """(option, path as given, path resolved) for every path of ``options``."""
    for option, value in options.items():
        if value is None:
            continue
        values = [value] if isinstance(value, (str, os.PathLike)) else list(value)
        for path in values:
            if path is not None and str(path) != "":
                yield option, str(path), Path(os.path.realpath(os.path.expanduser(path)))


@contextlib.contextmanager
def atomic_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder next to ``folder``; when the block succeeds, move each file written
    there into ``folder`` (one rename each, replacing the file of the same name).

    For a set of outputs that must be replaced together (the aggregate's tables): nothing in
    ``folder`` changes before every new file is complete, so a failure leaves the previous set as
    it was. Files of ``folder`` the block did not write are left alone (unlike ``atomic_dir``,
    which swaps the whole folder). Leftovers of a killed run are removed by
    :func:`remove_stale_temporaries`.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(folder)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{_owner_tag()}.", suffix=TMP_DIR_SUFFIX, dir=folder.parent))
    try:
        yield staging
        folder.mkdir(exist_ok=True)
        for path in sorted(staging.iterdir()):
            if path.is_file():
                os.replace(path, folder / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
