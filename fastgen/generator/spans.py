"""Span bytes: a session plan as one OpenTelemetry trace file in the shape inference-perf 0.7.0 reads.

Every span of a trace directory has the same attribute keys with the same JSON types (inference-perf unifies the whole
corpus with Arrow), and times are ISO-8601 from a fixed epoch (no wall clock).

Speed: `gen_ai.input.messages` and `gen_ai.tool.definitions` (about 97% of the bytes) are never serialized per
span. Each message escapes its JSON once; a file is a list of chunks (the small serialized parts and references to
those pre-escaped pieces) that the writer hands to a vectored write and the hash, so a shared block costs no copy in
Python at all. `native.py` builds the same file the slow, obvious way; tests hold the two byte-equal.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable

import orjson

from .messages import Output, SessionPlan, Turn
from .prompt_tokens import ContentCount, PromptCount

__all__ = [
    "EPOCH",
    "CONTENT_COUNT",
    "iso_time",
    "after_attribute",
    "output_parts",
    "span_dict",
    "session_spans",
    "session_dict",
    "session_chunks",
    "session_bytes",
]

EPOCH = datetime(2026, 6, 15, 10, 0, 0, tzinfo=timezone.utc)


def iso_time(ms: int) -> str:
    t = EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def after_attribute(turn: Turn) -> str:
    """`fastgen.after`: the graph the plan means for this request, for `fastgen validate`: the span ids it carries
    the outputs of, space-separated (the one it continues first), then `~ID` for the one it is only timed after
    (`~*`: any one earlier call). A string in every span of a scenario that states it (Arrow types stay one)."""
    assert turn.after is not None
    return " ".join([*turn.after, *([f"~{turn.follows}"] if turn.follows else [])])


def output_parts(output: Output) -> list[dict]:
    """gen_ai.output.messages: one assistant message in OTel parts (text keyed `content`, or tool calls with ids)."""
    parts: list[dict]
    if output.text is not None:
        parts = [{"type": "text", "content": output.text.text}]
    else:
        parts = [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in output.calls]
    return [{"role": "assistant", "parts": parts}]


def span_dict(
    plan: SessionPlan, turn: Turn, *, model: str, input_tokens: int, input_messages, output_messages, tool_definitions
) -> dict:
    """A span, with its three JSON-string attributes given already in the form the caller serializes."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": plan.session_id,
        "gen_ai.input.messages": input_messages,
        "gen_ai.output.messages": output_messages,
        "gen_ai.tool.definitions": tool_definitions,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": turn.output.tokens,
        "gen_ai.response.finish_reasons": ["tool_calls" if turn.output.is_tool_call else "stop"],
        "fastgen.scenario": plan.scenario,
        "fastgen.turn": turn.turn,
        "fastgen.turn_kind": turn.kind,
    }
    if turn.after is not None:
        attributes["fastgen.after"] = after_attribute(turn)
    return {
        "span_id": turn.span_id,
        "trace_id": plan.session_id,
        "name": f"chat {model}",
        "start_time": iso_time(turn.start_ms),
        "end_time": iso_time(turn.end_ms),
        "status": {"code": 1},
        "attributes": attributes,
    }


def session_spans(
    plan: SessionPlan,
    *,
    model: str,
    count: PromptCount,
    input_messages: Callable[[Turn], object],
    output_messages: Callable[[Turn], str],
    tool_definitions: object,
) -> list[dict]:
    """Every turn's span; the three JSON-string attributes come from the caller, serialized its own way (the spliced
    path puts placeholders where the native one puts whole JSON strings), so the two paths share the rest."""
    return [
        span_dict(
            plan,
            turn,
            model=model,
            input_tokens=count.input_tokens(plan, turn),
            input_messages=input_messages(turn),
            output_messages=output_messages(turn),
            tool_definitions=tool_definitions,
        )
        for turn in plan.turns
    ]


def session_dict(plan: SessionPlan, spans: list[dict]) -> dict:
    return {"session_id": plan.session_id, "scenario": plan.scenario, "spans": spans}


# Placeholders for the two big attributes. orjson escapes NUL inside strings, so a raw NUL in its output can only
# come from these fragments: splitting on it finds them.
_INPUT = orjson.Fragment(b"\x00I\x00")
_TOOLS = orjson.Fragment(b"\x00T\x00")


CONTENT_COUNT = ContentCount()


def session_chunks(plan: SessionPlan, *, model: str, count: PromptCount = CONTENT_COUNT) -> list[bytes]:
    """The trace file of a session as chunks whose concatenation is the file; `count` counts each span's input."""
    spans = session_spans(
        plan,
        model=model,
        count=count,
        input_messages=lambda turn: _INPUT,
        output_messages=lambda turn: orjson.dumps(output_parts(turn.output)).decode(),
        tool_definitions=_TOOLS,
    )
    skeleton = orjson.dumps(session_dict(plan, spans)).split(b"\x00")
    chunks: list[bytes] = [skeleton[0]]
    turns = iter(plan.turns)
    tools = plan.catalog.escaped
    for marker, text in zip(skeleton[1::2], skeleton[2::2]):
        if marker == b"I":
            messages = next(turns).messages
            chunks.append(b'"[')
            for i, message in enumerate(messages):
                if i:
                    chunks.append(b",")
                chunks.append(message.escaped)
            chunks.append(b']"')
        else:
            chunks.append(tools)
        chunks.append(text)
    return chunks


def session_bytes(plan: SessionPlan, *, model: str, count: PromptCount = CONTENT_COUNT) -> bytes:
    return b"".join(session_chunks(plan, model=model, count=count))
