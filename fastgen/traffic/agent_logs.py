"""The coding agents' own logs among the trace files: which files are (by their lines, not their names), their calls
read by their form's reader (claude_code.py, codex.py) and made requests, and the lines that say what a form cannot
see. A .jsonl file in none of the forms fastgen reads is refused here, naming them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import orjson

from .claude_code import claude_code_calls, claude_code_notes, is_claude_code_line
from .codex import codex_calls, codex_notes, is_codex_line
from .logged import AgentLogError, LoggedCall, Request, TokenCounter

__all__ = ["agent_log_form", "agent_log_requests"]


def agent_log_requests(
    paths: list[Path], *, count_tokens: Optional[TokenCounter], notes: Optional[list[str]]
) -> list[Request]:
    """The requests of the agents' log files, in start order; each form's notes added to `notes`."""
    calls: list[LoggedCall] = []
    said: dict[str, None] = {}  # the forms' notes, in the order met
    seen: set[str] = set()  # Claude Code message ids read (a resumed session's file repeats them)
    for path in paths:
        if agent_log_form(path) == "claude_code":
            calls += claude_code_calls(path, count=count_tokens, seen=seen)
            said.update(dict.fromkeys(claude_code_notes(count_tokens)))
        else:
            calls += codex_calls(path)
            said.update(dict.fromkeys(codex_notes()))
    if notes is not None:
        notes += list(said)
    if paths and not calls:
        raise AgentLogError(f"{paths[0].parent}: the agents' logs hold no API calls with usage counts")
    return _requests(calls)


_FORMS = (
    "OpenTelemetry spans (*.json, or one a line), Mooncake lines (hash_ids), Claude Code session files "
    "(~/.claude/projects/<project>/) or Codex rollouts (~/.codex/sessions/)"
)


def agent_log_form(path: Path) -> Optional[str]:
    """claude_code or codex for an agent's own log, by its first lines; None for the other forms. A .jsonl file in
    none of the forms is refused here, naming them."""
    if path.suffix != ".jsonl":
        return None
    rows: list = []
    with open(path, "rb") as f:
        for line in f:
            if line.strip() and len(rows) < 20:
                try:
                    rows.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    return None  # reported by the reader of the form it is taken for
    if any(is_codex_line(r) for r in rows):
        return "codex"
    if any(is_claude_code_line(r) for r in rows):
        return "claude_code"
    known = ("hash_ids", "input_length", "output_length", "attributes", "event_name", "body", "name")
    if rows and isinstance(rows[0], dict) and not any(k in rows[0] for k in known):
        raise AgentLogError(f"{path}: a .jsonl file in none of the forms read; give {_FORMS}")
    return None


def _requests(calls: list[LoggedCall]) -> list[Request]:
    """The agents' logged calls as requests: each continues its agent's last one; the cached tokens are reused, and
    shared with another session on a session's first call (nothing of the session was in the cache before it), the
    session's own on its later calls."""
    calls = sorted(calls, key=lambda c: (c.start_ms, c.session, c.thread))
    last: dict[tuple[str, str], int] = {}
    out: list[Request] = []
    for i, c in enumerate(calls):
        opens = not any(s == c.session for s, _ in last)
        out.append(
            Request(
                session=c.session,
                start_ms=c.start_ms,
                end_ms=c.end_ms,
                input_tokens=c.input_tokens,
                output_tokens=c.output_tokens,
                tool_calls=c.tool_calls,
                subagent=c.thread != "main",
                reused=min(c.cached_tokens, c.input_tokens),
                shared=min(c.cached_tokens, c.input_tokens) if opens else 0,
                follows=last.get((c.session, c.thread)),
                model=c.model,
                own=0 if opens else min(c.cached_tokens, c.input_tokens),
            )
        )
        last[(c.session, c.thread)] = i
    return out
