"""TLM candidate parsing for every Commonsense-170k answer format, and the scoring requests."""

from __future__ import annotations

import json

import pytest

from depthprune.calibration.tlm import label_requests, parse_item, text_requests


def rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_row_of_the_mirror_parses(data_dir):
    all_rows = rows(data_dir / "commonsense_170k" / "train.jsonl") + rows(
        data_dir / "commonsense_170k" / "format_examples.jsonl"
    )
    formats = set()
    for i, row in enumerate(all_rows):
        item = parse_item(row, f"row {i}")
        label_format = row["instruction"].rsplit("Answer format:", 1)[1].strip()
        formats.add(label_format.split("/")[0].rstrip("0123456789"))
        assert len(item.candidates) == len(label_format.split("/"))
        assert all(text.strip() for text in item.candidates)
        assert item.question and 0 <= item.gold < len(item.candidates)
    assert formats == {"true", "answer", "solution", "ending", "option"}


# The offline stand-in for Commonsense-170k: the eight tasks' leading training rows, grouped by task in
# this order (../shared/data/SOURCES.md §9), in the proportions of the LLM-Adapters training sets.
CS170K_TASKS = [
    ("boolq", 233),
    ("piqa", 399),
    ("siqa", 827),
    ("hellaswag", 988),
    ("winogrande", 1000),
    ("arc_easy", 56),
    ("arc_challenge", 28),
    ("openbookqa", 123),
]
# ARC-E, ARC-C and OBQA share one format (four Answer candidates); each part starts with the first
# question of that task's training split.
FIRST_QUESTION = {
    "arc_easy": "Which factor will most likely cause a person to develop a fever?",
    "arc_challenge": "George wants to warm his hands quickly by rubbing them.",
    "openbookqa": "The sun is responsible for",
}
FORMAT_TASK = {"true": "boolq", "solution": "piqa", "ending": "hellaswag", "option": "winogrande"}


def test_the_8_task_mirror_parses_with_its_per_task_counts(data_dir):
    all_rows = rows(data_dir / "commonsense_170k" / "train.jsonl")
    assert len(all_rows) == sum(count for _, count in CS170K_TASKS) == 3654
    tasks = []
    for i, row in enumerate(all_rows):
        item = parse_item(row, f"train.jsonl row {i}")
        labels = row["instruction"].rsplit("Answer format:", 1)[1].strip().split("/")
        kind = labels[0].rstrip("0123456789")
        if kind == "answer":
            task = "siqa" if len(labels) == 3 else "arc_or_obqa"
        else:
            task = FORMAT_TASK[kind]
        if task == "arc_or_obqa":
            starts = [name for name, first in FIRST_QUESTION.items() if item.question.startswith(first)]
            task = starts[0] if starts else tasks[-1]  # a part runs until the next part's first question
        tasks.append(task)
        assert len(item.candidates) == len(labels) and 0 <= item.gold < len(labels)
        assert item.question and all(text.strip() for text in item.candidates)
        assert item.blank == (task == "winogrande")
        # text-format requests exist for every item (what tlm.format: text scores)
        assert len(text_requests(item)) == len(labels)
    counts = {}
    for task in tasks:  # each task one contiguous part, in SOURCES.md order
        counts[task] = counts.get(task, 0) + 1
    assert list(counts.items()) == CS170K_TASKS
    assert [t for k, t in enumerate(tasks) if k == 0 or t != tasks[k - 1]] == [name for name, _ in CS170K_TASKS]


