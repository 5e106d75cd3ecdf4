"""A config's sessions as AIPerf's `mooncake_trace` dataset with whole prompts (AIPerf 0.13.0,
dataset/loader/mooncake_trace.py), each session starting at a time drawn from a Poisson process at the config's
session rate and each later request following its recorded wait: for `aiperf profile --custom-dataset-type
mooncake_trace --fixed-schedule`.

    {"session_id": "s", "timestamp": 812.431, "messages": [...], "tools": [...], "output_length": 44,
     "extra": {"tool_choice": "none"}}
    {"session_id": "s", "delay": 1000, "messages": [...], "tools": [...], "output_length": 85}

Why this form (read from AIPerf 0.13.0's source): its rate strategies (timing/strategies/request_rate.py,
RequestRateStrategy.execute_phase) pace requests, not sessions: a continuation turn takes the next tick of the same
clock that starts new sessions, so `--request-rate R --arrival-pattern poisson` bunches and stretches session starts
(a coefficient of variation of 1.73 measured where a Poisson process has 1), and a first turn's `delay` is not
honoured. Its fixed schedule (timing/strategies/fixed_schedule.py, FixedScheduleStrategy) sends each conversation's
first turn at its `timestamp` and each later turn `delay` ms after the turn before it returns
(handle_credit_return). dag_jsonl turns have no `timestamp` (dataset/loader/dag_jsonl_models.py, DagTurn), so the
fixed schedule cannot replay them; `mooncake_trace` lines can carry `messages`, `tools`, `output_length` (sent as
max_tokens), `extra` (merged into the body), `session_id`, `timestamp` and `delay` (dataset/loader/models.py,
MooncakeTrace). fastgen draws the starts (export.arrivals, seeded from the config's base_seed), so the same
dataset and config give the same bytes.

Lines follow the sessions the config replays (inference-perf's slots, in order: a file a slot runs twice is two
sessions), each session's requests in order. The messages are the whole prompt inference-perf sends (wire form),
`output_length` its max_tokens, `extra.tool_choice` its force_recorded choice (as export.dag writes them), `delay`
the recorded wait capped at the config's max_wait_ms.

Not as inference-perf replays it:
- later requests carry the recorded answers: AIPerf sends a `messages` line as written (its
  MESSAGE_ARRAY_WITH_RESPONSES mode), where inference-perf's default (fastgen --outputs live) puts the engine's own
  answers in their place; a config of fastgen --outputs recorded sends the same prompts.
- sessions must be chains, each request after the one before: a session that forks or spawns is refused (AIPerf
  sends a mooncake session's requests one at a time); export it as dag_jsonl.
- concurrency: the schedule starts every session at its time, whatever the config's concurrent_sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .arrivals import poisson_starts_ms
from ..analysis.corpus import read_replayed
from .dag import session_conversations
from ..analysis.analyze import ConfigTarget, Corpus, target_slots
from ..errors import OutputError
from ..traces.requests import SessionRequests

__all__ = ["SessionsExport", "arrivals_seed", "mooncake_sessions"]


@dataclass
class SessionsExport:
    lines: list[dict] = field(default_factory=list)  # one a request: each session's requests in order
    sessions: int = 0
    window_s: float = 0.0  # the sessions start within it: count / rate


def arrivals_seed(base_seed: int) -> str:
    """The seed of the session starts: the config's base_seed, kept apart from inference-perf's own draws on it."""
    return f"fastgen session arrivals {base_seed}"


def mooncake_sessions(target: ConfigTarget, corpus: Corpus, rate: float) -> SessionsExport:
    """The target's sessions (each slot once, in slot order) as mooncake_trace lines, starting as a Poisson process of
    `rate` sessions a second."""
    slots = target_slots(target, corpus)
    starts = poisson_starts_ms(len(slots), rate, arrivals_seed(target.load.base_seed))
    export = SessionsExport(window_s=len(slots) / rate)
    seen: set[str] = set()
    for position, (index, start) in enumerate(zip(slots, starts)):
        session = read_replayed(corpus.files[index])
        name = session.session_id if session.session_id not in seen else f"{session.session_id}-{position}"
        seen.add(name)
        export.lines += session_lines(session, name, start, target.load.max_wait_ms)
        export.sessions += 1
    return export


def session_lines(session: SessionRequests, name: str, start_ms: float, max_wait_ms: int) -> list[dict]:
    """One session's requests as mooncake_trace lines: the first at `start_ms`, the rest after their waits."""
    conversations, _ = session_conversations(session, max_wait_ms, name)  # _: dag_jsonl's notes on tools per turn
    if len(conversations) != 1:
        raise OutputError(
            f"{session.path} forks or spawns ({len(conversations)} conversations): AIPerf's mooncake_trace sends a "
            f"session's requests one after another; export this config as dag_jsonl instead"
        )
    turns = conversations[0]["turns"]
    lines = []
    for position, (turn, request) in enumerate(zip(turns, session.requests, strict=True)):
        line: dict = {"session_id": name}
        if position == 0:
            line["timestamp"] = start_ms
        else:
            line["delay"] = turn["delay"]
        line["messages"] = list(request.messages)
        if request.tools:
            line["tools"] = list(request.tools)
        line["output_length"] = turn["max_tokens"]
        if "extra" in turn:
            line["extra"] = turn["extra"]
        lines.append(line)
    return lines
