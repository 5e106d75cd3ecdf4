"""bakeoff/shards.py: one config's replay split into disjoint shards; real generated datasets, inference-perf's own
config model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from fastgen.errors import OutputError, SpecError
from fastgen.bakeoff.shards import plan_shards, write_shards
from fastgen.formats.rows import replay_slots

CONFIG = "configs/scenario3/c100_stable.yml"  # 20 sessions at the small scale


def _rows(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_plan_shards_slots_are_disjoint_and_their_union_is_the_configs_replay(small_dataset):
    config = small_dataset / CONFIG
    document = yaml.safe_load(config.read_text())
    stage = document["load"]["stages"][0]
    single = replay_slots(20, document["load"]["base_seed"], stage["num_sessions"])
    shards = plan_shards(config, 3)
    assert [s.index for s in shards] == [0, 1, 2] and {s.count for s in shards} == {3}
    together = [slot for s in shards for slot in s.slots]
    assert len(together) == len(set(together)) == stage["num_sessions"]
    assert sorted(together) == sorted(single)
    assert [s.slots for s in shards] == [tuple(single[k::3]) for k in range(3)]  # round-robin in slot order


def test_plan_shards_configs_share_the_load_and_keep_their_own_seed_and_reports(small_dataset):
    config = small_dataset / CONFIG
    document = yaml.safe_load(config.read_text())
    stage = document["load"]["stages"][0]
    shards = plan_shards(config, 3)
    rates = [s.config["load"]["stages"][0]["session_rate"] for s in shards]
    assert sum(rates) == pytest.approx(stage["session_rate"])
    assert [s.config["load"]["stages"][0]["num_sessions"] for s in shards] == [len(s.slots) for s in shards]
    assert len({s.config["load"]["base_seed"] for s in shards}) == 3
    # the reports go into the shard's own folder; the tokenizer is the shard's copy of the config's folder
    assert [s.config["storage"]["local_storage"]["path"] for s in shards] == ["."] * 3
    for shard in shards:
        assert shard.config["load"]["stages"][0]["concurrent_sessions"] >= 1
        assert shard.config["tokenizer"]["pretrained_model_name_or_path"] == "./tokenizer"
        assert shard.tokenizer == (small_dataset / "traces" / "tokenizer").resolve()


def test_plan_shards_gives_every_remote_report_path_a_shard_suffix(tmp_path, small_dataset):
    config = tmp_path / "configs" / "scenario3" / "c.yml"
    shutil.copytree(small_dataset / "traces", tmp_path / "traces")
    config.parent.mkdir(parents=True)
    document = yaml.safe_load((small_dataset / CONFIG).read_text())
    document["storage"]["google_cloud_storage"] = {"bucket_name": "b", "path": "runs/c100/"}
    document["storage"]["simple_storage_service"] = {"bucket_name": "b"}
    config.write_text(yaml.safe_dump(document))
    shards = plan_shards(config, 2)
    assert [s.config["storage"]["google_cloud_storage"]["path"] for s in shards] == [
        "runs/c100/shard-00",
        "runs/c100/shard-01",
    ]
    assert [s.config["storage"]["simple_storage_service"]["path"] for s in shards] == ["shard-00", "shard-01"]


def test_write_shards_files_hold_exactly_each_shards_rows_byte_for_byte(tmp_path, small_dataset):
    config = small_dataset / CONFIG
    source = _rows(small_dataset / "traces" / "scenario3_stable.jsonl")
    shards = plan_shards(config, 3)
    paths = write_shards(config, 3, tmp_path / "out")
    assert paths == [tmp_path / "out" / f"shard-{k:02d}" / "c100_stable.yml" for k in range(3)]
    for shard, path in zip(shards, paths):
        rows = _rows(path.parent / "scenario3_stable.jsonl")
        assert sorted(rows) == sorted(source[i] for i in shard.slots)
        # the shard's own shuffle starts its sessions in the single config's slot order
        order = replay_slots(len(rows), shard.config["load"]["base_seed"], len(rows))
        assert [rows[r] for r in order] == [source[i] for i in shard.slots]
        assert yaml.safe_load(path.read_text()) == shard.config
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["format_version"], manifest["shard_count"], manifest["source_config"]) == (2, 3, "c100_stable.yml")
    assert "shards" not in manifest  # format 1's name for its version, beside a count it was not
    tokenizer = sorted(
        p.relative_to(small_dataset / "traces").as_posix()
        for p in (small_dataset / "traces" / "tokenizer").rglob("*")
        if p.is_file()
    )
    assert tokenizer and sorted(manifest["files"]) == sorted(
        [f"shard-{k:02d}/{name}" for k in range(3) for name in ("c100_stable.yml", "scenario3_stable.jsonl")]
        + [f"shard-{k:02d}/{name}" for k in range(3) for name in tokenizer]
    )


def test_write_shards_from_a_trace_directory_writes_the_rows_the_dataset_file_holds(tmp_path, small_dataset):
    config = tmp_path / "c.yml"
    document = yaml.safe_load((small_dataset / CONFIG).read_text())
    replay = document["data"]["otel_trace_replay"]
    replay.pop("hf_dataset_path")
    replay["trace_directory"] = str(small_dataset / "traces" / "scenario3_stable")
    config.write_text(yaml.safe_dump(document))
    from_dir = write_shards(config, 2, tmp_path / "from-dir")
    from_file = write_shards(small_dataset / CONFIG, 2, tmp_path / "from-file")
    for a, b in zip(from_dir, from_file):
        assert (a.parent / "scenario3_stable.jsonl").read_bytes() == (b.parent / "scenario3_stable.jsonl").read_bytes()


def test_shard_configs_load_in_inference_perfs_config_model(tmp_path, small_dataset):
    from inference_perf.config import read_config

    for path in write_shards(small_dataset / CONFIG, 2, tmp_path / "out"):
        config = read_config(str(path))
        assert config.load.stages[0].num_sessions == 10
        assert config.data.otel_trace_replay.hf_dataset_path == {"path": "json", "data_files": "scenario3_stable.jsonl"}


def test_a_shard_copied_to_another_folder_loads_there_with_inference_perfs_own_loaders(
    tmp_path, small_dataset, monkeypatch
):
    """Another machine's stand-in: the shard's folder copied elsewhere, the export removed; inference-perf's config
    model, its dataset loader and the tokenizer find everything from inside the copy."""
    from inference_perf.config import read_config
    from inference_perf.datagen.replay.otel_trace_replay_datagen import _download_hf_dataset
    from transformers import AutoTokenizer

    out = tmp_path / "out"
    paths = write_shards(small_dataset / CONFIG, 2, out, base_url="http://gpu-host:8000")
    away = tmp_path / "elsewhere" / "shard-01"
    shutil.copytree(paths[1].parent, away)
    shutil.rmtree(out)
    text = (away / "c100_stable.yml").read_text()
    assert str(small_dataset) not in text and str(tmp_path) not in text  # nothing names the machine it came from
    monkeypatch.chdir(away)
    config = read_config("c100_stable.yml")
    assert config.server.base_url == "http://gpu-host:8000"
    assert config.storage.local_storage.path == "."  # its reports are written beside it
    source = config.data.otel_trace_replay.hf_dataset_path
    dataset = _download_hf_dataset({**source, "cache_dir": str(tmp_path / "datasets-cache")})
    assert sorted(json.dumps(dict(row), sort_keys=True) for row in dataset) == sorted(
        json.dumps(json.loads(line), sort_keys=True)
        for line in (away / "scenario3_stable.jsonl").read_text().splitlines()
    )
    assert len(dataset) == config.load.stages[0].num_sessions == 10
    tokenizer = AutoTokenizer.from_pretrained(config.tokenizer.pretrained_model_name_or_path)
    reference = AutoTokenizer.from_pretrained(str(small_dataset / "traces" / "tokenizer"))
    assert tokenizer("def f(): pass")["input_ids"] == reference("def f(): pass")["input_ids"]


@pytest.mark.parametrize("count", [0, -1, 21])
def test_plan_shards_refuses_a_count_outside_one_to_the_sessions(small_dataset, count):
    with pytest.raises(SpecError, match="--shards"):
        plan_shards(small_dataset / CONFIG, count)


def test_write_shards_refuses_a_dataset_file_the_manifest_does_not_list_and_writes_nothing(tmp_path, small_dataset):
    shutil.copytree(small_dataset / "traces", tmp_path / "traces")
    shutil.copytree(small_dataset / "configs", tmp_path / "configs")
    dataset = tmp_path / "traces" / "scenario3_stable.jsonl"
    dataset.write_bytes(dataset.read_bytes().replace(b'"session_id"', b'"session_iD"', 1))
    with pytest.raises(OutputError, match="hash differs"):
        write_shards(tmp_path / CONFIG, 2, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_write_shards_replaces_an_earlier_export_and_refuses_a_folder_of_other_files(tmp_path, small_dataset):
    out = tmp_path / "out"
    write_shards(small_dataset / CONFIG, 3, out)
    write_shards(small_dataset / CONFIG, 2, out)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "shard-00", "shard-01"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match="--out"):
        write_shards(small_dataset / CONFIG, 2, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("shards", "changed", "code", "fix"),
    [
        ("0", False, 2, "give 1 or more"),
        ("21", False, 2, "give at most 20"),
        ("2", True, 1, "regenerate the dataset"),
    ],
)
def test_export_shards_command_bad_input_is_one_line_and_writes_nothing(
    tmp_path, small_dataset, capsys, shards, changed, code, fix
):
    from fastgen.cli import main

    shutil.copytree(small_dataset / "traces", tmp_path / "traces")
    shutil.copytree(small_dataset / "configs", tmp_path / "configs")
    if changed:
        dataset = tmp_path / "traces" / "scenario3_stable.jsonl"
        dataset.write_bytes(dataset.read_bytes().replace(b"def ", b"deF ", 1))  # an edited row
    out = tmp_path / "out"
    assert main(["export", "shards", str(tmp_path / CONFIG), "--shards", shards, "--out", str(out)]) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("fastgen: error: ") and fix in err
    assert not out.exists()


def test_export_shards_command_writes_the_shards(tmp_path, small_dataset, capsys):
    from fastgen.cli import main

    out = tmp_path / "out"
    args = ["export", "shards", str(small_dataset / CONFIG), "--shards", "2", "--out", str(out)]
    assert main([*args, "--base-url", "http://vllm.serving:8000"]) == 0
    assert "wrote 2 shards" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "shard-00", "shard-01"]
    for shard in ("shard-00", "shard-01"):
        config = yaml.safe_load((out / shard / "c100_stable.yml").read_text())
        assert config["server"]["base_url"] == "http://vllm.serving:8000"
        assert (out / shard / "tokenizer" / "tokenizer.json").is_file()


def _request_entry(session: str, turn: int, start: float) -> dict:
    usage = {"prompt_tokens": 100 * (turn + 1), "prompt_tokens_details": {"cached_tokens": 40 * turn}}
    return {
        "start_time": start,
        "end_time": start + 1.0,
        "error": None,
        "info": {"labels": {"session": session, "turn": str(turn)}, "response_metrics": {"server_usage": usage}},
        "computed_metrics": {"output_tokens": 7, "time_to_first_token": 0.1 * (turn + 1)},
    }


def _shard_reports(folder: Path, session: str, recorded: int, events: int = 2) -> None:
    folder.mkdir(parents=True)
    requests = [_request_entry(session, turn, float(turn)) for turn in range(recorded)]
    sessions = [{"session_id": f"trace0_{session}", "success": True, "error": None, "num_events": events}]
    for entry in sessions:
        entry.update(start_time=0.0, end_time=float(events))
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    (folder / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))


def test_a_sharded_runs_counts_are_its_shards_records_merged_and_a_loss_in_one_shard_shows(tmp_path):
    from fastgen.bakeoff.runner import BakeoffOptions, _judge
    from fastgen.bakeoff.status import read_counts
    from fastgen.results.runs import read_runs

    run = tmp_path / "x" / "scenario3" / "c100_noisy" / "repeat-1"
    _shard_reports(run / "shards" / "shard-00", "a", 2)
    _shard_reports(run / "shards" / "shard-01", "b", 1)  # one request of its session's two never recorded
    counts = read_counts(run)
    assert (counts.recorded, counts.expected, counts.sessions, counts.lost) == (3, 4, 2, 1)
    for folder in ("shard-00", "shard-01"):
        (run / "shards" / folder / "inference-perf.log").write_text("done\n")
    options = BakeoffOptions(url="http://x", label="x", shards=2)
    status, reason = _judge([0, 0], counts, run, options, died=False, restarted=None, who="the server")
    assert (status, reason) == ("incomplete", "shard-01: 1 of 2 requests not recorded")

    runs, problems = read_runs(tmp_path / "x")
    assert list(runs) == ["scenario3/c100_noisy"]  # one run: the shard folders are not runs of their own
    (repeat,) = runs["scenario3/c100_noisy"].repeats
    assert sorted((r.session, r.turn) for r in repeat.requests) == [("a", 0), ("a", 1), ("b", 0)]
    assert repeat.status == "incomplete" and repeat.requests_failed == 1 and repeat.requests_total == 4


# A sharded bakeoff against the fake engine, beside the same config run by one process: the same requests reach the
# engine, and the readers merge the shards' records into one run with the single run's figures.
SHARDED = "scenario3/c100_noisy"  # 20 sessions


@pytest.fixture(scope="module")
def bakeoff_dataset(tmp_path_factory) -> Path:
    from e2e.suites.run import Dataset, generate

    workdir = tmp_path_factory.mktemp("shards-bakeoff")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def _bakeoff(dataset: Path, out: Path, url: str, label: str, *args: str):
    from e2e.suites.runner import fastgen_command

    return fastgen_command(
        "bakeoff",
        "--url",
        url,
        "--label",
        label,
        "--config-dir",
        str(dataset / "configs"),
        "--out",
        str(out),
        "--scrape-interval",
        "0.5",
        "--outputs",
        "recorded",
        "--configs",
        SHARDED,
        *args,
        timeout_s=600,
    )


def _sent(part: list[dict]) -> list[str]:
    """What each request sent (its messages and tools), as sorted JSON: the request set, whatever the order."""
    return sorted(
        json.dumps({k: e["body"].get(k) for k in ("messages", "tools")}, sort_keys=True)
        for e in part
        if e.get("status") == 200
    )


@pytest.mark.slow  # a bakeoff of one process and one of two shards, compare
def test_sharded_bakeoff_sends_the_single_runs_requests_and_compare_merges_the_shards(bakeoff_dataset, tmp_path):
    from e2e.suites.bakeoff import FakeEngineProcess, segments
    from e2e.suites.runner import fastgen_command
    from fastgen.results.runs import read_runs

    out = tmp_path / "reports"
    with FakeEngineProcess(bakeoff_dataset / "traces" / "tokenizer", tmp_path / "engine.jsonl", "vllm") as engine:
        one = _bakeoff(bakeoff_dataset, out, engine.url, "one")
        two = _bakeoff(bakeoff_dataset, out, engine.url, "two", "--shards", "2")
        log = engine.log()
    assert one.returncode == 0, one.stdout + one.stderr
    assert two.returncode == 0, two.stdout + two.stderr
    parts = [p for p in segments(log) if p]
    assert len(parts) == 2 and _sent(parts[0]) == _sent(parts[1]) and len(_sent(parts[0])) > 40

    run = out / "two" / SHARDED / "repeat-1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "completed" and record["shards"] == 2 and record["identity"]["shards"] == 2
    shard_dirs = sorted((run / "shards").iterdir())
    assert [p.name for p in shard_dirs if p.is_dir()] == ["shard-00", "shard-01"]
    sessions = [
        {s["session_id"] for s in json.loads((d / "per_session_lifecycle_metrics.json").read_text())}
        for d in shard_dirs
        if d.is_dir()
    ]
    assert sessions[0] and sessions[1] and not sessions[0] & sessions[1]  # distinct runtime ids across shards
    assert not list(
        (run / "shards").rglob("*.jsonl")
    )  # the shards' copies of the rows are dropped once the run has ended

    single, sharded = (read_runs(out / label)[0][SHARDED].repeats[0] for label in ("one", "two"))
    assert record["requests"] == json.loads((out / "one" / SHARDED / "repeat-1" / "run.json").read_text())["requests"]
    assert len(sharded.requests) == len(single.requests)
    for figure in ("prompt_tokens", "cached_tokens", "output_tokens"):
        assert sum(getattr(r, figure) for r in sharded.requests) == sum(getattr(r, figure) for r in single.requests)
    assert sorted((r.session, r.turn) for r in sharded.requests) == sorted((r.session, r.turn) for r in single.requests)

    compared = fastgen_command("compare", str(out / "one"), str(out / "two"), "--out", str(tmp_path / "report"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    runs_table = next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]
    row = dict(zip(runs_table["columns"], runs_table["rows"][0]))
    assert row["requests A"] == row["requests B"] == len(single.requests)
    assert row["hit % A"]["value"] == row["hit % B"]["value"] and row["hit % A"]["n"] == row["hit % B"]["n"]


@pytest.mark.slow  # real inference-perf replaying one exported shard against the fake engine
def test_a_copied_shard_replays_with_real_inference_perf_from_its_new_folder(bakeoff_dataset, tmp_path):
    """A shard exported with --base-url, copied to another folder (another machine's stand-in) and the export
    removed, replays there as it is: inference-perf run from inside the copy sends its sessions' requests to the
    server the export named, and writes its reports into the copy."""
    from e2e.suites.bakeoff import FakeEngineProcess
    from fastgen.bakeoff.inference_perf import inference_perf_command, run_inference_perf

    config = bakeoff_dataset / "configs" / f"{SHARDED}.yml"
    with FakeEngineProcess(bakeoff_dataset / "traces" / "tokenizer", tmp_path / "engine.jsonl", "vllm") as engine:
        paths = write_shards(config, 2, tmp_path / "out", base_url=engine.url)
        away = tmp_path / "elsewhere" / "shard-01"
        shutil.copytree(paths[1].parent, away)
        shutil.rmtree(tmp_path / "out")
        log = tmp_path / "inference-perf.log"
        code = run_inference_perf(
            inference_perf_command(), away / config.name, away, log, 600, cache=tmp_path / "datasets-cache"
        )
        sent = [e for e in engine.log() if e.get("status") == 200]
    assert code == 0, log.read_text()[-2000:]
    requests = json.loads((away / "per_request_lifecycle_metrics.json").read_text())
    sessions = json.loads((away / "per_session_lifecycle_metrics.json").read_text())
    shard = yaml.safe_load((away / config.name).read_text())
    dataset = away / shard["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"]
    rows = [json.loads(line)["session_id"] for line in dataset.read_text().splitlines()]
    assert len(sessions) == len(rows) == 10 and all(s["success"] for s in sessions)
    assert {s["session_id"].split("_", 1)[1] for s in sessions} == set(rows)  # trace{slot}_{row's session_id}
    assert len(requests) == len(sent) > 10 and not any(r.get("error") for r in requests)
