"""results/ceilings.py: the ceilings of `fastgen analyze --json` beside each measured hit ratio, or an unreadable
analysis named."""

from __future__ import annotations

import json

import pytest
from _support.results import table

from fastgen.results import compare_runs


def test_compare_with_an_analysis_sets_the_pooled_ceiling_beside_each_hit_ratio(two_sides, tmp_path):
    analysis = tmp_path / "analysis.json"
    by_turn = {
        "1": {"prompt_tokens": 2000, "hit_percent_infinite": 10.0, "hit_percent_capacity": 5.0},
        "2": {"prompt_tokens": 2000, "hit_percent_infinite": 90.0, "hit_percent_capacity": 80.0},
        "3": {"prompt_tokens": 2000, "hit_percent_infinite": 95.0, "hit_percent_capacity": 50.0},
    }
    analysis.write_text(
        json.dumps(
            {
                "format": 1,
                "definition": "vllm",
                "capacity_tokens": 4096,
                "configs": [
                    {
                        "config": "scenario1/c2",
                        "requests": 6,
                        "prompt_tokens": 6000,
                        "hit_percent_infinite": 65.0,
                        "hit_percent_capacity": 45.0,
                        "by_turn": by_turn,
                    }
                ],
            }
        )
    )
    compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=analysis)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (row,) = table(report, "runs", "Runs")
    assert (row["ceiling % inf"], row["ceiling % cap"]) == (65.0, 45.0)  # one analysis: one pair of columns
    turn3 = table(report, "scenario1", "Prefix-cache hit ratio by turn")[2]
    assert turn3["ceiling % inf"] == pytest.approx(95.0)


def test_compare_with_an_unreadable_analysis_names_it_and_reports_without_ceilings(two_sides, tmp_path):
    bad = tmp_path / "analysis.json"
    bad.write_text("{")
    comparison = compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=bad)
    assert any(p.startswith(f"--analysis {bad} is not the JSON of fastgen analyze --json") for p in comparison.problems)
    runs = next(s for s in json.loads((tmp_path / "out" / "report.json").read_text())["sections"] if s["id"] == "runs")[
        "tables"
    ][0]
    assert not any(c.startswith("ceiling") for c in runs["columns"])
