"""Faults as they happen: signals, a full disk, a dying worker, foreign files, hostile input (real processes)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SMALL, run_fastgen, trace_files

# Big enough that a run takes a few seconds, so a signal or a kill lands in the middle of it.
MEDIUM = ["--scale", "0.3", "--budget-scale", "0.3", "--tokenizer", "builtin", "--quiet"]


def _start(tmp_path: Path, *extra: str, preexec=None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fastgen",
            *MEDIUM,
            *extra,
            "--output-dir",
            str(tmp_path / "out"),
            "--config-dir",
            str(tmp_path / "configs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )


def _wait_for_files(tmp_path: Path, timeout: float = 60) -> None:
    """Until the workers have written some session files into the staging folder."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if list(tmp_path.glob(".out.fastgen-*/scenario*/session_*.json")):
            return
        time.sleep(0.05)
    raise AssertionError("no session file appeared")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if ".fastgen-" in p.name or p.name.endswith(".part"))


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_generation_stops_cleans_up_and_a_rerun_completes(tmp_path, sig, code):
    proc = _start(tmp_path, "--workers", "2")
    _wait_for_files(tmp_path)
    proc.send_signal(sig)
    started = time.monotonic()
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert time.monotonic() - started < 10
    assert _leftovers(tmp_path) == [] and not (tmp_path / "out").exists()
    assert all(_children(proc.pid) == [] for _ in range(1))

    rerun = run_fastgen(
        *MEDIUM, "--workers", "2", "--output-dir", str(tmp_path / "out"), "--config-dir", str(tmp_path / "configs")
    )
    assert rerun.returncode == 0, rerun.stderr
    assert run_fastgen("verify", str(tmp_path / "out")).returncode == 0


def _file_size_limit(limit: int):
    def apply():
        # writes past the limit fail with EFBIG instead of killing the process with SIGXFSZ
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize("workers", ["1", "2"])
def test_write_failure_in_a_worker_names_the_file_and_leaves_nothing(tmp_path, workers):
    # A real write error from the kernel: files over 1 MB cannot be written (scenario files are larger).
    proc = _start(tmp_path, "--workers", workers, preexec=_file_size_limit(1_000_000))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    (line,) = stderr.splitlines()
    assert line.startswith("fastgen: error: cannot write ") and "session_" in line and "File too large" in line
    assert _leftovers(tmp_path) == [] and not (tmp_path / "out").exists()


def test_previous_output_survives_a_failed_regeneration(tmp_path):
    first = _start(tmp_path, "--workers", "2")
    assert first.wait(timeout=120) == 0
    before = (tmp_path / "out" / "manifest.json").read_bytes()
    failed = _start(tmp_path, "--workers", "2", "--seed", "7", preexec=_file_size_limit(1_000_000))
    assert failed.wait(timeout=120) == 1
    assert (tmp_path / "out" / "manifest.json").read_bytes() == before
    assert run_fastgen("verify", str(tmp_path / "out")).returncode == 0
    assert _leftovers(tmp_path) == []


def test_killed_worker_is_noticed_and_the_run_fails_without_hanging(tmp_path):
    proc = _start(tmp_path, "--workers", "2")
    _wait_for_files(tmp_path)
    workers = _children(proc.pid)
    assert workers
    os.kill(workers[0], signal.SIGKILL)
    killed_at = time.monotonic()
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - killed_at < 5
    assert proc.returncode == 1
    (line,) = stderr.splitlines()
    assert "worker process died" in line and "session" in line
    assert _leftovers(tmp_path) == [] and not (tmp_path / "out").exists()


