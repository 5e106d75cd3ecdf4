"""What the coding agents' own logs give of each API call (claude_code.py, codex.py), before read.py turns the calls
into requests: counts, times and which agent of the session sent the call. The logs carry the prompts and answers'
text; the readers count it and drop it, so nothing here holds text.

The cached share is the service's own: its cache reads as the log records them (a cache with a time to live), not an
unbounded prefix cache computed from hashes as for spans (read.py).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import orjson

from ..errors import FastgenError

__all__ = [
    "AgentLogError",
    "LoggedCall",
    "Request",
    "TokenCounter",
    "chars_per_token",
    "counted",
    "iso_ms",
    "log_lines",
]

TokenCounter = Callable[[str], int]

# the estimate without a tokenizer: about 4 characters a token for English prose and code (OpenAI's and Anthropic's
# rule of thumb); stated in the reader's note where used
chars_per_token = 4


class AgentLogError(FastgenError):
    """An agent's log that cannot be read as traffic: one line naming the file and what is missing."""


@dataclass(frozen=True)
class Request:
    """A request as every reader gives it (read.py); here, below the readers of the agents' logs that make them."""

    session: str
    start_ms: float
    end_ms: Optional[float]  # None where the source has no end times (Mooncake)
    input_tokens: int
    output_tokens: int
    tool_calls: Optional[int]  # calls in the answer; None where the source does not say
    subagent: bool  # sent by a sub-agent of the session, not by its main agent
    reused: int  # prompt tokens an earlier request (of any session) sent as the same prefix
    shared: int  # prompt tokens a request of another session sent as the same prefix
    follows: Optional[int]  # the earlier request of the same thread whose prompt and answer this one continues
    model: str = ""
    # prompt tokens an earlier request of the same session sent as the same prefix: what an engine's cache keeps for
    # the session across its idle gap (stats.py's hit ratio by idle gap)
    own: int = 0


@dataclass(frozen=True)
class LoggedCall:
    session: str
    thread: str  # the agent of the session that sent it: "main", or a sub-agent's id
    start_ms: float  # when the prompt was complete: the timestamp of the line the call answers
    end_ms: float  # the timestamp of the answer's last line
    input_tokens: int  # the whole prompt: cached and uncached
    cached_tokens: int  # the prompt tokens the service read from its cache
    output_tokens: int
    tool_calls: int
    model: str = ""


def iso_ms(text) -> Optional[float]:
    """An ISO 8601 timestamp (Z or offset) in ms since the epoch; None when absent or not one."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def counted(texts: list[str], count: Optional[TokenCounter]) -> int:
    """The tokens of an answer's texts: by the tokenizer where given, else the characters over chars_per_token."""
    if count is not None:
        return sum(count(t) for t in texts if t)
    return -(-sum(len(t) for t in texts) // chars_per_token)


def log_lines(path: Path) -> list[dict]:
    """The file's JSON objects, one a line (blank lines skipped)."""
    out = []
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise AgentLogError(f"{path}:{number}: not a JSON line") from None
        if isinstance(row, dict):
            out.append(row)
    return out
