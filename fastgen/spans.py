"""Span bytes: a session plan as one OpenTelemetry trace file in the shape inference-perf 0.7.0 reads.

Every span of every file has the same attribute keys with the same JSON types (inference-perf unifies the whole
corpus with Arrow), times are ISO-8601 from a fixed epoch (no wall clock), and `gen_ai.input.messages` is
spliced from messages serialized once (a shared block is escaped once, however many spans repeat it).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import orjson

from .plans.types import Output, SessionPlan, Turn

__all__ = ["EPOCH", "iso_time", "output_messages_json", "span_dict", "session_dict", "session_bytes"]

EPOCH = datetime(2026, 6, 15, 10, 0, 0, tzinfo=timezone.utc)


def iso_time(ms: int) -> str:
    t = EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def output_messages_json(output: Output) -> str:
    """One assistant message in OTel parts: a text part keyed `content`, or tool_call parts with ids."""
    if output.text is not None:
        parts = [{"type": "text", "content": output.text.text}]
    else:
        parts = [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in output.calls]
    return orjson.dumps([{"role": "assistant", "parts": parts}]).decode()


def span_dict(plan: SessionPlan, turn: Turn, *, model: str) -> dict:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": plan.session_id,
        "gen_ai.input.messages": "[" + ",".join(m.json for m in turn.messages) + "]",
        "gen_ai.output.messages": output_messages_json(turn.output),
        "gen_ai.tool.definitions": plan.catalog.json,
        "gen_ai.usage.input_tokens": plan.input_tokens(turn),
        "gen_ai.usage.output_tokens": turn.output.tokens,
        "gen_ai.response.finish_reasons": ["tool_calls" if turn.output.is_tool_call else "stop"],
        "fastgen.scenario": plan.scenario,
        "fastgen.turn": turn.turn,
    }
    return {
        "span_id": turn.span_id,
        "trace_id": plan.session_id,
        "name": f"chat {model}",
        "start_time": iso_time(turn.start_ms),
        "end_time": iso_time(turn.end_ms),
        "status": {"code": 1},
        "attributes": attributes,
    }


def session_dict(plan: SessionPlan, *, model: str) -> dict:
    return {"session_id": plan.session_id, "scenario": plan.scenario,
            "spans": [span_dict(plan, turn, model=model) for turn in plan.turns]}


def session_bytes(plan: SessionPlan, *, model: str) -> bytes:
    return orjson.dumps(session_dict(plan, model=model))
