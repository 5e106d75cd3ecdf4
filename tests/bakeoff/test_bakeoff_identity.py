"""bakeoff/identity.py: what a run ran against, and when a run done before still stands for the same question."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.bakeoff import MODEL, QUICK, bakeoff, engine, run_record

from e2e.engines.server import ServerThread
from fastgen.bakeoff.identity import identity_change, run_identity, server_identity
from fastgen.bakeoff.plan import run_config_text
from fastgen.bakeoff.server import probe_server
from fastgen.formats.run_record import RunRecord, write_run


def test_identity_change_names_what_makes_a_run_not_the_same(dataset, tmp_path):
    config = dataset / "configs" / "scenario2" / "c10_sync.yml"
    server = {
        "url": "http://a:1",
        "engine": "vllm",
        "version": "1",
        "model": MODEL,
        "kv_capacity_tokens": 1600,
        "block_size": 16,
        "gpus": None,
        "process_start": 1.0,
    }

    def identity(path: Path = config, outputs=None, reset=True, tool_choice=None, **changes) -> dict:
        import yaml

        text = run_config_text(
            path.read_text(),
            config_dir=config.parent,
            url="http://a:1",
            engine="vllm",
            report_dir=tmp_path / "run",
            outputs=outputs,
            tool_choice=tool_choice,
        )
        return run_identity({**server, **changes}, config_path=path, run_config=yaml.safe_load(text), reset=reset)

    edited = tmp_path / "c10_sync.yml"
    edited.write_text(config.read_text() + "# edited\n")
    base = identity()
    assert identity_change(base, identity(process_start=2.0, version="2")) is None  # a restart of the same server
    assert identity_change(base, identity(path=edited)) == "the config changed"
    assert identity_change(base, identity(kv_capacity_tokens=3200)) == "another KV capacity"
    assert identity_change(base, identity(outputs="recorded")) == "another outputs mode"
    assert identity_change(base, identity(tool_choice="as_recorded")) == "another tool_choice mode"
    assert identity_change(base, identity(url="http://b:1")) == "another server URL"
    assert identity_change(base, identity(reset=False)).startswith("the cache was reset between runs in one")
    # a capacity that could not be read this time (a /metrics that failed once) is not known, not another one
    assert identity_change(base, identity(kv_capacity_tokens=None)) is None
    assert identity_change(None, base) == "it was run by an older fastgen"
    assert base["outputs"] == "live" and base["tool_call_max_tokens"] == "floor" and len(base["dataset_sha256"]) == 64
    assert base["tool_choice"] == "forced"
    assert base["workload"] == "default" and base["reset"] is True


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_refuses_a_label_whose_runs_came_from_another_server_unless_rerun(dataset, tmp_path):
    other = "http://127.0.0.1:9"
    old = tmp_path / "reports" / "x" / "scenario1" / "c1" / "repeat-1"
    old.mkdir(parents=True)
    write_run(
        old,
        RunRecord(
            config="scenario1/c1",
            status="completed",
            identity={"server": {"url": other, "engine": "vllm", "model": MODEL}},
        ),
    )
    with engine(dataset, tmp_path) as server:
        refused = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        assert refused.returncode == 1
        error = refused.stderr.strip()
        assert len(error.splitlines()) == 1 and error.startswith("fastgen: error: ")
        assert other in error and server.url in error and "--label" in error and "--rerun" in error
        assert not (tmp_path / "reports" / "x" / "scenario2").exists()
        went_on = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--rerun")
    assert went_on.returncode == 0 and run_record(tmp_path, QUICK)["identity"]["server"]["url"] == server.url


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_server_identity_reads_version_capacity_and_process_start(dataset, flavour):
    from e2e.engines.fake_engine import VERSIONS, EngineProfile

    profile = EngineProfile(flavour=flavour, kv_capacity_tokens=4096)
    with ServerThread(dataset / "traces" / "tokenizer", profile=profile) as thread:
        server = probe_server(thread.base_url, MODEL)
        identity = server_identity(server, MODEL, gpus=2)
    # the scheduler's settings, in the engine's own names, from the endpoint that served them
    scheduler = identity.pop("scheduler")
    if flavour == "vllm":
        assert scheduler["source"] == "GET /server_info?config_format=json"
        assert (scheduler["block_size"], scheduler["policy"]) == (16, "fcfs")
    else:
        assert (scheduler["source"], scheduler["schedule_policy"]) == ("GET /get_server_info", "fcfs")
        assert scheduler["chunked_prefill_size"] == -1
    assert identity == {
        "url": thread.base_url,
        "engine": flavour,
        "version": VERSIONS[flavour],
        "model": MODEL,
        "kv_capacity_tokens": 4096,
        "block_size": 16,
        "gpus": 2,
        "process_start": thread.state.process_start,
    }
