"""e2e.real.sglang against a real SGLang 0.5.23 on the CPU: per-token radix hits in usage, /flush_cache, /metrics, named
tool calls, stop by process group, and the stand-ins that let it run here.

Skipped unless FASTGEN_SGLANG_VENV names a venv where e2e.real.sglang.install() has finished (minutes and 2.8 GB, so no
test does it): `FASTGEN_SGLANG_VENV=.e2e-sglang/venv .venv/bin/python -m pytest tests/e2e/test_e2e_sglang.py`.
A start is 40-70 s on 2 cores (more under load): the module shares one server, which the stop test ends, and the
name-enforcing parser's test starts its own after it, so that one server runs at a time (about 2.5 minutes in all).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from e2e.real.engine_process import DEFAULT_MODEL, TOKENIZER, build_model, group_members
from e2e.real.sglang import INSTALL_MARKER, NAME_ENFORCING_TOOL_CALL_PARSER, SglangServer, install

VENV = os.environ.get("FASTGEN_SGLANG_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_SGLANG_VENV does not point at a venv installed by e2e.real.sglang.install()",
)
CONTEXT = 4096
POOL = 16384  # --max-total-tokens: 8 MiB of KV at 512 bytes per token
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string"} for key in keys},
                "required": list(keys),
            },
        },
    }
    for name, keys in (
        ("read_file", ("path",)),
        ("run_tests", ("target",)),
        ("edit_file", ("path", "patch")),
        ("search", ("query",)),
    )
]


@pytest.fixture(scope="module")
def python():
    return install(Path(VENV))  # returns at once: the marker is there (a changed stand-in is copied again)


@pytest.fixture(scope="module")
def server(python, tmp_path_factory):
    model = build_model(python, TOKENIZER, Path(VENV) / f"fastgen-tiny-llama-{CONTEXT}", CONTEXT)
    log = tmp_path_factory.mktemp("sglang") / "server.log"
    with SglangServer(python, model, max_total_tokens=POOL, context_length=CONTEXT, log=log) as running:
        yield running


def streamed(server: SglangServer, body: dict) -> list[dict]:
    status, raw = server.post("/v1/chat/completions", {"model": DEFAULT_MODEL, "stream": True, **body})
    assert status == 200, raw[:500]
    events = [line.removeprefix("data: ") for line in raw.decode().split("\n\n") if line.strip()]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


def streamed_usage(server: SglangServer, content: str, **extra) -> dict:
    chunks = streamed(
        server,
        {
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 4,
            "stream_options": {"include_usage": True},
            **extra,
        },
    )
    usage = [chunk["usage"] for chunk in chunks if chunk.get("usage")]
    assert usage, "no usage chunk"
    return usage[-1]


def cached(usage: dict) -> int:
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


def metric_sum(text: str, name: str) -> float:
    """The sum of a family's samples over all label sets (prompt_tokens_total is split by is_streaming)."""
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if re.match(rf"{re.escape(name)}(\{{| )", line)
    )


def forced_names(server: SglangServer, forced: str, turn: int) -> list[str]:
    chunks = streamed(
        server,
        {
            "messages": [{"role": "user", "content": f"Task {turn}: go on."}],
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": forced}},
            "max_tokens": 32,
        },
    )
    return [
        call["function"]["name"]
        for chunk in chunks
        for choice in chunk["choices"]
        for call in (choice.get("delta") or {}).get("tool_calls") or []
        if call.get("function", {}).get("name")
    ]


def group_cpu_seconds(group: int) -> float:
    """User and system CPU time so far of a process group's live members, from /proc/PID/stat."""
    ticks = 0
    for pid in group_members(group):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat
    return ticks / os.sysconf("SC_CLK_TCK")


def test_models_lists_the_served_name_and_context(server):
    status, body = server.get("/v1/models")
    assert status == 200
    models = json.loads(body)["data"]
    assert [(m["id"], m["owned_by"], m["max_model_len"]) for m in models] == [(DEFAULT_MODEL, "sglang", CONTEXT)]


def test_a_repeated_prompt_hits_every_token_but_the_last_until_the_cache_is_flushed(server):
    content = "Fix the failing test in the parser module, then run the suite again. " * 12
    assert server.flush_cache()
    first = streamed_usage(server, content)
    assert cached(first) == 0
    second = streamed_usage(server, content)
    assert cached(second) == second["prompt_tokens"] - 1  # the radix cache hits per token, not per block
    assert server.flush_cache()
    assert cached(streamed_usage(server, content)) == 0


