"""fastgen.predicted: compare's own analyze, at what each side's runs recorded, against `fastgen analyze --json` run by
hand with the same options; and the one line it says where it cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support.results import identity, report_of, scenario1_requests, table, write_repeat
from conftest import run_fastgen

from fastgen.predicted import recorded_ceilings, recorded_setup
from fastgen.results import compare_runs, read_runs

CONFIG = "scenario1/c10"


def side(root: Path, dataset: Path, label: str, *, engine: str, capacity: int, block: int) -> Path:
    """One run of CONFIG as the bakeoff records it: run-config.yml names the trace folder, run.json the configs."""
    folder = write_repeat(
        root / label / CONFIG,
        scenario1_requests(900),
        identity=identity(server={"engine": engine, "kv_capacity_tokens": capacity, "block_size": block}),
    )
    trace_dir = (dataset / "traces" / "scenario1").as_posix()
    (folder / "run-config.yml").write_text(
        "load:\n  stages:\n  - concurrent_sessions: 10\n    num_sessions: 2\n"
        f"data:\n  otel_trace_replay:\n    trace_directory: {trace_dir}\n"
    )
    record = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**record, "config_dir": (dataset / "configs").as_posix()}))
    return root / label


def test_compare_runs_analyze_for_each_side_at_what_its_runs_recorded(small_dataset, tmp_path):
    a = side(tmp_path, small_dataset, "vllm", engine="vllm", capacity=16384, block=32)
    b = side(tmp_path, small_dataset, "sglang", engine="sglang", capacity=8192, block=1)
    compare_runs(a, b, tmp_path / "out", plots=False, ceilings_for=recorded_ceilings)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "runs", "Runs")
    for tag, engine, capacity, block in (("A", "vllm", 16384, 32), ("B", "sglang", 8192, 1)):
        out = tmp_path / f"analysis-{engine}.json"
        result = run_fastgen(
            "analyze",
            str(small_dataset / "traces"),
            "--engine",
            engine,
            "--block-size",
            str(block),
            "--kv-cache-tokens",
            str(capacity),
            "--only",
            CONFIG,
            "--json",
            str(out),
        )
        assert result.returncode == 0, result.stderr
        (by_hand,) = json.loads(out.read_text())["configs"]
        assert row[f"ceiling {tag} % inf"] == pytest.approx(by_hand["hit_percent_infinite"], abs=1e-6)
        assert row[f"ceiling {tag} % cap"] == pytest.approx(by_hand["hit_percent_capacity"], abs=1e-6)
    setup = {r[""]: r for r in table(report, "setup", "What each side ran")}["ceilings"]
    assert "--engine sglang --block-size 1 --kv-cache-tokens 8192, run by compare" in json.dumps(setup)


def test_compare_says_in_one_line_why_it_has_no_ceilings(small_dataset, tmp_path):
    a = side(tmp_path, small_dataset, "a", engine="vllm", capacity=16384, block=32)
    gone = tmp_path / "gone"
    b = side(tmp_path, gone, "b", engine="vllm", capacity=16384, block=32)  # its dataset is not on this machine
    comparison = compare_runs(a, b, tmp_path / "out", plots=False, ceilings_for=recorded_ceilings)
    assert (
        f"b: no ceilings: the trace folder its runs replayed, {gone / 'traces'}, is not here (or has no tokenizer/)"
        in (comparison.problems)
    )
    (row,) = table(report_of(tmp_path / "out"), "runs", "Runs")
    assert "ceiling A % inf" in row and "ceiling B % inf" not in row


def test_a_side_whose_runs_recorded_two_engines_or_no_trace_folder_has_no_single_setup(small_dataset, tmp_path):
    a = side(tmp_path, small_dataset, "a", engine="vllm", capacity=16384, block=32)
    other = write_repeat(
        a / "scenario1" / "c1", scenario1_requests(900), identity=identity(server={"engine": "sglang"})
    )
    assert other.exists()
    runs, _ = read_runs(a)
    assert recorded_setup(runs) == (None, "its runs recorded 2 engines (sglang, vllm)")
    plain = write_repeat(tmp_path / "plain" / CONFIG, scenario1_requests(900)).parent.parent.parent
    assert recorded_setup(read_runs(plain)[0]) == (None, "its runs recorded no trace folder (run-config.yml)")
