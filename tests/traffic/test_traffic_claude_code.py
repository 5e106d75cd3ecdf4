"""Claude Code's own session logs read as traffic (traffic/claude_code.py): a fixture in the form Claude Code writes
under ~/.claude/projects/<project>/ (a main session with a tool loop, its answers split one content block a line with
placeholder output counts, a sub-agent's sidechain file, a resumed session repeating lines), and `fastgen workload
stats` and `fit` on the folder as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fastgen
from fastgen.traffic import read_traffic
from fastgen.traffic.logged import AgentLogError, chars_per_token

MARKER = "zq-marker-7f3a9c1e"
SESSION = "4f35e220-c435-4cf7-b9b9-f40426042847"


def _at(seconds: float) -> str:
    return f"2025-05-26T07:{27 + int(seconds) // 60:02d}:{seconds % 60:06.3f}Z"


def _line(kind: str, uuid: str, parent, seconds: float, message: dict, **extra) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": f"/home/{MARKER}",
            "sessionId": SESSION, "version": "1.0.3", "type": kind, "message": message, "uuid": uuid,
            "timestamp": _at(seconds), **extra}  # fmt: skip


def _answer(msg: str, blocks: list[dict], usage: dict) -> list[dict]:
    """One API response as Claude Code writes it: a line per content block, the stream start's usage on each."""
    return [{"id": msg, "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514", "content": [b],
             "stop_reason": None, "usage": {**usage, "service_tier": "standard"}} for b in blocks]  # fmt: skip


def _usage(uncached: int, read: int, created: int) -> dict:
    return {"input_tokens": uncached, "cache_read_input_tokens": read, "cache_creation_input_tokens": created,
            "output_tokens": 1}  # fmt: skip


TOOL_INPUT = {"command": f"grep -r {MARKER} src"}
FIRST = [{"type": "thinking", "thinking": f"look for {MARKER}" * 10, "signature": "sig"},
         {"type": "text", "text": f"Searching {MARKER}."},
         {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": TOOL_INPUT}]  # fmt: skip


def _main_session() -> list[dict]:
    lines = [{"type": "summary", "summary": f"about {MARKER}", "leafUuid": "u6"},
             _line("user", "u1", None, 0.0, {"role": "user", "content": f"fix {MARKER}"})]  # fmt: skip
    parent = "u1"
    for i, message in enumerate(_answer("msg_1", FIRST, _usage(10, 0, 5000))):
        lines.append(_line("assistant", f"a1{i}", parent, 2.0 + i * 0.5, message, requestId="req_1"))
        parent = f"a1{i}"
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"{MARKER} found"}
    lines.append(_line("user", "u2", parent, 4.5, {"role": "user", "content": [result]}))
    text = [{"type": "text", "text": "Done: " + MARKER * 3}]
    lines.append(_line("assistant", "a2", "u2", 6.0, _answer("msg_2", text, _usage(20, 5000, 100))[0]))
    synthetic = {**_answer("msg_x", text, _usage(0, 0, 0))[0], "model": "<synthetic>"}  # an API error Claude Code wrote
    lines.append(_line("assistant", "a3", "a2", 7.0, synthetic))
    return lines


def _sidechain() -> list[dict]:
    task = _line("user", "s1", None, 2.6, {"role": "user", "content": f"sub-task {MARKER}"}, isSidechain=True,
                 agentId="a7c")  # fmt: skip
    call = _answer("msg_3", [{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"p": MARKER}}],
                   _usage(3, 0, 800))[0]  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": "toolu_2", "content": MARKER}
    done = _answer("msg_4", [{"type": "text", "text": MARKER}], _usage(4, 800, 30))[0]
    return [task,
            _line("assistant", "s2", "s1", 3.0, call, isSidechain=True, agentId="a7c", requestId="req_3"),
            _line("user", "s3", "s2", 3.2, {"role": "user", "content": [result]}, isSidechain=True, agentId="a7c"),
            _line("assistant", "s4", "s3", 4.0, done, isSidechain=True, agentId="a7c", requestId="req_4")]  # fmt: skip


