"""The checks of one replayed config: what inference-perf reported against what the server saw and the traces say.

Each check returns failure lines (empty = passed). Requests are matched to spans by content (traces.py); a span's
predecessor is the previous span for a chain and the root for a fan (each scenario's Shape says which), which is
the graph `fastgen validate` holds every file to.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .reports import SessionReports
from .traces import Span, index_spans, load_session, request_key

__all__ = ["Outcome", "check_run", "join_problems", "shape_of"]

_MAX_LINES = 5  # failure lines kept per check: the first few say what went wrong
# Arrivals: inference-perf starts sessions 1/session_rate apart; allow scheduling jitter on a busy 2-core machine.
_GAP_TOLERANCE = 0.25
_SPREAD_SLACK_S = 1.0
_HIT_TOLERANCE = 1e-6  # percent; both sides sum the same integers


@dataclass
class Outcome:
    config: str  # e.g. scenario1/c10
    trace_dir: str  # e.g. scenario1, scenario2_stagger
    seconds: float
    requests: int = 0
    sessions: int = 0
    server_hit: Optional[float] = None  # 100 x sum(cached) / sum(prompt) over the server's answers
    report_hit: Optional[float] = None  # inference-perf's pooled kv_cache_hit_percent
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def shape_of(trace_dir: str) -> str:
    """ "chain" or "fan": the graph kind the trace directory's scenario declares (fastgen.generator.scenarios)."""
    from fastgen.generator.scenarios import scenario_of_layout

    scenario = scenario_of_layout(trace_dir)
    if scenario is None:
        raise ValueError(f"no registered scenario writes {trace_dir!r}")
    return scenario.shape(scenario.spec_type()).kind


def check_run(
    outcome: Outcome, *, exit_code: int, records: list[dict], reports: Optional[SessionReports], stage: dict
) -> Outcome:
    """Fill `outcome` (counts, hit rates, failures) from one run; `stage` is the config's load stage.

    The session reports' file_path must be absolute (the runner generates with --absolute-paths).
    """
    fail = outcome.failures
    if exit_code != 0:
        fail.append(f"inference-perf exited with {exit_code}")
    bad = [r for r in records if r.get("status") != 200]
    fail += [f"server answered {r.get('status')}: {r.get('error')}" for r in bad[:_MAX_LINES]]
    outcome.requests = len(records)
    if reports is None:
        fail.append("no session report")
        return outcome
    outcome.sessions, outcome.report_hit = len(reports.sessions), reports.kv_cache_hit_percent
    fail += _check_sessions(reports, stage)
    sessions = {s["file_path"]: load_session(Path(s["file_path"])) for s in reports.sessions}
    matched, problems = _match(records, sessions)
    fail += problems
    if problems or bad:
        return outcome  # the request-level checks need every request placed and answered
    outcome.server_hit = _hit_percent(records)
    shape = shape_of(outcome.trace_dir)
    for file, spans in sessions.items():
        sent = matched[file]
        fail += _cap([line for span in spans for line in _check_request(span, spans=spans, sent=sent, shape=shape)])
        fail += _cap(_check_joins(spans, sent))
    fail += _cap([line for r in records for line in _check_tool_pairing(r)])
    fail += _cap(_check_recorded_counts(sessions, matched))
    fail += _check_cache(reports, matched, outcome)
    if stage.get("session_rate"):
        fail += _check_arrivals(matched, float(stage["session_rate"]))
    return outcome


def _cap(lines: list[str]) -> list[str]:
    return lines[:_MAX_LINES] + ([f"... and {len(lines) - _MAX_LINES} more"] if len(lines) > _MAX_LINES else [])


def _check_sessions(reports: SessionReports, stage: dict) -> list[str]:
    """Every session of the stage ran and succeeded, with all its events completed."""
    out = []
    status = (reports.stage.get("stage_metadata") or {}).get("status")
    if status != "COMPLETED":
        out.append(f"stage status {status}, expected COMPLETED")
    if len(reports.sessions) != stage["num_sessions"]:
        out.append(f"{len(reports.sessions)} sessions reported, the stage has num_sessions {stage['num_sessions']}")
    for s in reports.sessions:
        if not s.get("success") or s.get("num_events_completed") != s.get("num_events"):
            out.append(
                f"session {s['session_id']}: success={s.get('success')} error={s.get('error')} "
                f"{s.get('num_events_completed')}/{s.get('num_events')} events completed"
            )
    return _cap(out)