def test_metrics_count_what_usage_reports_and_the_pool_size(server):
    content = "Refactor the session scheduler and keep the prefix cache warm. " * 20
    assert server.flush_cache()
    before = server.metrics()
    usages = [streamed_usage(server, content), streamed_usage(server, content)]
    after = server.metrics()
    for family in (
        "sglang:cached_tokens_total",
        "sglang:prompt_tokens_total",
        "sglang:max_total_num_tokens",
        "sglang:token_usage",
        "sglang:num_used_tokens",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
    ):
        assert f"# TYPE {family} " in after, family
    assert metric_sum(after, "sglang:max_total_num_tokens") == POOL  # exactly --max-total-tokens
    # the counters survive a flush, and grow by what the usage chunks say: the bakeoff's own check
    grown = {
        name: metric_sum(after, name) - metric_sum(before, name)
        for name in ("sglang:cached_tokens_total", "sglang:prompt_tokens_total")
    }
    assert grown == {
        "sglang:cached_tokens_total": sum(cached(u) for u in usages),
        "sglang:prompt_tokens_total": sum(u["prompt_tokens"] for u in usages),
    }
    assert 0 <= metric_sum(after, "sglang:token_usage") <= 1  # a fraction of the pool, rounded to 0.01


def test_a_flush_is_refused_while_a_request_runs(server):
    answers = []
    slow = threading.Thread(
        target=lambda: answers.append(streamed_usage(server, "Write a long story.", max_tokens=600, ignore_eos=True))
    )
    slow.start()
    try:
        deadline = time.monotonic() + 60
        while metric_sum(server.metrics(), "sglang:num_running_reqs") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not server.flush_cache(wait_s=0)  # 400 at once: a request is running
        assert not server.flush_cache(wait_s=0.5)  # 400 "Timed out waiting for idle state."
    finally:
        slow.join(timeout=300)
    assert answers and answers[0]["completion_tokens"] == 600
    assert server.flush_cache()  # waits until the request is done with


def test_hermes_does_not_hold_a_named_tool_choice_even_at_strict_level_2(server):
    # SGLang renders only the forced tool into the prompt but constrains the output with one tag over all tools:
    # a random model then names any of the four (by chance all eight right: 1 in 65,536)
    names = [
        forced_names(server, forced, turn)[:1] for turn, forced in enumerate([t["function"]["name"] for t in TOOLS] * 2)
    ]
    assert all(len(name) == 1 and name[0] in {t["function"]["name"] for t in TOOLS} for name in names)
    assert names != [[t["function"]["name"]] for t in TOOLS] * 2


def test_an_idle_server_sleeps_and_stop_ends_the_whole_process_group(server):
    # the last test of the module server: it stops it
    group = server.process.pid
    assert len(group_members(group)) >= 3 and server.rss_bytes() > 1 << 30  # launcher, scheduler, detokenizer
    spent = group_cpu_seconds(group)
    time.sleep(3)
    assert group_cpu_seconds(group) - spent < 1.0  # --sleep-on-idle: without it the scheduler spins (2.9 s here)
    began = time.monotonic()
    server.stop()
    assert server.process is None and group_members(group) == []
    assert time.monotonic() - began < SglangServer.STOP_GRACE_S + 10
    server.stop()  # a second stop is a no-op


def test_qwen3_coder_holds_a_named_tool_choice(server, tmp_path):
    # after the stop test: one server at a time (the module's is stopped by now; its python and model serve again)
    with SglangServer(
        server.python,
        server.model_dir,
        max_total_tokens=POOL,
        context_length=CONTEXT,
        log=tmp_path / "server.log",
        tool_call_parser=NAME_ENFORCING_TOOL_CALL_PARSER,
    ) as enforcing:
        for turn, forced in enumerate([t["function"]["name"] for t in TOOLS] * 2):
            assert forced_names(enforcing, forced, turn)[:1] == [forced]


def test_the_kernel_stand_in_fills_request_rows_and_names_what_it_lacks(python):
    probe = subprocess.run(
        [
            str(python),
            "-c",
            """
import torch, sgl_kernel
rows = torch.zeros((5, 32), dtype=torch.int32)
slots = torch.randperm(4096)[:13]
sgl_kernel.assign_req_to_token_pool_cpu(torch.tensor([2, 4, 1], dtype=torch.int32), rows, torch.tensor([0, 3, 8]),
                                        torch.tensor([6, 3, 15]), slots, 32)
assert rows[2, :6].tolist() == slots[:6].tolist() and rows[1, 8:15].tolist() == slots[6:].tolist()
assert int(rows.count_nonzero()) == int(slots.count_nonzero())
try:
    sgl_kernel.decode_attention_cpu()
except NotImplementedError as error:
    print(error)
""",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "sgl_kernel.decode_attention_cpu is not implemented" in probe.stdout


def test_a_zero_pool_is_refused():
    with pytest.raises(ValueError):
        SglangServer(Path("python"), Path("model"), max_total_tokens=0, context_length=4096, log=Path("log"))
