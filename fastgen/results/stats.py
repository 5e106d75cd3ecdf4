"""The few statistics a report needs, over request and session records, each None where there is nothing to
measure (no request of that kind, an engine that exports no such metric)."""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from .runs import ConfigRun, RequestRecord

__all__ = ["PERCENTILES", "counter_delta", "hit_percent", "percentile", "peak", "ratio", "side_by_side",
           "ttft_ms", "values_ms"]

PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """The q-th percentile (linear interpolation, numpy's default), or None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def values_ms(requests: Iterable[RequestRecord], attribute: str) -> list[float]:
    """One timing of every successful request that has it, in milliseconds."""
    return [getattr(r, attribute) * 1000.0 for r in requests if not r.failed and getattr(r, attribute) is not None]


def ttft_ms(requests: Iterable[RequestRecord], q: float) -> Optional[float]:
    return percentile(values_ms(requests, "ttft"), q)


def hit_percent(requests: Iterable[RequestRecord]) -> Optional[float]:
    """100 x cached / prompt tokens, pooled over the requests the server reported usage for."""
    prompt = cached = 0
    for r in requests:
        if r.prompt_tokens is not None and not r.failed:
            prompt += r.prompt_tokens
            cached += r.cached_tokens or 0
    return 100.0 * cached / prompt if prompt else None


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """B/A, or None when either is missing or A is zero."""
    return None if a is None or b is None or a == 0 else b / a


def side_by_side(measure: Callable[[list[RequestRecord]], Optional[float]], a: list[RequestRecord],
                 b: list[RequestRecord]) -> list[Optional[float]]:
    """[A, B, B/A] of one measure."""
    va, vb = measure(a), measure(b)
    return [va, vb, ratio(va, vb)]


def peak(run: ConfigRun, values: Callable[[dict], Optional[float]]) -> Optional[float]:
    """The largest value of a sampled metric over a run, or None if it was never exported."""
    found = [v for v in (values(sample) for _, sample in run.samples) if v is not None]
    return max(found) if found else None


def counter_delta(run: ConfigRun, values: Callable[[dict], Optional[float]]) -> Optional[float]:
    """How much a sampled counter grew over a run (last sample minus first)."""
    found = [v for v in (values(sample) for _, sample in run.samples) if v is not None]
    return found[-1] - found[0] if len(found) >= 2 else None