def test_stale_staging_of_a_killed_run_is_removed_by_the_next_run(tmp_path):
    proc = _start(tmp_path, "--workers", "2")
    _wait_for_files(tmp_path)
    for pid in [*_children(proc.pid), proc.pid]:
        os.kill(pid, signal.SIGKILL)  # no cleanup possible
    proc.communicate(timeout=30)
    assert _leftovers(tmp_path)
    mine = tmp_path / ".out.fastgen-notmine"
    mine.mkdir()  # same pattern but not marked as fastgen's: kept
    # the same folders: the killed run's staging of the traces and of the configs both go
    rerun = run_fastgen(
        *SMALL, "--workers", "1", "--output-dir", str(tmp_path / "out"), "--config-dir", str(tmp_path / "configs")
    )
    assert rerun.returncode == 0, rerun.stderr
    assert _leftovers(tmp_path) == [".out.fastgen-notmine"]


def test_force_writes_beside_foreign_files_and_removes_only_listed_ones(tmp_path):
    out = tmp_path / "out"
    args = [*SMALL, "--workers", "1", "--output-dir", str(out), "--config-dir", str(tmp_path / "c")]
    assert run_fastgen(*args, "--scale", "0.08").returncode == 0  # a bigger previous run
    notes = out / "notes.txt"
    notes.write_text("mine\n")
    assert run_fastgen(*args).returncode == 1  # refused without --force
    result = run_fastgen(*args, "--force")
    assert result.returncode == 0, result.stderr
    assert notes.read_text() == "mine\n"
    report = run_fastgen("verify", str(out))
    assert report.returncode == 1 and "0 missing, 1 extra, 0 changed" in report.stdout  # the extra is notes.txt


def test_force_never_overwrites_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "out"
    (out / "scenario1").mkdir(parents=True)
    theirs = out / "scenario1" / "session_0000.json"
    theirs.write_text("{}")
    result = run_fastgen(
        *SMALL, "--workers", "1", "--force", "--output-dir", str(out), "--config-dir", str(tmp_path / "c")
    )
    assert result.returncode == 1 and "would be overwritten" in result.stderr
    assert theirs.read_text() == "{}"
    assert sorted(p.name for p in out.rglob("*")) == ["scenario1", "session_0000.json"]


@pytest.mark.parametrize("name", ['we"ird\\dir', "new\nline", "ünïcødé ✓", "x" * 200])
def test_hostile_output_paths_give_valid_output_and_loadable_configs(tmp_path, name):
    out = tmp_path / name / "traces"
    configs = tmp_path / name / "configs"
    result = run_fastgen(
        *SMALL, "--workers", "1", "--scale", "0.01", "--output-dir", str(out), "--config-dir", str(configs)
    )
    assert result.returncode == 0, result.stderr
    for path in trace_files(out):
        json.loads(path.read_bytes())
    config = pytest.importorskip("inference_perf.config")
    cfg = config.read_config(str(configs / "scenario1" / "c1.yml"))
    data_files = cfg.data.otel_trace_replay.hf_dataset_path["data_files"]
    assert (configs / "scenario1" / data_files).resolve() == (out / "scenario1.jsonl").resolve()


@pytest.mark.parametrize("seed", ["0", str(2**63 - 1)])
def test_seeds_at_the_ends_of_their_range_generate(tmp_path, seed):
    result = run_fastgen(
        *SMALL,
        "--workers",
        "1",
        "--scale",
        "0.01",
        "--seed",
        seed,
        "--output-dir",
        str(tmp_path / "o"),
        "--config-dir",
        str(tmp_path / "c"),
    )
    assert result.returncode == 0, result.stderr
    assert run_fastgen("verify", str(tmp_path / "o")).returncode == 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["--seed", str(2**63)], "--seed"),
        (["--budget-scale", "10"], "--max-model-len"),
        (["--scale", "1e9"], "--scale"),
    ],
)
def test_out_of_range_input_is_one_line_and_writes_nothing(tmp_path, args, words):
    result = run_fastgen(
        "--tokenizer",
        "builtin",
        "--quiet",
        *args,
        "--output-dir",
        str(tmp_path / "o"),
        "--config-dir",
        str(tmp_path / "c"),
    )
    assert result.returncode in (1, 2)
    (line,) = result.stderr.splitlines()
    assert words in line
    assert list(tmp_path.iterdir()) == []
