"""results/sections/scenario2.py: the fan-out's roles, and the peak KV usage in tokens where the engine counts them."""

from __future__ import annotations

from _support.results import identity, report_of, request, rows, scenario1_requests, section, write_repeat

from fastgen.results import compare_runs
from fastgen.results.sections.scenario2 import roles


def test_scenario2_roles_take_the_branch_that_started_first_not_branch_one():
    from fastgen.results.runs import _request

    entries = [
        request("x", 0, "root", start=0, prompt=100, cached=0, trace_dir="scenario2_sync"),
        request("x", 1, "branch", start=5, prompt=120, cached=96, trace_dir="scenario2_sync"),
        request("x", 2, "branch", start=2, prompt=120, cached=96, trace_dir="scenario2_sync"),
        request("x", 3, "branch", start=7, prompt=120, cached=96, trace_dir="scenario2_sync"),
    ]
    found = roles([_request(e) for e in entries])
    assert [r.turn for r in found["root"]] == [0]
    assert [r.turn for r in found["first"]] == [2]
    assert sorted(r.turn for r in found["later"]) == [1, 3]


def test_compare_shows_no_kv_tokens_from_a_gauge_rounded_to_one_percent(tmp_path):
    for side, samples in (("a", [{"sglang:token_usage": 0.0}]), ("b", [{"sglang:token_usage": 0.01}])):
        write_repeat(
            tmp_path / side / "scenario2" / "c2_sync",
            scenario1_requests(900),
            identity=identity(server={"engine": "sglang", "kv_capacity_tokens": 2_097_152}),
            samples=samples,
        )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    kv_section = next(
        t for t in section(report_of(tmp_path / "out"), "scenario2")["tables"] if t["title"].startswith("Hit ratio")
    )
    (kv,) = rows(kv_section)
    assert kv["peak KV % B"]["value"] == 1.0 and kv["peak KV tokens B"]["value"] is None
    assert kv["peak KV tokens B/A"]["value"] is None
    assert "sglang:token_usage only, rounded to 1% of the cache: no count of tokens and no B/A" in kv_section["note"]
