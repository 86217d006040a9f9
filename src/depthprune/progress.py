"""Progress of long loops, logged to the rule's log: done of expected, blocks run, elapsed, ETA.

A 64-item TLM prior or a BO search runs for many minutes; without this their logs say nothing until
the end. Lines are logged at most every ``interval`` seconds (and always for the last step), so
logs stay short however many steps there are.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("depthprune.progress")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Counts steps of one task; ``total`` None when the amount of work is not known in advance."""

    def __init__(
        self, label: str, total: int | None, unit: str = "evaluations", interval: float = 30.0, clock=time.monotonic
    ):
        self.label = label
        self.total = total
        self.unit = unit
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.blocks_run: int | None = None
        self._last_logged = self.started
        self.lines: list[str] = []  # what was logged (tests read it)

    def step(self, n: int = 1, blocks_run: int | None = None, note: str = "") -> None:
        self.done += n
        if blocks_run is not None:
            self.blocks_run = blocks_run
        now = self.clock()
        last = self.total is not None and self.done >= self.total
        if last or now - self._last_logged >= self.interval:
            self._last_logged = now
            self.emit(note)

    def line(self, note: str = "") -> str:
        elapsed = self.clock() - self.started
        done = f"{self.done}/{self.total}" if self.total else str(self.done)
        parts = [f"{self.label}: {done} {self.unit}"]
        if self.blocks_run is not None:
            parts.append(f"{self.blocks_run} blocks run")
        parts.append(f"{_duration(elapsed)} elapsed")
        if self.total and 0 < self.done < self.total:
            parts.append(f"ETA {_duration(elapsed / self.done * (self.total - self.done))}")
        if note:
            parts.append(note)
        return ", ".join(parts)

    def emit(self, note: str = "") -> None:
        text = self.line(note)
        self.lines.append(text)
        log.info("%s", text)