def _write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture
def project(tmp_path) -> Path:
    """~/.claude/projects/<project>/ as Claude Code leaves it."""
    root = tmp_path / "-home-user-project"
    _write(root / f"{SESSION}.jsonl", _main_session())
    _write(root / SESSION / "subagents" / "agent-a7c.jsonl", _sidechain())
    # a resumed session's file starts with the lines of the one it resumes: their calls are read once
    _write(root / "9a0d1c2e-0000-4000-8000-000000000001.jsonl", _main_session()[:5])
    (root / "sessions-index.json").write_text(json.dumps({"version": 1, "entries": [{"firstPrompt": MARKER}]}))
    return root


def test_calls_tokens_cached_shares_and_agents(project):
    notes: list[str] = []
    requests = read_traffic([project], notes=notes)
    assert [(r.input_tokens, r.reused, r.subagent, r.tool_calls) for r in requests] == [
        (5010, 0, False, 1),  # msg_1: three lines, one call; input = uncached + read + created
        (803, 0, True, 1),  # the sub-agent's first call
        (834, 800, True, 0),
        (5120, 5000, False, 0),  # msg_2 continues msg_1 after the tool's result
    ]
    first_chars = sum(len(b.get("thinking", b.get("text", ""))) for b in FIRST[:2]) + len("Bash")
    first_chars += len(json.dumps(TOOL_INPUT, separators=(",", ":")))
    assert requests[0].output_tokens == -(-first_chars // chars_per_token)  # not the logs' placeholder 1
    assert {r.session for r in requests} == {SESSION}
    assert [r.follows for r in requests] == [None, None, 1, 0]
    # the tool's latency: from the tool_use answer's last line to the tool_result line
    assert requests[3].start_ms - requests[0].end_ms == pytest.approx(1500)
    assert requests[0].start_ms == requests[0].end_ms - 3000  # from the prompt's line
    assert requests[0].shared == 0 and requests[3].shared == 0  # nothing cached before the session's first call
    assert any("output_tokens are placeholders" in line for line in notes)


def test_tokenizer_counts_the_answers(project):
    requests = read_traffic([project], count_tokens=lambda text: 1 if text else 0)
    assert [r.output_tokens for r in requests] == [3, 1, 1, 1]  # one a text block or tool call


def test_a_log_without_usage_is_refused(tmp_path):
    lines = _main_session()
    for line in lines:
        if isinstance(line.get("message"), dict):
            line["message"].pop("usage", None)
    _write(tmp_path / "s.jsonl", lines)
    with pytest.raises(AgentLogError, match="s.jsonl: a Claude Code log whose answers carry no message.usage"):
        read_traffic([tmp_path])


def test_a_file_in_none_of_the_forms_is_refused(tmp_path):
    _write(tmp_path / "x.jsonl", [{"event": "something", "at": 1}])
    result = run_fastgen("workload", "stats", str(tmp_path))
    assert result.returncode != 0
    assert "x.jsonl: a .jsonl file in none of the forms read; give OpenTelemetry spans" in result.stderr
    assert "Claude Code session files" in result.stderr and "Codex rollouts" in result.stderr


def test_workload_stats_and_fit_on_the_folder(project, tmp_path):
    stats = run_fastgen("workload", "stats", str(project))
    assert stats.returncode == 0, stats.stderr
    assert "note: Claude Code logs: output tokens counted from the answers' content at 4 characters" in stats.stdout
    assert "| input tokens per step, mean | 154,000 (TraceLab) | 2,942 |" in stats.stdout
    out = tmp_path / "mine.yaml"
    fit = run_fastgen("workload", "fit", str(project), "--out", str(out), "--check-sessions", "4")
    assert fit.returncode == 0, fit.stderr
    assert "output_tokens are placeholders" in fit.stdout and out.exists()
    # the logs hold the marker in every prompt, answer, tool call, path and title: none of it reaches any output
    assert MARKER not in stats.stdout + stats.stderr + fit.stdout + fit.stderr + out.read_text()
