"""results/sections/throughput.py: sessions and output tokens per GPU-hour (and the KV peak in tokens beside them)."""

from __future__ import annotations

import pytest
from _support.results import identity, report_of, rows, scenario1_requests, section, table, write_repeat

from fastgen.results import compare_runs


def test_compare_throughput_per_gpu_hour_and_kv_usage_in_tokens(tmp_path):
    write_repeat(
        tmp_path / "a" / "scenario2" / "c2_sync",
        scenario1_requests(900),
        identity=identity(server={"gpus": 2, "kv_capacity_tokens": 100_000}),
        samples=[{"vllm:kv_cache_usage_perc": 0.5}],
    )
    write_repeat(
        tmp_path / "b" / "scenario2" / "c2_sync",
        scenario1_requests(900),
        identity=identity(server={"engine": "sglang", "gpus": 1, "kv_capacity_tokens": 20_000}),
        samples=[{"sglang:token_usage": 0.9, "sglang:num_used_tokens": 17_950}],
    )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "throughput", "Throughput")
    # 2 sessions over 36 s: 200 sessions/h; 60 output tokens over 3.5 s
    assert row["sessions/h A"]["value"] == pytest.approx(200.0)
    assert row["sessions/GPU-h A"]["value"] == pytest.approx(100.0)
    assert row["sessions/GPU-h B"]["value"] == pytest.approx(200.0)
    assert row["output tok/GPU-h A"]["value"] == pytest.approx(60 / 3.5 * 3600 / 2)
    assert row["output tok/s B/A"]["too_few"] == "a figure of whole runs, 1 run on a side: 2 needed"
    kv_section = next(t for t in section(report, "scenario2")["tables"] if t["title"].startswith("Hit ratio and peak"))
    (kv,) = rows(kv_section)
    # SGLang's tokens are its own count (sglang:num_used_tokens), not its gauge rounded to 1 % x the capacity
    assert (kv["peak KV % A"]["value"], kv["peak KV % B"]["value"]) == (50.0, 89.75) and "peak KV % B/A" not in kv
    assert kv["peak KV tokens A"]["value"] == 50_000 and kv["peak KV tokens B"]["value"] == 17_950
    assert kv["peak KV tokens B/A"]["value"] == pytest.approx(0.359) and kv["peak KV tokens B/A"]["too_few"]
    assert "sglang: sglang:num_used_tokens (a count of tokens)" in kv_section["note"]
