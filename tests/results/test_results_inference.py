"""fastgen.results.inference: the decision rule on hand-built request records, each case with a known answer, and
the bad input the rule must say "too few to tell" to rather than divide by zero."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from _support.results import report_of, request, swarm_requests, table, write_repeat
from records import record

from fastgen.results import compare_runs
from fastgen.results.inference import (
    BOOTSTRAP,
    MIN_INTERVAL_RUNS,
    MIN_SESSIONS,
    _weighted_quantile,
    benjamini_hochberg,
    compare,
    figure,
    run_compare,
    run_figure,
    t_quantile,
    t_two_sided_p,
)
from fastgen.results.runs import RequestRecord
from fastgen.results.stats import Figure, hit_ratio, percentile_ms

TTFT50 = percentile_ms("ttft", 50)
# the same statistic of something the server counts, not a clock: sessions replicate it within one run
COUNTED50 = replace(TTFT50, clocked=False)


def rec(session: str, *, turn=1, ttft=None, prompt=None, cached=None, repeat=1, failed=False) -> RequestRecord:
    return record(
        session,
        start=float(turn),
        turn=turn,
        ttft=ttft,
        prompt=prompt,
        cached=cached,
        repeat=repeat,
        failed=failed,
        config="scenario1/c10",
    )


def run(ttfts_ms: dict[str, list[float]], repeat: int = 1) -> list[RequestRecord]:
    """One run: each session's requests with these TTFTs (ms), turn after turn."""
    return [
        rec(s, turn=t, ttft=v / 1000, repeat=repeat) for s, values in ttfts_ms.items() for t, v in enumerate(values, 1)
    ]


def jittered(sessions: int, *, seed: int, scale: float = 1.0, turns: int = 4) -> dict[str, list[float]]:
    """Sessions whose turns cost what the session costs (its own level) times request noise: TTFTs in ms."""
    rng = np.random.default_rng(seed)
    levels = np.random.default_rng(99).lognormal(5.0, 0.5, sessions)  # the dataset's: the same on every side
    return {f"s{i}": list(scale * level * rng.lognormal(0.0, 0.3, turns)) for i, level in enumerate(levels)}


def test_t_quantiles_and_p_values_match_the_tables():
    expected = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 10: 2.228, 30: 2.042, math.inf: 1.960}
    for df, t in expected.items():
        assert t_quantile(df) == pytest.approx(t, abs=1e-3)
    assert t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-4)
    assert t_two_sided_p(0.0, 5) == pytest.approx(1.0) and t_quantile(2.7) == t_quantile(2)  # df rounded down


def test_benjamini_hochberg_rejects_the_step_up_set():
    # m = 4: thresholds 0.0125, 0.025, 0.0375, 0.05 for the sorted p-values; step up to the largest one under its own
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.5]) == [True, False, False, False]
    assert benjamini_hochberg([0.03, 0.02, 0.01, 0.5]) == [True, True, True, False]
    assert benjamini_hochberg([0.04, 0.049, 0.045, 0.03]) == [True, True, True, True]
    assert benjamini_hochberg([0.2, 0.3]) == [False, False] and benjamini_hochberg([]) == []


def test_weighted_quantile_is_the_percentile_of_the_repeated_values():
    rng = np.random.default_rng(1)
    values = np.sort(rng.exponential(1.0, 13))
    weights = rng.integers(0, 4, size=(50, 13)).astype(float)
    weights[:, 0] += 1  # every resample draws something
    for q in (5, 50, 95):
        got = _weighted_quantile(values, weights, q)
        want = [np.percentile(np.repeat(values, w.astype(int)), q) for w in weights]
        assert got == pytest.approx(want)


