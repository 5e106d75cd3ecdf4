"""The requests inference-perf sends for a trace file, as its graph builder reads the file: the wire messages, the
tools as the request body carries them, max_tokens, and when each request may start (its predecessors, the wait).

Recorded outputs stand in for live ones: at replay each assistant message that continues an earlier request is the
server's live answer, which has the recorded length only approximately (output lengths are not pinned).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import orjson

from ..extras import import_extra
from .graph import READERS, build_graph, quiet_transformers, read_trace

__all__ = ["ReplayRequest", "SessionRequests", "read_session", "wire_tools"]

TOOL_CALL_MIN_MAX_TOKENS = 4096  # inference-perf's override_tool_call_max_tokens: max(4 x recorded, 4096)
ZERO_MAX_TOKENS = 30  # what inference-perf's client sends when the recorded output count is 0


@dataclass(frozen=True)
class ReplayRequest:
    event_id: str  # inference-perf's graph event id (event_NNN_<span_id>)
    predecessors: tuple[str, ...]
    wait_ms: int  # after its predecessors end (the recorded think or tool time; max_wait_ms caps it)
    t_start_ms: int  # recorded start, from the session's first request
    messages: tuple[dict, ...]  # wire form
    tools: Optional[tuple[dict, ...]]  # wire form, or None
    max_tokens: int
    output_tokens: int  # recorded
    recorded_input_tokens: int
    is_tool_call: bool
    attributes: dict


@dataclass(frozen=True)
class SessionRequests:
    session_id: str  # the file's session_id (inference-perf prefixes trace<slot>_ at replay)
    path: Path
    requests: tuple[ReplayRequest, ...]  # in the replay's start order (recorded start, then event id)


_WIRE_TOOLS: dict[bytes, tuple[dict, ...]] = {}  # a session's requests, and most sessions, carry the same tools


def wire_tools(definitions: Optional[list[dict]]) -> Optional[tuple[dict, ...]]:
    """`tools` as inference-perf's request body carries them (apis/chat.py: nested form, cleaned parameters); the
    same definitions give the same (shared, not to be changed) tuple."""
    if not definitions:
        return None
    try:
        key = orjson.dumps(definitions)  # keeps key order, which the cleaned parameters keep too
    except TypeError:  # what orjson cannot write (an int past 64 bits) is cleaned each time, not remembered
        return _clean_tools(definitions)
    known = _WIRE_TOOLS.get(key)
    if known is None:
        if len(_WIRE_TOOLS) >= 256:
            _WIRE_TOOLS.clear()
        known = _WIRE_TOOLS[key] = _clean_tools(definitions)
    return known


def _clean_tools(definitions: list[dict]) -> tuple[dict, ...]:
    quiet_transformers()
    # the replay's own cleaning
    _clean_parameters = import_extra("inference_perf.apis.chat", extra="validate", command=READERS)._clean_parameters

    tools = []
    for tool in definitions:
        fn = tool["function"] if "function" in tool else tool
        tools.append(
            {
                "type": tool.get("type", "function"),
                "function": {
                    "name": fn["name"],
                    "description": fn.get("description"),
                    "parameters": _clean_parameters(fn.get("parameters")),
                },
            }
        )
    return tuple(tools)


def _max_tokens(call) -> int:
    recorded = call.expected_output_tokens
    if call.expected_output_is_tool_call:
        return max(4 * recorded, TOOL_CALL_MIN_MAX_TOKENS)
    return recorded or ZERO_MAX_TOKENS


def _as_sent(call, events: dict, sent: dict[str, tuple[dict, ...]]) -> tuple[dict, ...]:
    """The messages as the replay sends them, given what each earlier event sent: a shared segment is the start of
    what its source sent, and an output segment's message, where the source answered with tool calls, loses any
    `content` (the live answer that fills the slot at replay is the calls), so text the trace keeps there for the
    graph builder only (a sub-agent join's reports, agent_loop) is never sent, by the join or by any request after
    it. A text output stays as recorded: it stands for the live text."""
    messages = list(call.messages)
    at = 0
    for segment in call.input_segments:
        source = segment.source_event_id
        if segment.type == "shared" and source in sent:
            messages[at : at + segment.message_count] = sent[source][: segment.message_count]
        elif segment.type == "output" and source in events and events[source].call.expected_output_is_tool_call:
            messages[at] = {k: v for k, v in messages[at].items() if k != "content"}
        at += segment.message_count
    return tuple(messages)


def read_session(path: Path) -> SessionRequests:
    """One trace file's requests; raises (OSError, ValueError, ...) on a file the replay could not read."""
    path = Path(path)
    doc = read_trace(path)
    graph, _ = build_graph(doc, path)
    session_id = str(doc.get("session_id") or doc.get("trace_id") or path.name.split(".")[0])
    events = sorted(graph.events.values(), key=lambda e: (e.t_start_ms, e.event_id))
    requests = []
    sent: dict[str, tuple[dict, ...]] = {}
    for event in events:
        call = event.call
        if not call.messages:  # inference-perf drops it from the schedule
            continue
        sent[event.event_id] = _as_sent(call, graph.events, sent)
        requests.append(
            ReplayRequest(
                event_id=event.event_id,
                predecessors=tuple(event.predecessor_event_ids),
                wait_ms=int(event.wait_ms),
                t_start_ms=int(event.t_start_ms),
                messages=sent[event.event_id],
                tools=wire_tools(call.tool_definitions),
                max_tokens=_max_tokens(call),
                output_tokens=int(call.expected_output_tokens),
                recorded_input_tokens=int(call.total_input_tokens),
                is_tool_call=bool(call.expected_output_is_tool_call),
                attributes=dict(call.attributes or {}),
            )
        )
    return SessionRequests(session_id, path, tuple(requests))
