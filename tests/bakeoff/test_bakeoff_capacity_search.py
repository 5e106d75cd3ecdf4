"""The capacity search against synthetic engines whose capacity is known: exact, noisy near it, failing, broke."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

import pytest

from fastgen.bakeoff.capacity_search import (
    SLO,
    Budget,
    Measured,
    Outcome,
    Verdict,
    judge,
    parse_slo,
    search,
)
from fastgen.errors import SpecError


@dataclass(frozen=True)
class Fig:
    value: Optional[float]
    low: Optional[float] = None
    high: Optional[float] = None


def exact(capacity: float, seconds: float = 10.0):
    calls: list[float] = []

    def measure(load: float) -> Measured:
        calls.append(load)
        verdict = Verdict.MEETS if load <= capacity else Verdict.BREAKS
        return Measured(verdict, {"ttft_p95_ms": load}, seconds=seconds)

    return measure, calls


def test_parse_slo_reads_each_target_and_names_a_bad_one():
    assert parse_slo("ttft_p95_ms=2000, tpot_p95_ms=100") == SLO(ttft_p95_ms=2000.0, tpot_p95_ms=100.0)
    assert str(parse_slo("session_p95_s=600")) == "session_p95_s=600"
    with pytest.raises(SpecError, match="'ttft=5' is not NAME=VALUE with NAME one of ttft_p95_ms"):
        parse_slo("ttft=5")
    with pytest.raises(SpecError, match="must be a positive number"):
        parse_slo("ttft_p95_ms=-1")
    with pytest.raises(SpecError, match="given twice"):
        parse_slo("ttft_p95_ms=1,ttft_p95_ms=2")


def test_judge_decides_only_beyond_the_interval():
    slo = SLO(ttft_p95_ms=100, tpot_p95_ms=50)
    assert judge(slo, {"ttft_p95_ms": Fig(80, 70, 95), "tpot_p95_ms": Fig(10)}) is Verdict.MEETS
    assert judge(slo, {"ttft_p95_ms": Fig(90, 80, 110), "tpot_p95_ms": Fig(10)}) is Verdict.UNCLEAR
    assert judge(slo, {"ttft_p95_ms": Fig(90, 80, 110), "tpot_p95_ms": Fig(60, 55, 65)}) is Verdict.BREAKS
    assert judge(slo, {"ttft_p95_ms": Fig(None), "tpot_p95_ms": Fig(10)}) is Verdict.UNCLEAR
    assert judge(slo, {"ttft_p95_ms": Fig(80)}) is Verdict.UNCLEAR  # tpot asked, not measured


@pytest.mark.parametrize("capacity", [1, 3, 17, 100, 150, 613])
def test_whole_loads_bracket_an_exact_capacity_to_neighbours_or_the_width(capacity):
    measure, _ = exact(capacity)
    found = search(measure, start=10, lowest=1, highest=1000)
    assert found.outcome is Outcome.BRACKETED
    assert found.lo <= capacity < found.hi
    assert found.hi == found.lo + 1 or found.hi / found.lo - 1 <= 0.10


@pytest.mark.parametrize("capacity", [0.37, 4.2, 55.5])
def test_continuous_loads_bracket_within_the_stated_width(capacity):
    measure, calls = exact(capacity)
    found = search(measure, start=1.0, lowest=0.01, highest=1000.0, width=0.05, whole=False)
    assert found.outcome is Outcome.BRACKETED
    assert found.lo <= capacity < found.hi and found.hi / found.lo - 1 <= 0.05
    assert len(calls) == len(found.steps) <= 14
    assert [s.load for s in found.steps] == calls


def test_an_unclear_step_is_repeated_and_one_still_unclear_counts_as_not_meeting():
    # capacity 20; at 20..24 the first measurement is unclear, then 20 meets and 21..24 stay unclear
    seen: dict[float, int] = {}

    def measure(load: float) -> Measured:
        seen[load] = seen.get(load, 0) + 1
        if 20 <= load <= 24 and (load > 20 or seen[load] == 1):
            return Measured(Verdict.UNCLEAR, {})
        return Measured(Verdict.MEETS if load <= 20 else Verdict.BREAKS, {})

    found = search(measure, start=5, lowest=1, highest=100, repeats=2)
    assert found.outcome is Outcome.BRACKETED and found.lo == 20 and found.hi in {21, 22}
    assert seen[20] == 2 and all(seen[load] == 3 for load in seen if 20 < load <= 24)
    assert [s.attempt for s in found.steps if s.load == 20] == [1, 2]


def test_noise_near_the_boundary_still_brackets_it_within_the_noise():
    # the measured capacity wanders by up to 5 % each step: the bracket lands within that of the truth
    rng = random.Random(7)

    def measure(load: float) -> Measured:
        wobble = 40 * (1 + rng.uniform(-0.05, 0.05))
        return Measured(Verdict.MEETS if load <= wobble else Verdict.BREAKS, {})

    for _ in range(20):
        found = search(measure, start=8, lowest=1, highest=500, whole=False)
        assert found.outcome is Outcome.BRACKETED
        assert 40 * 0.95 / 1.10 <= found.lo and found.hi <= 40 * 1.05 * 1.10


def test_the_lowest_load_already_breaking_is_said_with_what_was_measured():
    measure, calls = exact(0.5)
    found = search(measure, start=8, lowest=1, highest=64)
    assert found.outcome is Outcome.BELOW_LOWEST and found.lo is None and found.hi == 1
    assert calls == [8, 4, 2, 1]
    assert found.line(SLO(ttft_p95_ms=2000)) == (
        "no load meets ttft_p95_ms=2000: the lowest allowed, 1, already breaks it; "
        "measured: 8 breaks, 4 breaks, 2 breaks, 1 breaks (4 steps, 40 s)"
    )


def test_the_highest_load_still_meeting_is_said():
    measure, calls = exact(10_000)
    found = search(measure, start=8, lowest=1, highest=50)
    assert found.outcome is Outcome.ABOVE_HIGHEST and found.lo == 50 and found.hi is None
    assert calls == [8, 16, 32, 50]
    assert found.line(SLO(ttft_p95_ms=5)).startswith("every load meets ttft_p95_ms=5: the highest allowed, 50,")


def test_failed_requests_stop_the_search_with_the_bracket_so_far():
    def measure(load: float) -> Measured:
        failed = 3 if load >= 32 else 0
        return Measured(Verdict.MEETS, {}, failed=failed, requests=40)

    found = search(measure, start=8, lowest=1, highest=500)
    assert found.outcome is Outcome.SERVER_FAILED and found.lo == 16 and found.hi is None
    assert found.line(SLO(ttft_p95_ms=1)).startswith("the server failed requests at load 32 (3 of 40);")


def test_a_budget_too_small_for_one_step_measures_nothing():
    measure, calls = exact(10)
    for budget in (Budget(steps=0), Budget(seconds=5.0)):
        found = search(measure, start=8, lowest=1, highest=50, budget=budget, step_s=10.0)
        assert found.outcome is Outcome.NO_BUDGET and found.steps == () and calls == []
        assert "too small for one step" in found.line(SLO(ttft_p95_ms=1))


def test_the_budget_stops_the_search_with_what_it_knows():
    measure, calls = exact(100)
    by_steps = search(measure, start=8, lowest=1, highest=1000, budget=Budget(steps=5))
    assert by_steps.outcome is Outcome.OUT_OF_BUDGET and len(by_steps.steps) == 5
    assert (by_steps.lo, by_steps.hi) == (64, 128)  # 8, 16, 32, 64 meet, 128 breaks
    # 35 s pays for three 10 s steps: the fourth would end past it, so it is not started
    by_time = search(measure, start=8, lowest=1, highest=1000, budget=Budget(seconds=35), step_s=10)
    assert by_time.outcome is Outcome.OUT_OF_BUDGET and by_time.seconds == 30 and by_time.lo == 32
    assert "with the bracket [32, -]" in by_time.line(SLO(ttft_p95_ms=1))


def test_bad_bounds_are_refused():
    measure, _ = exact(1)
    with pytest.raises(SpecError, match="0 < lowest <= highest"):
        search(measure, start=1, lowest=5, highest=2)
