"""e2e.suites.aa_simulation: whole reports built from synthetic runs whose truth is known. One A/A and one A/B report
here; the false-positive rate over many seeds is the slow test (tests/conftest.py) and the measurement in
docs/report.md."""

from __future__ import annotations

import pytest

from e2e.suites.aa_simulation import claims, synthetic_pair


def test_an_a_a_report_claims_nothing_with_one_two_or_three_runs():
    for repeats in (1, 2, 3):
        found = claims(synthetic_pair(7, repeats=repeats))
        assert found["tested"] > 10 and found["claimed"] == 0 and found["headline"] == [], repeats


def test_an_a_b_report_with_a_known_ttft_gap_claims_it_b_higher_with_two_runs_not_with_one():
    with_two = claims(synthetic_pair(7, repeats=2, gap=1.0))["headline"]
    assert any(line.startswith("scenario3/c100_noisy: TTFT p50 ms (text answers)") for line in with_two)
    assert all(float(line.split("B/A ")[1].split(" ")[0]) > 1.5 for line in with_two if "TTFT" in line)
    with_one = claims(synthetic_pair(7, repeats=1, gap=1.0))["headline"]
    assert not any("TTFT" in line for line in with_one)  # one run a side: a time is too few to tell


@pytest.mark.slow  # 70 whole reports
def test_the_rule_keeps_its_false_positive_rate_over_many_a_a_seeds():
    """60 A/A reports (20 seeds at 1, 2 and 3 runs a side), each some 13-50 tests: at most ALPHA of them may claim
    anything; at three runs a side a TTFT x 1.5 is found in every one of 10 seeds."""
    reports = [claims(synthetic_pair(seed, repeats=k)) for k in (1, 2, 3) for seed in range(100, 120)]
    assert sum(found["claimed"] > 0 for found in reports) <= 3
    found = [claims(synthetic_pair(seed, repeats=3, gap=0.5))["headline"] for seed in range(200, 210)]
    assert all(any(line.startswith("scenario3/c100_noisy: TTFT p") for line in lines) for lines in found)
