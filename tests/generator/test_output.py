"""The output folder, as the real `fastgen` command leaves it: refusal, replacement, reproducibility, the manifest."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import shutil
import stat
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import xxhash

from conftest import SMALL, load_spans, run_fastgen, trace_files
from fastgen.generator.scenarios import default_spec
from fastgen.formats.tokenizer import BUILTIN_DIR

ONE_WORKER = [*SMALL, "--workers", "1"]


def _generate(root: Path, *extra: str, traces: Path | None = None):
    return run_fastgen(
        *ONE_WORKER, *extra, "--output-dir", str(traces or root / "traces"), "--config-dir", str(root / "configs")
    )


def _manifest(traces: Path) -> dict:
    return json.loads((traces / "manifest.json").read_bytes())


def _staging_leftovers(parent: Path) -> list[str]:
    # mkdtemp names both the staging folder and the swap folder `.NAME.fastgen-*`
    return sorted(p.name for p in parent.iterdir() if ".fastgen-" in p.name)


def _one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fastgen: error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def one_worker_dataset(tmp_path_factory) -> Path:
    """Same arguments as conftest's small_dataset but one worker, so the two can be compared byte for byte."""
    root = tmp_path_factory.mktemp("one_worker")
    previous = os.umask(0o022)  # the usual umask, whatever pytest runs under; the mode test reads it back
    try:
        result = _generate(root)
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    return root / "traces"


def test_generate_folder_with_foreign_file_exits_1_and_touches_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    foreign = out / "notes.txt"
    foreign.write_bytes(b"mine, not fastgen's\n")

    result = _generate(tmp_path, traces=out)

    assert result.returncode == 1
    line = _one_error_line(result)
    assert str(out) in line and "empty" in line
    assert sorted(out.iterdir()) == [foreign]
    assert foreign.read_bytes() == b"mine, not fastgen's\n"
    # Configs come after traces: a refused output must not leave a config folder (or staging) beside it either.
    assert sorted(tmp_path.iterdir()) == [out]


def test_generate_over_previous_output_replaces_it_whole(one_worker_dataset, tmp_path):
    traces = tmp_path / "traces"
    # a previous, larger run: its extra sessions must not survive next to the new ones
    bigger = run_fastgen(
        *ONE_WORKER, "--scale", "0.08", "--output-dir", str(traces), "--config-dir", str(tmp_path / "c")
    )
    assert bigger.returncode == 0, bigger.stderr
    old_count = len(trace_files(traces))

    result = _generate(tmp_path, traces=traces)

    assert result.returncode == 0, result.stderr
    assert len(trace_files(traces)) < old_count
    on_disk = {p.relative_to(traces).as_posix() for p in traces.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(_manifest(traces)["files"]) == on_disk
    assert (traces / "manifest.json").read_bytes() == (one_worker_dataset / "manifest.json").read_bytes()
    assert _staging_leftovers(tmp_path) == []


def test_generate_over_previous_output_with_a_file_it_did_not_write_refuses(one_worker_dataset, tmp_path):
    traces = tmp_path / "traces"
    shutil.copytree(one_worker_dataset, traces)
    stray = traces / "scenario1" / "session_9999.json"
    stray.write_bytes(b"my own notes\n")
    before = {p: p.read_bytes() for p in traces.rglob("*") if p.is_file()}

    result = _generate(tmp_path, traces=traces)

    assert result.returncode == 1
    assert "scenario1/session_9999.json" in _one_error_line(result)
    assert {p: p.read_bytes() for p in traces.rglob("*") if p.is_file()} == before
    assert _staging_leftovers(tmp_path) == []


@pytest.mark.parametrize("under", [False, True], ids=["is_a_file", "under_a_file"])
def test_generate_output_path_blocked_by_regular_file_exits_1(tmp_path, under):
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"not a folder\n")
    out = blocker / "traces" if under else blocker

    result = _generate(tmp_path, traces=out)

    assert result.returncode == 1
    line = _one_error_line(result)
    assert str(blocker) in line and ("which is a file" if under else "is not a folder") in line, line
    assert "--output-dir" in line
    assert blocker.read_bytes() == b"not a folder\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]  # no staging, no configs


def test_generate_into_the_current_empty_folder_fills_it_in_place(tmp_path):
    # "." cannot be swapped away (a shell may sit in it): an empty folder is filled in place, nothing left beside it.
    cwd = tmp_path / "work"
    cwd.mkdir()

    result = run_fastgen(*ONE_WORKER, "--output-dir", ".", "--config-dir", str(tmp_path / "configs"), cwd=cwd)

    assert result.returncode == 0, result.stderr
    assert (cwd / "manifest.json").is_file() and trace_files(cwd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "work"]
    assert run_fastgen("verify", ".", cwd=cwd).returncode == 0


