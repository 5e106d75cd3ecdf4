"""Hand-made replay graphs: what no generated scenario has (a new prompt, a join, a second root), built request by
request; tests/export/test_export_dag.py lays them out and tests/e2e/test_e2e_aiperf.py loads them with AIPerf."""

from __future__ import annotations

from pathlib import Path

from fastgen.traces.requests import ReplayRequest, SessionRequests


SYSTEM = {"role": "system", "content": "s"}


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def _answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _request(event: str, messages: list, after: tuple = (), wait_ms: int = 0, **kw) -> ReplayRequest:
    return ReplayRequest(
        event_id=event,
        predecessors=after,
        wait_ms=wait_ms,
        t_start_ms=0,
        messages=tuple(messages),
        tools=kw.get("tools"),
        max_tokens=kw.get("max_tokens", 10),
        output_tokens=10,
        recorded_input_tokens=0,
        is_tool_call=kw.get("is_tool_call", False),
        attributes={},
    )


def hand_made_sessions() -> dict[str, SessionRequests]:
    """Graphs with a new prompt, a join, a second root, an unorderable wait and a spawn before the last turn (also
    loaded by AIPerf in tests/e2e/test_e2e_aiperf.py)."""
    a = [SYSTEM, _user("task")]
    shapes = {
        "compaction": [
            _request("a", a),
            _request("b", [*a, _answer("x"), _user("summarize")], ("a",), 100),
            _request("c", [SYSTEM, _answer("summary"), _user("go on")], ("b",), 200),
            _request("d", [SYSTEM, _answer("summary"), _user("go on"), _answer("y"), _user("more")], ("c",), 300),
        ],
        "join": [
            _request("a", a),
            _request("b", [SYSTEM, _user("sub-task")], ("a",), 50),
            _request("c", [*a, _answer("x"), _user("after the sub-task")], ("a", "b"), 70),
        ],
        "roots": [_request("a", a), _request("b", [SYSTEM, _user("another")])],
        "unordered": [
            _request("a", a),
            _request("b", [*a, _answer("x"), _user("one")], ("a",)),
            _request("c", [*a, _answer("x"), _user("two")], ("a", "b")),
        ],
        "early spawn": [
            _request("a", a),
            _request("b", [SYSTEM, _user("sub-task")], ("a",)),
            _request("c", [*a, _answer("x"), _user("next")], ("a",)),
        ],
    }
    return {name: SessionRequests(name, Path(f"{name}.json"), tuple(rs)) for name, rs in shapes.items()}
