"""The chat workload (the `chat` scenario: conversations without tools) fitted to traffic in which no request answers
with a tool call, as a chat service's trace is (Mooncake's conversation trace): fit.py's agent loop would force a
tool-call step into every session. fit_traffic chooses between the two.

How each field is fitted (ranges as fit.py fits them: uniforms with the values' 10th and 90th percentiles):
- system: the prefix sessions share (the median over sessions of the first request's tokens another session sent
  first), as fit.py's;
- first: the first request's remaining tokens; message: each later request's growth over the one before it and that
  one's answer; answer: every request's output tokens;
- turns: requests per session, with turn_strata where they have a long tail: four strata of 50, 40, 8 and 2 % of the
  sessions between the traces' percentiles at those edges, cut at the 256 requests inference-perf can queue;
- concurrency, session_spacing_ms and timing as fit.py's (think_gap_ms the waits between a session's requests).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..generator.scenarios.base import MOST_REQUESTS, MOST_REQUESTS_WHY
from ..generator.spec import DEFAULT_MAX_MODEL_LEN, WORKLOAD_FORMAT
from ..traffic.read import Request
from .fit import (
    _STRATA,
    Fit,
    _int_range,
    _long_tailed,
    _peak_sessions,
    _range,
    _sessions,
    _shared_prefix,
    _spacing,
    _timing,
    fit_workload,
)

__all__ = ["SCENARIO", "fit_chat", "fit_traffic", "is_chat"]

SCENARIO = "chat"


def is_chat(requests: Sequence[Request]) -> bool:
    """Whether the traffic is chat: no request answers with a tool call (or says it does: Mooncake lines carry no
    answers) and none is a sub-agent's."""
    return not any(r.tool_calls or r.subagent for r in requests)


FAMILIES = ("auto", "chat", "agent")


def fit_traffic(
    requests: Sequence[Request], *, max_model_len: int = DEFAULT_MAX_MODEL_LEN, family: str = "auto"
) -> Fit:
    """The workload family that can say the traffic, fitted: chat where no request calls a tool (or `family`
    says so), else the agent loop. A source that cannot show tool calls (Mooncake lines) reads as chat unless the
    caller knows better."""
    if family not in FAMILIES:
        raise ValueError(f"family {family!r} is not one of {FAMILIES}")
    if family == "chat" or (family == "auto" and requests and is_chat(requests)):
        return fit_chat(requests, max_model_len=max_model_len)
    return fit_workload(requests, max_model_len=max_model_len)


def fit_chat(requests: Sequence[Request], *, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> Fit:
    """The chat workload fitted to the requests (read_traffic's, in start order)."""
    sessions = _sessions(requests)
    notes: list[str] = []
    mooncake = all(r.tool_calls is None for r in requests)
    shared = _shared_prefix(requests, sessions)
    threads = [s.main for s in sessions.values() if s.main]
    steps = [len(t) for t in threads]
    growth = [
        max(1.0, requests[b].input_tokens - requests[a].input_tokens - requests[a].output_tokens)
        for t in threads
        for a, b in zip(t, t[1:])
    ]
    scenario: dict = {
        "sessions": len(sessions),
        "system": shared,
        "first": _range([requests[t[0]].input_tokens - shared for t in threads], least=1),
        "message": _range(growth, least=1),
        "answer": _range([r.output_tokens for r in requests], least=1),
        "turns": _int_range(steps, least=1),
    }
    longest = max(steps)
    if _long_tailed(steps):
        scenario["turn_strata"] = _strata(steps)
    scenario["concurrency"] = [_peak_sessions(requests, sessions)]
    scenario["session_spacing_ms"] = _spacing(requests, sessions)
    timing = _timing(requests, sessions, notes, mooncake)
    document = {
        "format": WORKLOAD_FORMAT,
        "max_model_len": max_model_len,
        "timing": timing,
        "scenarios": {SCENARIO: scenario},
    }
    notes.append(
        "input tokens per request, median: a session's first message is drawn from a uniform range between the "
        "traces' 10th and 90th percentiles, whose median is its middle, not a skewed median; the mean holds"
    )
    if longest > MOST_REQUESTS:
        notes.append(
            f"steps per session, tail: the traces' longest session has {longest} steps; {MOST_REQUESTS_WHY}, so "
            f"fastgen makes at most {MOST_REQUESTS} a session"
        )
    if mooncake:
        notes.append(
            "appended tokens, cached share, cross-session sharing: Mooncake lines share whole hash-id blocks, the "
            "fitted spans prefixes of messages, so these differ by up to a block a request"
        )
    return Fit(document, tuple(notes))


def _strata(steps: Sequence[int]) -> list[dict]:
    """turn_strata whose requests per session have the traces' percentiles at the strata's edges (0, 50, 90 and 98
    percent): a uniform each between two of them, the last (2 %) centred on the traces' 99th percentile, not
    stretched to their longest session (one conversation of 43 among 8,000 would put the p99 near 24, not 7), none
    past MOST_REQUESTS."""
    edges = np.cumsum((0,) + _STRATA)
    at = [float(np.percentile(steps, float(p), method="hazen")) for p in edges]
    at[-1] = min(at[-1], max(at[-2], 2 * float(np.percentile(steps, 99, method="hazen")) - at[-2]))
    at = [min(MOST_REQUESTS, q) for q in at]
    out = []
    for percent, lo_q, hi_q in zip(_STRATA, at, at[1:]):
        lo = max(1, int(round(lo_q)))
        out.append({"percent": percent, "turns": {"lo": lo, "hi": max(lo, int(round(hi_q)))}})
    return out
