"""The one place a multiprocessing start method is chosen, with the reason for each kind of pool."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext
from typing import Literal

__all__ = ["Kind", "context"]

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
