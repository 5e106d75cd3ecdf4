"""The scheduler settings a server reports, recorded with each run so that `fastgen analyze --server-from RUN_DIR`
predicts for exactly that server: which requests run together, and so what the prefix cache keeps, depends on them.

Each engine's own names, as its endpoint answers them (the analysis maps them onto its model):
- vLLM: `GET /server_info?config_format=json` (served with VLLM_SERVER_DEV_MODE=1, which the bakeoff's reset needs
  anyway): its `vllm_config.scheduler_config` (the per-step token budget `max_num_batched_tokens`, `max_num_seqs`,
  chunked prefill, the policy, the admission rules) and `cache_config` (block size, blocks);
- SGLang: `GET /get_server_info` (the server's arguments; the scheduler's effective request limit under
  `internal_states`): `chunked_prefill_size`, `max_prefill_tokens`, `schedule_policy`, `page_size`, ...

An engine that answers neither (an older one, a router in front, vLLM without dev mode) gives None: the run record
then says nothing, and analyze predicts with its stated defaults.
"""

from __future__ import annotations

import json
from typing import Optional

from .server import LiveServer, fetch

__all__ = ["SGLANG_SETTINGS", "VLLM_SETTINGS", "scheduler_settings"]

VLLM_SETTINGS = {
    "scheduler_config": (
        "max_num_batched_tokens",
        "max_num_seqs",
        "enable_chunked_prefill",
        "policy",
        "long_prefill_token_threshold",
        "scheduler_reserve_full_isl",
        "watermark",
        "async_scheduling",
    ),
    "cache_config": ("block_size", "num_gpu_blocks", "enable_prefix_caching"),
}
SGLANG_SETTINGS = (
    "chunked_prefill_size",
    "max_prefill_tokens",
    "schedule_policy",
    "page_size",
    "max_running_requests",
    "max_total_tokens",
    "schedule_conservativeness",
    "enable_mixed_chunk",
    "disable_overlap_schedule",
    "disable_radix_cache",
    "radix_eviction_policy",
)
VLLM_INFO_PATH = "/server_info?config_format=json"


def scheduler_settings(server: LiveServer, info: dict) -> Optional[dict]:
    """The scheduler settings `server` reports (its engine's names, plus `source`: the endpoint), or None. `info` is
    the engine's info endpoint's answer (LiveServer.info), which is SGLang's source."""
    if server.engine.name == "sglang":
        return _sglang(info)
    if server.engine.name == "vllm":
        return _vllm(server)
    return None


def _vllm(server: LiveServer) -> Optional[dict]:
    try:
        answer = fetch(server.url + VLLM_INFO_PATH, timeout_s=30)  # its first answer collects the system's details
        config = json.loads(answer.body).get("vllm_config") if answer.status == 200 else None
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(config, dict):
        return None
    found: dict = {"source": "GET " + VLLM_INFO_PATH}
    for section, keys in VLLM_SETTINGS.items():
        values = config.get(section)
        if isinstance(values, dict):
            found.update({key: values[key] for key in keys if key in values})
    return found if len(found) > 1 else None


def _sglang(info: dict) -> Optional[dict]:
    states = [s for s in info.get("internal_states") or [] if isinstance(s, dict)]
    found: dict = {"source": "GET /get_server_info"}
    for key in SGLANG_SETTINGS:
        for where in (info, *states):
            if key in where:
                found[key] = where[key]
                break
    for state in states:  # the limit the scheduler applies (max_running_requests itself is often unset)
        if state.get("effective_max_running_requests_per_dp") is not None:
            found["effective_max_running_requests"] = state["effective_max_running_requests_per_dp"]
            break
    return found if len(found) > 1 else None
