"""Every statistic the report prints, and what each rests on: the measures over requests, the figures of whole runs,
the steady-state window. When two figures differ is inference.py's: this module says what a figure is.

A figure (`Figure`) is a value, n (the requests behind it), the sessions and runs it rests on, and an interval
[low, high] (inference.py: sessions and runs, a t interval); a B/A (`Ratio`) carries its own interval, the p-value of
the test against its margin and, once the report's tests are corrected (by family), whether it is a difference.
Percentiles are numpy's linear interpolation; a percentile q needs at least 1 / (1 - q/100) requests in every run
it is computed from (p95: 20, p99: 100), fewer and it would be the largest value: its value is None (with its n). A
hit ratio is pooled: 100 x the sum of cached tokens over the sum of prompt tokens (long prompts weigh as they do).

Times: a request's start and end are inference-perf's perf_counter seconds, comparable within one run only, so
windows and time bins are computed per repeat, each from its own first request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from .runs import ConfigRun, Repeat, RequestRecord

__all__ = [
    "Figure",
    "HIT_MARGIN",
    "MARGIN",
    "Measure",
    "P99_MIN_REQUESTS",
    "PERCENTILES",
    "Ratio",
    "Window",
    "counter_delta",
    "hit_percent",
    "hit_ratio",
    "in_window",
    "kv_tokens",
    "mean",
    "output_tokens_per_s",
    "over_time",
    "peak",
    "per_gpu_hour",
    "percentile",
    "percentile_min_n",
    "percentile_ms",
    "prompt_tokens_sent",
    "ratio",
    "sessions_per_hour",
    "steady_window",
    "ttft_ms",
    "values_ms",
    "window_offsets",
    "window_output_tokens_per_s",
]

PERCENTILES = (50, 95, 99)
P99_MIN_REQUESTS = 100
# The smallest B/A worth a claim (inference.py: a difference is one whose interval lies beyond it). Hit ratios: 1 %
# of the ratio, about a point at the 80-95 % agents reach, the size of a block-granularity effect and more than a
# constant prompt offset lifts them (the Same prompts section measures it); everything else (times, rates, token
# counts): 5 %, below which a host's scheduling and a GPU's clocks move figures run to run.
HIT_MARGIN = 0.01
MARGIN = 0.05


@dataclass(frozen=True)
class Figure:
    value: Optional[float]
    n: int  # requests behind it (sessions for sessions/h), over every repeat
    low: Optional[float] = None
    high: Optional[float] = None
    repeats: int = 0  # runs it was computed from
    sessions: int = 0  # sessions behind it (0: a figure of whole runs)
    too_few: Optional[str] = None  # why it has no interval (too few sessions or runs)
    df: Optional[float] = None  # the degrees of freedom of its interval's t (None: no interval, or an exact one)
    # whether the interval says something (inference.MIN_INTERVAL_RUNS); None: no interval. Not informative, the
    # report prints what would make it so instead of the range: `needs_runs` runs (None: more sessions)
    informative: Optional[bool] = None
    needs_runs: Optional[int] = None


@dataclass(frozen=True)
class Ratio:
    """B/A of two figures, and the test of whether it is a difference."""

    value: Optional[float]
    low: Optional[float] = None  # its 95 % interval (inference.py), before the report's tests are corrected
    high: Optional[float] = None
    distinguishable: Optional[bool] = None  # a difference (after the correction); None: not tested
    left_out: Optional[str] = None  # why there is no value although both sides have one (an incomplete run)
    too_few: Optional[str] = None  # why it was not tested: too few sessions or runs, or a value of 0
    p: Optional[float] = None  # the test's p-value against the margin (inference.py), before the correction
    margin: Optional[float] = None  # the smallest difference claimed: B/A beyond 1 + margin or 1 / (1 + margin)
    sessions: int = 0  # sessions with data on both sides (paired)
    offset_free: Optional[str] = None  # whose constant prompt offset was taken out before the test (a hit ratio)
    df: Optional[float] = None  # as a Figure's: its interval's degrees of freedom, whether it is informative and,
    informative: Optional[bool] = None  # if not, the runs a side that would make it so (the test is the same)
    needs_runs: Optional[int] = None


@dataclass(frozen=True)
class Measure:
    """A statistic of a set of requests. `row` is what one request contributes (None: it does not count); the
    statistic is either a function of the rows' column sums (`of_sums`: a pooled ratio, a mean) or the `quantile`
    of the rows' single value. inference.py evaluates it over resampled sessions with weights."""

    name: str  # what it is called in a test's key and in a line: "hit %", "ttft p95"
    row: Callable[[RequestRecord], Optional[tuple[float, ...]]]
    of_sums: Optional[Callable[[np.ndarray], np.ndarray]] = None  # (..., columns) sums -> (...) values
    quantile: Optional[float] = None  # 0-100
    min_n: int = 1  # fewer rows in any run: no value
    margin: float = MARGIN
    upper: Optional[float] = None  # the largest value it can take (an interval is cut there): 100 for a ratio in %
    # what a clock measures (a time): a run's host and clocks move every request of it together, so the run is its
    # unit of replication (inference.py); False for what the server counts (tokens), which sessions replicate
    clocked: bool = True
    # it counts prompt tokens: a B/A of it compares the sides without a constant prompt offset (results/prompts.py)
    of_prompts: bool = False


