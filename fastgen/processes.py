"""Process pools: the one place a multiprocessing start method is chosen (with the reason for each kind of pool), how
many workers a job pays for, and the progress line of a pool over files."""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.context import BaseContext
from typing import Callable, Literal, Optional

__all__ = ["Kind", "context", "file_progress", "usable_cpus", "workers_for"]

Kind = Literal["fork-prepared", "spawn"]


def context(kind: Kind) -> BaseContext:
    """The multiprocessing context for a pool of `kind`:

    - "fork-prepared": fork where the platform has it, else spawn. The generator's workers inherit a builder the
      parent has already prepared (pools, shared blocks) at no cost; under spawn it is pickled to each of them. The
      parent keeps the tokenizer's own threads off while forking (workers._no_tokenizer_threads).
    - "spawn": always spawn. validate's workers import inference-perf after the parent may have started tokenizer
      or Arrow threads, and forking a process with running threads can deadlock; spawn also behaves the same on
      every OS.
    """
    if kind == "fork-prepared":
        return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    if kind == "spawn":
        return multiprocessing.get_context("spawn")
    raise ValueError(f"unknown kind of process pool: {kind!r}")


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers_for(items: int, items_per_worker: int, limit: Optional[int] = None) -> int:
    """Workers a job of `items` pays for: one per `items_per_worker` items (a worker's start costs what about that
    many items take), at most `limit` (default: the usable CPUs), at least one."""
    limit = usable_cpus() if limit is None else limit
    return max(1, min(limit, items // items_per_worker))


def file_progress(what: str) -> Callable[[int, int], None]:
    """A progress callback (done, total) that rewrites one stderr line, about a hundred times over the whole."""

    def tick(done: int, total: int) -> None:
        if done == total or done % max(1, total // 100) == 0:
            print(f"\r{what} {done}/{total} files", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return tick
