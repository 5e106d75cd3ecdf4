"""Traffic read from trace files (fastgen/traffic/read.py) and its statistics (stats.py): hand-made spans and
Mooncake lines whose every number is known, the bad inputs, and `fastgen workload stats` on a generated set."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from fastgen.traffic import fidelity_table, read_traffic, traffic_stats
from fastgen.traffic.read import TrafficError

SYSTEM = {"role": "system", "content": "You are an agent. " * 40}
TOOLS = json.dumps([{"type": "function", "name": "read_file", "parameters": {"type": "object"}}])


def _span(n: int, messages: list, output: dict, *, start_s: float, end_s: float, tokens: tuple, **extra) -> dict:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": extra.pop("model", "m"),
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps([output]),
        "gen_ai.tool.definitions": TOOLS,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        **extra,
    }
    return {"name": f"chat {n}", "start_time_unix_nano": int(start_s * 1e9), "end_time_unix_nano": int(end_s * 1e9),
            "attributes": attributes}  # fmt: skip


def _call(i: int) -> dict:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": f"c{i}", "name": "read_file", "arguments": {"path": f"f{i}"}}]}  # fmt: skip


def _wire(i: int) -> list[dict]:
    return [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}"})},
                }
            ],
        },  # fmt: skip
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"contents of f{i}\n" * 20},
    ]


def _session(path: Path, name: str, *, model: str = "m") -> None:
    """Three requests: two tool calls (1 and 2 calls... one each), then a text answer, 2 s and 5 s of tool time, and
    a second session-like chain sharing only the system prompt is another file."""
    task = {"role": "user", "content": f"Task of {name}: fix it."}
    m1 = [SYSTEM, task]
    m2 = m1 + _wire(1)
    m3 = m2 + _wire(2)
    text = {"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}
    spans = [
        _span(1, m1, _call(1), start_s=0, end_s=1, tokens=(1000, 20), model=model),
        _span(2, m2, _call(2), start_s=3, end_s=4, tokens=(1500, 20), model=model),
        _span(3, m3, text, start_s=9, end_s=10, tokens=(2100, 50), model=model),
    ]
    path.write_bytes(orjson.dumps({"session_id": name, "spans": spans}))


def test_spans_give_counts_gaps_calls_and_prefix_sharing(tmp_path):
    _session(tmp_path / "a.json", "a")
    _session(tmp_path / "b.json", "b")
    requests = read_traffic([tmp_path])
    assert [r.session for r in requests] == ["a", "b", "a", "b", "a", "b"]
    a = [r for r in requests if r.session == "a"]
    assert [r.tool_calls for r in a] == [1, 1, 0]
    assert [r.follows is not None for r in a] == [False, True, True]
    # each later request continues the one before: its prompt and answer are this one's prefix
    assert a[1].reused >= 1000 * 0.9 and a[2].reused >= 1500 * 0.9
    # b shares a's system prompt and tool catalog, not the task
    b0 = next(r for r in requests if r.session == "b")
    assert 0 < b0.shared == b0.reused < b0.input_tokens
    stats = traffic_stats(requests)
    assert stats["sessions"] == 2 and stats["requests"] == 6
    assert stats["steps_p50"] == 3 and stats["calls_mean"] == pytest.approx(4 / 6)
    assert stats["tool_p50"] == pytest.approx(3.5) and stats["human_p50"] is None  # gaps 2 s and 5 s, both sessions
    assert stats["input_mean"] == pytest.approx(1533.33, abs=0.01) and stats["output_p50"] == 20
    assert stats["subagent_share"] == 0
    table = fidelity_table(stats)
    assert "| tool calls per step, mean | 1.20 (TraceLab) | 0.67 | ±10% | NO |" in table


def test_spans_without_messages_take_them_from_their_details_events_in_the_same_file(tmp_path):
    """event_only capture: each chat span (as the SDK's console exporter writes it) has its counts, and a log record
    of its span id (ConsoleLogRecordExporter's form) its messages; the same requests as with them on the spans."""
    _session(tmp_path / "a.json", "a")
    lines = []
    for i, span in enumerate(orjson.loads((tmp_path / "a.json").read_bytes())["spans"]):
        attributes = span["attributes"]
        content = {k: json.loads(attributes.pop(k)) for k in ("gen_ai.input.messages", "gen_ai.output.messages")}
        span_id = f"0x{i + 1:016x}"
        lines.append({"event_name": "gen_ai.client.inference.operation.details", "body": None, "span_id": span_id,
                      "trace_id": f"0x{7:032x}", "attributes": {**attributes, **content}})  # fmt: skip
        lines.append({**span, "context": {"trace_id": f"0x{7:032x}", "span_id": span_id}})
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    on_spans, from_events = read_traffic([tmp_path / "a.json"]), read_traffic([tmp_path / "a.jsonl"])
    assert [(r.tool_calls, r.follows, r.reused) for r in from_events] == [
        (r.tool_calls, r.follows, r.reused) for r in on_spans
    ]  # fmt: skip
    assert [r.follows is not None for r in from_events] == [False, True, True]


def _per_message_events(span: dict, span_id: str, *, content: bool = True) -> list[dict]:
    """openai-v2 2.3b0's log records of a chat span (as its real run writes them): one event a prompt message, then
    one a choice; without content capture the bodies of system, user and tool messages are empty."""
    attributes = span["attributes"]
    events = []
    for m in json.loads(attributes.pop("gen_ai.input.messages")):
        body = {k: v for k, v in m.items() if k != "role" and (content or k != "content")}
        events.append({"event_name": f"gen_ai.{m['role']}.message", "body": body or None, "span_id": span_id})
    for output in json.loads(attributes.pop("gen_ai.output.messages")):
        events.append({"event_name": "gen_ai.choice", "body": {"index": 0, "message": output}, "span_id": span_id})
    return [
        {**e, "attributes": {"gen_ai.system": "openai"}, "observed_timestamp": "2026-12-05T08:49:26Z"} for e in events
    ]


@pytest.mark.parametrize("content", [True, False])
def test_spans_without_messages_take_them_from_per_message_events(tmp_path, content):
    """openai-v2 2.3b0 and earlier: the prompt's messages and the answer as events of the span, in a second file;
    without content captured, refused (not read as every prompt being the same)."""
    _session(tmp_path / "a.json", "a")
    spans, events = [], []
    for i, span in enumerate(orjson.loads((tmp_path / "a.json").read_bytes())["spans"]):
        span_id = f"0x{i + 1:016x}"
        events += _per_message_events(span, span_id, content=content)
        spans.append({**span, "context": {"trace_id": f"0x{7:032x}", "span_id": span_id}})
    for name, lines in (("spans.jsonl", spans), ("logs.jsonl", events)):
        (tmp_path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    files = [tmp_path / "spans.jsonl", tmp_path / "logs.jsonl"]
    if not content:
        with pytest.raises(TrafficError, match="has no gen_ai.input.messages"):
            read_traffic(files)
        return
    on_spans, from_events = read_traffic([tmp_path / "a.json"]), read_traffic(files)
    assert [(r.tool_calls, r.follows, r.reused) for r in from_events] == [
        (r.tool_calls, r.follows, r.reused) for r in on_spans
    ]  # fmt: skip
    assert [r.follows is not None for r in from_events] == [False, True, True]


def test_mooncake_lines_give_sessions_from_their_hash_ids(tmp_path):
    lines = [
        {"timestamp": 0, "input_length": 1200, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 500, "input_length": 1100, "output_length": 10, "hash_ids": [1, 7, 8]},
        {"timestamp": 900, "input_length": 1800, "output_length": 30, "hash_ids": [1, 2, 9, 10]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    requests = read_traffic([path])
    # the third extends the first's full blocks (1, 2): the same session; the second shares block 1 only
    assert requests[0].session == requests[2].session != requests[1].session
    assert [r.reused for r in requests] == [0, 512, 1024]
    assert [r.shared for r in requests] == [0, 512, 0]  # another session sent block 1 first only for the second
    stats = traffic_stats(requests)
    assert stats["steps_p50"] == 1.5 and stats["calls_mean"] is None and stats["tool_p50"] is None


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: _session(p, "a") or _strip_usage(p), "has no gen_ai.usage.input_tokens/output_tokens"),
        (  # traced without content: no prefix or step can be followed
            lambda p: _session(p, "a") or _strip_messages(p),
            "has no gen_ai.input.messages, on it or in a gen_ai.client.inference.operation.details log event .*"
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
        ),
        (lambda p: _session(p, "a") or _session(p.with_name("b.json"), "b", model="other"), "the traces mix models"),
        (  # an ISO time that is none was a traceback
            lambda p: _session(p, "a") or _bad_end_time(p),
            r"a.json: span 'chat 2' has end_time 'yesterday', not an ISO 8601 time; write it as one",
        ),
    ],
)
def test_bad_spans_are_one_line_naming_what_is_missing(tmp_path, make, message):
    make(tmp_path / "a.json")
    with pytest.raises(TrafficError, match=message):
        read_traffic([tmp_path])


def _bad_end_time(path: Path) -> None:
    doc = orjson.loads(path.read_bytes())
    span = doc["spans"][1]
    del span["end_time_unix_nano"]
    span["end_time"] = "yesterday"
    path.write_bytes(orjson.dumps(doc))


def _strip_usage(path: Path) -> None:
    doc = orjson.loads(path.read_bytes())
    del doc["spans"][1]["attributes"]["gen_ai.usage.input_tokens"]
    path.write_bytes(orjson.dumps(doc))


def _strip_messages(path: Path) -> None:
    doc = orjson.loads(path.read_bytes())
    del doc["spans"][0]["attributes"]["gen_ai.input.messages"]
    path.write_bytes(orjson.dumps(doc))


def test_mooncake_without_timestamps_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"input_length": 10, "output_length": 1, "hash_ids": [1]}) + "\n")
    with pytest.raises(TrafficError, match=r"t.jsonl:1: has no 'timestamp'; the lines must carry timestamps"):
        read_traffic([path])