def _timing(attribute: str, scale: float) -> Callable[[RequestRecord], Optional[tuple[float, ...]]]:
    def row(r: RequestRecord) -> Optional[tuple[float, ...]]:
        value = getattr(r, attribute)
        return None if r.failed or value is None else (value * scale,)

    return row


def percentile_min_n(q: float) -> int:
    """The fewest requests a percentile needs in each run: below 1 / (1 - q/100) it is the largest value."""
    return max(1, math.ceil(1.0 / (1.0 - q / 100.0) - 1e-9)) if q < 100 else 1


def percentile_ms(attribute: str, q: float) -> Measure:
    """The q-th percentile of a timing of the successful requests that have it, in milliseconds."""
    return Measure(f"{attribute} p{q:g}", _timing(attribute, 1000.0), quantile=q, min_n=percentile_min_n(q))


def _mean_of_sums(sums: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[..., 1] > 0, sums[..., 0] / np.where(sums[..., 1] > 0, sums[..., 1], 1), np.nan)


def mean(attribute: str, *, clocked: bool = False) -> Measure:
    """The mean of a value of the successful requests that have it (a count of tokens, unless `clocked`)."""
    timing = _timing(attribute, 1.0)

    def row(r: RequestRecord) -> Optional[tuple[float, ...]]:
        found = timing(r)
        return None if found is None else (found[0], 1.0)

    return Measure(f"mean {attribute}", row, of_sums=_mean_of_sums, clocked=clocked)


def _usage(r: RequestRecord) -> Optional[tuple[float, ...]]:
    if r.failed or r.prompt_tokens is None:
        return None
    return (float(r.prompt_tokens), float(r.cached_tokens or 0))


def _pooled_hit(sums: np.ndarray) -> np.ndarray:
    prompt = sums[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prompt > 0, 100.0 * sums[..., 1] / np.where(prompt > 0, prompt, 1), np.nan)


def hit_ratio() -> Measure:
    """100 x cached / prompt tokens, pooled over the requests the server reported usage for."""
    return Measure("hit %", _usage, of_sums=_pooled_hit, margin=HIT_MARGIN, upper=100.0, clocked=False, of_prompts=True)


def _value(x) -> Optional[float]:
    x = float(x)
    return None if np.isnan(x) else x


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """B/A, or None when either is missing or A is zero."""
    return None if a is None or b is None or a == 0 else b / a


# Plain values, for checks that need a number and no spread (the e2e compares them with engine logs).


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
    rows = [row for r in requests if (row := _usage(r)) is not None]
    return _value(_pooled_hit(np.asarray(rows).sum(axis=0))) if rows else None


# Figures of a whole run, one value per repeat.


def peak(repeat: Repeat | ConfigRun, values: Callable[[dict], Optional[float]]) -> Optional[float]:
    """The largest value of a sampled metric over a run, or None if it was never exported."""
    found = [v for v in (values(sample) for _, sample in repeat.samples) if v is not None]
    return max(found) if found else None


def kv_tokens(
    repeat: Repeat, used: Callable[[dict], Optional[float]], usage: Optional[Callable[[dict], Optional[float]]]
) -> Optional[float]:
    """Peak KV usage of one run in tokens: the largest sampled count of used tokens where the engine exports one
    (`used`), else the peak usage fraction x the KV capacity the run recorded (`usage`; None: the engine's gauge is
    too coarse to count tokens with)."""
    tokens = peak(repeat, used)
    if tokens is not None or usage is None:
        return tokens
    fraction, capacity = peak(repeat, usage), repeat.server.get("kv_capacity_tokens")
    return None if fraction is None or capacity is None else fraction * capacity


def counter_delta(repeat: Repeat | ConfigRun, values: Callable[[dict], Optional[float]]) -> Optional[float]:
    """How much a sampled counter grew over a run (last sample minus first)."""
    found = [v for v in (values(sample) for _, sample in repeat.samples) if v is not None]
    return found[-1] - found[0] if len(found) >= 2 else None


