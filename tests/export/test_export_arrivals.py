"""export.arrivals: session starts as a Poisson process over the window count/rate, the same for the same seed."""

from __future__ import annotations

import statistics

import pytest

from fastgen.export import poisson_starts_ms


def test_poisson_starts_are_seeded_sorted_and_within_the_window():
    starts = poisson_starts_ms(400, 20.0, "seed a")
    assert starts == poisson_starts_ms(400, 20.0, "seed a")
    assert starts != poisson_starts_ms(400, 20.0, "seed b")
    assert starts == sorted(starts) and len(starts) == 400
    assert 0 <= starts[0] and starts[-1] <= 400 / 20.0 * 1000
    assert all(round(s, 3) == s for s in starts)


@pytest.mark.parametrize("seed", [f"seed {i}" for i in range(5)])
def test_poisson_start_gaps_are_exponential_at_the_rate(seed):
    """Gaps of a Poisson process: coefficient of variation 1, mean 1/rate. Over 400 sessions the CV's spread is
    about 0.05, so 0.8-1.2 is four of them; the mean, conditioned on the count, is within 1/(count+1) of 1/rate."""
    starts = poisson_starts_ms(400, 20.0, seed)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    mean = statistics.fmean(gaps)
    assert 0.8 <= statistics.pstdev(gaps) / mean <= 1.2
    assert abs(mean - 50.0) <= 5.0


def test_poisson_starts_refuse_a_rate_of_zero():
    with pytest.raises(ValueError, match="rate > 0"):
        poisson_starts_ms(3, 0.0, "s")
