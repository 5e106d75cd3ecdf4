"""results/sections/scenario3.py: stable against noisy layouts, and the hit over time with its steady window shaded."""

from __future__ import annotations

import json

import pytest
from _support.results import request, steady_requests, write_folder, write_repeat

from fastgen.results import compare_runs


def test_scenario3_verdict_says_canonicalization_matters_when_stable_wins_widely_on_both(tmp_path):
    def swarm(hit_stable, hit_noisy):
        out = {}
        for layout, hit in (("stable", hit_stable), ("noisy", hit_noisy)):
            out[layout] = [
                request(
                    f"{layout}-{i}", 1, "text", start=i, prompt=1000, cached=hit * 10, trace_dir=f"scenario3_{layout}"
                )
                for i in range(4)
            ]
        return out

    for side, (stable, noisy) in (("a", (90, 40)), ("b", (85, 35))):
        for layout, requests in swarm(stable, noisy).items():
            write_folder(tmp_path / side / "scenario3" / f"c100_{layout}", requests, concurrency=100)
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    scenario3 = next(s for s in report["sections"] if s["id"] == "scenario3")
    (finding,) = scenario3["findings"]
    assert "by 50.0 points on a and 50.0 on b" in finding
    assert finding.endswith("prompt canonicalization matters more than the engine.")


def test_compare_plots_shade_the_steady_state_window(tmp_path):
    pytest.importorskip("matplotlib")
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario3" / "c2_stable", steady_requests())
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out")
    plot = next(p for s in comparison.sections for p in s.plots if p.name == "scenario3_c2_stable_hit_over_time")
    assert plot.shade == {"a": [1.0, 11.0], "b": [1.0, 11.0]}
    (tmp_path / "out" / comparison.plots[plot.name]).write_bytes(b"not mine")
    from fastgen.errors import OutputError

    with pytest.raises(OutputError, match="scenario3_c2_stable_hit_over_time.png was not written by fastgen compare"):
        compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out")
