"""Long loops log done/expected, blocks run, elapsed time and ETA (fake clock: no timing in tests)."""

import logging

from depthprune.progress import Progress
from depthprune.search import get_algorithm


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_lines_report_eta_and_throttle(caplog):
    clock = FakeClock()
    progress = Progress("prior", total=4, interval=30.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="depthprune.progress"):
        clock.now = 10.0
        progress.step(blocks_run=12)  # within the interval: not logged
        clock.now = 40.0
        progress.step(blocks_run=30)
        clock.now = 41.0
        progress.step(blocks_run=40)  # throttled
        clock.now = 80.0
        progress.step(blocks_run=50)  # the last step is always logged
    assert progress.lines == [
        "prior: 2/4 evaluations, 30 blocks run, 40s elapsed, ETA 40s",
        "prior: 4/4 evaluations, 50 blocks run, 1m20s elapsed",
    ]
    assert "prior: 2/4 evaluations" in caplog.text


def test_unknown_total_has_no_eta():
    clock = FakeClock()
    progress = Progress("search cbo M=2", total=None, unit="set requests", interval=0.0, clock=clock)
    clock.now = 5.0
    progress.step(blocks_run=3)
    assert progress.lines == ["search cbo M=2: 1 set requests, 3 blocks run, 5s elapsed"]


def test_expected_requests_of_greedy_and_beam():
    greedy = get_algorithm("greedy")
    assert greedy.expected_requests(30, 3, greedy.resolve_params()) == 30 + 29 + 28
    beam = get_algorithm("beam")
    assert beam.expected_requests(30, 2, beam.resolve_params({"beam_width": 2})) == 30 + 2 * 29


def test_prior_logs_progress_through_the_evaluator(tiny_model_dir, data_dir, caplog):
    from depthprune.cli import build_parser
    from depthprune.cli_common import build_evaluator
    from depthprune.prior import compute_prior

    args = build_parser().parse_args(
        [
            "prior",
            "--model",
            str(tiny_model_dir),
            "--calibration",
            "ppl_c4",
            "--data-dir",
            str(data_dir),
            "--n-samples",
            "2",
            "--seq-len",
            "16",
            "--out",
            "unused.json",
        ]
    )
    evaluator = build_evaluator(args)
    with caplog.at_level(logging.INFO, logger="depthprune.progress"):
        compute_prior(evaluator)
    assert "prior: 8/8 evaluations" in caplog.text and "blocks run" in caplog.text
    assert evaluator.progress is None  # detached afterwards
