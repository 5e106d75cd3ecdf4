"""Traces made by a real client: an OpenAI-compatible agent loop (the openai SDK) traced by OpenTelemetry's own
instrumentation (opentelemetry-instrumentation-openai-v2, content captured on the spans) and exported by the SDK's
console exporter, one span a line, against the e2e's local server; `fastgen workload stats` reads the spans and
gives back the loop's own numbers: its sessions, steps, calls, tool latencies, human waits and prefix reuse, and
`fastgen workload fit` fits a workload to them that holds none of their text.

Needs the `otel` extra (make env-all installs it; pyproject.toml pins the versions that work). Skipped only where
the instrumentation's distribution is not installed at all: installed but broken (a release that no longer imports,
as openai-v2 2.4b0 with util-genai 1.2b0 does) fails here instead of skipping."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _support import ROOT
from conftest import run_fastgen

try:
    importlib.metadata.distribution("opentelemetry-instrumentation-openai-v2")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("the otel extra is not installed", allow_module_level=True)


# Each session: a system prompt every session shares, a task, then user turns of tool steps (one forced call each,
# answered with a file of known size after a known tool time) and a text answer, a human wait between user turns.
SESSIONS = [  # (tool steps of each user turn)
    (3,),
    (5, 2),
    (7,),
    (4, 4, 1),
    (6,),
]
TOOL_S = [0.05, 0.15]  # alternate tool times
HUMAN_S = 0.4
_CLIENT = r"""
import os, sys, time
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = sys.argv[6]
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from openai import OpenAI

url, out_path, plan = sys.argv[1], sys.argv[2], eval(sys.argv[3])
tool_s, human_s, logs_path = eval(sys.argv[4]), float(sys.argv[5]), sys.argv[7]
out, logs_out = open(out_path, "w"), open(logs_path, "w")
provider = TracerProvider()
provider.add_span_processor(
    SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n"))
)
logs = LoggerProvider()
logs.add_log_record_processor(SimpleLogRecordProcessor(
    ConsoleLogRecordExporter(out=logs_out, formatter=lambda record: record.to_json(indent=None) + "\n")
))
OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)
tracer = provider.get_tracer("agent")
client = OpenAI(base_url=url + "/v1", api_key="none")
tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
system = {"role": "system", "content": "You are a coding agent. Read before you change anything. " * 30}
waits = 0
for s, turns in enumerate(plan):
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        messages = [system]
        for u, steps in enumerate(turns):
            if u:
                time.sleep(human_s)
            messages.append({"role": "user", "content": f"Session {s}, request {u}: fix the parser bug number {s}{u}."})
            for step in range(steps + 1):
                last = step == steps
                answer = client.chat.completions.create(
                    model="m", messages=messages, tools=tools, tool_choice="none" if last else "required",
                    max_tokens=30,
                ).choices[0].message
                if last:
                    messages.append({"role": "assistant", "content": answer.content or ""})
                    break
                call = answer.tool_calls[0]
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
                time.sleep(tool_s[waits % len(tool_s)])
                waits += 1
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": f"line {step} of file {s}: def parse(x): return x\n" * (20 + 10 * step)})
provider.force_flush()
logs.force_flush()
out.close()
logs_out.close()
"""


def test_the_installed_otel_extra_imports():
    """What the client imports, imported for real: an ImportError is this test's failure, not a skip."""
    for module in ("openai", "opentelemetry.sdk.trace", "opentelemetry.instrumentation.openai_v2"):
        importlib.import_module(module)


@pytest.fixture(scope="module", params=["span_only", "event_only"])
def loop(request, tmp_path_factory) -> tuple[list[Path], list[dict]]:
    """The agent loop's trace files and what the server served it. span_only: the messages on the chat spans, one
    file; event_only: the messages in the instrumentation's log events, a second file of log records beside the
    spans, read with them."""
    from e2e.engines.server import ServerThread

    folder = tmp_path_factory.mktemp(request.param)
    spans, logs = folder / "spans.jsonl", folder / "logs.jsonl"
    with ServerThread(ROOT / "fastgen" / "data" / "builtin-tokenizer", model_name="m") as server:
        run = subprocess.run(
            [sys.executable, "-c", _CLIENT, server.base_url, str(spans), repr(SESSIONS), repr(TOOL_S), str(HUMAN_S),
             request.param, str(logs)],
            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        served = list(server.records)
    assert run.returncode == 0, run.stderr[-2000:]
    # where the instrumentation put the messages: on the spans, or only in the log events
    assert ("gen_ai.input.messages" in spans.read_text()) == (request.param == "span_only")
    assert ("gen_ai.input.messages" in logs.read_text()) == (request.param == "event_only")
    return [spans, logs], served


def test_stats_of_an_instrumented_agent_loop_are_the_loops_own(loop):
    from fastgen.traffic import read_traffic, traffic_stats

    files, served = loop
    requests = read_traffic(files)
    steps = [sum(turns) + len(turns) for turns in SESSIONS]  # the tool steps and each user turn's text answer
    assert len(requests) == len(served) == sum(steps)
    # every count is the server's usage, as the instrumentation recorded it
    assert sorted(r.input_tokens for r in requests) == sorted(
        s["response"]["usage"]["prompt_tokens"] for s in served
    )  # fmt: skip
    stats = traffic_stats(requests)
    assert stats["sessions"] == len(SESSIONS)
    assert stats["steps_p50"] == sorted(steps)[len(steps) // 2]
    assert stats["calls_mean"] == pytest.approx(sum(sum(t) for t in SESSIONS) / sum(steps))
    # the gaps the loop slept, plus a few ms of client overhead; medians of the two tool times alternating
    tool_gaps = sorted(
        (r.start_ms - requests[r.follows].end_ms) / 1000
        for r in requests
        if r.follows is not None and requests[r.follows].tool_calls
    )
    assert len(tool_gaps) == sum(sum(t) for t in SESSIONS)
    assert min(TOOL_S) <= tool_gaps[0] and tool_gaps[-1] < max(TOOL_S) + 0.1
    human = [r for r in requests if r.follows is not None and requests[r.follows].tool_calls == 0]
    assert len(human) == sum(len(t) - 1 for t in SESSIONS)
    assert HUMAN_S <= stats["human_p50"] * 60 < HUMAN_S + 0.1
    # every request after the first of its session continues the one before; all share the system prompt
    assert sum(r.follows is None for r in requests) == len(SESSIONS)
    assert stats["cached_share"] > 60 and 0 < stats["cross_share"] < stats["cached_share"]
    assert stats["subagent_share"] == 0


def test_fit_of_an_instrumented_agent_loop_holds_no_text_of_it(loop, tmp_path):
    files, _ = loop
    out = tmp_path / "fitted.yaml"
    result = run_fastgen("workload", "fit", *map(str, files), "--out", str(out), "--check-sessions", "10")
    assert result.returncode == 0, result.stderr
    agent = yaml.safe_load(out.read_text())["scenarios"]["agent_loop"]
    assert agent["sessions"] == len(SESSIONS)
    # the spans hold the loop's prompts, tool results and tool name; the YAML and the output none of them
    text = "".join(f.read_text() for f in files)
    for phrase in ("Read before you change anything", "fix the parser bug", "def parse(x)", "read_file"):
        assert phrase in text
        assert phrase not in out.read_text() and phrase not in result.stdout + result.stderr
