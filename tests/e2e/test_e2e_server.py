"""e2e.engines.server, e2e.engines.model and e2e.engines.prefix_cache: the fake server speaks OpenAI chat completions
and caches for real."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from _support import ROOT
from e2e.engines.prefix_cache import PrefixCache
from e2e.engines.server import DEFAULT_MODEL, ServerThread

TOKENIZER = ROOT / "fastgen" / "data" / "builtin-tokenizer"
TOOL = {
    "type": "function",
    "name": "apply_patch",
    "description": "Apply a patch.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "hunks": {"type": "integer"}},
        "required": ["path", "hunks"],
    },
}


@pytest.fixture(scope="module")
def server():
    with ServerThread(TOKENIZER) as running:
        yield running


def post(server: ServerThread, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"{server.base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def chat(**fields) -> dict:
    return {"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": "Fix the failing test."}], **fields}


def sse_events(raw: bytes) -> list:
    events = [line.removeprefix("data: ") for line in raw.decode().split("\n\n") if line]
    return [e if e == "[DONE]" else json.loads(e) for e in events]


def test_prefix_cache_same_prompt_twice_hits_whole_blocks_below_the_last_token():
    cache, ids = PrefixCache(), list(range(40))
    assert cache.lookup_and_insert(ids)[0] == 0
    assert cache.lookup_and_insert(ids)[0] == 32
    assert cache.lookup_and_insert(ids[:32])[0] == 16  # the last token is always computed, so its block is not a hit


def test_prefix_cache_divergent_prompt_hits_only_the_shared_blocks():
    cache = PrefixCache()
    cache.lookup_and_insert(list(range(64)))
    assert cache.lookup_and_insert(list(range(20)) + [999] * 44)[0] == 16
    assert cache.lookup_and_insert([999] + list(range(1, 64)))[0] == 0  # a block's key covers the whole prefix


def test_prefix_cache_clear_forgets_every_prompt():
    cache, ids = PrefixCache(), list(range(64))
    cache.lookup_and_insert(ids)
    cache.clear()
    assert cache.lookup_and_insert(ids)[0] == 0


def test_server_models_lists_the_served_model(server):
    with urllib.request.urlopen(f"{server.base_url}/v1/models", timeout=30) as response:
        assert [m["id"] for m in json.load(response)["data"]] == [DEFAULT_MODEL]


def test_server_stream_with_include_usage_sends_max_tokens_tokens_then_usage_then_done(server):
    status, raw = post(server, chat(max_tokens=5, stream=True, stream_options={"include_usage": True}))
    events = sse_events(raw)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-2])
    assert status == 200 and events[-1] == "[DONE]"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 5
    assert len(server.model.tokenizer.encode(text, add_special_tokens=False)) == 5
    assert events[-3]["choices"][0]["finish_reason"] == "length"


def test_server_stream_without_include_usage_sends_no_usage_chunk(server):
    _, raw = post(server, chat(max_tokens=3, stream=True))
    assert not any("usage" in e for e in sse_events(raw) if e != "[DONE]")


def test_server_max_tokens_above_the_cap_emits_the_cap_and_stops(server):
    status, raw = post(server, chat(max_tokens=5000))
    body = json.loads(raw)
    assert status == 200 and body["usage"]["completion_tokens"] == server.model.output_cap
    assert body["choices"][0]["finish_reason"] == "stop"


def test_server_named_tool_choice_returns_that_tool_with_a_fresh_call_id(server):
    body = chat(max_tokens=4096, tools=[TOOL], tool_choice={"type": "function", "function": {"name": "apply_patch"}})
    calls = [json.loads(post(server, body)[1])["choices"][0]["message"]["tool_calls"][0] for _ in range(2)]
    assert [c["function"]["name"] for c in calls] == ["apply_patch"] * 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", c["id"]) for c in calls) and calls[0]["id"] != calls[1]["id"]
    assert set(json.loads(calls[0]["function"]["arguments"])) == {"path", "hunks"}


def test_server_streamed_tool_call_reassembles_to_the_recorded_answer(server):
    body = chat(max_tokens=4096, stream=True, tools=[TOOL], tool_choice="required")
    _, raw = post(server, body)
    deltas = [d for e in sse_events(raw)[:-1] if e["choices"] for d in e["choices"][0]["delta"].get("tool_calls", [])]
    arguments = "".join(d["function"].get("arguments") or "" for d in deltas)
    answered = server.records[-1]["response"]["message"]["tool_calls"][0]
    assert deltas[0]["id"] == answered["id"] and arguments == answered["function"]["arguments"]


def test_server_text_tool_choice_none_answers_with_text(server):
    _, raw = post(server, chat(max_tokens=4, tools=[TOOL], tool_choice="none"))
    message = json.loads(raw)["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"]


def test_server_repeated_prompt_reports_cached_tokens_from_the_prefix_cache(server):
    server.reset()
    body = chat(
        max_tokens=2,
        messages=[
            {"role": "system", "content": "You are terse. " * 60},
            {"role": "user", "content": "Summarize the diff."},
        ],
    )
    first, second = (json.loads(post(server, body)[1])["usage"] for _ in range(2))
    prompt = len(server.model.prompt_ids(body["messages"], None))
    assert first["prompt_tokens"] == second["prompt_tokens"] == prompt
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["prompt_tokens_details"]["cached_tokens"] == (prompt - 1) // 16 * 16


def test_server_wrong_model_returns_404_and_records_it(server):
    status, raw = post(server, {**chat(max_tokens=2), "model": "no-such-model"})
    assert status == 404 and "no-such-model" in json.loads(raw)["message"]
    assert server.records[-1]["status"] == 404


def test_server_reset_empties_records_and_cache(server):
    post(server, chat(max_tokens=2))
    server.reset()
    assert server.records == [] and server.model.cache.lookup_and_insert(list(range(40)))[0] == 0


def test_server_cli_prints_the_port_and_records_requests_to_the_file(tmp_path):
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "e2e.engines.server",
            "--port",
            "0",
            "--tokenizer",
            str(TOKENIZER),
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        port = int(proc.stdout.readline())
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(chat(max_tokens=3)).encode()
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["body"]["max_tokens"] == 3 and lines[0]["t"] > 0


def test_model_answers_a_recorded_call_under_ids_of_its_own_only_when_asked():
    from e2e.engines.model import FakeModel, load_tokenizer
    from e2e.checks.traces import request_key

    messages = [{"role": "user", "content": "Read both files."}]
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path":"{n}.py"}}'}}
        for n in ("a", "b")
    ]
    recorded = {request_key({"messages": messages}): {"role": "assistant", "content": None, "tool_calls": calls}}
    tokenizer = load_tokenizer(str(TOKENIZER))
    as_recorded = FakeModel(tokenizer, recorded=recorded).answer({"messages": messages}).message
    fresh = FakeModel(tokenizer, recorded=recorded, fresh_call_ids=True).answer({"messages": messages}).message
    assert as_recorded["tool_calls"] == calls
    assert [c["function"] for c in fresh["tool_calls"]] == [c["function"] for c in calls]
    ids = [c["id"] for c in fresh["tool_calls"]]
    assert len(set(ids)) == 2 and not set(ids) & {"call_a", "call_b"}