def _match(records: list[dict], sessions: dict[str, list[Span]]) -> tuple[dict[str, dict[int, dict]], list[str]]:
    """file -> span index -> the record of its request; plus a line per request or span left unmatched."""
    try:
        index = index_spans(sessions)
    except ValueError as exc:
        return {}, [str(exc)]
    matched: dict[str, dict[int, dict]] = {file: {} for file in sessions}
    out = []
    for r in records:
        span = index.get(request_key(r["body"]))
        if span is None:
            out.append(
                f"a request with {len(r['body'].get('messages') or [])} messages matches no span of the "
                "sessions that ran"
            )
        elif span.index in matched[span.file]:
            out.append(f"{Path(span.file).name} span {span.index} was sent twice")
        else:
            matched[span.file][span.index] = r
    spans = sum(len(v) for v in sessions.values())
    if len(records) != spans:
        out.insert(0, f"the server saw {len(records)} requests, the sessions that ran have {spans} events")
    out += [
        f"{Path(f).name} span {s.index} was never sent"
        for f, v in sessions.items()
        for s in v
        if s.index not in matched[f]
    ]
    return matched, _cap(out)


def _wire(message: dict) -> dict:
    """A message as compared: content "" and None alike, tool calls as (id, name, arguments)."""
    out = {"role": message.get("role"), "content": message.get("content") or None}
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [(c.get("id"), c["function"]["name"], c["function"]["arguments"]) for c in calls]
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _role_content(messages) -> list[tuple]:
    return [(m.get("role"), m.get("content") or None) for m in messages]


def _check_request(span: Span, *, spans: list[Span], sent: dict[int, dict], shape: str) -> list[str]:
    """The request holds its predecessor's live answer where the recording holds the recorded one (its last assistant
    message), the predecessor's exact request before it (all of it in a chain; only the start after a compaction,
    which keeps the system prompt and drops the rest), the recorded messages after it; the tool choice is right."""
    name = f"{Path(span.file).name} span {span.index}"
    out = _check_tool_choice(name, span, sent[span.index])
    messages = sent[span.index]["body"]["messages"]
    if span.index == 0 or span.after == ():
        if _role_content(messages) != _role_content(span.messages):
            out.append(f"{name}: the {'root' if span.index == 0 else 'first'} request is not the recorded prompt")
        return out
    if span.after is not None:
        parent_index = next(s.index for s in spans if s.span_id == span.after[0])
    else:
        parent_index = span.index - 1 if shape == "chain" else 0
    parent = sent[parent_index]
    at = max(i for i, m in enumerate(span.messages) if m.get("role") == "assistant")
    prefix = parent["body"]["messages"][:at]
    live = parent["response"]["message"]
    if messages[:at] != prefix:
        first = next((i for i, (a, b) in enumerate(zip(messages, prefix)) if a != b), min(len(messages), len(prefix)))
        out.append(f"{name}: does not start with span {parent_index}'s request (first difference at message {first})")
    elif len(messages) <= at or _wire(messages[at]) != _wire(live):
        out.append(f"{name}: message {at} is not span {parent_index}'s live output")
    elif _role_content(messages[at + 1 :]) != _role_content(span.messages[at + 1 :]):
        out.append(f"{name}: the messages after span {parent_index}'s live output are not the recorded ones")
    return out


def _check_joins(spans: list[Span], sent: dict[int, dict]) -> list[str]:
    """Every sub-agent join as the fake server saw it (join_problems), by when each child's answer was out."""
    by_id = {s.span_id: s for s in spans}
    out = []
    for span in spans:
        if span.after is None or len(span.after) < 2:
            continue
        children = [by_id[i] for i in span.after[1:]]
        out += join_problems(
            f"{Path(span.file).name} span {span.index}",
            sent[span.index]["body"]["messages"],
            sent[span.index]["t"],
            [(f"span {c.index}", c.output.get("content") or "", sent[c.index].get("t_done")) for c in children],
        )
    return out


def join_problems(
    name: str, messages: list[dict], start: float, children: list[tuple[str, str, Optional[float]]]
) -> list[str]:
    """What is wrong with one sub-agent join (a request that carries the spawn's output, then each child's report),
    sent as `messages` at `start`: it must go out after each child's answer was out (children: name, recorded report,
    when its answer was out or None), hold each report in a `role: tool` message, and send the spawning message
    without the reports the trace keeps there for inference-perf's graph builder (the live answer fills that slot).
    The parent waited for its children, and their answers reached it."""
    results = [m.get("content") or "" for m in messages if m.get("role") == "tool"]
    out = []
    for child, report, done in children:
        if done is None or start < done:
            out.append(f"{name} went out before {child}'s answer was out, whose report it carries")
        if not report or not any(report in r for r in results):
            out.append(f"{name}: no tool result holds {child}'s report")
    if any(m.get("tool_calls") and m.get("content") for m in messages):
        out.append(f"{name} sent a spawning message with content (the reports kept for the graph builder)")
    return out