@pytest.mark.parametrize(
    "instruction, answer, question, candidates, gold, blank",
    [
        (
            "Please answer the following question with true or false, question: is the sky blue?\n\nAnswer format: true/false",
            "false",
            "is the sky blue?",
            ("true", "false"),
            1,
            False,
        ),
        (
            "Please choose the correct answer to the question: Pick one\n\nAnswer1: red Answer2: a blue car Answer3: green\n\nAnswer format: answer1/answer2/answer3",
            "answer2",
            "Pick one",
            ("red", "a blue car", "green"),
            1,
            False,
        ),
        (
            "Please choose the correct solution to the question: Open a jar\n\nSolution1: twist lid\n\nSolution2: hit it \n\nAnswer format: solution1/solution2",
            "solution1",
            "Open a jar",
            ("twist lid", "hit it"),
            0,
            False,
        ),
        (
            "Please choose the correct ending to complete the given sentence: Drums: A man\n\nEnding1: plays.\n\nEnding2: sings.\n\nEnding3: sits.\n\nEnding4: runs.\n\nAnswer format: ending1/ending2/ending3/ending4",
            "ending4",
            "Drums: A man",
            ("plays.", "sings.", "sits.", "runs."),
            3,
            False,
        ),
        (
            "Please choose the correct answer to fill in the blank to complete the given sentence: Ann beat Bo so _ won.\n\nOption1: Ann Option2: Bo Answer format: option1/option2",
            "option1",
            "Ann beat Bo so _ won.",
            ("Ann", "Bo"),
            0,
            True,
        ),
        (
            "Please choose the correct answer to the question: Q?\nAnswer1: a\nAnswer2: b\nAnswer3: c\nAnswer4: d\nAnswer5: e\n\nAnswer format: answer1/answer2/answer3/answer4/answer5",
            "answer5",
            "Q?",
            ("a", "b", "c", "d", "e"),
            4,
            False,
        ),
    ],
)
def test_each_format(instruction, answer, question, candidates, gold, blank):
    item = parse_item({"instruction": instruction, "input": "", "output": "", "answer": answer})
    assert (item.question, item.candidates, item.gold, item.blank) == (question, candidates, gold, blank)


def test_text_requests_follow_the_spec():
    item = parse_item(
        {
            "instruction": "Please choose the correct answer to the question: Why?\n\nAnswer1: x Answer2: y\n\nAnswer format: answer1/answer2",
            "answer": "answer1",
        }
    )
    assert text_requests(item) == [("Question: Why?\nAnswer:", " x"), ("Question: Why?\nAnswer:", " y")]
    blank = parse_item(
        {
            "instruction": "Please choose the correct answer to fill in the blank to complete the given sentence: Ann beat Bo so _ won the cup.\n\nOption1: Ann Option2: Bo Answer format: option1/option2",
            "answer": "option2",
        }
    )
    # partial scoring: the option fills the blank in the context; the rest is the shared continuation
    assert text_requests(blank) == [("Ann beat Bo so Ann", " won the cup."), ("Ann beat Bo so Bo", " won the cup.")]
    tf = parse_item(
        {
            "instruction": "Please answer the following question with true or false, question: ok?\n\nAnswer format: true/false",
            "answer": "true",
        }
    )
    assert [c for _, c in text_requests(tf)] == [" true", " false"]
    row = {
        "instruction": "Please answer the following question with true or false, question: ok?\n\nAnswer format: true/false",
        "answer": "true",
    }
    context, continuation = label_requests(row, tf)[1]
    assert context.endswith("### Response:\nthe correct answer is") and continuation == " false"


@pytest.mark.parametrize(
    "row, message",
    [
        ({"instruction": "Please answer: what?", "answer": "true"}, "no 'Answer format"),
        ({"instruction": "Q\n\nAnswer format: answer1/answer2", "answer": "answer1"}, "no 'Answer1:'-style candidates"),
        (
            {"instruction": "Q\n\nAnswer1: a\n\nAnswer format: answer1/answer2", "answer": "answer1"},
            r"\['answer2'\].*missing",
        ),
        (
            {"instruction": "Q\n\nAnswer1: a Answer2: b\n\nAnswer format: answer1/answer2", "answer": "answer7"},
            "answer7",
        ),
        ({"answer": "true"}, 'missing field "instruction"'),
    ],
)
def test_unparseable_items_are_named(row, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_item(row, "Commonsense 170k row 41")
    assert "row 41" in str(err.value)
