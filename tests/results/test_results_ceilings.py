"""results/ceilings.py: the ceilings of `fastgen analyze --json` beside each measured hit ratio, or an unreadable
analysis named."""

from __future__ import annotations

import json

import pytest
from _support.results import identity, scenario1_requests, table, write_repeat

from fastgen.results import compare_runs
from fastgen.results.ceilings import read_ceilings


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


def _analysis(path, replicas: int, router: str) -> None:
    config = {"config": "scenario1/c2", "requests": 6, "prompt_tokens": 6000, "by_turn": {}}
    config |= {"hit_percent_infinite": 65.0, "hit_percent_capacity": 45.0}
    document = {"format": 1, "definition": "vllm", "capacity_tokens": 4096, "replicas": replicas, "router": router}
    path.write_text(json.dumps({**document, "configs": [config]}))


def test_a_fleets_analysis_is_named_so_and_one_caches_beside_a_fleets_runs_is_said(tmp_path):
    router = {
        "url": "http://router:30000",
        "policy": "round_robin",
        "replica_urls": ["http://r0:8000", "http://r1:8000"],
    }
    write_repeat(tmp_path / "fleet" / "scenario1" / "c2", scenario1_requests(900), identity=identity(router=router))
    write_repeat(tmp_path / "one" / "scenario1" / "c2", scenario1_requests(300))
    fleet, one = tmp_path / "fleet.json", tmp_path / "one.json"
    _analysis(fleet, 2, "round_robin")
    _analysis(one, 1, "round_robin")  # analyze names its default router for one engine too: not a fleet
    ceilings, problems = read_ceilings(fleet)
    assert ceilings is not None and problems == []
    assert ceilings.describe().startswith(
        "fleet.json: ceilings for 2 replicas behind round_robin (each replica its own cache, pooled over the fleet's "
        "requests), KV capacity 4,096 tokens per replica"
    )
    single, _ = read_ceilings(one)
    assert single is not None and single.describe().startswith("one.json: KV capacity 4,096 tokens, block size")
    runs = (tmp_path / "fleet", tmp_path / "one")
    matched = compare_runs(*runs, tmp_path / "out", plots=False, analysis_a=fleet, analysis_b=one)
    assert not [p for p in matched.problems if "is an analysis of" in p]
    crossed = compare_runs(*runs, tmp_path / "out2", plots=False, analysis_a=one, analysis_b=fleet)
    assert [p for p in crossed.problems if "is an analysis of" in p] == [
        "fleet: its runs went through 2 replicas behind round_robin, but --analysis-a is an analysis of one engine: its "
        "ceilings are not those of what ran (fastgen analyze --replicas N --router POLICY --kv-cache-tokens "
        "PER_REPLICA --json gives a fleet's)",
        "one: its runs went through one engine, but --analysis-b is an analysis of 2 replicas behind round_robin: its "
        "ceilings are not those of what ran (fastgen analyze --replicas N --router POLICY --kv-cache-tokens "
        "PER_REPLICA --json gives a fleet's)",
    ]
