"""fastgen.results.stats on hand-built request records: every figure, its n and its spread, with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from fastgen.results.runs import RequestRecord
from fastgen.results.stats import (
    BOOTSTRAP,
    Figure,
    figure,
    figure_ratio,
    hit_percent,
    hit_ratio,
    in_window,
    mean,
    per_gpu_hour,
    percentile,
    percentile_ms,
    run_figure,
    steady_window,
    window_output_tokens_per_s,
)


def rec(
    session="s",
    *,
    start=0.0,
    end=None,
    ttft=None,
    prompt=None,
    cached=None,
    output=10,
    failed=False,
    repeat=1,
    turn=1,
    kind="text",
) -> RequestRecord:
    return RequestRecord(
        session=session,
        trace_dir="scenario1",
        turn=turn,
        kind=kind,
        start=start,
        end=start + 1.0 if end is None else end,
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        ttft=ttft,
        latency=None,
        ntpot=None,
        tpot=None,
        failed=failed,
        repeat=repeat,
    )


def timed(values_s, repeat=1) -> list[RequestRecord]:
    return [rec(f"s{i}", start=float(i), ttft=v, repeat=repeat) for i, v in enumerate(values_s)]


def test_percentile_p95_and_p99_on_known_samples():
    # 1..100 ms: numpy's linear interpolation puts p95 at 95.05 and p99 at 99.01
    requests = timed([i / 1000 for i in range(1, 101)])
    p95, p99 = figure([requests], percentile_ms("ttft", 95)), figure([requests], percentile_ms("ttft", 99))
    assert (p95.value, p95.n) == (pytest.approx(95.05), 100)
    assert (p99.value, p99.n) == (pytest.approx(99.01), 100)
    assert percentile([10, 20, 30, 40], 50) == 25 and percentile([], 50) is None


def test_p99_needs_100_requests_and_says_how_many_it_had():
    few = figure([timed([i / 1000 for i in range(1, 100)])], percentile_ms("ttft", 99))
    assert few == Figure(None, 99, repeats=1)  # of 99 requests p99 is their maximum: not shown
    assert figure([timed([i / 1000 for i in range(1, 100)])], percentile_ms("ttft", 95)).value is not None


def test_figure_failed_requests_and_those_without_the_timing_are_not_counted():
    requests = timed([0.1, 0.2]) + [rec("x", ttft=5.0, failed=True), rec("y", ttft=None)]
    assert figure([requests], percentile_ms("ttft", 50)).n == 2


def test_bootstrap_interval_is_deterministic_and_brackets_the_value():
    rng = np.random.default_rng(7)
    requests = timed(list(rng.exponential(0.1, 60)))
    first, again = (figure([requests], percentile_ms("ttft", 50)) for _ in range(2))
    assert first == again  # a fixed seed: the same records give the same interval, run after run
    values = sorted(r.ttft * 1000 for r in requests)
    assert values[0] < first.low < first.value < first.high < values[-1]  # an interval, not the min-max
    assert first.repeats == 1 and first.n == 60 and BOOTSTRAP == 1000


def test_figure_over_repeats_is_the_median_with_the_min_max():
    groups = [timed([0.010] * 3, repeat=1), timed([0.030] * 3, repeat=2), timed([0.020] * 3, repeat=3)]
    got = figure(groups, percentile_ms("ttft", 50))
    assert got == Figure(pytest.approx(20.0), 9, pytest.approx(10.0), pytest.approx(30.0), 3)


def test_hit_ratio_pools_tokens_over_prompts_of_unequal_length():
    # a short prompt all cached, a long one not: pooled 100 / 1000 = 10 %, not the per-request mean of 50 %
    requests = [rec("a", prompt=100, cached=100), rec("b", prompt=900, cached=0)]
    assert figure([requests], hit_ratio()).value == pytest.approx(10.0)
    assert hit_percent(requests) == pytest.approx(10.0)


def test_hit_ratio_bootstrap_resamples_requests_with_their_prompt_lengths():
    requests = [rec(f"a{i}", prompt=100, cached=100) for i in range(10)] + [
        rec(f"b{i}", prompt=900, cached=0) for i in range(10)
    ]
    got = figure([requests], hit_ratio())
    assert got.value == pytest.approx(10.0) and got.n == 20
    assert 0 < got.low < 10.0 < got.high < 50.0


def test_ratio_of_overlapping_intervals_is_not_distinguishable():
    a, b = Figure(100.0, 50, 90.0, 110.0, 1), Figure(107.0, 50, 95.0, 120.0, 1)
    r = figure_ratio(a, b)
    assert r.value == pytest.approx(1.07) and r.distinguishable is False
    apart = figure_ratio(a, Figure(150.0, 50, 130.0, 170.0, 1))
    assert (
        apart.distinguishable is True
        and apart.low == pytest.approx(130 / 110)
        and apart.high == pytest.approx(170 / 90)
    )


def test_ratio_without_intervals_is_undecided_and_a_left_out_one_has_no_value():
    assert figure_ratio(Figure(1.0, 1, repeats=1), Figure(2.0, 1, repeats=1)).distinguishable is None
    left = figure_ratio(Figure(1.0, 1, 0.5, 1.5, 1), Figure(3.0, 1, 2.5, 3.5, 1), "incomplete")
    assert left.value is None and left.left_out == "incomplete"


def test_run_figure_has_min_max_over_repeats_and_no_interval_for_one_run():
    assert run_figure([3.0, 1.0, 2.0], 30) == Figure(2.0, 30, 1.0, 3.0, 3)
    assert run_figure([5.0, None], 10) == Figure(5.0, 10, None, None, 1)


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
    assert figure([[rec(output=10), rec(output=30)]], mean("output_tokens")).value == pytest.approx(20.0)
    assert per_gpu_hour(2.0, 4, per_second=True) == pytest.approx(1800.0)
    assert per_gpu_hour(100.0, 2, per_second=False) == pytest.approx(50.0)
    assert per_gpu_hour(100.0, None, per_second=False) is None
