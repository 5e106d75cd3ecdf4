"""Codex CLI's own rollout files, read as API calls (logged.py): `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`
(`$CODEX_HOME/sessions/`), one session each.

The form, one JSON object a line, as openai/codex writes it (https://github.com/openai/codex: the line is
`RolloutLine` {timestamp, RolloutItem flattened} in codex-rs/protocol/src/protocol.rs, written by
codex-rs/core/src/rollout/recorder.rs; the response items are `ResponseItem` of codex-rs/protocol/src/models.rs):
- `timestamp`: ISO 8601, when the line was written; `type` and `payload`, by type:
- `session_meta`: `payload.id` (the session, a UUID), `cwd`, `cli_version`, `instructions`, `git`, ...
- `turn_context`: a user turn's settings: `model`, `cwd`, `approval_policy`, `sandbox_policy`, `effort`, ...
- `response_item`: an item of the conversation as the Responses API has it: `payload.type` `message` (`role` user,
  assistant, developer; `content` [{type input_text/output_text, text}]), `reasoning` (`summary`,
  `encrypted_content`), `function_call` (`name`, `arguments`, `call_id`), `function_call_output` (`call_id`,
  `output`), `custom_tool_call` / `custom_tool_call_output`, `local_shell_call`, `web_search_call`.
- `event_msg`: the session's events: `payload.type` `user_message`, `agent_message`, `agent_reasoning`,
  `exec_command_end`, ..., and `token_count`, whose `info` (null before the first answer) holds
  `last_token_usage` (the last call's) and `total_token_usage` (the session's sum), each {input_tokens,
  cached_input_tokens, output_tokens, reasoning_output_tokens, total_tokens}, and `model_context_window`. As the
  Responses API counts them (TokenUsage::non_cached_input, blended_total), `input_tokens` includes the cached ones
  and `output_tokens` the reasoning ones. A token_count is written when a call completes, and again with the same
  totals on a rate-limit update: a repeat of the totals is not a call. (ccusage reads the same events:
  https://github.com/ryoppippi/ccusage, apps/codex.)
- `compacted`: a compaction's summary.

A call here: one token_count with new totals; its counts are `last_token_usage` (else the totals' difference); its
tool calls the function, custom-tool and shell calls written since the last call; its end the token_count's
timestamp, its start the last line before its answer's first item (the user's message or the last tool output: the
send itself is not logged). Older rollouts (2025 before token_count was recorded) carry no counts and are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .logged import AgentLogError, LoggedCall, iso_ms, log_lines

__all__ = ["codex_calls", "codex_notes", "is_codex_line"]

_KINDS = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_ANSWER_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_TOOL_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_ANSWER_EVENTS = ("agent_message", "agent_reasoning", "agent_reasoning_raw_content", "agent_reasoning_section_break")
_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens")


def is_codex_line(row) -> bool:
    return isinstance(row, dict) and row.get("type") in _KINDS and isinstance(row.get("payload"), dict)


def codex_notes() -> list[str]:
    return [
        "Codex rollouts: cached share is the service's cached input tokens; a call's send time is not logged (its "
        "start is the line it answers); sub-agents and input shared across sessions are not told apart"
    ]


def _is_answer(kind, payload: dict) -> bool:
    if kind == "response_item":
        item = payload.get("type")
        return item in _ANSWER_ITEMS or (item == "message" and payload.get("role") == "assistant")
    return kind == "event_msg" and payload.get("type") in _ANSWER_EVENTS


def codex_calls(path: Path) -> list[LoggedCall]:
    """The API calls of one Codex rollout file."""
    session, model = path.stem, ""
    calls: list[LoggedCall] = []
    last_input: Optional[float] = None  # the last line the coming call answers
    answer_start: Optional[float] = None  # set once the call's answer began
    tools, previous, items = 0, None, 0
    for line in log_lines(path):
        ts, kind, payload = iso_ms(line.get("timestamp")), line.get("type"), line.get("payload")
        if not isinstance(payload, dict) or ts is None:
            continue
        if kind == "session_meta":
            session = str(payload.get("id") or session)
        elif kind == "turn_context":
            model = str(payload.get("model") or model)
        if _is_answer(kind, payload):
            items += 1
            answer_start = answer_start if answer_start is not None else (last_input if last_input is not None else ts)
            tools += payload.get("type") in _TOOL_CALLS
        elif kind == "event_msg" and payload.get("type") == "token_count":
            usage = _usage(payload.get("info"), previous)
            if usage is None:
                continue
            previous = payload["info"]["total_token_usage"]
            start = answer_start if answer_start is not None else (last_input if last_input is not None else ts)
            calls.append(
                LoggedCall(
                    session=session,
                    thread="main",
                    start_ms=start,
                    end_ms=ts,
                    input_tokens=usage["input_tokens"],
                    cached_tokens=min(usage["cached_input_tokens"], usage["input_tokens"]),
                    output_tokens=usage["output_tokens"],
                    tool_calls=tools,
                    model=model,
                )
            )
            answer_start, tools, last_input = None, 0, ts
        elif answer_start is None:
            last_input = ts
    if items and not calls:
        raise AgentLogError(
            f"{path}: a Codex rollout with no token_count events carrying counts (info); it cannot give token counts "
            f"(rollouts of Codex CLI before it recorded them: record the sessions with a current codex)"
        )
    return calls


def _usage(info, previous) -> Optional[dict[str, int]]:
    """The call's counts: last_token_usage, else the difference of the totals; None for a repeat of the totals."""
    if not isinstance(info, dict) or not isinstance(info.get("total_token_usage"), dict):
        return None
    total = info["total_token_usage"]
    if total == previous:
        return None
    last = info.get("last_token_usage")
    if isinstance(last, dict):
        return {k: int(last.get(k) or 0) for k in _FIELDS}
    before = previous or {}
    return {k: int(total.get(k) or 0) - int(before.get(k) or 0) for k in _FIELDS}
