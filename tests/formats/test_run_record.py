"""fastgen/formats/run_record.py: run.json, one writer and one reader, versioned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastgen.errors import OutputError
from fastgen.formats.run_record import RUN_FILE, RUN_FORMAT, RouterFleet, RunRecord, read_run, router_fleet, write_run

# a run.json as the bakeoff wrote it before the record (format 2, every key the runner set, fleet behind a router)
BAKEOFF_RUN = {
    "config": "scenario1/c10",
    "config_dir": "/data/configs",
    "ended": 1700000100.5,
    "errors": ["HTTP Error 500"],
    "exit_code": 0,
    "fastgen": "0.9.0",
    "fleet": {"replicas": [{"url": "http://a", "requests": 3}]},
    "format": 2,
    "identity": {"server": {"url": "http://a", "engine": "vllm", "block_size": 16}, "shards": 2},
    "label": "vllm",
    "metrics_errors": 0,
    "metrics_samples": 12,
    "reason": None,
    "repeat": 2,
    "repeats": 3,
    "requests": {"expected": 10, "recorded": 10, "failed": 1},
    "reset": {"done": True, "verified": True, "how": "POST /reset_prefix_cache"},
    "scrape_interval_s": 1.0,
    "seconds": 100.25,
    "sessions": {"total": 4, "failed": 0},
    "shards": 2,
    "started": 1700000000.25,
    "status": "incomplete",
    "warning": None,
}


def _write_raw(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_FILE).write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_run_record_round_trip_keeps_every_field(tmp_path):
    record = read_run(_write_raw(tmp_path / "old", BAKEOFF_RUN))
    assert record is not None
    write_run(tmp_path, record)
    assert read_run(tmp_path) == record
    assert (
        record.repeat == 2 and record.shards == 2 and record.requests == {"expected": 10, "recorded": 10, "failed": 1}
    )
    assert record.server == {"url": "http://a", "engine": "vllm", "block_size": 16}


def test_run_record_writes_the_bytes_the_bakeoff_wrote_before_it(tmp_path):
    record = read_run(_write_raw(tmp_path / "old", BAKEOFF_RUN))
    assert record is not None
    write_run(tmp_path, record)
    assert (tmp_path / RUN_FILE).read_text() == json.dumps(BAKEOFF_RUN, indent=2, sort_keys=True) + "\n"
    # no router: no fleet key, as before
    write_run(tmp_path, RunRecord(config="scenario1/c1"))
    written = json.loads((tmp_path / RUN_FILE).read_text())
    assert "fleet" not in written and "url" not in written and written["format"] == RUN_FORMAT


def test_run_record_without_format_reads_as_format_1_with_defaults(tmp_path):
    folder = _write_raw(tmp_path, {"status": "completed", "url": "http://old", "engine": "sglang", "reset": True})
    record = read_run(folder)
    assert record is not None
    assert record.format == 1 and record.shards == 1 and record.identity == {} and record.requests is None
    assert record.status == "completed" and record.errors == [] and record.repeat is None
    assert record.reset == {"done": True, "verified": None, "how": None}
    assert record.server == {"url": "http://old", "engine": "sglang"}


def test_run_record_fields_of_the_wrong_type_read_as_not_recorded(tmp_path):
    folder = _write_raw(tmp_path, {"format": 2, "ended": "yesterday", "repeat": True, "identity": [], "shards": "2"})
    record = read_run(folder)
    assert record is not None
    assert record.ended is None and record.repeat is None and record.identity == {} and record.shards == 1


def test_run_record_of_a_newer_format_is_refused_in_one_line_naming_the_fix(tmp_path):
    folder = _write_raw(tmp_path, {**BAKEOFF_RUN, "format": RUN_FORMAT + 1})
    with pytest.raises(OutputError) as refused:
        read_run(folder)
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert f"format {RUN_FORMAT + 1}" in message and "upgrade fastgen" in message and str(folder) in message


def test_run_record_missing_or_not_an_object_reads_as_none(tmp_path):
    assert read_run(tmp_path) is None
    (tmp_path / RUN_FILE).write_text("[1, 2]")
    assert read_run(tmp_path) is None
    (tmp_path / RUN_FILE).write_text('{"status": ')
    assert read_run(tmp_path) is None


def test_run_record_write_is_all_or_nothing_on_error(tmp_path, monkeypatch):
    write_run(tmp_path, RunRecord(config="scenario1/c1", status="completed"))
    before = (tmp_path / RUN_FILE).read_bytes()
    with pytest.raises(TypeError):  # not JSON: fails before a byte is written
        write_run(tmp_path, RunRecord(config="scenario1/c2", identity={"server": object()}))
    assert (tmp_path / RUN_FILE).read_bytes() == before

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("fastgen.formats.atomic.os.replace", full_disk)  # the new bytes written, never placed
    with pytest.raises(OSError):
        write_run(tmp_path, RunRecord(config="scenario1/c3", status="failed"))
    assert (tmp_path / RUN_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [RUN_FILE]  # no temporary file left


def test_router_fleet_reads_the_routers_policy_replicas_and_each_capacity_as_recorded():
    assert router_fleet({}) is None and router_fleet({"router": "sglang-router"}) is None
    router = {"policy": "cache_aware", "replicas": [{"kv_capacity_tokens": 4096}, {"url": "http://b"}, "odd"]}
    assert router_fleet({"router": router}) == RouterFleet("cache_aware", 3, (4096, None, None))
    urls_only = {"router": {"replica_urls": ["http://a", "http://b"]}}
    assert router_fleet(urls_only) == RouterFleet("None", 2, ())
