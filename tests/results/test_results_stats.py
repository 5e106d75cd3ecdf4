"""fastgen.results.stats on hand-built request records: every figure, its n and its spread, with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from records import record

from fastgen.results import read_runs
from fastgen.results.runs import RequestRecord
from fastgen.results.stats import (
    HIT_MARGIN,
    hit_percent,
    hit_ratio,
    in_window,
    mean,
    per_gpu_hour,
    percentile,
    percentile_min_n,
    percentile_ms,
    steady_window,
    ttft_ms,
    window_output_tokens_per_s,
)

rec = record


def timed(values_s, repeat=1) -> list[RequestRecord]:
    return [rec(f"s{i}", start=float(i), ttft=v, repeat=repeat) for i, v in enumerate(values_s)]


def test_percentile_on_known_samples():
    assert percentile([10, 20, 30, 40], 50) == 25 and percentile([], 50) is None
    # 1..100 ms: numpy's linear interpolation puts p95 at 95.05
    assert ttft_ms(timed([i / 1000 for i in range(1, 101)]), 95) == pytest.approx(95.05)


def test_a_percentile_needs_one_over_one_minus_q_requests_in_each_run():
    assert [percentile_min_n(q) for q in (50, 95, 99)] == [2, 20, 100]
    assert percentile_ms("ttft", 99).min_n == 100 and percentile_ms("ttft", 95).name == "ttft p95"


def test_a_measure_counts_neither_failed_requests_nor_those_without_the_value():
    measure = percentile_ms("ttft", 50)
    requests = timed([0.1, 0.2]) + [rec("x", ttft=5.0, failed=True), rec("y", ttft=None)]
    assert [measure.row(r) for r in requests] == [(100.0,), (200.0,), None, None]
    assert hit_ratio().row(rec("z", prompt=100, cached=None)) == (100.0, 0.0)  # no details: nothing cached


def test_hit_ratio_pools_tokens_over_prompts_of_unequal_length():
    # a short prompt all cached, a long one not: pooled 100 / 1000 = 10 %, not the per-request mean of 50 %
    requests = [rec("a", prompt=100, cached=100), rec("b", prompt=900, cached=0)]
    assert hit_percent(requests) == pytest.approx(10.0)
    sums = np.sum([hit_ratio().row(r) for r in requests], axis=0)
    assert hit_ratio().of_sums(sums) == pytest.approx(10.0) and hit_ratio().margin == HIT_MARGIN


def sessions(*spans, repeat=1) -> list[RequestRecord]:
    """Each session as two requests: (start, end) of its first request's start and its last one's end."""
    out = []
    for i, (start, end) in enumerate(spans):
        out += [
            rec(f"s{i}", start=start, end=start + 0.5, repeat=repeat),
            rec(f"s{i}", start=end - 0.5, end=end, repeat=repeat, turn=2),
        ]
    return out


def test_steady_window_runs_from_the_plateau_to_the_last_session_start():
    # two at a time: s0 0-10, s1 1-11, s2 10-20 (as s0 ends), s3 11-21: the peak of 2 is first reached at 1,
    # the last session starts at 11
    requests = sessions((0, 10), (1, 11), (10, 20), (11, 21))
    window = steady_window(requests)
    assert (window.start, window.end, window.peak, window.sessions) == (1, 11, 2, 4)
    # half the peak (1 session) is reached at once
    assert steady_window(requests, plateau=0.5).start == 0
    # the requests that started inside it
    assert sorted(r.start for r in in_window(requests, window)) == [1, 9.5, 10, 10.5, 11]


def test_steady_window_is_none_when_every_session_starts_before_the_plateau():
    assert steady_window(sessions((0, 10), (0, 12), (0, 14))) is None


def test_window_output_tokens_count_each_request_in_proportion_to_its_time_inside():
    window = steady_window(sessions((0, 10), (1, 11), (10, 20), (11, 21)))  # 1 to 11: 10 s
    requests = [rec("x", start=0.0, end=2.0, output=100), rec("y", start=5.0, end=6.0, output=50)]
    # x: half of its time inside (50 tokens), y: all (50): 100 tokens over 10 s
    assert window_output_tokens_per_s(requests, window) == pytest.approx(10.0)
    assert window_output_tokens_per_s(requests, None) is None


def test_mean_output_tokens_and_per_gpu_hour():
    measure = mean("output_tokens")
    sums = np.sum([measure.row(r) for r in (rec(output=10), rec(output=30))], axis=0)
    assert measure.of_sums(sums) == pytest.approx(20.0)
    assert per_gpu_hour(2.0, 4, per_second=True) == pytest.approx(1800.0)
    assert per_gpu_hour(100.0, 2, per_second=False) == pytest.approx(50.0)
    assert per_gpu_hour(100.0, None, per_second=False) is None


def test_hit_percent_pools_cached_over_prompt_tokens(two_sides):
    runs, _ = read_runs(two_sides[0])
    # 4 of 6 requests have 900 of 1000 cached
    assert hit_percent(runs["scenario1/c2"].requests) == pytest.approx(100 * 3600 / 6000)


def test_percentile_interpolates_linearly():
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([], 50) is None
