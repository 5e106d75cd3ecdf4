"""bakeoff/runner.py: `fastgen bakeoff` over the configs as a user runs it (real processes, the real inference-perf,
fake engines on loopback that log every request and reset): a rerun, a server that dies, repeats, Ctrl-C, a changed
dataset, and the README's own command from the dataset's folder."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import ROOT
from _support.bakeoff import QUICK, bakeoff, engine, run_record

from e2e.suites.bakeoff import is_probe, segments
from e2e.suites.run import Dataset


@pytest.fixture(scope="module")
def readme_dataset(tmp_path_factory) -> Path:
    """A dataset as the README makes it: configs/ beside traces/, paths in the configs relative."""
    workdir = tmp_path_factory.mktemp("bakeoff-readme")
    arguments = [a for a in Dataset().arguments(workdir, "http://127.0.0.1:9") if a != "--absolute-paths"]
    result = subprocess.run([sys.executable, "-m", "fastgen", *arguments], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "../../traces" in (workdir / "configs" / "scenario2" / "c10_sync.yml").read_text()
    return workdir


def readme_bakeoff(folder: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    """The README's command, from the dataset's folder (reports go to ./reports)."""
    return subprocess.run(
        [sys.executable, "-m", "fastgen", "bakeoff", "--url", url, "--label", "vllm", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=folder,
    )


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_skips_a_completed_config_unless_rerun(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK).returncode == 0
        first = run_record(tmp_path, QUICK)
        again = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        assert again.returncode == 0 and "1 skipped" in again.stdout
        assert run_record(tmp_path, QUICK) == first
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--rerun").returncode == 0
        resets = [e for e in server.log() if e.get("event") == "reset"]
    assert "running" not in again.stderr and f"{QUICK}: skipped" in again.stderr
    # a verified reset is two: one the probe checks, one that drops the probe's own prefix
    assert len(resets) == 4 and run_record(tmp_path, QUICK)["started"] > first["started"]
    assert first["status"] == "completed" and first["reason"] is None
    assert first["reset"]["done"] == "POST /reset_prefix_cache" and first["reset"]["verified"] is True
    assert first["requests"] == {"expected": 12, "recorded": 12, "failed": 0}
    assert first["sessions"] == {"total": 2, "failed": 0} and first["errors"] == []
    assert first["metrics_samples"] >= 2 and first["identity"]["server"]["engine"] == "vllm"
    assert (first["format"], first["repeat"], first["repeats"]) == (2, 1, 1)
    # what analyze --server-from reads: the scheduler's settings from vLLM's dev-mode GET /server_info
    scheduler = first["identity"]["server"]["scheduler"]
    assert scheduler["source"] == "GET /server_info?config_format=json" and scheduler["max_num_batched_tokens"] > 0
    assert scheduler["block_size"] == first["identity"]["server"]["block_size"]


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_bakeoff_server_that_dies_mid_config_fails_it_and_stops(dataset, tmp_path, flavour):
    # three requests check the server, three verify the reset, then three of the replay's are answered
    with engine(dataset, tmp_path, flavour, "--die-after", "9") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "scenario1/c1")
    assert result.returncode == 1
    # the design's order: scenario 1 first
    assert "scenario1/c1: failed: the server stopped answering during the run" in result.stdout
    assert "scenario2/c10_sync: failed: not run: the server stopped answering" in result.stdout
    record = run_record(tmp_path, "scenario1/c1")
    assert record["status"] == "failed" and record["metrics_errors"] >= 1
    assert not (tmp_path / "reports" / "x" / "scenario2").exists()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_ctrl_c_keeps_finished_runs_and_leaves_no_partial_run(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        command = [
            sys.executable,
            "-m",
            "fastgen",
            "bakeoff",
            "--url",
            server.url,
            "--label",
            "x",
            "--config-dir",
            str(dataset / "configs"),
            "--out",
            str(tmp_path / "reports"),
            "--configs",
            QUICK,
            "scenario1/c10",
        ]
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        partial = tmp_path / "reports" / "x" / "scenario2" / "c10_sync" / "repeat-1.partial"  # after scenario1/c10
        deadline = time.monotonic() + 120
        while not (partial / "inference-perf.log").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"fastgen: interrupted; 1 finished run kept in {tmp_path / 'reports' / 'x'}, the unfinished one removed; run "
        f"the same command again to go on"
    )
    assert run_record(tmp_path, "scenario1/c10")["status"] == "completed"
    assert not partial.exists() and not (tmp_path / "reports" / "x" / "scenario2" / "c10_sync" / "repeat-1").exists()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_readme_command_from_the_dataset_folder_completes(readme_dataset, tmp_path):
    # the bug: --out reports (relative) handed to inference-perf, which runs from the config's folder
    folder = shutil.copytree(readme_dataset, tmp_path / "data")
    with engine(readme_dataset, tmp_path) as server:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "fastgen",
                "bakeoff",
                "--url",
                server.url,
                "--label",
                "vllm",
                "--configs",
                "scenario2/c10_sync",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=folder,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    run = folder / "reports" / "vllm" / "scenario2" / "c10_sync" / "repeat-1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "completed" and (run / "per_request_lifecycle_metrics.json").exists()
    assert "1 completed, 0 incomplete, 0 skipped (done before), 0 failed" in result.stdout
    # the config read its dataset file, and datasets kept its Arrow copy in the output folder, as the log line says
    cache = folder / "reports" / ".datasets-cache"
    assert any(cache.rglob("*.arrow")) and f"datasets' cache: {cache.resolve()}" in result.stderr


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_resume_runs_again_when_the_dataset_changed(readme_dataset, tmp_path):
    folder = shutil.copytree(readme_dataset, tmp_path / "data")
    with engine(readme_dataset, tmp_path) as server:
        assert readme_bakeoff(folder, server.url, "--configs", QUICK).returncode == 0
        first = json.loads((folder / "reports" / "vllm" / QUICK / "repeat-1" / "run.json").read_text())
        with open(folder / "traces" / "manifest.json", "a") as manifest:
            manifest.write("\n")
        again = readme_bakeoff(folder, server.url, "--configs", QUICK)
    second = json.loads((folder / "reports" / "vllm" / QUICK / "repeat-1" / "run.json").read_text())
    assert again.returncode == 0 and "0 skipped" in again.stdout, again.stdout
    assert f"{QUICK}: running again (the dataset changed)" in again.stderr
    assert second["identity"]["dataset_sha256"] != first["identity"]["dataset_sha256"]
    assert second["started"] > first["started"]


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_repeats_each_config_after_a_verified_reset_with_the_asked_modes(dataset, tmp_path):
    with engine(dataset, tmp_path, "sglang") as server:
        result = bakeoff(
            dataset,
            tmp_path,
            server.url,
            "--configs",
            QUICK,
            "--repeat",
            "2",
            "--gpus",
            "8",
            "--outputs",
            "recorded",
            "--tool-call-max-tokens",
            "recorded",
        )
        log = server.log()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 configs x 2 repeats: 2 completed" in result.stdout
    # the check before the first config (a tool-choice request, the probe twice); then each repeat: probe, probe,
    # reset, probe (no cached tokens: verified), reset, then the replay
    kinds = ["probe" if is_probe(e) else "reset" if e.get("event") == "reset" else "chat" for e in log]
    one = ["probe", "probe", "reset", "probe", "reset"] + ["chat"] * 12
    assert kinds == ["probe"] * 3 + one + one
    assert log[0]["body"]["tool_choice"]["function"]["name"] == "run_tests" and log[0]["body"]["stream"] is True
    assert log[0]["response"]["message"]["tool_calls"][0]["function"]["name"] == "run_tests"
    # SGLang waits for idle itself when asked: every flush asked it to
    assert all(0 < e["timeout"] <= 30 for e in log if e.get("event") == "reset")
    assert all(e["done"] for e in log if e.get("event") == "reset")
    assert [len(part) for part in segments(log)] == [0, 12, 12]
    for repeat in (1, 2):
        record = run_record(tmp_path, QUICK, repeat)
        assert (record["status"], record["repeat"], record["repeats"]) == ("completed", repeat, 2)
        assert record["reset"]["verified"] is True and record["reset"]["done"] == "POST /flush_cache"
        identity = record["identity"]
        assert (identity["outputs"], identity["tool_call_max_tokens"]) == ("recorded", "recorded")
        assert identity["server"]["gpus"] == 8 and identity["server"]["engine"] == "sglang"
        assert {k: identity["server"][k] for k in ("tool_choice_held", "cached_tokens_reported", "metrics_served")} == {
            "tool_choice_held": True,
            "cached_tokens_reported": True,
            "metrics_served": True,
        }
        run_config = (tmp_path / "reports" / "x" / QUICK / f"repeat-{repeat}" / "run-config.yml").read_text()
        assert "disable_output_substitution: true" in run_config
        assert "override_tool_call_max_tokens: false" in run_config