def test_a_quantile_over_many_rows_is_resampled_at_cut_points_to_within_one_cut():
    from fastgen.results import inference

    rng = np.random.default_rng(2)
    rows, clusters = rng.lognormal(0.0, 1.0, (6000, 1)), rng.integers(0, 300, 6000)
    counts = inference._draws([np.arange(300)], 300, 200)
    order = np.argsort(rows[:, 0])
    for q in (50, 95, 99):
        cut = inference._run_values(rows, clusters, percentile_ms("ttft", q), counts)
        exact = inference._weighted_quantile(rows[order, 0], counts[:, clusters[order]], q)
        assert cut == pytest.approx(exact, rel=0.03)  # a cut holds 3 of 6,000 rows
        assert np.std(np.log(cut)) == pytest.approx(np.std(np.log(exact)), rel=0.05)  # the spread the rule uses


def test_a_figure_over_one_run_is_a_session_bootstrap_interval_that_brackets_the_value():
    requests = run(jittered(20, seed=3))
    first, again = (figure([requests], COUNTED50) for _ in range(2))
    assert first == again  # a fixed seed: the same records give the same interval
    values = sorted(r.ttft * 1000 for r in requests)
    assert values[0] < first.low < first.value < first.high < values[-1]
    assert (first.n, first.sessions, first.repeats, BOOTSTRAP) == (80, 20, 1, 1000)


def test_a_figure_over_runs_is_the_mean_with_a_t_interval_over_runs():
    groups = [run({f"s{i}": [v] for i in range(8)}, repeat=k) for k, v in enumerate((10.0, 30.0, 20.0), 1)]
    got = figure(groups, TTFT50)
    # identical sessions within a run: no sessions' variance; runs: 20 x exp(+- 4.303 x sd(log values) / sqrt(3))
    assert (got.value, got.n, got.repeats, got.sessions) == (pytest.approx(20.0), 24, 3, 8)
    half = 4.3027 * np.std(np.log([10, 30, 20]), ddof=1) / math.sqrt(3)
    assert (got.low, got.high) == (
        pytest.approx(20 * math.exp(-half), rel=1e-3),
        pytest.approx(20 * math.exp(half), rel=1e-3),
    )


def spread_runs(values_ms: tuple[float, ...], sessions: int = 8) -> list[list[RequestRecord]]:
    """Runs whose sessions all took the same TTFT, one value a run: only the runs' spread is left."""
    return [run({f"s{i}": [v] for i in range(sessions)}, repeat=k) for k, v in enumerate(values_ms, 1)]


def test_an_interval_the_spread_of_two_runs_holds_up_is_flagged_with_the_runs_it_needs():
    # two runs 2.6 times apart: t on one degree of freedom makes the interval span five orders of magnitude
    two = figure(spread_runs((1000.0, 2600.0)), TTFT50)
    assert math.log10(two.high / two.low) > 5 and two.df == pytest.approx(1.0)
    assert (two.informative, two.needs_runs, MIN_INTERVAL_RUNS) == (False, 3, 3)  # the range kept, flagged
    three = figure(spread_runs((1000.0, 2600.0, 1400.0)), TTFT50)
    assert (three.informative, three.needs_runs, three.df) == (True, None, pytest.approx(2.0))
    # B/A: two runs a side pool 2 degrees of freedom (t = 4.30), still more than two orders of magnitude here
    _, _, r = compare(spread_runs((1000.0, 2600.0)), spread_runs((3000.0, 7800.0)), TTFT50)
    assert math.log10(r.high / r.low) > 2 and (r.df, r.informative, r.needs_runs) == (pytest.approx(2.0), False, 3)
    _, _, r = compare(spread_runs((1000.0, 2600.0, 1400.0)), spread_runs((3000.0, 7800.0, 4200.0)), TTFT50)
    assert (r.df, r.informative, r.needs_runs) == (pytest.approx(4.0), True, None)
    # whole-run figures alike; runs that agree leave no runs' spread, and the interval is informative
    assert (run_figure([1.0, 2.6], 2).informative, run_figure([1.0, 2.6], 2).needs_runs) == (False, 3)
    assert run_compare([1.0, 2.6], [3.0, 7.8], n_a=2, n_b=2, margin=0.05)[2].needs_runs == 3
    assert run_figure([1.0, 1.0], 2).informative is True


