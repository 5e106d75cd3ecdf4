"""`fastgen analyze` as a user runs it, end to end in a real process on a real generated dataset: its summary,
tables, sweep, plots and JSON, and its bad input as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support import ROOT


@pytest.fixture(scope="module")
def small(e2e_dataset) -> Path:
    """The e2e suite's dataset (conftest.py), generated once a session."""
    return e2e_dataset


def analyze_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastgen", "analyze", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_analyze_every_config_and_stable_beats_noisy(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"), "--configs", str(small / "configs"), "--kv-cache-tokens", "4096", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("prompts read as: template")
    doc = json.loads(out.read_text())
    configs = {c["config"]: c for c in doc["configs"]}
    assert len(configs) == 17 and doc["reading"] == "template" and doc["capacity_tokens"] == 4096
    stable, noisy = configs["scenario3/c100_stable"], configs["scenario3/c100_noisy"]
    assert stable["hit_percent_infinite"] > noisy["hit_percent_infinite"] + 5
    for c in configs.values():
        assert 0 < c["hit_percent_capacity"] <= c["hit_percent_infinite"] < 100
        assert sum(t["prompt_tokens"] for t in c["by_turn"].values()) == c["prompt_tokens"]
    # one session at a time: the capacity holds a whole session, so nothing is lost to it
    assert configs["scenario1/c1"]["hit_percent_capacity"] == configs["scenario1/c1"]["hit_percent_infinite"]


def test_analyze_capacity_smaller_than_a_request_is_one_line(small):
    result = analyze_cli(str(small / "traces"), "--kv-cache-tokens", "64")
    assert result.returncode == 2
    assert result.stderr.startswith("fastgen: error: a KV capacity of 64 tokens is smaller than one request")
    assert len(result.stderr.strip().splitlines()) == 1


def test_analyze_a_corrupt_trace_names_the_file(small, tmp_path):
    import shutil

    traces = tmp_path / "traces"
    shutil.copytree(small / "traces" / "scenario2_sync", traces / "scenario2_sync")
    shutil.copytree(small / "traces" / "tokenizer", traces / "tokenizer")
    victim = sorted((traces / "scenario2_sync").glob("*.json"))[0]
    victim.write_bytes(victim.read_bytes()[:500])
    result = analyze_cli(str(traces))
    assert result.returncode == 1
    assert result.stderr.startswith(f"fastgen: error: {victim} cannot be read as inference-perf reads it")


@pytest.mark.parametrize("case", ["no traces", "missing config dir", "no tokenizer", "gib without model"])
def test_analyze_bad_input_is_one_line(small, tmp_path, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "tokenizer").mkdir()
    args = {
        "no traces": [str(empty), "--tokenizer", str(small / "traces" / "tokenizer")],
        "missing config dir": [str(small / "traces"), "--configs", str(tmp_path / "nope")],
        "no tokenizer": [str(small / "traces"), "--tokenizer", str(tmp_path / "missing")],
        "gib without model": [str(small / "traces"), "--kv-cache-gib", "1"],
    }[case]
    result = analyze_cli(*args)
    assert result.returncode in (1, 2) and result.stderr.startswith("fastgen: error: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_analyze_sweep_ends_at_the_unbounded_hit_ratio_and_draws_the_plots(small, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"),
        "--only",
        "scenario3/c100_*",
        "scenario1/c10",
        "--sweep",
        "--plots",
        str(tmp_path / "plots"),
        "--json",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    configs = {c["config"]: c for c in json.loads(out.read_text())["configs"]}
    assert sorted(configs) == ["scenario1/c10", "scenario3/c100_noisy", "scenario3/c100_stable"]
    for c in configs.values():
        hits = [p["hit_percent"] for p in c["sweep"]]
        capacities = [p["capacity_tokens"] for p in c["sweep"]]
        assert capacities == sorted(capacities) and len(hits) >= 4
        # room for everything the replay computes: nothing is evicted, so the unbounded cache's ratio
        assert hits[-1] == pytest.approx(c["hit_percent_infinite"])
        assert hits[0] <= hits[-1]
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == [
        "scenario1_hit_by_capacity.png",
        "scenario1_hit_by_turn.png",
        "scenario3_hit_by_capacity.png",
        "scenario3_hit_by_turn.png",
        "stable_vs_noisy.png",
    ]


# --- issue 24: the answer first (summary, binding line, knee), the long tables behind --verbose, plots that mark the
# capacity, and the service model as options (given, or calibrated from a bakeoff run)


SUMMARY_ONLY = ("--only", "scenario1/c1", "scenario1/c10", "scenario3/c100_*")


def test_analyze_summary_says_the_speeds_and_names_the_configs_the_capacity_binds(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(str(small / "traces"), *SUMMARY_ONLY, "--kv-cache-tokens", "4096", "--json", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "service model: prefill 20,000 tokens/s, decode 50.0 tokens/s (the defaults)" in result.stdout
    assert "binds: more than 1 point lost" in result.stdout
    doc = json.loads(out.read_text())
    configs = {c["config"]: c for c in doc["configs"]}
    bound = [name for name, c in configs.items() if c["hit_percent_infinite"] - c["hit_percent_capacity"] > 1.0]
    assert "scenario1/c1" not in bound and "scenario3/c100_noisy" in bound  # one of each, for the line to be tested
    (line,) = [x for x in lines if x.startswith("the KV capacity of 4,096 tokens binds")]
    assert line.endswith(
        f"binds {len(bound)} of {len(configs)} configs (at-capacity hit % more than 1 point below "
        f"unbounded): {', '.join(bound)}"
    )
    rows = {x.split()[0]: x.split() for x in lines if x.split() and x.split()[0] in configs}
    for name, c in configs.items():
        assert c["capacity_binds"] == (name in bound)
        assert rows[name][-2:] == [f"{c['capacity_cost_points']:.1f}", "yes" if name in bound else "no"]
    assert doc["binds_above_points"] == 1.0 and doc["service_model"]["source"] == "the defaults"


@pytest.mark.parametrize("verbose", [False, True])
def test_analyze_long_tables_reach_the_terminal_only_with_verbose(small, tmp_path, verbose):
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"), "--only", "scenario2/c10_sync", "--json", str(out), *(["--verbose"] if verbose else [])
    )
    assert result.returncode == 0, result.stderr
    assert ("by turn (scenario 2: 0 is the root, 1-5 the branches)" in result.stdout) == verbose
    assert ("by turn: --verbose, or in --json" in result.stdout) != verbose
    by_turn = json.loads(out.read_text())["configs"][0]["by_turn"]
    assert len(by_turn) == 6  # the JSON holds the table either way: the root and five branches
    assert (len(result.stdout.splitlines()) > 6 + 6) == verbose


def test_analyze_sweep_prints_each_configs_knee(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(str(small / "traces"), "--only", "scenario3/c100_noisy", "--sweep", "--json", str(out))
    assert result.returncode == 0, result.stderr
    (config,) = json.loads(out.read_text())["configs"]
    want = min(
        p["capacity_tokens"] for p in config["sweep"] if p["hit_percent"] >= config["hit_percent_infinite"] - 1.0
    )
    assert config["knee_capacity_tokens"] == want
    (row,) = [x for x in result.stdout.splitlines() if x.startswith("scenario3/c100_noisy")]
    assert row.split()[-1] == f"{want:,}"
    assert "knee: the smallest swept KV capacity within 1 point of hit % infinite" in result.stdout