def _check_recorded_counts(sessions: dict[str, list[Span]], matched: dict[str, dict[int, dict]]) -> list[str]:
    """The server's prompt_tokens for each session's first request (its prompt holds no live answer yet) is the
    span's recorded input_tokens: the fake server renders the real chat template (with transformers) as vLLM does."""
    out = []
    for file, spans in sessions.items():
        usage = matched[file][0]["response"].get("usage") or {}
        if usage.get("prompt_tokens") != spans[0].input_tokens:
            out.append(
                f"{Path(file).name} span 0: the server counted {usage.get('prompt_tokens')} prompt tokens, the "
                f"span records {spans[0].input_tokens}"
            )
    return out


def _check_tool_choice(name: str, span: Span, record: dict) -> list[str]:
    # A recorded tool-call turn must force that very tool (flat tool definitions make inference-perf name it), or
    # any tool where it made several calls at once (one name cannot say that: "required"); a text turn must not.
    choice = record["body"].get("tool_choice")
    if span.tool_names and span.has_tools:
        several = len(span.tool_names) > 1
        want: object = "required" if several else {"type": "function", "function": {"name": span.tool_names[0]}}
        if choice != want:
            return [f"{name}: tool_choice {choice!r}, expected {want!r}"]
        if not record["response"]["message"].get("tool_calls"):
            return [f"{name}: a forced tool call was answered with text"]
        return []
    if choice not in (None, "none", "auto"):
        return [f"{name}: a text turn was sent tool_choice {choice!r}"]
    return []


def _check_tool_pairing(record: dict) -> list[str]:
    """No role:tool message without an assistant tool call of the same id earlier in the same request."""
    seen: set = set()
    out = []
    for i, m in enumerate(record["body"].get("messages") or []):
        seen.update(c.get("id") for c in m.get("tool_calls") or [])
        if m.get("role") == "tool" and m.get("tool_call_id") not in seen:
            out.append(f"message {i} answers tool call {m.get('tool_call_id')!r}, which no earlier message made")
    return out


def _hit_percent(records: list[dict]) -> Optional[float]:
    prompt = sum(r["response"]["usage"]["prompt_tokens"] for r in records)
    cached = sum(r["response"]["usage"]["prompt_tokens_details"]["cached_tokens"] for r in records)
    return 100.0 * cached / prompt if prompt else None


def _check_cache(reports: SessionReports, matched: dict[str, dict[int, dict]], outcome: Outcome) -> list[str]:
    """inference-perf's cache numbers are the server's: per session, and pooled."""
    out = []
    for s in reports.sessions:
        usage = [r["response"]["usage"] for r in matched[s["file_path"]].values()]
        cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usage)
        prompt = sum(u["prompt_tokens"] for u in usage)
        if (s.get("total_cached_tokens"), s.get("total_input_tokens")) != (cached, prompt):
            out.append(
                f"session {s['session_id']}: report says cached/input {s.get('total_cached_tokens')}/"
                f"{s.get('total_input_tokens')}, the server answered {cached}/{prompt}"
            )
    if outcome.report_hit is None or outcome.server_hit is None:
        out.append(f"cache hit: report {outcome.report_hit}, server {outcome.server_hit}")
    elif abs(outcome.report_hit - outcome.server_hit) > _HIT_TOLERANCE:
        out.append(f"cache hit: report {outcome.report_hit:.4f} %, server {outcome.server_hit:.4f} %")
    return _cap(out)


def _check_arrivals(matched: dict[str, dict[int, dict]], rate: float) -> list[str]:
    """Sessions start 1/session_rate apart: the gaps between first requests, and their overall spread."""
    starts = sorted(sent[0]["t"] for sent in matched.values() if 0 in sent)
    if len(starts) < 3:
        return []
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    expected = 1.0 / rate
    median, spread = statistics.median(gaps), starts[-1] - starts[0]
    want_spread = expected * (len(starts) - 1)
    out = []
    if abs(median - expected) > _GAP_TOLERANCE * expected:
        out.append(f"sessions start a median {median:.3f} s apart, session_rate says {expected:.3f} s")
    if abs(spread - want_spread) > _GAP_TOLERANCE * want_spread + _SPREAD_SLACK_S:
        out.append(f"first requests spread over {spread:.2f} s, session_rate says {want_spread:.2f} s")
    return out
