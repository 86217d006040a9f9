"""docs/performance.md quotes its benchmark output from files: every block of printed output in it is
in a record under benchmarks/records/ and links that record, every link to a record resolves, and
every record's header names the command, the CPU kind and the dtype."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC_PATH = REPO / "docs" / "performance.md"
RECORDS = REPO / "benchmarks" / "records"
DOC = DOC_PATH.read_text(encoding="utf-8")

# A fenced block is a command to type (a shell tag) or printed output (no tag, or `text`), which must
# come from a record. Any other tag fails test_every_block_is_a_command_or_output: classify it here.
SHELL_TAGS = {"bash", "sh", "shell", "console", "zsh"}
OUTPUT_TAGS = {"", "text"}
FENCE = re.compile(r"^```([\w-]*)\s*$")
RECORD_LINK = re.compile(r"\]\((\.\./benchmarks/records/[^)\s#]+)\)")
HEADER_KEYS = ("command", "cpu", "dtype")
DTYPES = ("float32", "bfloat16", "float16", "float64")
RECORD_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-([a-z0-9]+(?:-[a-z0-9]+)*)-(" + "|".join(DTYPES) + r")\.[a-z]+$")
# The CSV that `python -m depthprune timing stages --out` writes.
STAGES_COLUMNS = ["stage", "jobs", "seconds", "max_job_seconds", "cpu_seconds", "max_rss_mb", "share"]


@dataclass(frozen=True)
class Block:
    line: int  # the opening fence's line number in the doc
    tag: str
    lines: tuple[str, ...]
    prose: str  # the doc's text since the previous block: where its record link belongs


def fenced_blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks, prose_start, i = [], 0, 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"docs/performance.md:{i + 1}: fenced block never closed"
        blocks.append(Block(i + 1, opening.group(1), tuple(lines[i + 1 : end]), "\n".join(lines[prose_start:i])))
        prose_start = i = end + 1
    return blocks


BLOCKS = fenced_blocks(DOC)
OUTPUT_BLOCKS = [block for block in BLOCKS if block.tag in OUTPUT_TAGS]
RECORD_FILES = sorted(path for path in RECORDS.iterdir() if path.is_file() and path.name != "README.md")


def stages_table(rows: list[list[str]]) -> list[str]:
    """The table `timing stages` prints (src/depthprune/timing/stages.py) for the rows of its --out CSV."""
    table = [f"{'stage':<16}{'jobs':>5}{'seconds':>10}{'max job s':>11}{'cpu s':>10}{'max RSS MB':>12}{'share':>7}"]
    for stage, jobs, seconds, longest, cpu, rss, share in rows:
        table.append(
            f"{stage:<16}{int(jobs):>5}{float(seconds):>10.1f}{float(longest):>11.1f}"
            f"{float(cpu):>10.1f}{float(rss):>12.0f}{float(share):>7.0%}"
        )
    total = sum(float(row[2]) for row in rows)
    table.append(f"stages: total_job_seconds={total:.1f} ({total / 60:.1f} min) dominant={rows[0][0]}")
    return table


def record_bodies(path: Path) -> list[list[str]]:
    """A record's lines without its `#` header lines; for a `timing stages` CSV also the table it prints."""
    body = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    bodies = [body]
    if path.suffix == ".csv":
        rows = list(csv.reader(body))
        if rows and rows[0] == STAGES_COLUMNS:
            bodies.append(stages_table(rows[1:]))
    return bodies


def holds(haystack: list[str], needle: tuple[str, ...]) -> bool:
    """Whether ``needle`` is a run of consecutive lines of ``haystack`` (trailing blanks ignored)."""
    hay = [line.rstrip() for line in haystack]
    want = [line.rstrip() for line in needle]
    return bool(want) and any(hay[i : i + len(want)] == want for i in range(len(hay) - len(want) + 1))


def records_holding(lines: tuple[str, ...]) -> list[Path]:
    return [path for path in RECORD_FILES if any(holds(body, lines) for body in record_bodies(path))]


