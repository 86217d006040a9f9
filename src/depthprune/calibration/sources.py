"""The calibration data sources (docs/method.md §2): one ``DataSource`` per source in
``DATA_SOURCES``, the one place that knows a source (a light module: no torch).

Everything else derives from it: ``load_calibration_samples`` reads and samples through it,
calibration/heldout.py reserves its ``reserved`` leading indices, the workflow checks and
fingerprints its ``mirror_file``, and ``cli_common`` gives each source its hub option
``--<name>-dataset``. A ``CalibrationSpec`` (calibration/specs.py) names its source by ``name``; a
name that is not here is an error naming it, never another source's data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from depthprune.calibration import data as calib_data
from depthprune.calibration.tlm import TLMItem, label_requests, parse_item, text_requests
from depthprune.errors import InputError

# (rows of the source, indices into them, tlm_format) -> (items, their (context, continuation) requests)
TLMItems = Callable[[Sequence[Any], Sequence[int], str], tuple[list[TLMItem], list[list[tuple[str, str]]]]]


@dataclass(frozen=True)
class DataSource:
    name: str  # what CalibrationSpec.source names; the hub option is --<name>-dataset
    rows: str  # what one row is, plural, in errors ("C4 documents")
    mirror_file: str  # the JSONL under data_dir (the workflow checks and fingerprints it at plan time)
    hub_dataset: str  # the Hugging Face dataset id read without data_dir (the option's default)
    # Leading indices per seed kept out of the held-out draw (calibration/heldout.py): the largest
    # calibration size a study draws from this source.
    reserved: int
    load: Callable[[Any, str], Sequence[Any]]  # (data_dir or None: the hub, dataset id) -> rows, in order
    texts: Callable[[Sequence[Any], Sequence[int]], list[str]]  # perplexity: the text of the rows at these indices
    # perplexity: a drawn document shorter than seq_len is continued by the undrawn rows' texts
    # (C4 packing exact, objectives.exact_length_ids); False: each text is cut at seq_len
    continues_documents: bool = False
    tlm_items: TLMItems | None = None  # the TLM items of the rows at these indices; None: no TLM on it

    @property
    def hub_option(self) -> str:
        """The command-line option naming the hub dataset (cli_common.add_calibration_args)."""
        return f"--{self.name.replace('_', '-')}-dataset"

    @property
    def hub_option_dest(self) -> str:
        return f"{self.name}_dataset"


def documents(rows: Sequence[str], indices: Sequence[int]) -> list[str]:
    """The rows themselves: a source whose loader returns one text per row (C4)."""
    return [rows[i] for i in indices]


def cs170k_text(row: dict) -> str:
    """Plain text of a Commonsense-170k row for ``ppl_cs170k`` (choice: prompt, input, output)."""
    parts = [row["instruction"].strip(), str(row.get("input") or "").strip(), str(row["output"]).strip()]
    return "\n".join(p for p in parts if p)


def cs170k_texts(located: Sequence[tuple[str, dict]], indices: Sequence[int]) -> list[str]:
    texts = []
    for i in indices:
        where, row = located[i]
        for field_name in ("instruction", "output"):
            if field_name not in row:
                raise InputError(f'{where}: missing field "{field_name}"')
        texts.append(cs170k_text(row))
    return texts


def cs170k_tlm_items(located: Sequence[tuple[str, dict]], indices: Sequence[int], tlm_format: str):
    items = [parse_item(located[i][1], located[i][0]) for i in indices]
    if tlm_format == "text":
        requests = [text_requests(item) for item in items]
    else:
        requests = [label_requests(located[i][1], item) for i, item in zip(indices, items)]
    return items, requests


DATA_SOURCES: dict[str, DataSource] = {
    source.name: source
    for source in (
        DataSource(
            name="c4",
            rows="C4 documents",
            mirror_file=calib_data.C4_MIRROR_FILE,
            hub_dataset=calib_data.DEFAULT_C4_DATASET,
            reserved=64,
            load=calib_data.load_c4_documents,
            texts=documents,
            continues_documents=True,
        ),
        DataSource(
            name="cs170k",
            rows="Commonsense 170k rows",
            mirror_file=calib_data.CS170K_MIRROR_FILE,
            hub_dataset=calib_data.DEFAULT_CS170K_DATASET,
            reserved=128,
            load=calib_data.load_cs170k_rows_located,
            texts=cs170k_texts,
            tlm_items=cs170k_tlm_items,
        ),
    )
}


def data_source(name: str) -> DataSource:
    """The registered source ``name``; an unknown one is an error naming it and the known ones."""
    try:
        return DATA_SOURCES[name]
    except KeyError:
        raise InputError(
            f"calibration data source {name!r} is not registered (calibration/sources.py DATA_SOURCES): "
            f"expected one of {', '.join(DATA_SOURCES)}"
        ) from None
