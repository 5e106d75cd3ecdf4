"""e2e.real.vllm against a real vLLM on the CPU: prefix caching, cached tokens in usage, dev-mode cache reset, stop.

Skipped unless FASTGEN_VLLM_VENV names a venv where e2e.real.vllm.install() has finished (it takes minutes and 3.4 GB,
so no test does it): `FASTGEN_VLLM_VENV=/work/vllm-venv .venv/bin/python -m pytest tests/e2e/test_e2e_vllm.py`.
One server start is 30-60 s on 2 cores: the module shares one, and two tests start their own (about 2-3 minutes
in all).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e.real.vllm import DEFAULT_MODEL, INSTALL_MARKER, TOKENIZER, VllmServer, build_model, group_members, install

VENV = os.environ.get("FASTGEN_VLLM_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_VLLM_VENV does not point at a venv installed by e2e.real.vllm.install()",
)
MAX_LEN = 4096


@pytest.fixture(scope="module")
def python():
    return install(Path(VENV))  # returns at once: the marker is there


@pytest.fixture(scope="module")
def model(python):
    return build_model(python, TOKENIZER, Path(VENV) / f"fastgen-tiny-llama-{MAX_LEN}", MAX_LEN)


@pytest.fixture(scope="module")
def server(python, model, tmp_path_factory):
    # 0.004 GiB: --kv-cache-memory-bytes 4294967, 262 blocks (8,384 tokens), small enough to evict in a few requests
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with VllmServer(
        python,
        model,
        served_model_name=DEFAULT_MODEL,
        kv_cache_gib=0.004,
        max_model_len=MAX_LEN,
        kv_cache_metrics=True,
        log=log,
    ) as running:
        yield running


def streamed_usage(server: VllmServer, content: str) -> dict:
    status, raw = server.post(
        "/v1/chat/completions",
        {
            "model": DEFAULT_MODEL,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200, raw[:500]
    events = [line.removeprefix("data: ") for line in raw.decode().split("\n\n") if line.strip()]
    assert events[-1] == "[DONE]"
    usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
    assert usage, "no usage chunk"
    return usage[-1]


def test_models_lists_the_served_name(server):
    status, body = server.get("/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(body)["data"]] == [DEFAULT_MODEL]


def test_a_repeated_prompt_hits_whole_32_token_blocks_until_the_cache_is_reset(server):
    content = "Fix the failing test in the parser module, then run the suite again. " * 12
    assert server.reset_prefix_cache()
    first = streamed_usage(server, content)
    assert (first.get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0
    second = streamed_usage(server, content)
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < second["prompt_tokens"] and cached % 32 == 0
    assert server.reset_prefix_cache()
    third = streamed_usage(server, content)
    assert (third.get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0


def test_vllm_counts_a_tool_call_history_as_fastgens_chat_template_renders_it(server):
    # arguments (a JSON string on the wire) reach vLLM's template as objects, an assistant tool-call message has no
    # content: fastgen.formats.chat_template renders what vLLM renders, so the counts agree token for token
    from fastgen.formats.chat_template import ChatTemplate
    from fastgen.formats.tokenizer import load_tokenizer

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"src/app.py","start":1}'},
    }
    messages = [
        {"role": "system", "content": "You are a coding agent.\n"},
        {"role": "user", "content": "Fix the failing test.\n"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def main():\n    return 1\n"},
        {"role": "user", "content": "Go on.\n"},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "start": {"type": "integer"}},
                    "required": ["path"],
                },
            },
        }
    ]
    tokenizer = load_tokenizer(str(TOKENIZER))
    ours = tokenizer.count(ChatTemplate(tokenizer.folder_files).render(messages, tools))
    status, raw = server.post(
        "/v1/chat/completions",
        {"model": DEFAULT_MODEL, "messages": messages, "tools": tools, "tool_choice": "none", "max_tokens": 1},
    )
    assert status == 200, raw[:500]
    assert json.loads(raw)["usage"]["prompt_tokens"] == ours


def test_a_small_cache_evicts_and_says_so_in_metrics(server):
    assert server.reset_prefix_cache()
    content = "Refactor the session scheduler and keep the prefix cache warm. " * 60  # about 900 tokens
    streamed_usage(server, content)
    assert streamed_usage(server, content)["prompt_tokens_details"]["cached_tokens"] > 0
    for i in range(12):  # 12 x ~900 tokens of other prompts: more than the 8,384-token cache
        streamed_usage(server, f"Unrelated prompt number {i} about a different repository layout. " * 60)
    assert streamed_usage(server, content)["prompt_tokens_details"]["cached_tokens"] == 0
    evicted = [
        line
        for line in server.metrics().splitlines()
        if line.startswith("vllm:kv_block_idle_before_evict_seconds_count")
    ]
    assert evicted and float(evicted[0].split()[-1]) > 0


def test_metrics_expose_the_prefix_cache_and_kv_usage(server):
    text = server.metrics()
    for family in (
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
    ):
        assert f"# TYPE {family} " in text, family


def test_stop_ends_the_whole_process_group(python, model, tmp_path):
    running = VllmServer(python, model, max_model_len=MAX_LEN, log=tmp_path / "server.log", num_blocks=256)
    with running:
        group = running.process.pid
        assert len(group_members(group)) >= 3 and running.rss_bytes() > 1 << 30
        assert 'num_gpu_blocks="256"' in running.metrics()
    assert running.process is None
    assert group_members(group) == []  # API server, engine core, worker, resource tracker: all gone
    running.stop()  # a second stop is a no-op


def test_a_start_that_fails_names_the_engine_error_and_leaves_nothing(python, model, tmp_path, monkeypatch):
    groups, popen = [], subprocess.Popen

    def spy(*args, **kwargs):
        process = popen(*args, **kwargs)
        groups.append(process.pid)  # the server leads its own group
        return process

    monkeypatch.setattr(subprocess, "Popen", spy)
    # 64 blocks hold 63 x 32 = 2,016 tokens besides the null block: too few for one 4,096-token request
    failing = VllmServer(python, model, max_model_len=MAX_LEN, log=tmp_path / "server.log", num_blocks=64)
    with pytest.raises(RuntimeError, match="ValueError: To serve at least one request"):
        failing.start()
    assert failing.process is None and len(groups) == 1
    assert group_members(groups[0]) == []


def test_a_zero_cache_is_refused():
    with pytest.raises(ValueError):
        VllmServer(Path("python"), Path("model"), kv_cache_gib=0, log=Path("log"))