def test_generate_same_arguments_twice_gives_identical_bytes(one_worker_dataset, tmp_path):
    result = _generate(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # --quiet
    again = tmp_path / "traces"
    assert (again / "manifest.json").read_bytes() == (one_worker_dataset / "manifest.json").read_bytes()
    first = trace_files(one_worker_dataset)
    assert [p.relative_to(one_worker_dataset) for p in first] == [p.relative_to(again) for p in trace_files(again)]
    for path in first:
        assert (again / path.relative_to(one_worker_dataset)).read_bytes() == path.read_bytes(), path


def test_generate_one_and_two_workers_give_identical_manifests(one_worker_dataset, small_dataset):
    # Workers write their own files; the order they finish in must not reach the bytes.
    assert (small_dataset / "traces" / "manifest.json").read_bytes() == (
        one_worker_dataset / "manifest.json"
    ).read_bytes()


def test_generate_other_seed_changes_content_not_layout(one_worker_dataset, tmp_path):
    result = _generate(tmp_path, "--seed", "7")

    assert result.returncode == 0, result.stderr
    other = tmp_path / "traces"
    base_files, other_files = (
        {p: e for p, e in _manifest(t)["files"].items() if p.startswith("scenario") and p.endswith(".json")}
        for t in (one_worker_dataset, other)
    )
    assert set(other_files) == set(base_files)
    assert all(other_files[p]["xxh3_128"] != base_files[p]["xxh3_128"] for p in base_files)
    base_spans = {p: len(load_spans(one_worker_dataset / p)) for p in base_files}
    other_spans = {p: len(load_spans(other / p)) for p in other_files}
    # Scenarios 1 and 2 have a fixed shape; scenario 3 draws 2-6 turns per session from the seed (design doc), so
    # there only the range and the stable/noisy pairing (same content, other order) are seed-independent.
    for spans in (base_spans, other_spans):
        for path, count in spans.items():
            if path.startswith(("scenario1/", "scenario2_")):
                assert count == 6, path
            else:
                assert 2 <= count <= 6, path
                if path.startswith("scenario3_stable/"):
                    assert spans[path.replace("stable", "noisy")] == count, path


def test_manifest_records_tokenizer_arguments_and_spec(one_worker_dataset):
    manifest = _manifest(one_worker_dataset)

    builtin_sha = hashlib.sha256((BUILTIN_DIR / "tokenizer.json").read_bytes()).hexdigest()
    assert manifest["generator"] == "fastgen"
    assert manifest["tokenizer"]["source"] == "builtin"
    assert manifest["tokenizer"]["sha256"] == builtin_sha
    assert manifest["arguments"]["seed"] == 42
    assert manifest["arguments"]["model"] == "meta-llama/Llama-3.3-70B-Instruct"
    expected_spec = default_spec().scaled(sessions=0.04, budgets=0.05).to_dict()
    assert manifest["workload"] == json.loads(json.dumps(expected_spec))  # tuples come back as lists


def test_manifest_sizes_and_hashes_match_the_bytes_on_disk(one_worker_dataset):
    files = _manifest(one_worker_dataset)["files"]

    # every file of the output but the manifest itself, the tokenizer folder included
    assert set(files) == {
        p.relative_to(one_worker_dataset).as_posix() for p in one_worker_dataset.rglob("*") if p.is_file()
    } - {"manifest.json"}
    for rel, entry in files.items():
        data = (one_worker_dataset / rel).read_bytes()
        assert entry == {"size": len(data), "xxh3_128": xxhash.xxh3_128(data).hexdigest()}, rel


def test_generate_tokenizer_folder_holds_the_builtin_tokenizer(one_worker_dataset):
    folder = one_worker_dataset / "tokenizer"

    assert (folder / "tokenizer.json").read_bytes() == (BUILTIN_DIR / "tokenizer.json").read_bytes()
    assert isinstance(json.loads((folder / "tokenizer_config.json").read_bytes()), dict)


def test_generate_output_folder_is_readable_by_group_and_others(one_worker_dataset):
    # mkdtemp makes the staging folder 0700 and it becomes the output by rename; the dataset is meant to be shared.
    mode = one_worker_dataset.stat().st_mode
    shared = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
    assert mode & shared == shared, oct(mode)


def test_progress_bar_on_a_terminal_counts_files_and_megabytes(tmp_path):
    # The bar shows only when stderr is a terminal: give the real command a pseudo-terminal and read what it drew.
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # rows, columns: a real window
    loud = [arg for arg in SMALL if arg != "--quiet"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fastgen",
            *loud,
            "--workers",
            "2",
            "--output-dir",
            str(tmp_path / "traces"),
            "--config-dir",
            str(tmp_path / "configs"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not data:
            break
        drawn += data
    assert proc.wait(timeout=600) == 0
    os.close(leader)
    total = sum(1 for _ in (tmp_path / "traces").glob("scenario*/*.json"))
    final = drawn.decode(errors="replace").replace("\r", "\n").splitlines()
    bar = [line for line in final if f"{total}/{total}" in line]
    assert bar, drawn[-500:]
    size_mb = sum(p.stat().st_size for p in (tmp_path / "traces").glob("scenario*/*.json")) / 1e6
    assert f"{size_mb:,.0f} MB" in bar[-1], bar[-1]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_disk_too_small_stops_the_run_while_it_writes_and_leaves_nothing(tmp_path, monkeypatch, capsys, workers):
    """The free-space estimate runs once the workers write (off the critical path): short, it stops them, and the
    staging folder goes with everything they wrote."""
    from fastgen.cli import main
    from fastgen.generator import output

    real = shutil.disk_usage
    monkeypatch.setattr(output.shutil, "disk_usage", lambda path: real(path)._replace(free=4096))
    out = tmp_path / "traces"
    rc = main([*SMALL, "--workers", workers, "--output-dir", str(out), "--config-dir", str(tmp_path / "configs")])
    assert rc == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("fastgen: error: ") and "needs about" in line and "free some space" in line, line
    assert "\n" not in line
    assert not out.exists() and not (tmp_path / "configs").exists()
    assert _staging_leftovers(tmp_path) == []
