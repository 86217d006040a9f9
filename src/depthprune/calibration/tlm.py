"""Commonsense-170k items parsed back into (question, candidates, gold) for the TLM objective.

LLM-Adapters flattened every task into one instruction string ending in ``Answer format: a/b/...``
with the candidates inline (``Answer1: ... Answer2: ...``; likewise Solution, Ending, Option) and
separated by a blank line, a newline or a single space. True/false items have no inline
candidates. The parser inverts that; an item it cannot invert is an error naming the item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from depthprune.errors import InputError

_FORMAT = re.compile(r"Answer format:\s*(?P<labels>[A-Za-z0-9_/]+)\s*$")
_CANDIDATE = re.compile(r"(?P<kind>Answer|Solution|Ending|Option)(?P<num>\d+):")
# "Please choose the correct answer to the question: ..." -> the text after the first ": ".
_LEAD_IN = re.compile(r"^Please [^:]*?:\s*", re.S)


@dataclass(frozen=True)
class TLMItem:
    question: str
    candidates: tuple[str, ...]
    gold: int
    blank: bool = False  # fill-in-the-blank (WinoGrande-style) item: question holds "_"


def parse_item(row: dict, where: str = "item") -> TLMItem:
    """Parse one LLM-Adapters row; ``where`` names it in errors (e.g. ``train.jsonl:17``, 1-based)."""
    for field_name in ("instruction", "answer"):
        if field_name not in row:
            raise InputError(f'{where}: missing field "{field_name}"')
    if not isinstance(row["instruction"], str):
        raise InputError(f'{where}: field "instruction" must be a string')
    instruction = row["instruction"].strip()
    answer = str(row["answer"]).strip().lower()
    match = _FORMAT.search(instruction)
    if not match:
        raise InputError(f"{where}: no 'Answer format: a/b/...' line in the instruction")
    labels = [label.strip().lower() for label in match.group("labels").split("/")]
    body = instruction[: match.start()].strip()
    if answer not in labels:
        raise InputError(f"{where}: answer {answer!r} is not one of the labels {labels}")
    gold = labels.index(answer)

    if labels == ["true", "false"]:
        return TLMItem(question=_LEAD_IN.sub("", body).strip(), candidates=("true", "false"), gold=gold)

    found = list(_CANDIDATE.finditer(body))
    if not found:
        raise InputError(f"{where}: labels {labels} but no 'Answer1:'-style candidates in the instruction")
    texts: dict[str, str] = {}
    for k, marker in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(body)
        label = f"{marker.group('kind').lower()}{marker.group('num')}"
        texts[label] = " ".join(body[marker.end() : end].split())
    missing = [label for label in labels if label not in texts]
    if missing:
        raise InputError(f"{where}: candidates {missing} named in 'Answer format' are missing from the instruction")
    question = _LEAD_IN.sub("", body[: found[0].start()]).strip()
    candidates = tuple(texts[label] for label in labels)
    blank = labels[0].startswith("option") and "_" in question
    return TLMItem(question=question, candidates=candidates, gold=gold, blank=blank)


def text_requests(item: TLMItem) -> list[tuple[str, str]]:
    """(context, continuation) per candidate for ``tlm.format: text`` (docs/method.md §2)."""
    if item.blank:
        # Partial scoring as lm-eval's winogrande: option filled into the blank is context, the rest
        # of the sentence is the (shared) scored continuation.
        cut = item.question.index("_")
        rest = item.question[cut + 1 :].strip()
        return [(item.question[:cut] + option, " " + rest) for option in item.candidates]
    context = f"Question: {item.question}\nAnswer:"
    return [(context, " " + text) for text in item.candidates]


ALPACA_TEMPLATE = (
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n"
)


def label_requests(row: dict, item: TLMItem) -> list[tuple[str, str]]:
    """(context, continuation) per candidate for ``tlm.format: labels`` (LLM-Adapters prompt)."""
    match = _FORMAT.search(row["instruction"].strip())
    labels = [label.strip().lower() for label in match.group("labels").split("/")]
    context = ALPACA_TEMPLATE.format(instruction=row["instruction"].strip()) + "the correct answer is"
    return [(context, " " + label) for label in labels]
