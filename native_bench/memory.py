"""The memory of a process tree as PSS: each page shared between processes counted once, split between them.

RSS summed over a parent and its forked workers counts every shared page once per process (inference-perf forks
its load workers after loading the dataset, so they share most of it): 23.4 GB RSS summed was 8.4 GB of PSS. The
kernel's own accounting (/proc/PID/smaps_rollup) is read, no estimate.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Optional

__all__ = ["PssSampler", "tree_pss_kib"]


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids.extend(int(k) for k in task.read_text().split())
        except OSError:  # the thread or process ended while being read
            pass
    return kids


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_pss_kib(root: int) -> int:
    """PSS of `root` and every process below it, KiB (0 once it has ended)."""
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _pss_kib(pid)
        stack.extend(_children(pid))
    return total


class PssSampler:
    """Samples a process tree's PSS every `period_s` on a thread; `peak_kib` is the highest seen. `over(kib)` is
    called once when a sample passes `cap_kib` (to stop a run before it takes the machine's memory)."""

    def __init__(
        self,
        root: int,
        period_s: float = 0.2,
        cap_kib: Optional[int] = None,
        over: Callable[[int], None] = lambda kib: None,
    ) -> None:
        self.root, self.period_s, self.cap_kib, self._over = root, period_s, cap_kib, over
        self.peak_kib, self.capped = 0, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def __enter__(self) -> "PssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            kib = tree_pss_kib(self.root)
            self.peak_kib = max(self.peak_kib, kib)
            if self.cap_kib is not None and kib > self.cap_kib and not self.capped:
                self.capped = True
                self._over(kib)
            self._stop.wait(self.period_s)
