"""Helpers the analysis tests share: hand-made planned requests over block hashes, and an analysis result."""

from __future__ import annotations

import numpy as np

from fastgen.analysis.schedule import PlannedRequest

BS = 16


def hashes(*keys: int) -> np.ndarray:
    return np.asarray(keys, dtype=np.uint64)


def request(event, blocks, *, preds=(), wait_ms=0, extra=5, output=10, label="1") -> PlannedRequest:
    return PlannedRequest(event, tuple(preds), wait_ms, hashes(*blocks), len(blocks) * BS + extra, output, label)


def target_result(name, prompt, cached_infinite, cached_capacity=None, sweep=(), by_label=None):
    from fastgen.analysis import TargetResult

    return TargetResult(
        name,
        "t",
        1,
        requests=1,
        prompt_tokens=prompt,
        cached_infinite=cached_infinite,
        cached_capacity=cached_capacity,
        sweep=list(sweep),
        by_label=by_label or {},
    )
