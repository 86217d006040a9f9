"""Calibration data: the readers of C4 and Commonsense-170k, from the Hugging Face hub or a local
mirror, and the seeded sampling every source shares (calibration/sources.py registers the sources).

A local mirror (``data_dir``) holds JSONL files in the original field layout, e.g.
``c4/train.jsonl`` and ``commonsense_170k/train.jsonl`` as in ``shared/data``. Sampling is seeded
and independent of where the rows came from.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Iterator
from pathlib import Path

from depthprune.errors import InputError

log = logging.getLogger(__name__)

DEFAULT_C4_DATASET = "allenai/c4"
C4_MIRROR_FILE = "c4/train.jsonl"
# The first training shard is enough for calibration; streaming reads only the documents needed.
C4_TRAIN_FILE = "en/c4-train.00000-of-01024.json.gz"
DEFAULT_CS170K_DATASET = "zwhe99/commonsense_170k"
CS170K_MIRROR_FILE = "commonsense_170k/train.jsonl"
# How many leading documents of the C4 shard to sample calibration documents from (mirror: all 1000).
C4_POOL = 1000


_UNDECODABLE = re.compile("[\udc80-\udcff]")  # surrogateescape's stand-ins for undecodable bytes


def read_jsonl_numbered(path: Path) -> Iterator[tuple[int, dict]]:
    """(1-based line number, row) for every non-blank line; errors name ``file:line``."""
    # surrogateescape: a byte that is not UTF-8 becomes a lone surrogate (valid UTF-8 never decodes to
    # one), found in its line below, instead of failing the read with no file or line named.
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for line_no, line in enumerate(handle, 1):
            undecodable = _UNDECODABLE.search(line)
            if undecodable:
                raise InputError(
                    f"{path}:{line_no}: not UTF-8 text (byte 0x{ord(undecodable.group()) - 0xDC00:02x} at "
                    f"character {undecodable.start() + 1} of the line); convert the file to UTF-8 (e.g. iconv "
                    "-f latin1 -t utf-8)"
                )
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise InputError(f"{path}:{line_no}: not valid JSON ({err})") from err
                if not isinstance(row, dict):
                    raise InputError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
                yield line_no, row


def text_field(row: dict, field: str, where: str) -> str:
    """``row[field]`` as a string, or an error naming the place (``file:line``) and the field."""
    if field not in row:
        raise InputError(f'{where}: missing field "{field}"')
    value = row[field]
    if not isinstance(value, str):
        raise InputError(f'{where}: field "{field}" must be a string, got {type(value).__name__}')
    return value


def _mirror_file(data_dir: str | Path | None, relative: str, what: str) -> Path:
    if data_dir is None:
        raise FileNotFoundError(
            f"{what}: read from a local mirror only; set the option data_dir to a folder holding {relative}"
        )
    path = Path(data_dir) / relative
    if path.is_dir():
        raise InputError(
            f"{what}: {path} is a folder; the local mirror (option data_dir={data_dir}) needs a JSONL file there"
        )
    if not path.is_file():
        raise FileNotFoundError(
            f"{what}: {path} not found in the local mirror (option data_dir={data_dir}); "
            f"point data_dir at a folder holding {relative}, or unset it to use the Hugging Face hub"
        )
    return path


def _hub_error(what: str, dataset_id: str, err: Exception) -> FileNotFoundError:
    return FileNotFoundError(
        f"{what}: cannot load {dataset_id!r} from the Hugging Face hub ({type(err).__name__}: {err}); "
        "set the option data_dir to a local mirror (e.g. ../shared/data) to run offline"
    )


def load_mirror_texts(data_dir: str | Path | None, relative: str, what: str, field: str = "text") -> list[str]:
    """The ``field`` of every row of the mirror file ``data_dir/relative``, in file order (``what``
    names the file in errors; a source without a hub reader refuses ``data_dir`` None)."""
    path = _mirror_file(data_dir, relative, what)
    return [text_field(row, field, f"{path}:{line}") for line, row in read_jsonl_numbered(path)]


def load_c4_documents(
    data_dir: str | Path | None, dataset_id: str = DEFAULT_C4_DATASET, pool: int = C4_POOL
) -> list[str]:
    """The leading ``pool`` documents of the C4 en training split."""
    if data_dir is not None:
        return load_mirror_texts(data_dir, C4_MIRROR_FILE, "C4 train")[:pool]
    try:
        from datasets import load_dataset

        stream = load_dataset(dataset_id, data_files={"train": C4_TRAIN_FILE}, split="train", streaming=True)
        rows = [dict(row) for _, row in zip(range(pool), stream)]
    except Exception as err:  # network, auth, missing file: all mean "not reachable"
        raise _hub_error("C4 train", dataset_id, err) from err
    return [text_field(row, "text", f"{dataset_id} row {i + 1}") for i, row in enumerate(rows)]


def load_cs170k_rows_located(
    data_dir: str | Path | None, dataset_id: str = DEFAULT_CS170K_DATASET
) -> list[tuple[str, dict]]:
    """(where, row) pairs: ``where`` names the row in errors (``file:line``, 1-based, or hub row)."""
    if data_dir is not None:
        path = _mirror_file(data_dir, CS170K_MIRROR_FILE, "Commonsense 170k train")
        return [(f"{path}:{line}", row) for line, row in read_jsonl_numbered(path)]
    try:
        from datasets import load_dataset

        rows = [dict(row) for row in load_dataset(dataset_id, split="train")]
    except Exception as err:
        raise _hub_error("Commonsense 170k train", dataset_id, err) from err
    return [(f"{dataset_id} row {i + 1}", row) for i, row in enumerate(rows)]


def sample_indices(population: int, n_samples: int, seed: int, what: str) -> list[int]:
    """``n_samples`` distinct indices drawn with ``seed`` (paper §4.4: random training instances)."""
    if n_samples < 1:
        raise InputError(f"n_samples (option --n-samples / calibration n_samples) must be at least 1 (got {n_samples})")
    if n_samples > population:
        raise InputError(f"n_samples={n_samples} exceeds the {population} {what} available")
    return random.Random(seed).sample(range(population), n_samples)


def sample_indices_and_reserve(population: int, n_samples: int, seed: int, what: str) -> tuple[list[int], list[int]]:
    """:func:`sample_indices`'s draw (the same indices: the generator's first call), and the
    remaining indices shuffled by the same generator (documents that continue short ones)."""
    drawn = sample_indices(population, n_samples, seed, what)
    rng = random.Random(seed)
    rng.sample(range(population), n_samples)  # advance past the draw, as sample_indices drew it
    taken = set(drawn)
    reserve = [i for i in range(population) if i not in taken]
    rng.shuffle(reserve)
    return drawn, reserve
