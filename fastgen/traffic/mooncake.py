"""Mooncake-style JSON lines read as requests, with their sessions inferred from hash-id chains where the lines name
none.

The format (Mooncake's FAST '25 traces, "Trace Format" in
https://github.com/kvcache-ai/Mooncake/blob/main/FAST25-release/README.md; AIPerf's `mooncake_trace` loader and
SGLang's `bench_serving --dataset-name mooncake` read it too), one JSON object a line:
- `timestamp`: the request's arrival, in milliseconds from the trace's start;
- `input_length`, `output_length`: the prompt's and the answer's tokens;
- `hash_ids`: the prompt as blocks of `block` tokens (512 in Mooncake's traces), each block an id standing for its
  tokens and everything before them, so two prompts with the same first k ids share their first k blocks; the last
  block is partial unless `input_length` is a multiple of the block size;
- `session_id` (optional, not in Mooncake's own traces): the conversation; where present, it is the session.

Sessions without `session_id`. A conversation's next request resends the prompt before it, its answer and a new
message: its ids start with all the earlier request's *full* blocks, while the earlier one's last, partial block
comes back filled with more tokens, as another id. So a request joins the session of an earlier request whose full
blocks its own ids start with, the longest such prompt first (where two sessions sent the same prompt, the later
one's; "earlier" is by timestamp, then by line). One that extends none starts a session. That alone is wrong on
production traffic: every request of a service starts with its system prompt, and a conversation's first request
can be only that prompt and a partial block ([system blocks + partial]); its full blocks are then the system
prompt, every later conversation extends it, and the trace collapses into a handful of sessions (Mooncake's public
conversation trace: 17, where about 7,400 conversations branch from its system block). So a request's full-block
prompt is not a session's when it is a prefix shared across conversations, known from the data by either sign:
- many different continuations branch from it (`SHARED_BRANCHES` or more distinct next ids): a conversation forks
  into a few parallel branches (retries, parallel calls; at most 11 in the public trace), a system prompt into one
  branch per conversation (7,373 there);
- a request went past it with other blocks before any request's prompt ended on it: a continuation cannot come
  before the request it continues, so the prefix was another conversation's too.
Several system prompts are each found alike. A conversation that opens with [system blocks + partial] is a session
of one request: its next request shares only the system blocks with it (the partial block comes back as another
id), as every other conversation does, so nothing in the ids tells them apart. Where neither sign shows (the trace
opens with such a request and fewer than `SHARED_BRANCHES` conversations follow), that request's session takes them
all: in so small a trace a system prompt cannot be told from a conversation's first prompt. Parallel branches of a
conversation each extend the prompt they fork from and join its session. Each line's ids are hashed into a chain of
prefixes once; the rule is two passes over the chains, linear in the ids (then a sort by arrival).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import orjson
import xxhash

from ..errors import FastgenError

__all__ = ["SHARED_BRANCHES", "MooncakeError", "MooncakeRequest", "is_mooncake", "mooncake_requests"]

# distinct continuations from which a prefix is taken for one shared across conversations: above a conversation's
# parallel branches (at most 11 in Mooncake's public conversation trace), below a service's conversations
SHARED_BRANCHES = 16
_NEEDED = ("timestamp", "input_length", "output_length", "hash_ids")


class MooncakeError(FastgenError):
    """A Mooncake file that cannot be read: one line naming the file, the line and what is missing."""


@dataclass(frozen=True)
class MooncakeRequest:
    session: str
    start_ms: float
    input_tokens: int
    output_tokens: int
    chain: list[int]  # hash of each prefix of the hash ids: the prompt's blocks, for prefix sharing


@dataclass(frozen=True)
class _Line:
    number: int  # line number in its file, from 1
    start_ms: float
    input_tokens: int
    output_tokens: int
    chain: list[int]  # hash of each prefix of the ids
    full: int  # how many of the ids are full blocks
    session: Optional[str]  # the line's own session_id


def is_mooncake(path: Path) -> bool:
    """A .jsonl file of Mooncake lines (hash_ids), not of spans (one per line, as the OpenTelemetry SDK's console
    exporter writes them with a one-line formatter)."""
    if path.suffix != ".jsonl":
        return False
    with open(path, "rb") as f:
        first = next((line for line in f if line.strip()), b"")
    try:
        row = orjson.loads(first)
    except orjson.JSONDecodeError:
        return True  # reported as Mooncake's bad line
    return not (isinstance(row, dict) and "attributes" in row and "hash_ids" not in row)


def mooncake_requests(path: Path, block: int) -> list[MooncakeRequest]:
    """The file's requests in arrival order (timestamp, then line), each in its session."""
    lines = sorted(_lines(path, block), key=lambda line: (line.start_ms, line.number))
    sessions = _infer_sessions(lines, stem=path.stem)
    return [
        MooncakeRequest(session, line.start_ms, line.input_tokens, line.output_tokens, line.chain)
        for line, session in zip(lines, sessions)
    ]


