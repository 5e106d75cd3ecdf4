"""The session-per-row dataset file of each trace directory (formats/rows.py): its rows are the trace files, in
the order inference-perf reads the directory, and the real inference-perf sends the same requests from either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_fastgen
from fastgen.errors import OutputError
from fastgen.formats.compression import read_trace_bytes
from fastgen.formats.rows import dataset_file, reading_trace_directory, row_chunks, trace_dir_of, with_source_paths


def _row(source_id: str, trace: bytes) -> bytes:
    return b"".join(bytes(c) for c in row_chunks(source_id, trace))


def test_row_chunks_adds_source_id_and_keeps_every_other_byte():
    trace = b'{"session_id":"s-1","spans":[{"a":"x\\ny"}]}'
    line = _row("scenario1/session_0000.json", trace)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"source_id": "scenario1/session_0000.json", **json.loads(trace)}
    assert line[len(b'{"source_id":"scenario1/session_0000.json",') :] == trace[1:] + b"\n"


def test_row_chunks_a_multi_line_trace_is_refused():
    with pytest.raises(OutputError, match="not a one-line JSON object"):
        row_chunks("a.json", b'{"spans":\n[]}')


def test_trace_dir_of_reads_either_source_and_refuses_neither():
    assert trace_dir_of({"trace_directory": "../traces/scenario1"}) == "../traces/scenario1"
    dataset = {"hf_dataset_path": {"path": "json", "data_files": "../traces/scenario1.jsonl.zst"}}
    assert trace_dir_of(dataset) == "../traces/scenario1"
    for other in ({}, {"hf_dataset_path": "org/name"}, {"hf_dataset_path": {"path": "json", "data_files": "x.csv"}}):
        with pytest.raises(KeyError):
            trace_dir_of(other)


def test_with_source_paths_changes_only_the_path():
    replay = {"hf_dataset_path": {"path": "json", "data_files": "a.jsonl"}, "max_wait_ms": 5}
    assert with_source_paths(replay, str.upper) == {
        "hf_dataset_path": {"path": "json", "data_files": "A.JSONL"},
        "max_wait_ms": 5,
    }
    assert replay["hf_dataset_path"]["data_files"] == "a.jsonl"  # a copy: the caller's section is left alone
    assert with_source_paths({"trace_directory": "t"}, str.upper) == {"trace_directory": "T"}


def test_reading_trace_directory_turns_each_generated_config_to_its_trace_directory(small_dataset):
    configs = sorted((small_dataset / "configs").rglob("*.yml"))
    assert configs
    for path in configs:
        document = yaml.safe_load(path.read_text())
        replay = document["data"]["otel_trace_replay"]
        converted = reading_trace_directory(document)
        section = converted["data"]["otel_trace_replay"]
        assert "hf_dataset_path" not in section and "hf_dataset_path" in replay  # the caller's document unchanged
        # the folder beside the dataset file the config read, with the session files; every other key kept
        trace_dir = (path.parent / section["trace_directory"]).resolve()
        assert (
            trace_dir.with_name(dataset_file(trace_dir.name))
            == (path.parent / replay["hf_dataset_path"]["data_files"]).resolve()
        )
        assert sorted(trace_dir.glob("session_*.json"))
        assert {k: v for k, v in section.items() if k != "trace_directory"} == {
            k: v for k, v in replay.items() if k != "hf_dataset_path"
        }
        assert {k: v for k, v in converted.items() if k != "data"} == {k: v for k, v in document.items() if k != "data"}
        assert reading_trace_directory(converted) == converted  # one reading the directory already: as it is


def test_generated_dataset_files_hold_every_trace_file_in_sorted_order(small_dataset):
    traces = small_dataset / "traces"
    manifest = json.loads((traces / "manifest.json").read_bytes())["files"]
    layouts = sorted(p.name for p in traces.iterdir() if p.is_dir() and p.name.startswith("scenario"))
    assert layouts and all(dataset_file(layout) in manifest for layout in layouts)
    for layout in layouts:
        files = sorted((traces / layout).glob("*.json"))  # inference-perf: sorted(dir.glob("*.json"))
        expected = b"".join(_row(f"{layout}/{f.name}", f.read_bytes()) for f in files)
        assert (traces / dataset_file(layout)).read_bytes() == expected


def test_compressed_dataset_files_hold_the_plain_rows(tmp_path, small_dataset):
    from conftest import SMALL

    out = tmp_path / "traces"
    configs = ["--config-dir", str(tmp_path / "configs")]
    result = run_fastgen(*SMALL, "--workers", "2", "--compress", "zstd", "--output-dir", str(out), *configs)
    assert result.returncode == 0, result.stderr
    for plain in sorted((small_dataset / "traces").glob("*.jsonl")):
        assert read_trace_bytes(out / (plain.name + ".zst")) == plain.read_bytes()


def test_verify_names_the_fix_for_a_changed_dataset_file(tmp_path, small_dataset):
    import shutil

    traces = tmp_path / "traces"
    shutil.copytree(small_dataset / "traces", traces)
    path = traces / "scenario1.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"source_id":"scenario1/', b'"source_id":"scenario9/', 1))
    result = run_fastgen("verify", str(traces))
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "scenario1.jsonl" in errors[0] and "regenerate" in errors[0], result.stdout


# The real inference-perf against the fake server: every request replayed from a dataset file is one replayed from
# its trace directory. Recorded outputs make each request's body independent of the server's answers and timing.

_COMPARED = ("messages", "tools", "tool_choice", "max_tokens")


def _bodies(records: list[dict]) -> list[str]:
    return sorted(json.dumps({k: r["body"].get(k) for k in _COMPARED}, sort_keys=True) for r in records)


def _traces_config(path: Path) -> Path:
    """The same config reading the trace directory, written beside it (what fastgen --source traces writes)."""
    document = reading_trace_directory(yaml.safe_load(path.read_text()))
    document["storage"]["local_storage"]["path"] += "-traces"
    target = path.with_name(path.stem + "_traces.yml")
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


@pytest.mark.slow  # 4 inference-perf runs
def test_inference_perf_sends_the_same_requests_from_the_dataset_file_as_from_the_trace_directory(tmp_path):
    from e2e.suites.replay import run_inference_perf
    from e2e.checks.reports import read_reports
    from e2e.suites.run import Dataset, free_port
    from e2e.engines.server import ServerThread

    port = free_port()
    arguments = Dataset().arguments(tmp_path, f"http://127.0.0.1:{port}")
    # no recorded think or tool gaps slept through, scenario 3's sessions arriving within a second: the timing of
    # requests changes, not what is sent
    result = run_fastgen(*arguments, "--outputs", "recorded", "--max-wait-ms", "0", "--arrival-window", "1")
    assert result.returncode == 0, result.stderr
    compared = 0
    with ServerThread(tmp_path / "traces" / "tokenizer", port=port, answers_from=tmp_path / "traces") as server:
        for name in ("scenario2/c10_stagger", "scenario3/c100_noisy"):  # 20 sessions: their shuffled order too
            bodies, sessions = [], []
            dataset_config = tmp_path / "configs" / f"{name}.yml"
            assert "hf_dataset_path" in yaml.safe_load(dataset_config.read_text())["data"]["otel_trace_replay"]
            for config in (dataset_config, _traces_config(dataset_config)):
                server.reset()
                log = tmp_path / "logs" / f"{config.parent.name}-{config.stem}.log"
                code = run_inference_perf(config, log=log, timeout_s=300)
                assert code == 0, log.read_text()[-2000:]
                bodies.append(_bodies([r for r in server.records if r["status"] == 200]))
                # the runtime id trace{slot}_{session_id} of every session, and its file: the rows' order is the
                # directory's, so the seeded shuffle gives every session the same slot
                reports = read_reports(yaml.safe_load(config.read_text()), config.parent)
                sessions.append(sorted((s["session_id"], Path(s["file_path"]).resolve()) for s in reports.sessions))
            assert bodies[0] and bodies[0] == bodies[1], name
            assert sessions[0] and sessions[0] == sessions[1], name
            compared += len(bodies[0])
    assert compared > 40
    assert (tmp_path / "logs" / ".datasets-cache").is_dir()  # datasets kept its Arrow copy beside the logs