def test_with_two_runs_an_interval_shows_where_its_sessions_carry_it_not_its_runs():
    sessions = jittered(20, seed=5)
    close = [run({s: [v * scale for v in values] for s, values in sessions.items()}, repeat=k) for k, scale in
             ((1, 1.0), (2, 1.02))]  # fmt: skip
    got = figure(close, TTFT50)
    assert (got.informative, got.needs_runs) == (True, None) and got.high / got.low < 3
    apart = [run({s: [v * scale for v in values] for s, values in sessions.items()}, repeat=k) for k, scale in
             ((1, 1.0), (2, 2.0))]  # fmt: skip
    assert (figure(apart, TTFT50).informative, figure(apart, TTFT50).needs_runs) == (False, 3)


def test_a_hit_ratio_whose_runs_agree_rests_on_its_sessions_and_shows_its_interval_from_two_runs():
    groups = [[rec(f"s{i}", prompt=1000, cached=100 * (i % 9), repeat=k) for i in range(20)] for k in (1, 2)]
    got = figure(groups, hit_ratio())
    assert got.informative is True and got.low < got.value < got.high and got.df > 2


def test_hit_ratio_resamples_whole_sessions_with_their_prompt_lengths():
    requests = [rec(f"a{i}", prompt=100, cached=100) for i in range(10)]
    requests += [rec(f"b{i}", prompt=900, cached=0) for i in range(10)]
    got = figure([requests], hit_ratio())
    assert got.value == pytest.approx(10.0) and got.n == 20
    assert 0 < got.low < 10.0 < got.high < 50.0


def test_an_a_a_comparison_is_not_a_difference_with_one_two_or_three_runs():
    for runs in (1, 2, 3):
        a = [run(jittered(20, seed=10 + k), repeat=k) for k in range(runs)]
        b = [run(jittered(20, seed=20 + k), repeat=k) for k in range(runs)]
        for measure in (TTFT50, COUNTED50) if runs > 1 else (COUNTED50,):
            _, _, r = compare(a, b, measure)
            assert r.p is not None and r.p > 0.05 and r.low < 1 < r.high, (runs, measure.clocked)


def test_a_time_needs_two_runs_a_side_what_the_server_counts_does_not():
    a, b = run(jittered(20, seed=1)), run(jittered(20, seed=2, scale=3.0))
    fa, _, r = compare([a], [b], TTFT50)
    assert r.value == pytest.approx(3.0, rel=0.3) and r.p is None and fa.low is None
    assert r.too_few == fa.too_few == "a time, and one run a side: 2 needed"
    _, _, counted = compare([a], [b], COUNTED50)
    assert counted.p is not None and counted.p < 0.001


def test_a_known_gap_is_a_difference_and_its_interval_holds_it():
    a = [run(jittered(20, seed=k), repeat=k) for k in range(3)]
    b = [run(jittered(20, seed=50 + k, scale=3.0), repeat=k) for k in range(3)]
    _, _, r = compare(a, b, TTFT50)
    assert r.p < 0.001 and r.low < 3.0 < r.high and r.low > 1.05 and r.sessions == 20


def test_pairing_tells_apart_sides_whose_own_intervals_overlap():
    # the sessions differ a lot from each other, B is 20 % slower on every one: each side's interval is wide,
    # the paired B/A is not
    a = run(jittered(20, seed=1))
    b = [rec(r.session, turn=r.turn, ttft=r.ttft * 1.2) for r in a]
    fa, fb, r = compare([a, a], [b, b], TTFT50)
    assert fa.high > fb.low and r.low == pytest.approx(1.2) and r.p == 0.0


