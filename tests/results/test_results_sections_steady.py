"""results/sections/steady.py: the steady-state window and its figures beside the whole run's."""

from __future__ import annotations

import pytest
from _support.results import report_of, steady_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_steady_state_window_and_its_figures_beside_the_whole_run(tmp_path):
    from fastgen.results import CompareOptions

    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario3" / "c2_stable", steady_requests())
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    figures = {r["figure"]: r for r in table(report_of(tmp_path / "out"), "steady_state", "Whole run against")}
    assert figures["hit %"]["window A"] == "1.0-11.0 s, 2 in flight"
    assert figures["hit %"]["whole A"]["value"] == pytest.approx(50.0)
    # inside 1-11 s: s1's first turn (1), s0's second (9.5), s2's first (10), s1's second (10.5), s3's first (11)
    assert figures["hit %"]["steady A"]["value"] == pytest.approx(40.0) and figures["hit %"]["steady A"]["n"] == 5
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out2", plots=False, options=CompareOptions(plateau=0.5))
    figures = {r["figure"]: r for r in table(report_of(tmp_path / "out2"), "steady_state", "Whole run against")}
    assert figures["hit %"]["window A"] == "0.0-11.0 s, 2 in flight"
