"""Helpers every scenario's plan shares: synthetic timing, tool calls, and a conversation chained request by
request (Chain)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np
import orjson

from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..messages import Message, Output, ToolCall, Turn, tool_result
from ..spec import Timing
from ..tools import ToolCatalog

__all__ = [
    "CALL_TOKENS_BOUND",
    "Chain",
    "duration_ms",
    "gap",
    "history",
    "make_call",
    "letters",
    "ticket_name",
]

# A tool call's name and arguments are a few dozen tokens; this bound is only for the up-front window check.
CALL_TOKENS_BOUND = 120


def duration_ms(timing: Timing, input_tokens: int, output_tokens: int) -> int:
    """A plausible server time for a request: prefill plus decode."""
    return timing.prefill_ms_per_1k_tokens * input_tokens // 1000 + timing.decode_ms_per_token * output_tokens


def history(output: Output, results: Iterable[Text] = ()) -> tuple[Message, ...]:
    """What an answer adds to the next request: the assistant's message, then each call's result by its id."""
    return (output.as_history(), *(tool_result(call, text) for call, text in zip(output.calls, results)))


def gap(timing: Timing, rng: np.random.Generator, output: Output) -> int:
    """The time from an answer to the next request: think time after a text, the slowest of the tools after calls
    (they run side by side)."""
    if not output.calls:
        return timing.think_gap_ms.draw(rng)
    return max(timing.tool_exec_ms.draw(rng) for _ in output.calls)


@dataclass(kw_only=True)
class Chain:
    """One conversation as a chain of requests: each request is the one before it, that one's answer (with each
    call's result by its id), then what the next step adds; it lasts its prefill and decode (duration_ms), and the
    next starts a gap after it ends. Its n-th request is the turn `{prefix}-t{n}`, numbered n.

    The chain draws nothing: the scenario draws every text and gap in its own order, so that its bytes are its own.
    A scenario that states its edges per turn (Turn.after) starts the chain with `after=()`; with the default None
    its turns state none and its Shape says them."""

    timing: Timing
    catalog: ToolCatalog  # every request carries it
    prefix: str
    messages: tuple[Message, ...]  # the next request's, so far
    start_ms: int  # when the next request starts
    after: Optional[tuple[str, ...]] = None  # the span ids whose outputs the next request carries (None: unstated)
    turns: list[Turn] = field(default_factory=list)  # several chains of a session may share one (sub-agents)
    sent: int = field(default=0, init=False)  # requests so far
    last: Optional[Turn] = field(default=None, init=False)  # the request sent last

    def add(self, *messages: Message) -> None:
        """Messages the next request adds after what the chain carries."""
        self.messages += messages

    def prompt_tokens(self) -> int:
        """The next request's prompt so far: the tool catalog and every message."""
        return self.catalog.tokens + sum(m.tokens for m in self.messages)

    def send(self, output: Output, *, role: str = "", follows: str = "") -> Turn:
        """Record the next request, answered by `output`: its messages so far, at start_ms."""
        self.sent += 1
        end = self.start_ms + duration_ms(self.timing, self.prompt_tokens(), output.tokens)
        span = f"{self.prefix}-t{self.sent}"
        self.last = Turn(span, self.sent, self.messages, output, self.start_ms, end, role, self.after, follows)
        self.turns.append(self.last)
        return self.last

    def carry(self, results: Iterable[Text] = (), *, gap: int) -> None:
        """Carry the last answer (and its calls' `results`) into the next request, which starts `gap` ms after it."""
        last = self._answered()
        self.restart(self.messages + history(last.output, results), gap=gap)

    def restart(self, messages: tuple[Message, ...], *, gap: int) -> None:
        """Start the next request over from `messages` (as a compaction does), `gap` ms after the last one ends; it
        still carries the last one's output."""
        last = self._answered()
        self.messages, self.start_ms = messages, last.end_ms + gap
        if self.after is not None:
            self.after = (last.span_id,)

    def _answered(self) -> Turn:
        if self.last is None:
            raise ValueError(f"chain {self.prefix} has sent no request to carry on from")
        return self.last


def make_call(composer: Composer, rng: np.random.Generator, name: str, arguments: dict) -> ToolCall:
    call_id = "call_" + Vocab(rng).hex(24)
    args_json = orjson.dumps(arguments).decode()
    tokens = composer.count(name) + composer.count(args_json)
    return ToolCall(call_id, name, arguments, args_json, tokens)


def ticket_name(v: Vocab) -> str:
    """The issue-tracker id a session's story is about, e.g. PAYMENTS-4821."""
    return f"{v.team().upper()}-{v.number(1000, 99999)}"


def letters(k: int) -> str:
    """The k-th (0-based) name in A, B, ..., Z, AA, AB, ...: as many distinct names as there are branches."""
    name = ""
    k += 1
    while k:
        k, rest = divmod(k - 1, 26)
        name = chr(ord("A") + rest) + name
    return name