def test_identical_values_test_as_they_are():
    same = run({f"s{i}": [100.0, 100.0] for i in range(10)})
    fa, fb, r = compare([same, same], [same, same], TTFT50)  # zero spread anywhere: equal, no difference
    assert (fa.low, fa.high, r.value, r.p) == (pytest.approx(100.0), pytest.approx(100.0), 1.0, 1.0)
    lower = run({f"s{i}": [97.0, 97.0] for i in range(10)})  # 3 % lower everywhere: within the 5 % margin
    assert compare([same, same], [lower, lower], TTFT50)[2].p == 1.0
    much = run({f"s{i}": [50.0, 50.0] for i in range(10)})  # half, in every session and run: a difference
    assert compare([same, same], [much, much], TTFT50)[2].p == 0.0


def test_zero_spread_hit_ratios_are_not_a_difference_unless_every_session_shows_it():
    # hit ratios equal run to run (recorded outputs), 0.97 of A's pooled, but from two sessions of ten only
    a = [rec(f"s{i}", prompt=1000, cached=900) for i in range(10)]
    b = [rec(f"s{i}", prompt=1000, cached=900 if i >= 2 else 765) for i in range(10)]
    _, _, r = compare([a, a], [b, b], hit_ratio())
    assert r.value == pytest.approx(0.97) and r.p > 0.05


def test_too_few_sessions_to_tell():
    a, b = run(jittered(MIN_SESSIONS - 1, seed=1)), run(jittered(MIN_SESSIONS - 1, seed=2, scale=5.0))
    fa, fb, r = compare([a, a], [b, b], TTFT50)
    assert r.value == pytest.approx(fb.value / fa.value) and r.p is None
    assert r.too_few == "7 sessions on both sides, 8 needed" and fa.too_few == "7 sessions, 8 needed" and fa.low is None
    one = run({"s0": [100.0, 120.0, 90.0]})
    fa, _, r = compare([one], [one], COUNTED50)
    assert fa.too_few == "1 session, 8 needed" and r.too_few == "1 sessions on both sides, 8 needed"


def test_runs_of_different_repeat_counts_give_an_interval():
    a = [run(jittered(20, seed=k), repeat=k) for k in range(3)]
    b = [run(jittered(20, seed=40 + k), repeat=k) for k in range(2)]
    fa, fb, r = compare(a, b, TTFT50)
    assert (fa.repeats, fb.repeats) == (3, 2) and r.low < r.value < r.high and r.p is not None
    fa, fb, r = compare(a, b[:1], COUNTED50)  # 3 runs against 1: pooled over both sides, 2 degrees of freedom
    assert (fa.repeats, fb.repeats) == (3, 1) and r.low < r.value < r.high and r.p is not None
    assert compare(a, b[:1], TTFT50)[2].too_few == "a time, and one run a side: 2 needed"


def test_a_failed_repeat_without_requests_leaves_the_others():
    a = [run(jittered(20, seed=1), repeat=1), [rec("s0", ttft=None, failed=True, repeat=2)], run(jittered(20, seed=3))]
    b = [run(jittered(20, seed=2)), run(jittered(20, seed=4))]
    fa, _, r = compare(a, b, TTFT50)
    assert fa.repeats == 2 and fa.n == 160 and r.p is not None


def test_a_value_of_zero_has_no_ratio_to_test():
    cold = [rec(f"s{i}", prompt=1000, cached=0) for i in range(10)]
    warm = [rec(f"s{i}", prompt=1000, cached=500) for i in range(10)]
    assert compare([cold], [warm], hit_ratio())[2].value is None  # B/A of a zero A: none
    assert compare([warm], [cold], hit_ratio())[2].too_few == "a value of 0"


