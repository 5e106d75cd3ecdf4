"""Where a run's wall time goes: named marks on the machine's monotonic clock, for the benchmark of the critical path.

`time.perf_counter` is CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so a mark taken here
compares with one the benchmark took before it started fastgen (its interpreter start-up and imports) and with the
pool's workers. The marks never reach the dataset: they go to the file `--timings` names, and nowhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

__all__ = ["Timeline", "read_timings"]


@dataclass
class Timeline:
    """Marks in the order they were taken: each names the phase that has just ended."""

    marks: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter()))

    def once(self, name: str) -> None:
        """A mark taken the first time only (the first session written, of many)."""
        if all(taken != name for taken, _ in self.marks):
            self.mark(name)

    def document(self) -> bytes:
        """The marks as the JSON `--timings` writes and read_timings reads."""
        return orjson.dumps({"clock": "perf_counter", "marks": self.marks}, option=orjson.OPT_INDENT_2)


def read_timings(path: Path) -> list[tuple[str, float]]:
    """The marks a run wrote with --timings."""
    return [(str(name), float(t)) for name, t in orjson.loads(path.read_bytes())["marks"]]
