"""Claude Code's own session logs, read as API calls (logged.py): `~/.claude/projects/<project>/<session>.jsonl`, and
its sub-agents' files (`<session>/subagents/agent-<id>.jsonl` in recent versions, `agent-<id>.jsonl` beside the
sessions in older ones; sidechain lines in the session's own file older still).

The form, one JSON object a line (no published schema; as Claude Code 1.x-2.x writes it, and as the tools that read
these files parse it: ccusage, https://github.com/ryoppippi/ccusage (apps/ccusage/src/data-loader.ts), claude-code-log,
https://github.com/daaain/claude-code-log (claude_code_log/models.py), and the field-by-field notes of
https://github.com/23min/copilot-lens/blob/main/docs/research/claude-code-sessions.md):
- `type`: `user` (a prompt, or tool results), `assistant` (one content block of an answer), `summary`, `system`,
  `file-history-snapshot`, ... Only `assistant` lines are calls; the others give times.
- `uuid`, `parentUuid`: each line and the line it follows (null at a session's, a compaction's or a sidechain's root).
- `sessionId`: the session (a sub-agent's lines carry their parent session's); `timestamp`: ISO 8601, when the line
  was written.
- `isSidechain`: true on a sub-agent's lines (the Task tool); `agentId`: which sub-agent (recent versions).
- `requestId` (assistant lines): the API request; `message`: the Messages API message: `id` (`msg_...`), `role`,
  `model` (`<synthetic>` on the lines Claude Code writes itself, e.g. an API error: not calls), `content`: a string or
  blocks: `text` {text}, `thinking` {thinking, signature}, `redacted_thinking` {data}, `tool_use` {id, name, input},
  `tool_result` {tool_use_id, content} (on user lines), `image`.
- `message.usage` (assistant lines), the Messages API's (https://docs.anthropic.com/en/api/messages, and prompt
  caching: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): `input_tokens` (after the last cache
  breakpoint), `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`.

One API response is written as one line per content block (thinking, text, each tool_use), all with the same
`message.id` and `requestId` and the usage of the stream's start: `output_tokens` there is a placeholder (1, or a few
tokens), so a call's output is counted from its answer's content. A call here: the lines of one message id (a resumed
session's file repeats earlier lines: a message id already read is skipped). Its input: input + cache read + cache
creation tokens; cached: the cache reads. Its start: the timestamp of the line it answers (the prompt or the last tool
result; the send itself is not logged); its end: its last line's. A tool's latency is then the gap from the tool_use
answer's last line to the tool_result line the next call answers. Its agent: the main one, or the sidechain's agentId
(else the sidechain's root line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import orjson

from .logged import AgentLogError, LoggedCall, TokenCounter, chars_per_token, counted, iso_ms, log_lines

__all__ = ["claude_code_calls", "claude_code_notes", "is_claude_code_line"]

_USAGE = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


def is_claude_code_line(row) -> bool:
    return isinstance(row, dict) and "sessionId" in row and row.get("type") in ("user", "assistant", "system")


def claude_code_notes(count: Optional[TokenCounter]) -> list[str]:
    how = "by the tokenizer" if count is not None else f"at {chars_per_token} characters a token (give --tokenizer)"
    return [
        f"Claude Code logs: output tokens counted from the answers' content {how}: the logs' output_tokens are "
        f"placeholders",
        "Claude Code logs: cached share is the service's cache reads (a cache with a time to live); input shared "
        "across sessions is seen only on a session's first call; a call's send time is not logged (its start is the "
        "line it answers)",
    ]


def claude_code_calls(path: Path, *, count: Optional[TokenCounter], seen: set[str]) -> list[LoggedCall]:
    """The API calls of one Claude Code log file, skipping the message ids in `seen` (and adding its own)."""
    lines = log_lines(path)
    by_uuid = {line["uuid"]: line for line in lines if isinstance(line.get("uuid"), str)}
    groups: dict[str, list[dict]] = {}
    for line in lines:
        message = line.get("message")
        if line.get("type") != "assistant" or not isinstance(message, dict) or message.get("model") == "<synthetic>":
            continue
        key = message.get("id") or line.get("requestId")
        if key:
            groups.setdefault(str(key), []).append(line)
    if groups and not any(isinstance(g.get("message", {}).get("usage"), dict) for v in groups.values() for g in v):
        raise AgentLogError(
            f"{path}: a Claude Code log whose answers carry no message.usage; it cannot give token counts (read the "
            f"session files Claude Code writes under ~/.claude/projects/, not an export)"
        )
    roots: dict[str, str] = {}
    calls = []
    for key, group in groups.items():
        if key in seen:
            continue
        seen.add(key)
        call = _call(group, by_uuid=by_uuid, roots=roots, count=count, fallback=path.stem)
        if call is not None:
            calls.append(call)
    return calls


def _call(
    group: list[dict], *, by_uuid: dict, roots: dict[str, str], count: Optional[TokenCounter], fallback: str
) -> Optional[LoggedCall]:
    usages = [g["message"]["usage"] for g in group if isinstance(g["message"].get("usage"), dict)]
    times = [t for t in (iso_ms(g.get("timestamp")) for g in group) if t is not None]
    if not usages or not times:
        return None
    usage = {k: max(int(u.get(k) or 0) for u in usages) for k in _USAGE}
    first = group[0]
    parent = by_uuid.get(first.get("parentUuid") or "")
    start = iso_ms(parent.get("timestamp")) if parent is not None else None
    texts, calls = [], 0
    for line in group:
        content = line["message"].get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls += 1
                texts.append(str(block.get("name") or "") + orjson.dumps(block.get("input")).decode())
            elif block.get("type") in ("text", "thinking"):
                texts.append(str(block.get(block["type"]) or ""))
    cached = usage["cache_read_input_tokens"]
    return LoggedCall(
        session=str(first.get("sessionId") or fallback),
        thread=_thread(first, by_uuid, roots),
        start_ms=min(start, min(times)) if start is not None else min(times),
        end_ms=max(times),
        input_tokens=usage["input_tokens"] + cached + usage["cache_creation_input_tokens"],
        cached_tokens=cached,
        output_tokens=max(counted(texts, count), 1),
        tool_calls=calls,
        model=str(first["message"].get("model") or ""),
    )


def _thread(line: dict, by_uuid: dict, roots: dict[str, str]) -> str:
    """ "main", or the sub-agent that wrote the line: its agentId, else its sidechain's root line."""
    if not line.get("isSidechain"):
        return "main"
    if line.get("agentId"):
        return f"agent-{line['agentId']}"
    path, node = [], line
    while True:
        uuid = str(node.get("uuid"))
        if uuid in roots:
            root = roots[uuid]
            break
        path.append(uuid)
        parent = by_uuid.get(node.get("parentUuid") or "")
        if parent is None or not parent.get("isSidechain"):
            root = str(uuid)
            break
        node = parent
    for uuid in path:
        roots[uuid] = root
    return f"sidechain-{root}"