def _infer_sessions(lines: list[_Line], *, stem: str) -> list[str]:
    """Each line's session (lines in arrival order): its own session_id, else that of the earlier request whose
    full-block prompt it extends, the longest first, where that prompt is not shared (module docstring)."""
    shared = _shared_prefixes(lines)
    owner: dict[int, str] = {}  # a request's full-block prompt (its chain hash) -> the session that sent it last
    out: list[str] = []
    for line in lines:
        session = line.session
        if session is None:
            found = (owner.get(h) for h in reversed(line.chain))  # a shared prompt is never an owner's
            session = next((s for s in found if s is not None), None) or f"{stem}:{line.number}"
        if line.full and line.chain[line.full - 1] not in shared:
            owner[line.chain[line.full - 1]] = session
        out.append(session)
    return out


def _shared_prefixes(lines: list[_Line]) -> set[int]:
    """The full-block prompts (chain hashes) that are prefixes shared across conversations: branched from by
    SHARED_BRANCHES or more continuations, or extended before any request's prompt ended on them."""
    first_end: dict[int, int] = {}  # prompt -> the first request (arrival index) whose full blocks end on it
    for i, line in enumerate(lines):
        if line.full:
            first_end.setdefault(line.chain[line.full - 1], i)
    branches: dict[int, set[int]] = defaultdict(set)
    first_beyond: dict[int, int] = {}  # prompt -> the first request whose full blocks go on past it
    for i, line in enumerate(lines):
        chain = line.chain
        for k in range(len(chain) - 1):
            if chain[k] in first_end:
                if len(branches[chain[k]]) < SHARED_BRANCHES:
                    branches[chain[k]].add(chain[k + 1])
                if k < line.full - 1:
                    first_beyond.setdefault(chain[k], i)
    return {
        h
        for h, end in first_end.items()
        if len(branches.get(h, ())) >= SHARED_BRANCHES or first_beyond.get(h, end) < end
    }


def _lines(path: Path, block: int) -> list[_Line]:
    try:
        raw = path.read_bytes().splitlines()
    except OSError as exc:
        raise MooncakeError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    out: list[_Line] = []
    for number, text in enumerate(raw, start=1):
        if not text.strip():
            continue
        try:
            row = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise MooncakeError(f"{path}:{number}: not a JSON line") from None
        missing = next((key for key in _NEEDED if key not in row), None) if isinstance(row, dict) else "hash_ids"
        if missing is not None:
            what = (
                "timestamps (ms); Mooncake lines without them have no arrivals to measure"
                if missing == "timestamp"
                else missing
            )
            raise MooncakeError(f"{path}:{number}: has no {missing!r}; the lines must carry {what}")
        ids = [int(i) for i in row["hash_ids"]]
        chain, h = [], 0
        for i in ids:
            h = xxhash.xxh3_64_intdigest(i.to_bytes(8, "little", signed=True), seed=h)
            chain.append(h)
        session = row.get("session_id")
        out.append(
            _Line(
                number=number,
                start_ms=float(row["timestamp"]),
                input_tokens=int(row["input_length"]),
                output_tokens=int(row["output_length"]),
                chain=chain,
                full=min(len(ids), int(row["input_length"]) // block),
                session=None if session is None else str(session),
            )
        )
    return out