def sessions_per_hour(repeat: Repeat) -> Optional[float]:
    """Completed sessions over the span from the first session's start to the last one's end."""
    if not repeat.sessions:
        return None
    span = max(s.end for s in repeat.sessions) - min(s.start for s in repeat.sessions)
    return 3600.0 * sum(s.success for s in repeat.sessions) / span if span > 0 else None


def output_tokens_per_s(requests: Sequence[RequestRecord]) -> Optional[float]:
    """Output tokens of successful requests per second, over the span of the requests."""
    done = [r for r in requests if not r.failed and r.output_tokens is not None]
    if not done:
        return None
    span = max(r.end for r in done) - min(r.start for r in done)
    return sum(r.output_tokens or 0 for r in done) / span if span > 0 else None


def window_output_tokens_per_s(requests: Sequence[RequestRecord], window: Optional["Window"]) -> Optional[float]:
    """Output tokens per second over a window (None without one), each request's tokens counted in proportion to
    the part of its time inside the window (decode assumed even over a request)."""
    done = [r for r in requests if not r.failed and r.output_tokens is not None]
    if window is None or not done:
        return None
    tokens = 0.0
    for r in done:
        inside = min(r.end, window.end) - max(r.start, window.start)
        if inside > 0:
            tokens += (r.output_tokens or 0) * (inside / (r.end - r.start) if r.end > r.start else 1.0)
    return tokens / window.seconds if window.seconds > 0 else None


def per_gpu_hour(value: Optional[float], gpus: Optional[int], *, per_second: bool) -> Optional[float]:
    """A rate per hour (or per second, turned into per hour) divided by the GPUs the run recorded."""
    if value is None or not gpus:
        return None
    return value * (3600.0 if per_second else 1.0) / gpus


def prompt_tokens_sent(repeats: Sequence[Repeat], keep: Callable[[RequestRecord], bool] = lambda r: True) -> list[int]:
    """The server's prompt_tokens summed over each run's successful requests (runs without requests left out)."""
    return [
        sum(r.prompt_tokens for r in repeat.requests if keep(r) and not r.failed and r.prompt_tokens is not None)
        for repeat in repeats
        if repeat.requests
    ]


# The steady-state window.


@dataclass(frozen=True)
class Window:
    """Of one run (its perf_counter clock): from when the sessions in flight first reach the plateau (plateau x
    the most in flight at once) until the last session starts."""

    start: float
    end: float
    peak: int  # the most sessions in flight at once
    sessions: int

    @property
    def seconds(self) -> float:
        return self.end - self.start


def steady_window(requests: Sequence[RequestRecord], plateau: float = 1.0) -> Optional[Window]:
    """A session is in flight from its first request's start to its last request's end. None when the run has no
    such window (every session started before the plateau was reached: a ramp, then a drain)."""
    spans: dict[str, list[float]] = {}
    for r in requests:
        span = spans.setdefault(r.session, [r.start, r.end])
        span[0], span[1] = min(span[0], r.start), max(span[1], r.end)
    if not spans:
        return None
    # ends before starts at the same instant: a session that ends as another starts is not two in flight
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    in_flight, most, counts = 0, 0, []
    for t, step in events:
        in_flight += step
        most = max(most, in_flight)
        counts.append((t, in_flight))
    start = next(t for t, count in counts if count >= plateau * most)
    end = max(s for s, _ in spans.values())
    return Window(start, end, most, len(spans)) if end > start else None


def window_offsets(repeats: Sequence[Sequence[RequestRecord]], plateau: float = 1.0) -> Optional[tuple[float, float]]:
    """The steady-state window as seconds from each run's first request, the median over repeats that have one."""
    spans = []
    for requests in repeats:
        window = steady_window(requests, plateau)
        if window is not None:
            t0 = min(r.start for r in requests)
            spans.append((window.start - t0, window.end - t0))
    if not spans:
        return None
    return float(np.median([s for s, _ in spans])), float(np.median([e for _, e in spans]))


def in_window(requests: Sequence[RequestRecord], window: Optional[Window]) -> list[RequestRecord]:
    """The requests that started inside the window (none without one)."""
    return [] if window is None else [r for r in requests if window.start <= r.start <= window.end]


def over_time(
    repeats: Sequence[Sequence[RequestRecord]], bin_s: float, bins: int
) -> tuple[list[Optional[float]], list[Optional[float]]]:
    """(hit %, TTFT p95 ms) per time bin of `bin_s` seconds, each repeat's requests binned from its own first request
    and the bins pooled over repeats."""
    pooled: list[list[RequestRecord]] = [[] for _ in range(bins)]
    for requests in repeats:
        if not requests:
            continue
        t0 = min(r.start for r in requests)
        for r in requests:
            pooled[min(bins - 1, int((r.start - t0) / bin_s))].append(r)
    return [hit_percent(b) for b in pooled], [ttft_ms(b, 95) for b in pooled]