def test_figures_of_whole_runs_need_two_runs_a_side():
    assert run_figure([5.0], 10) == Figure(5.0, 10, repeats=1, too_few="1 run, 2 needed")
    got = run_figure([3.0, 1.0, 2.0], 30)
    half = 4.3027 * np.std(np.log([3, 1, 2]), ddof=1) / math.sqrt(3)
    assert got.value == 2.0 and got.high == pytest.approx(2 * math.exp(half), rel=1e-3)
    _, _, one = run_compare([1.0], [2.0, 2.1], n_a=1, n_b=2, margin=0.05)
    assert (
        one.value == pytest.approx(2.05)
        and one.too_few == "a figure of whole runs, 1 run on a side: 2 needed"
        and one.p is None
    )
    _, _, same = run_compare([1.0, 1.0], [1.0, 1.0], n_a=2, n_b=2, margin=0.05)  # no spread, no difference
    assert (same.value, same.p, same.low, same.high) == (1.0, 1.0, 1.0, 1.0)
    _, _, apart = run_compare([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], n_a=3, n_b=3, margin=0.05)
    assert apart.p < 0.01 and apart.low > 1.5
    _, _, zero = run_compare([0.0, 0.0], [1.0, 1.0], n_a=2, n_b=2, margin=0.05)
    assert zero.value is None


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no division by zero, no mean of nothing, anywhere
def test_compare_bad_input_is_too_few_to_tell_or_a_correct_interval_never_a_traceback(tmp_path):
    from fastgen.results import CompareOptions

    swarm = [100 + 3 * i for i in range(20)]
    # runs of different repeat counts: three of A, two of B
    for k in (1, 2, 3):
        write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests([t + k for t in swarm]), repeat=k, repeats=3)
    for k in (1, 2):
        write_repeat(tmp_path / "b" / "scenario1" / "c2", swarm_requests([t * 2 for t in swarm]), repeat=k, repeats=2)
    # a side with one session
    for side, ttft in (("a", 0.1), ("b", 0.2)):
        alone = [request("s0", t, "text", start=t, prompt=1000, cached=500, ttft=ttft) for t in (1, 2, 3)]
        write_repeat(tmp_path / side / "scenario1" / "c4", alone, concurrency=4)
    # a config with a failed repeat: its second run died before any request
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c8", swarm_requests(swarm), concurrency=8, repeats=2)
    failed = tmp_path / "b" / "scenario1" / "c8" / "repeat-2"
    write_repeat(tmp_path / "b" / "scenario1" / "c8", [], concurrency=8, repeat=2, repeats=2, status="failed")
    (failed / "per_request_lifecycle_metrics.json").unlink()
    # identical values, zero spread, on both sides, two runs each
    for side in ("a", "b"):
        for k in (1, 2):
            write_repeat(tmp_path / side / "scenario1" / "c16", swarm_requests([150.0] * 20), repeat=k, concurrency=16)
    for options in (CompareOptions(), CompareOptions(include_incomplete=True)):
        compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False, options=options, force=True)
        levels = {
            r["config"]: r for r in table(report_of(tmp_path / "out"), "scenario1", "TTFT of text answers by conc")
        }
        uneven = levels["scenario1/c2"]
        assert (uneven["TTFT p50 ms A"]["repeats"], uneven["TTFT p50 ms B"]["repeats"]) == (3, 2)
        assert uneven["TTFT p50 ms B/A"]["low"] < uneven["TTFT p50 ms B/A"]["value"] < uneven["TTFT p50 ms B/A"]["high"]
        one = levels["scenario1/c4"]["TTFT p50 ms B/A"]
        assert one["value"] == 2.0 and one["too_few"].startswith("1 sessions on both sides, 8 needed")
        same = levels["scenario1/c16"]["TTFT p50 ms B/A"]
        assert (same["value"], same["low"], same["high"], same["p"], same["distinguishable"]) == (1, 1, 1, 1, False)
        broken = levels["scenario1/c8"]
        if options.include_incomplete:  # the failed run adds nothing: one run a side, a time too few to tell
            assert broken["TTFT p50 ms B"]["repeats"] == 1 and "one run a side" in broken["TTFT p50 ms B/A"]["too_few"]
        else:
            assert broken["TTFT p50 ms B/A"]["left_out"] == "failed" and broken["status"].startswith("B failed")
