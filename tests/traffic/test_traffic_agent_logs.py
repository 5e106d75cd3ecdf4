"""fastgen/traffic/agent_logs.py: which .jsonl files are an agent's own log (by their lines, not their names), the
file in no form fastgen reads refused in one line naming the forms, and logged calls made requests (each continues
its own agent's last one; the first call of a session shares its cached tokens with another session)."""

from __future__ import annotations

import pytest

from fastgen.traffic.agent_logs import _requests, agent_log_form, agent_log_requests
from fastgen.traffic.logged import AgentLogError, LoggedCall


def test_files_of_the_other_forms_are_not_agent_logs(tmp_path):
    spans = tmp_path / "spans.json"
    spans.write_text('{"spans": []}')
    mooncake = tmp_path / "trace.jsonl"
    mooncake.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    assert [agent_log_form(p) for p in (spans, mooncake, broken)] == [None, None, None]


def test_a_jsonl_file_in_no_form_read_is_refused_naming_the_forms(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"note": "hello"}\n')
    with pytest.raises(AgentLogError) as raised:
        agent_log_form(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: a .jsonl file in none of the forms read; give OpenTelemetry spans")
    assert "Claude Code session files" in message and "Codex rollouts" in message and "\n" not in message


def test_no_files_give_no_requests():
    assert agent_log_requests([], count_tokens=None, notes=None) == []


def _call(session: str, thread: str, start_ms: float, cached: int) -> LoggedCall:
    return LoggedCall(session, thread, start_ms, start_ms + 100, 1000, cached, 50, 1, "m")


def test_calls_become_requests_in_start_order_each_following_its_own_agent():
    calls = [_call("s", "main", 300, 900), _call("s", "main", 0, 400), _call("s", "sub-1", 100, 600)]
    calls.append(_call("t", "main", 200, 2000))  # a cache count over the prompt's is held to the prompt
    requests = _requests(calls)
    assert [(r.session, r.start_ms, r.subagent) for r in requests] == [
        ("s", 0, False),
        ("s", 100, True),
        ("t", 200, False),
        ("s", 300, False),
    ]
    assert [r.follows for r in requests] == [None, None, None, 0]
    assert [r.reused for r in requests] == [400, 600, 1000, 900]
    # only a session's first call found its cached tokens from another session
    assert [r.shared for r in requests] == [400, 0, 1000, 0]
