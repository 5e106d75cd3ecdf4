"""Helpers every scenario's plan shares: synthetic timing and tool calls."""

from __future__ import annotations

import numpy as np
import orjson

from ..content.compose import Composer
from ..content.vocab import Vocab
from ..messages import ToolCall
from ..spec import Timing

__all__ = ["CALL_TOKENS_BOUND", "duration_ms", "make_call", "letters", "ticket_name"]

# A tool call's name and arguments are a few dozen tokens; this bound is only for the up-front window check.
CALL_TOKENS_BOUND = 120


def duration_ms(timing: Timing, input_tokens: int, output_tokens: int) -> int:
    """A plausible server time for a request: prefill plus decode."""
    return timing.prefill_ms_per_1k_tokens * input_tokens // 1000 + timing.decode_ms_per_token * output_tokens


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
