"""results/sections/slo.py: the largest concurrency that meets the TTFT target."""

from __future__ import annotations

import pytest
from _support.results import report_of, swarm_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_slo_gives_the_largest_concurrency_that_meets_the_ttft_target(tmp_path):
    from fastgen.results import CompareOptions

    for level, (a_ms, b_ms) in {2: (100, 100), 4: (200, 400), 8: (600, 900)}.items():
        write_repeat(tmp_path / "a" / "scenario1" / f"c{level}", swarm_requests([a_ms] * 20), concurrency=level)
        write_repeat(tmp_path / "b" / "scenario1" / f"c{level}", swarm_requests([b_ms] * 20), concurrency=level)
    compare_runs(
        tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False, options=CompareOptions(slo_ttft_p95_ms=300)
    )
    (row,) = table(report_of(tmp_path / "out"), "slo", "Largest concurrency")
    assert (row["concurrencies"], row["largest A"], row["largest B"]) == ("2, 4, 8", 4, 2)
    assert row["TTFT p95 ms A"]["value"] == pytest.approx(200.0)
