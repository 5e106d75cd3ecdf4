"""Every statistic the report prints, each with what it rests on: how many requests stand behind it and its spread.

A figure (`Figure`) is a value, n (the requests behind it), an interval [low, high] and the number of repeats:
- over several repeats of a config, the value is the median of the per-repeat values and the interval their min-max;
- over one run, the value is computed over its requests and the interval is a bootstrap 95% interval: BOOTSTRAP
  resamples of the requests (with replacement) from a numpy Generator seeded with BOOTSTRAP_SEED, so the same
  records always give the same interval;
- figures of a whole run (throughput, KV peak, counters) have per-repeat values only: min-max over repeats, no
  interval for one run.
Percentiles are numpy's linear interpolation; p99 needs P99_MIN_REQUESTS requests in every repeat it is computed
from, else its value is None (with its n). A hit ratio is pooled: 100 x the sum of cached tokens over the sum of
prompt tokens (a resample draws requests, so long prompts weigh as they do in the value). A B/A (`Ratio`) is
`distinguishable` when the two intervals do not overlap; None when either has no interval.

Times: a request's start and end are inference-perf's perf_counter seconds, comparable within one run only, so
windows and time bins are computed per repeat, each from its own first request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from .runs import ConfigRun, Repeat, RequestRecord

__all__ = [
    "BOOTSTRAP",
    "BOOTSTRAP_SEED",
    "Figure",
    "Measure",
    "P99_MIN_REQUESTS",
    "PERCENTILES",
    "Ratio",
    "Window",
    "counter_delta",
    "figure",
    "figure_ratio",
    "hit_percent",
    "hit_ratio",
    "in_window",
    "kv_tokens",
    "mean",
    "output_tokens_per_s",
    "over_time",
    "peak",
    "peak_percent",
    "per_gpu_hour",
    "percentile",
    "percentile_ms",
    "prompt_tokens_sent",
    "ratio",
    "run_figure",
    "sessions_per_hour",
    "steady_window",
    "ttft_ms",
    "values_ms",
    "window_offsets",
    "window_output_tokens_per_s",
]

PERCENTILES = (50, 95, 99)
P99_MIN_REQUESTS = 100
BOOTSTRAP = 1000
BOOTSTRAP_SEED = 20240522
_BOOTSTRAP_CELLS = 4_000_000  # resampled values held at once: resamples are drawn in batches under this


@dataclass(frozen=True)
class Figure:
    value: Optional[float]
    n: int  # requests behind it (sessions for sessions/h), over every repeat
    low: Optional[float] = None
    high: Optional[float] = None
    repeats: int = 0  # repeats it was computed from


@dataclass(frozen=True)
class Ratio:
    """B/A of two figures."""

    value: Optional[float]
    low: Optional[float] = None  # B's low over A's high
    high: Optional[float] = None
    distinguishable: Optional[bool] = None  # the intervals do not overlap; None: no interval on one side
    left_out: Optional[str] = None  # why there is no value although both sides have one (an incomplete run)


@dataclass(frozen=True)
class Measure:
    """A statistic of a set of requests: `columns` turns the requests it applies to into an (n, k) array,
    `statistic` maps (..., n, k) arrays to (...) values, so one call computes every bootstrap resample."""

    columns: Callable[[list[RequestRecord]], np.ndarray]
    statistic: Callable[[np.ndarray], np.ndarray]
    min_n: int = 1  # fewer requests (in any repeat): no value


def _attribute(attribute: str, scale: float = 1.0) -> Callable[[list[RequestRecord]], np.ndarray]:
    def columns(requests: list[RequestRecord]) -> np.ndarray:
        return np.asarray(
            [[getattr(r, attribute) * scale] for r in requests if not r.failed and getattr(r, attribute) is not None],
            dtype=float,
        ).reshape(-1, 1)

    return columns


def percentile_ms(attribute: str, q: float) -> Measure:
    """The q-th percentile of a timing of the successful requests that have it, in milliseconds."""
    return Measure(
        _attribute(attribute, 1000.0),
        lambda a: np.percentile(a[..., 0], q, axis=-1),
        P99_MIN_REQUESTS if q >= 99 else 1,
    )


def mean(attribute: str) -> Measure:
    return Measure(_attribute(attribute), lambda a: a[..., 0].mean(axis=-1))


def _usage(requests: list[RequestRecord]) -> np.ndarray:
    return np.asarray(
        [[r.prompt_tokens, r.cached_tokens or 0] for r in requests if not r.failed and r.prompt_tokens is not None],
        dtype=float,
    ).reshape(-1, 2)


def _pooled_hit(a: np.ndarray) -> np.ndarray:
    prompt = a[..., 0].sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prompt > 0, 100.0 * a[..., 1].sum(axis=-1) / np.where(prompt > 0, prompt, 1), np.nan)


def hit_ratio() -> Measure:
    """100 x cached / prompt tokens, pooled over the requests the server reported usage for."""
    return Measure(_usage, _pooled_hit)


def _value(x) -> Optional[float]:
    x = float(x)
    return None if np.isnan(x) else x


def _bootstrap(data: np.ndarray, statistic) -> tuple[Optional[float], Optional[float]]:
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    n = len(data)
    batch = max(1, min(BOOTSTRAP, _BOOTSTRAP_CELLS // max(1, n * data.shape[1])))
    batches = []
    for done in range(0, BOOTSTRAP, batch):
        index = rng.integers(0, n, size=(min(batch, BOOTSTRAP - done), n))
        batches.append(np.asarray(statistic(data[index]), dtype=float))
    values = np.concatenate(batches)
    values = values[~np.isnan(values)]
    if not len(values):
        return None, None
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def figure(groups: Sequence[Sequence[RequestRecord]], measure: Measure) -> Figure:
    """A measure over requests grouped by repeat: the median and min-max over repeats, or, for one repeat, the
    value with its bootstrap interval."""
    arrays = [a for a in (measure.columns(list(g)) for g in groups) if len(a)]
    n = sum(len(a) for a in arrays)
    if not arrays or min(len(a) for a in arrays) < measure.min_n:
        return Figure(None, n, repeats=len(arrays))
    if len(arrays) == 1:
        value = _value(measure.statistic(arrays[0]))
        low, high = _bootstrap(arrays[0], measure.statistic) if value is not None else (None, None)
        return Figure(value, n, low, high, 1)
    values = [v for v in (_value(measure.statistic(a)) for a in arrays) if v is not None]
    if not values:
        return Figure(None, n, repeats=len(arrays))
    return Figure(float(np.median(values)), n, min(values), max(values), len(arrays))


def run_figure(values: Sequence[Optional[float]], n: int) -> Figure:
    """A figure of whole runs, one value per repeat: the median, and min-max over repeats (none for one run)."""
    found = [float(v) for v in values if v is not None]
    if not found:
        return Figure(None, n, repeats=0)
    if len(found) == 1:
        return Figure(found[0], n, repeats=1)
    return Figure(float(np.median(found)), n, min(found), max(found), len(found))


def figure_ratio(a: Figure, b: Figure, left_out: Optional[str] = None) -> Ratio:
    """B/A, with the range of ratios the two intervals allow and whether they overlap."""
    if left_out is not None:
        return Ratio(None, left_out=left_out)
    value = ratio(a.value, b.value)
    if value is None:
        return Ratio(None)
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return Ratio(value)
    low = ratio(a.high, b.low)
    high = ratio(a.low, b.high) if a.low and a.low > 0 else None
    return Ratio(value, low, high, a.high < b.low or b.high < a.low)


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
    usage = _usage(list(requests))
    return _value(_pooled_hit(usage)) if len(usage) else None


# Figures of a whole run, one value per repeat.


def peak(repeat: Repeat | ConfigRun, values: Callable[[dict], Optional[float]]) -> Optional[float]:
    """The largest value of a sampled metric over a run, or None if it was never exported."""
    found = [v for v in (values(sample) for _, sample in repeat.samples) if v is not None]
    return max(found) if found else None


def peak_percent(repeat: Repeat, usage: Callable[[dict], Optional[float]]) -> Optional[float]:
    """Peak KV usage of one run in percent of its cache (a usage gauge that reads 0-1)."""
    fraction = peak(repeat, usage)
    return None if fraction is None else 100.0 * fraction


def kv_tokens(repeat: Repeat, usage: Callable[[dict], Optional[float]]) -> Optional[float]:
    """Peak KV usage in tokens: the peak sampled usage fraction x the KV capacity the run recorded."""
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


def prompt_tokens_sent(repeats: Sequence[Repeat], keep: Callable[[RequestRecord], bool] = lambda r: True) -> Figure:
    """The server's prompt_tokens summed over a run's successful requests: median and min-max over repeats."""
    sums = [
        sum(r.prompt_tokens for r in repeat.requests if keep(r) and not r.failed and r.prompt_tokens is not None)
        for repeat in repeats
        if repeat.requests
    ]
    return run_figure(sums, sum(len(repeat.requests) for repeat in repeats))


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
