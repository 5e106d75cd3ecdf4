"""The plan of a session: messages, outputs, timing and exact token counts, before any bytes are written.

A plan is what a scenario decides; `spans.py` turns it into trace bytes. Each message serializes its wire JSON
once, and escapes that JSON once more for its place inside the `gen_ai.input.messages` string, so a shared block
is escaped once however many spans repeat it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import orjson

from .content.compose import Ends, Text
from .tools import ToolCatalog

__all__ = [
    "ToolCall",
    "Message",
    "Output",
    "Turn",
    "SessionPlan",
    "system",
    "user",
    "assistant_text",
    "assistant_calls",
    "tool_result",
    "FOLLOWS_ANY",
]

FOLLOWS_ANY = "*"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict
    arguments_json: str  # compact JSON of `arguments`, as it appears in the history message
    tokens: int  # tokens of name plus arguments_json


@dataclass(frozen=True, eq=False)
class Message:
    role: str
    tokens: int
    wire: dict  # the OpenAI-style message inference-perf reads
    content: str | None = None
    calls: tuple[ToolCall, ...] = ()
    ends: Ends | None = None  # the content's first and last parts (Text.ends)
    # The wire's `content` is in the trace for inference-perf's graph builder only: a replay never sends it (the
    # message is an earlier request's output, replaced by that request's live answer), so neither `tokens` nor `sent`
    # has it. What a sub-agent join's spawning message carries (agent_loop).
    hidden: bool = False

    @property
    def sent(self) -> dict:
        """The message as a replay sends it: the wire, less hidden content."""
        if not self.hidden:
            return self.wire
        return {k: v for k, v in self.wire.items() if k != "content"}

    @cached_property
    def json(self) -> bytes:
        """The wire message as compact JSON."""
        return orjson.dumps(self.wire)

    @cached_property
    def escaped(self) -> bytes:
        """`json` escaped as the inside of a JSON string: what it contributes to gen_ai.input.messages."""
        return orjson.dumps(self.json.decode())[1:-1]


def _text_message(role: str, wire: dict, text: Text) -> Message:
    return Message(role, text.tokens, wire, text.text, (), text.ends)


def system(text: Text) -> Message:
    return _text_message("system", {"role": "system", "content": text.text}, text)


def user(text: Text) -> Message:
    return _text_message("user", {"role": "user", "content": text.text}, text)


def assistant_text(text: Text) -> Message:
    return _text_message("assistant", {"role": "assistant", "content": text.text}, text)


def assistant_calls(calls: tuple[ToolCall, ...], *, hidden: str | None = None) -> Message:
    """The assistant message that made `calls`; `hidden`: content in the trace that a replay never sends."""
    wire: dict = {"role": "assistant"} if hidden is None else {"role": "assistant", "content": hidden}
    wire["tool_calls"] = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}} for c in calls
    ]
    return Message("assistant", sum(c.tokens for c in calls), wire, None, calls, hidden=hidden is not None)


def tool_result(call: ToolCall, text: Text) -> Message:
    return _text_message("tool", {"role": "tool", "tool_call_id": call.id, "content": text.text}, text)


@dataclass(frozen=True)
class Output:
    """What the model answered: a text, or tool calls (then `text` is None)."""

    text: Text | None = None
    calls: tuple[ToolCall, ...] = ()

    @property
    def tokens(self) -> int:
        return self.text.tokens if self.text is not None else sum(c.tokens for c in self.calls)

    @property
    def is_tool_call(self) -> bool:
        return bool(self.calls)

    def as_history(self) -> Message:
        """The assistant message that carries this output into the next turn's input."""
        if self.calls:
            return assistant_calls(self.calls)
        assert self.text is not None, "an output is a text or tool calls"
        return assistant_text(self.text)


@dataclass(frozen=True)
class Turn:
    span_id: str
    turn: int  # 1-based; scenario 2 numbers the root 0 and the branches 1..5
    messages: tuple[Message, ...]
    output: Output
    start_ms: int
    end_ms: int
    role: str = ""  # what the turn is in its scenario's graph ("root", "branch"); empty for a turn of a chain
    # The graph the plan means, where the scenario states it per turn (None: its Shape says): the span ids whose
    # outputs this request carries (causal edges; the first is the request it continues), and the one it is only
    # timed after ("" none; FOLLOWS_ANY: any one earlier call, as among sub-agents running side by side)
    after: tuple[str, ...] | None = None
    follows: str = ""

    @property
    def kind(self) -> str:
        """The turn's kind in reports: its graph role where the scenario names one, else text or tool call."""
        return self.role or ("tool_call" if self.output.is_tool_call else "text")


@dataclass(frozen=True)
class SessionPlan:
    scenario: str  # the trace folder name: scenario1, scenario2_sync, ...
    session_id: str
    index: int
    catalog: ToolCatalog
    turns: tuple[Turn, ...] = field(default_factory=tuple)

    def input_tokens(self, turn: Turn) -> int:
        """Tokens of the tool catalog JSON plus every message's content (tool calls: name and arguments)."""
        return self.catalog.tokens + sum(m.tokens for m in turn.messages)
