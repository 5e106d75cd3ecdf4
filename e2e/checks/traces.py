"""What the trace files say each request should be: spans in inference-perf's order, and a key to find them by.

A request is matched to its span by content: the (role, content) of every message that is not an assistant
message. Those messages go out as recorded (shared and unique segments); assistant messages are the ones the replay
replaces with live outputs, and tool results keep their content while their tool_call_id is rewritten. So the key is
the same for the recorded span and for the request the replay sends, and it is unique within a dataset (every turn
adds new user or tool text); `index_spans` refuses a dataset where it is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional

__all__ = ["Span", "index_spans", "load_session", "message_key", "recorded_answers", "request_key"]


@dataclass(frozen=True)
class Span:
    file: str  # the trace file, as the session report's file_path names it
    index: int  # position in inference-perf's order: (start_time, span_id)
    messages: tuple  # the recorded input messages (dicts)
    tool_names: tuple[str, ...]  # names of the recorded output's tool calls; empty for a text turn
    has_tools: bool  # the span carries a tool catalog (inference-perf forces a tool only then)
    output: dict  # the recorded output as the assistant message a server would answer (OpenAI form)
    input_tokens: int = 0  # the recorded gen_ai.usage.input_tokens
    span_id: str = ""
    # the span ids whose outputs it carries, the one it continues first, where the plan states them (fastgen.after,
    # timing edges left out); None where the scenario's kind says (chain: the span before, fan: the root)
    after: Optional[tuple[str, ...]] = None


def load_session(path: Path) -> list[Span]:
    doc = json.loads(Path(path).read_bytes())
    llm = [s for s in doc["spans"] if _is_llm(s)]
    llm.sort(key=lambda s: (_parse_time(s["start_time"]), s["span_id"]))  # build_raw_calls' order
    return [_span(str(path), i, s["attributes"], s.get("span_id", "")) for i, s in enumerate(llm)]


def _is_llm(span: dict) -> bool:
    attrs = span.get("attributes") or {}
    return (attrs.get("gen_ai.operation.name") == "chat" or span.get("name", "").startswith("chat ")) and bool(
        attrs.get("gen_ai.input.messages")
    )


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def _span(file: str, index: int, attrs: dict, span_id: str) -> Span:
    output = (_json(attrs.get("gen_ai.output.messages")) or [{}])[0]  # OTel parts or OpenAI tool_calls
    names = tuple(p["name"] for p in output.get("parts") or [] if p.get("type") == "tool_call")
    names += tuple(c["function"]["name"] for c in output.get("tool_calls") or [])
    return Span(
        file=file,
        index=index,
        messages=tuple(_json(attrs["gen_ai.input.messages"])),
        tool_names=names,
        has_tools=bool(_json(attrs.get("gen_ai.tool.definitions"))),
        output=_answer(output),
        input_tokens=int(attrs.get("gen_ai.usage.input_tokens") or 0),
        span_id=span_id,
        after=_after(attrs.get("fastgen.after")),
    )


def _after(stated: Optional[str]) -> Optional[tuple[str, ...]]:
    return None if stated is None else tuple(w for w in stated.split() if not w.startswith("~"))


def _answer(output: dict) -> dict:
    """An OTel output message (text parts keyed `content`, tool_call parts) as an OpenAI assistant message, with the
    tool calls' recorded ids and their arguments as compact JSON, as the next turn's history carries them."""
    parts = output.get("parts") or []
    calls = [
        {
            "id": p["id"],
            "type": "function",
            "function": {
                "name": p["name"],
                "arguments": p["arguments"]
                if isinstance(p["arguments"], str)
                else json.dumps(p["arguments"], separators=(",", ":"), ensure_ascii=False),
            },
        }
        for p in parts
        if p.get("type") == "tool_call"
    ]
    calls += output.get("tool_calls") or []
    if calls:
        return {"role": "assistant", "content": None, "tool_calls": calls}
    text = "".join(p.get("content", "") for p in parts if p.get("type") == "text") or output.get("content") or ""
    return {"role": "assistant", "content": text}


def recorded_answers(trace_root: Path) -> dict[tuple, dict]:
    """request key -> recorded output, over every trace folder under trace_root. Keys are unique within a folder;
    across folders two layouts of one scenario may share a request (scenario 2's roots), with the same output."""
    answers: dict[tuple, dict] = {}
    ambiguous: set[tuple] = set()
    for folder in sorted(p for p in Path(trace_root).iterdir() if p.is_dir() and p.name != "tokenizer"):
        sessions = {str(p): load_session(p) for p in sorted(folder.glob("*.json"))}
        for key, span in index_spans(sessions).items():
            if answers.setdefault(key, span.output) != span.output:
                ambiguous.add(key)
    return {key: output for key, output in answers.items() if key not in ambiguous}


def message_key(messages) -> tuple:
    """(role, content) of every non-assistant message; inference-perf sends `developer` as `system`."""
    key = []
    for m in messages:
        role = "system" if m.get("role") == "developer" else m.get("role")
        if role != "assistant":
            content = m.get("content")
            key.append((role, content if isinstance(content, str) else json.dumps(content, sort_keys=True)))
    return tuple(key)


def request_key(body: dict) -> tuple:
    return message_key(body.get("messages") or [])


def index_spans(sessions: dict[str, list[Span]]) -> dict[tuple, Span]:
    """key -> span over every session given; raises ValueError if two spans share a key."""
    index: dict[tuple, Span] = {}
    for spans in sessions.values():
        for span in spans:
            key = message_key(span.messages)
            other: Optional[Span] = index.get(key)
            if other is not None:
                raise ValueError(
                    f"{span.file} span {span.index} and {other.file} span {other.index} send the same "
                    "non-assistant messages: requests cannot be told apart by content"
                )
            index[key] = span
    return index