def header_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]


def header_value(path: Path, key: str) -> str | None:
    for line in header_lines(path):
        found = re.match(rf"#\s*{key}:\s*(\S.*)$", line, flags=re.IGNORECASE)
        if found:
            return found.group(1)
    return None


def test_every_block_is_a_command_or_output():
    assert OUTPUT_BLOCKS, "no output block found in docs/performance.md: is the fence parser broken?"
    unknown = [f"line {block.line}: ```{block.tag}" for block in BLOCKS if block.tag not in SHELL_TAGS | OUTPUT_TAGS]
    assert not unknown, (
        f"fenced blocks neither command nor output (add the tag to SHELL_TAGS or OUTPUT_TAGS): {unknown}"
    )


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=lambda block: f"line{block.line}")
def test_output_block_is_in_a_record(block):
    assert records_holding(block.lines), (
        f"docs/performance.md:{block.line}: this output is in no file under benchmarks/records/ "
        "(verbatim, after the record's `#` header lines); add its record or correct the quote:\n"
        + "\n".join(block.lines)
    )


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=lambda block: f"line{block.line}")
def test_output_block_links_its_record(block):
    linked = {(DOC_PATH.parent / link).resolve() for link in RECORD_LINK.findall(block.prose)}
    holding = {path.resolve() for path in records_holding(block.lines)}
    assert linked & holding, (
        f"docs/performance.md:{block.line}: the text before this block links no record that holds it "
        f"(linked: {sorted(path.name for path in linked)}; holding: {sorted(path.name for path in holding)})"
    )


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=lambda block: f"line{block.line}")
def test_a_changed_digit_is_not_found(block):
    """The comparison is exact: the block with its last digit changed is in no record."""
    text = "\n".join(block.lines)
    where = max(i for i, char in enumerate(text) if char.isdigit())
    changed = text[:where] + str((int(text[where]) + 1) % 10) + text[where + 1 :]
    assert records_holding(tuple(changed.split("\n"))) == []


@pytest.mark.parametrize("link", sorted(set(RECORD_LINK.findall(DOC))))
def test_record_link_resolves(link):
    target = (DOC_PATH.parent / link).resolve()
    assert target.is_file(), f"docs/performance.md links {link}, which does not exist"
    assert target.parent == RECORDS.resolve(), f"{link} is not a file directly under benchmarks/records/"


def test_there_are_records():
    assert RECORD_FILES
    assert RECORD_LINK.findall(DOC)


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda path: path.name)
def test_record_header_names_command_cpu_and_dtype(path):
    name = RECORD_NAME.match(path.name)
    assert name, f"{path.name}: not named <date>-<benchmark>-<cpu kind>-<dtype>.<ext> (benchmarks/records/README.md)"
    values = {key: header_value(path, key) for key in HEADER_KEYS}
    missing = [f"# {key}:" for key, value in values.items() if value is None]
    assert not missing, f"{path.name}: header lacks {missing}"
    assert name.group(3) in re.findall(r"[a-z0-9]+", values["dtype"]), (
        f"{path.name}: the file name's dtype {name.group(3)} is not the header's ({values['dtype']})"
    )


@pytest.mark.parametrize("path", [path for path in RECORD_FILES if path.suffix == ".csv"], ids=lambda path: path.name)
def test_csv_record_headers_come_first(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    first_data = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    assert all(not line.startswith("#") for line in lines[first_data:]), f"{path.name}: a `#` line below the CSV"
    rows = list(csv.reader(lines[first_data:]))
    assert len(rows) > 1 and all(len(row) == len(rows[0]) for row in rows), f"{path.name}: ragged CSV"


def test_records_readme_names_every_record():
    readme = (RECORDS / "README.md").read_text(encoding="utf-8")
    unnamed = [path.name for path in RECORD_FILES if path.name not in readme]
    assert not unnamed, f"benchmarks/records/README.md does not name {unnamed}"
