"""Codex CLI's own rollout files read as traffic (traffic/codex.py): a fixture in the form Codex writes under
~/.codex/sessions/YYYY/MM/DD/ (session_meta, turn_context, response items, token_count events, a repeated count on a
rate-limit update), and `fastgen workload stats` and `fit` on the folder as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fastgen
from fastgen.traffic import read_traffic
from fastgen.traffic.logged import AgentLogError

MARKER = "zq-marker-7f3a9c1e"
SESSION = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def _line(seconds: float, kind: str, payload: dict) -> dict:
    minutes, seconds = divmod(seconds, 60)
    return {"timestamp": f"2025-10-01T12:{minutes:02.0f}:{seconds:06.3f}Z", "type": kind, "payload": payload}


def _count(seconds: float, last: tuple[int, int, int], total: tuple[int, int, int]) -> dict:
    def usage(n):
        return {"input_tokens": n[0], "cached_input_tokens": n[1], "output_tokens": n[2],
                "reasoning_output_tokens": n[2] // 2, "total_tokens": n[0] + n[2]}  # fmt: skip

    info = {"total_token_usage": usage(total), "last_token_usage": usage(last), "model_context_window": 272000}
    return _line(seconds, "event_msg", {"type": "token_count", "info": info, "rate_limits": None})


def _rollout() -> list[dict]:
    text = [{"type": "input_text", "text": MARKER}]
    return [
        _line(0.0, "session_meta", {"id": SESSION, "cwd": f"/home/{MARKER}", "cli_version": "0.46.0",
                                    "instructions": MARKER}),
        _line(0.1, "response_item", {"type": "message", "role": "user", "content": text}),
        _line(0.2, "turn_context", {"model": "gpt-5-codex", "cwd": f"/home/{MARKER}", "effort": "medium"}),
        _line(0.3, "event_msg", {"type": "token_count", "info": None, "rate_limits": None}),  # before any answer
        _line(2.0, "response_item", {"type": "reasoning", "summary": [], "encrypted_content": MARKER}),
        _line(2.5, "response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                     "arguments": json.dumps({"command": ["rg", MARKER]})}),
        _count(2.6, (9000, 0, 120), (9000, 0, 120)),
        _count(2.7, (9000, 0, 120), (9000, 0, 120)),  # the same totals again, on a rate-limit update: no call
        _line(3.4, "response_item", {"type": "function_call_output", "call_id": "c1", "output": MARKER}),
        _line(5.0, "response_item", {"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text", "text": MARKER}]}),
        _line(5.0, "event_msg", {"type": "agent_message", "message": MARKER}),
        _count(5.1, (9400, 8960, 60), (18400, 8960, 180)),
        _line(65.0, "event_msg", {"type": "user_message", "message": MARKER}),
        _line(65.0, "response_item", {"type": "message", "role": "user", "content": text}),
        _line(67.0, "response_item", {"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": MARKER}]}),
        _count(67.5, (9600, 9344, 40), (28000, 18304, 220)),
    ]  # fmt: skip


@pytest.fixture
def sessions(tmp_path) -> Path:
    """~/.codex/sessions/ as Codex leaves it."""
    path = tmp_path / "sessions" / "2025" / "10" / "01" / f"rollout-2025-10-01T12-00-00-{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in _rollout()))
    return tmp_path / "sessions"


def test_calls_tokens_cached_shares_and_tool_gaps(sessions):
    notes: list[str] = []
    requests = read_traffic([sessions], notes=notes)
    assert [(r.input_tokens, r.reused, r.output_tokens, r.tool_calls) for r in requests] == [
        (9000, 0, 120, 1),
        (9400, 8960, 60, 0),
        (9600, 9344, 40, 0),
    ]
    assert {r.session for r in requests} == {SESSION} and not any(r.subagent for r in requests)
    assert [r.follows for r in requests] == [None, 0, 1] and {r.model for r in requests} == {"gpt-5-codex"}
    # tool latency: the answer's count to the tool's output; the human's wait: the text answer to the next message
    assert requests[1].start_ms - requests[0].end_ms == pytest.approx(800)
    assert requests[2].start_ms - requests[1].end_ms == pytest.approx(59_900)
    assert any(line.startswith("Codex rollouts: ") for line in notes)


def test_a_rollout_without_counts_is_refused(tmp_path):
    lines = [line for line in _rollout() if line["payload"].get("type") != "token_count"]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(AgentLogError, match="r.jsonl: a Codex rollout with no token_count events carrying counts"):
        read_traffic([tmp_path])


def test_workload_stats_and_fit_on_the_folder(sessions, tmp_path):
    stats = run_fastgen("workload", "stats", str(sessions))
    assert stats.returncode == 0, stats.stderr
    assert "note: Codex rollouts: cached share is the service's cached input tokens" in stats.stdout
    assert "| input tokens per step, mean | 154,000 (TraceLab) | 9,333 |" in stats.stdout
    out = tmp_path / "mine.yaml"
    fit = run_fastgen("workload", "fit", str(sessions), "--out", str(out), "--check-sessions", "4")
    assert fit.returncode == 0, fit.stderr
    assert "note: Codex rollouts: " in fit.stdout and out.exists()
    assert MARKER not in stats.stdout + stats.stderr + fit.stdout + fit.stderr + out.read_text()
