"""analysis/serving.py: the server to predict for, read from a bakeoff run's record (--server-from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from _support.analysis import fleet_record

from fastgen.analysis.rules import ENGINE_RULES
from fastgen.analysis.serving import server_from, settings_from_record
from fastgen.errors import SpecError

# what the bakeoff recorded from the real engines (vLLM 0.32.0 GET /server_info, SGLang 0.5.23 GET /get_server_info)
VLLM = {
    "source": "GET /server_info?config_format=json",
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 128,
    "enable_chunked_prefill": True,
    "policy": "fcfs",
    "long_prefill_token_threshold": 0,
    "scheduler_reserve_full_isl": True,
    "watermark": 0.0,
    "async_scheduling": False,
    "block_size": 32,
    "num_gpu_blocks": 514,
    "enable_prefix_caching": True,
}
SGLANG = {
    "source": "GET /get_server_info",
    "chunked_prefill_size": 4096,
    "max_prefill_tokens": 16384,
    "schedule_policy": "lpm",
    "page_size": 1,
    "max_running_requests": None,
    "effective_max_running_requests": 2048,
    "schedule_conservativeness": 2.0,
    "enable_mixed_chunk": True,
}


def test_each_engines_recorded_settings_become_the_models():
    settings, missing, notes = settings_from_record("vllm", VLLM)
    assert (settings.batch_tokens, settings.max_running, settings.reserve_full_prompt) == (2048, 128, True)
    assert missing == () and notes == ()
    settings, missing, notes = settings_from_record("sglang", SGLANG)
    assert (settings.batch_tokens, settings.max_prefill_tokens, settings.max_running) == (4096, 16384, 2048)
    assert settings.policy == "lpm" and settings.new_token_ratio[0] == 1.0  # 0.7 x 2, at most 1
    assert missing == () and notes == ("mixed chunks (decode in prefill batches) are modelled as separate steps",)
    settings, _, notes = settings_from_record("sglang", {**SGLANG, "schedule_policy": "dfs-weight"})
    assert settings.policy == "fcfs" and "schedule_policy dfs-weight runs as fcfs" in notes


def write_record(folder: Path, server: dict) -> Path:
    from fastgen.formats.run_record import RunRecord, write_run

    folder.mkdir(parents=True)
    write_run(folder, RunRecord(config="scenario1/c10", repeat=1, status="completed", identity={"server": server}))
    return folder


def test_a_run_without_scheduler_settings_predicts_with_the_stated_defaults(tmp_path):
    old = write_record(tmp_path / "old", {"engine": "vllm", "kv_capacity_tokens": 16448, "block_size": 32})
    spec = server_from(old)
    assert spec.settings == ENGINE_RULES["vllm"].defaults and spec.defaulted == ("scheduler settings",)
    assert spec.describe() == (
        f"server from {old}: vllm, KV capacity 16,448 tokens, block size 32; max_num_batched_tokens 8,192, "
        f"max_num_seqs 1,024, policy fcfs, admission whole prompt (the run records no scheduler settings: vLLM "
        f"0.32's defaults for its OpenAI server on an 80 GB-class GPU (H100, H200))"
    )
    new = write_record(
        tmp_path / "new",
        {"engine": "vllm", "version": "0.32.0", "kv_capacity_tokens": 16448, "block_size": 32, "scheduler": VLLM},
    )
    assert server_from(new).settings.batch_tokens == 2048 and server_from(new).defaulted == ()


def test_server_from_refuses_runs_of_two_servers_and_a_folder_without_runs(tmp_path):
    write_record(tmp_path / "a" / "one", {"engine": "vllm", "kv_capacity_tokens": 16448, "block_size": 32})
    write_record(tmp_path / "a" / "two", {"engine": "vllm", "kv_capacity_tokens": 32896, "block_size": 32})
    with pytest.raises(SpecError, match="ran against different servers .kv_capacity_tokens 16448 and 32896."):
        server_from(tmp_path / "a")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="holds no run.json that names its server"):
        server_from(tmp_path / "empty")


def test_server_from_runs_through_a_router_is_their_fleet_at_each_replicas_capacity(tmp_path):
    spec = server_from(fleet_record(tmp_path / "fleet", "round_robin", 16448, 16448))
    assert (spec.replicas, spec.router, spec.capacity_tokens) == (2, "round_robin", 16448)
    assert (
        "vllm, 2 replicas behind round_robin, KV capacity 16,448 tokens per replica, block size 32" in spec.describe()
    )
    with pytest.raises(SpecError, match=r"its replicas recorded different KV capacities \(16448, 32896\)"):
        server_from(fleet_record(tmp_path / "uneven", "round_robin", 16448, 32896))
    # a replica that recorded no capacity is unknown, not different: the others' capacity, as compare takes it
    unknown = server_from(fleet_record(tmp_path / "unknown", "round_robin", 16448, None))
    assert (unknown.replicas, unknown.capacity_tokens) == (2, 16448)
