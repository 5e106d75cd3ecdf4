"""`fastgen export dag_jsonl`: each session of a generated dataset as AIPerf dag_jsonl conversations, checked against
inference-perf's own reading of the trace files (its graph's predecessors, the messages and tools it sends, its
max_tokens and waits), and the generic layout rules on hand-made graphs (tests/e2e/test_e2e_aiperf.py loads the files
with AIPerf's own loader)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from _support.dag import SYSTEM, _answer, _request, _user, hand_made_sessions
from conftest import run_fastgen
from fastgen.export import dag_export, session_conversations, write_dag
from fastgen.traces.requests import ReplayRequest, SessionRequests, read_session

CHAINS = ["scenario1/c10", "scenario3/c100_stable", "scenario3/c100_noisy"]
FANS = ["scenario2/c10_sync", "scenario2/c10_stagger"]


@pytest.fixture(scope="module")
def exported(small_dataset, tmp_path_factory):
    """{config: (target, the export, its lines as written and read back, inference-perf's sessions by id)}, and
    the prompt reading of the dataset's tokenizer."""
    from fastgen.analysis import config_targets
    from fastgen.analysis.analyze import Corpus, target_slots
    from fastgen.traces.blocks import load_reading

    folder = tmp_path_factory.mktemp("dag")
    reading = load_reading(small_dataset / "traces" / "tokenizer")
    targets = {t.name: t for t in config_targets(small_dataset / "configs", small_dataset / "traces")}
    out = {}
    for name in CHAINS + FANS:
        target = targets[name]
        corpus = Corpus(target.trace_dir, reading, 16)
        export = dag_export(target, corpus)
        path = folder / (name.replace("/", "_") + ".jsonl")
        write_dag(export.conversations, path)
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        sessions = [read_session(corpus.files[i]) for i in target_slots(target, corpus)]
        out[name] = (target, export, lines, {s.session_id: s for s in sessions})
    return reading, out


def _check_prompt(reading, history: list, tools: list | None, request: ReplayRequest) -> None:
    """The prompt the layout builds (recorded answers where AIPerf sends live ones) is the one inference-perf
    sends, message for message and token for token."""
    assert history == list(request.messages)
    assert tools == (list(request.tools) if request.tools else None)
    rebuilt = replace(request, messages=tuple(history), tools=tuple(tools) if tools else None)
    assert len(reading.ids(rebuilt)) == len(reading.ids(request)) == request.recorded_input_tokens


@pytest.mark.parametrize("name", CHAINS)
def test_a_chain_is_one_conversation_of_its_turns_in_order(exported, name):
    reading, by_config = exported
    target, export, lines, sessions = by_config[name]
    conversations = {line["session_id"]: line for line in lines}
    assert list(conversations) == list(sessions)  # one conversation a session, in slot order
    assert (export.sessions, export.forks, export.spawns, export.unexpressed) == (len(sessions), 0, 0, [])
    assert export.requests == sum(len(s.requests) for s in sessions.values())
    for session_id, session in sessions.items():
        turns, requests = conversations[session_id]["turns"], session.requests
        assert len(turns) == len(requests) >= 2
        history, tools = [], None
        for k, (turn, request) in enumerate(zip(turns, requests)):
            assert set(turn) <= {"messages", "tools", "max_tokens", "extra", "delay"}  # no forks, no spawns
            assert request.predecessors == ((requests[k - 1].event_id,) if k else ())  # each on the one before
            if k:
                answer = request.messages[len(history)]  # the recorded answer, where AIPerf sends its live one
                assert answer["role"] == "assistant"
                history = history + [answer]
            history += turn["messages"]
            tools = turn.get("tools", tools)
            _check_prompt(reading, history, tools, request)
            assert turn["max_tokens"] == request.max_tokens
            assert turn["delay"] == (min(request.wait_ms, target.load.max_wait_ms) if k else 0)
        assert "tools" in turns[0] and all("tools" not in turn for turn in turns[1:])  # the same catalog throughout


@pytest.mark.parametrize("name", FANS)
def test_a_fan_is_a_root_turn_that_forks_one_conversation_per_branch(exported, name):
    reading, by_config = exported
    target, export, lines, sessions = by_config[name]
    conversations = {line["session_id"]: line for line in lines}
    forked = [child for line in lines for turn in line["turns"] for child in turn.get("forks", ())]
    assert len(forked) == len(set(forked)) == export.forks
    assert [c for c in conversations if c not in forked] == list(sessions)  # the roots: one a session
    assert export.spawns == 0 and export.unexpressed == []
    for session_id, session in sessions.items():
        root, *branches = session.requests
        assert len(branches) >= 2 and all(b.predecessors == (root.event_id,) for b in branches)
        (turn,) = conversations[session_id]["turns"]
        _check_prompt(reading, turn["messages"], turn["tools"], root)
        assert (turn["max_tokens"], turn["delay"]) == (root.max_tokens, 0)
        assert len(turn["forks"]) == len(branches)
        for child, branch in zip(turn["forks"], branches):
            (first,) = conversations[child]["turns"]
            assert set(first) <= {"messages", "max_tokens", "extra", "delay"}  # the root's tools, inherited
            answer = branch.messages[len(root.messages)]
            _check_prompt(reading, turn["messages"] + [answer] + first["messages"], turn["tools"], branch)
            assert first["max_tokens"] == branch.max_tokens
            assert first["delay"] == min(branch.wait_ms, target.load.max_wait_ms)


def test_tool_choice_is_inference_perfs_forced_recorded_tool(exported):
    _, by_config = exported
    _, _, lines, sessions = by_config["scenario1/c10"]
    for line in lines:
        requests = sessions[line["session_id"]].requests
        for turn, request, after in zip(line["turns"], requests, requests[1:]):
            if request.is_tool_call:
                (call,) = after.messages[len(request.messages)]["tool_calls"]
                named = {"type": "function", "function": {"name": call["function"]["name"]}}
                assert turn["extra"] == {"tool_choice": named}
            else:
                assert turn["extra"] == {"tool_choice": "none"}


def test_two_exports_are_the_same_bytes_and_the_library_writes_them(small_dataset, exported, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (first, second):
        args = ["export", "dag_jsonl", str(small_dataset / "traces"), "--config", "scenario2/c10_sync"]
        result = run_fastgen(*args, "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("wrote 2 sessions of scenario2/c10_sync (12 requests in 12 conversations")
    assert first.read_bytes() == second.read_bytes()
    lines = exported[1]["scenario2/c10_sync"][2]
    assert [json.loads(line) for line in first.read_text().splitlines()] == lines


@pytest.mark.parametrize("where", ["a folder", "a missing folder"])
def test_a_bad_out_is_one_line_and_leaves_no_temporary_file(small_dataset, tmp_path, where):
    out = tmp_path / "taken" if where == "a folder" else tmp_path / "missing" / "out.jsonl"
    if where == "a folder":
        out.mkdir()
    result = run_fastgen(
        "export", "dag_jsonl", str(small_dataset / "traces"), "--config", "scenario1/c10", "--out", str(out)
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and f"cannot write {out}" in result.stderr
    assert "choose another --out" in result.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == (["taken"] if where == "a folder" else [])


def test_a_corrupt_trace_is_named_as_analyze_names_it(exported, tmp_path):
    import shutil

    from fastgen.analysis.analyze import Corpus, target_slots
    from fastgen.errors import OutputError

    reading, by_config = exported
    target = by_config["scenario1/c10"][0]
    shutil.copytree(target.trace_dir, tmp_path / "scenario1")
    corpus = Corpus(tmp_path / "scenario1", reading, 16)
    victim = corpus.files[target_slots(target, corpus)[0]]
    victim.write_bytes(victim.read_bytes()[:500])
    with pytest.raises(OutputError) as raised:
        dag_export(target, corpus)
    assert str(raised.value).startswith(f"{victim} cannot be read as inference-perf reads it (")
    assert str(raised.value).endswith("; regenerate or remove it")


# The layout rules on hand-made graphs: what no generated scenario has (a new prompt, a join, a second root).


def _layout(*requests: ReplayRequest, max_wait_ms: int = 15000) -> tuple[list[dict], list[str]]:
    return session_conversations(SessionRequests("s", Path("s.json"), tuple(requests)), max_wait_ms)


def test_a_new_prompt_is_spawned_with_its_whole_prompt_from_the_last_turn():
    lines, notes = session_conversations(hand_made_sessions()["compaction"], 15000, "s")
    assert lines == [
        {
            "session_id": "s",
            "turns": [
                {"messages": [SYSTEM, _user("task")], "max_tokens": 10, "delay": 0},
                {"messages": [_user("summarize")], "max_tokens": 10, "delay": 100, "spawns": ["s/1"]},
            ],
        },
        {
            "session_id": "s/1",
            "turns": [
                {"messages": [SYSTEM, _answer("summary"), _user("go on")], "max_tokens": 10, "delay": 200},
                {"messages": [_user("more")], "max_tokens": 10, "delay": 300},
            ],
        },
    ]
    assert notes == []


def test_a_wait_on_a_spawned_conversation_is_its_join():
    lines, notes = session_conversations(hand_made_sessions()["join"], 15000, "s")
    assert [turn.get("spawns") for turn in lines[0]["turns"]] == [[{"children": ["s/1"], "join_at": 1}], None]
    assert lines[0]["turns"][1]["messages"] == [_user("after the sub-task")]
    assert lines[1] == {
        "session_id": "s/1",
        "turns": [{"messages": [SYSTEM, _user("sub-task")], "max_tokens": 10, "delay": 50}],
    }
    assert notes == []


def test_a_second_root_starts_with_the_first_and_waits_are_capped():
    lines, notes = session_conversations(hand_made_sessions()["roots"], 15000, "s")
    assert [line["session_id"] for line in lines] == ["s", "s/1"]
    assert lines[0]["pre_session_spawns"] == ["s/1"] and notes == []
    capped, _ = _layout(_request("a", [SYSTEM]), _request("b", [SYSTEM, _answer("x"), _user("y")], ("a",), 40000))
    assert capped[0]["turns"][1]["delay"] == 15000


def test_what_aiperf_cannot_order_is_listed():
    lines, notes = session_conversations(hand_made_sessions()["unordered"], 15000, "s")
    assert lines[0]["turns"][0]["forks"] == ["s/1", "s/2"]  # the wait of s/2 on s/1 is not in the layout
    assert notes == ["s: c waits for b, which AIPerf cannot order; dropped"]
    lines, notes = session_conversations(hand_made_sessions()["early spawn"], 15000, "s")
    assert lines[0]["turns"][0]["spawns"] == [{"children": ["s/1"], "join_at": 1}]
    assert notes == ["s: c waits for s/1 to end (AIPerf joins a spawn from a turn before the last); added"]


def test_tools_are_written_where_they_change_and_tool_choice_follows_the_recorded_answer():
    one = ({"type": "function", "function": {"name": "read", "parameters": {}}},)
    two = (*one, {"type": "function", "function": {"name": "grep", "parameters": {}}})
    call = {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "read"}}]}
    a = [SYSTEM, _user("task")]
    b = [*a, call, {"role": "tool", "tool_call_id": "1", "content": "r"}]
    c = [*b, _answer("x"), _user("u")]
    lines, notes = _layout(
        _request("a", a, tools=one, is_tool_call=True, max_tokens=4096),
        _request("b", b, ("a",), tools=one),
        _request("c", c, ("b",), tools=two, is_tool_call=True),
        _request("d", [*c, _answer("y"), _user("v")], ("c",)),
    )
    turns = lines[0]["turns"]
    assert [turn.get("tools") for turn in turns] == [list(one), None, list(two), None]
    assert [turn.get("extra") for turn in turns] == [
        {"tool_choice": {"type": "function", "function": {"name": "read"}}},
        {"tool_choice": "none"},
        {"tool_choice": "required"},  # the answer is a text: no single call to name
        None,
    ]
    assert notes == ["s: d is sent without tools; AIPerf sends an earlier turn's"]
