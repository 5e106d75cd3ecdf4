"""results/sections/setup.py: what each side ran, from its runs' identity."""

from __future__ import annotations

from _support.results import identity, report_of, scenario1_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_setup_header_says_what_each_side_ran(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(
        tmp_path / "b" / "scenario1" / "c2",
        scenario1_requests(900),
        identity=identity(server={"engine": "sglang", "version": "0.5.0", "kv_capacity_tokens": 33_000}),
        reset={"done": "POST /flush_cache", "verified": False, "how": "probe found 512 cached"},
    )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    setup = {r[""]: r for r in table(report_of(tmp_path / "out"), "setup", "What each side ran")}
    assert (setup["engine and version"]["A: a"], setup["engine and version"]["B: b"]) == ("vllm 0.11.0", "sglang 0.5.0")
    assert setup["KV capacity (tokens)"]["B: b"] == "33,000" and setup["dataset (manifest sha256)"]["A: a"] == "d" * 12
    assert setup["cache reset"]["B: b"] == "POST /flush_cache: verified in 0 of 1 runs, seen to fail in 1"
