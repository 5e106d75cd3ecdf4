"""The agent_loop scenario: parallel tool calls answered by id, compaction to a new prefix, log-normal gaps,
sub-agents joined back; every count exact, every graph as inference-perf's own builder finds it."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from fastgen.errors import SpecError, WorkloadError
from fastgen.generator.scenarios import agent_loop
from fastgen.generator.scenarios.agent_loop import AgentLoopSpec, Stratum
from fastgen.generator.spec import LogNormal, Range, Spec, Timing
from fastgen.generator.workload import parse_workload
from fastgen.traffic.read import read_traffic
from fastgen.traffic.stats import PUBLISHED, traffic_stats, within
from fastgen.validate import check_file_against
from _support.figures import quoted, trace_and_dataset_bytes
from conftest import run_fastgen, write_sessions
from test_dataset import _output_tokens

SMALL = AgentLoopSpec(
    sessions=3,
    system=200,
    tools=900,
    repo_map=1500,
    task=Range(40, 80),
    turns=Range(6, 8),
    parallel_calls=Range(2, 4),
    tool_result=Range(100, 400),
    compact_trigger=5000,
    summary=Range(200, 400),
    final_output=Range(40, 80),
)
TIMING = Timing(think_gap_ms=LogNormal(2000, 9000, 30000), tool_exec_ms=LogNormal(1000, 5000, 20000))


# the same loop, one answer of which delegates to 2-3 sub-agents of 1-3 tool answers and a report each
SUB = dataclasses.replace(
    SMALL,
    sessions=2,
    subagents=Range(2, 3),
    spawn_at=Range(2, 3),
    subagent_system=150,
    subagent_task=Range(50, 100),
    subagent_turns=Range(1, 3),
    report=Range(80, 200),
)


@pytest.fixture(scope="module")
def sessions(builtin, tmp_path_factory):
    return write_sessions(builtin, Spec({"agent_loop": SMALL}, TIMING), tmp_path_factory.mktemp("agent_loop"))


@pytest.fixture(scope="module")
def sub_sessions(builtin, tmp_path_factory):
    return write_sessions(builtin, Spec({"agent_loop": SUB}, TIMING), tmp_path_factory.mktemp("subagents"))


def _messages(span: dict) -> list[dict]:
    return json.loads(span["attributes"]["gen_ai.input.messages"])


def _calls(span: dict) -> list[dict]:
    (message,) = json.loads(span["attributes"]["gen_ai.output.messages"])
    return [p for p in message["parts"] if p["type"] == "tool_call"]


def test_every_count_is_exact(sessions, builtin, rendered_prompt):
    for _, spans in sessions:
        for span in spans:
            a = span["attributes"]
            assert a["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(a)
            assert a["gen_ai.usage.output_tokens"] == _output_tokens(builtin, json.loads(a["gen_ai.output.messages"]))


def test_parallel_calls_are_answered_by_id_in_the_next_request(sessions):
    widest = 0
    for _, spans in sessions:
        for before, after in zip(spans, spans[1:]):
            calls = _calls(before)
            if not calls or after["attributes"]["fastgen.turn_kind"] == "compaction":
                continue
            widest = max(widest, len(calls))
            history = _messages(after)
            k = len(calls)
            assert [c["id"] for c in history[-k - 1]["tool_calls"]] == [c["id"] for c in calls]
            assert [m["role"] for m in history[-k:]] == ["tool"] * k
            assert [m["tool_call_id"] for m in history[-k:]] == [c["id"] for c in calls]
            assert len({c["arguments"].get("path") or c["id"] for c in calls}) == k  # no file read twice at once
    assert widest >= 2


def test_read_file_results_have_line_numbers(sessions):
    for _, spans in sessions:
        for span in spans[1:]:
            for message in _messages(span):
                if message["role"] == "tool" and message["content"].startswith("1\t"):
                    numbers = [int(line.split("\t", 1)[0]) for line in message["content"].splitlines()]
                    assert numbers == list(range(1, len(numbers) + 1))
                    return
    pytest.fail("no read_file result in any session")


def _content_tokens(tok, span: dict) -> int:
    """The prompt's content tokens, what the trigger counts: the tool catalog and each message's content or calls."""
    a = span["attributes"]
    total = tok.count(a["gen_ai.tool.definitions"])
    for m in _messages(span):
        if m.get("tool_calls"):
            total += sum(
                tok.count(c["function"]["name"]) + tok.count(c["function"]["arguments"]) for c in m["tool_calls"]
            )
        else:
            total += tok.count(m["content"])
    return total


def test_a_prompt_at_the_trigger_is_compacted_and_the_next_starts_from_the_summary(sessions, builtin):
    compactions = 0
    for _, spans in sessions:
        for i, span in enumerate(spans):
            a = span["attributes"]
            prompt = _content_tokens(builtin, span)
            if a["fastgen.turn_kind"] != "compaction":
                assert prompt < SMALL.compact_trigger
                continue
            compactions += 1
            last = _messages(span)[-1]
            assert prompt - builtin.count(last["content"]) >= SMALL.compact_trigger  # reached it before the ask
            (summary,) = json.loads(a["gen_ai.output.messages"])
            nxt = _messages(spans[i + 1])
            assert [m["role"] for m in nxt] == ["system", "assistant", "user"]
            assert nxt[0] == _messages(span)[0]  # the system prompt stays; the rest of the history is gone
            assert nxt[1]["content"] == summary["parts"][0]["content"]
            assert spans[i + 1]["attributes"]["gen_ai.usage.input_tokens"] < a["gen_ai.usage.input_tokens"] / 2
    assert compactions >= 2


def test_inference_perf_builds_the_chain_with_tool_id_and_summary_edges(sessions):
    pytest.importorskip("inference_perf")
    from fastgen.generator.expectations import expected_shapes
    from fastgen.validate import _build_graph, check_file_against

    shapes = {"agent_loop": agent_loop.shape(SMALL)}
    kinds = set()
    for path, _ in sessions:
        assert check_file_against(path, shapes).deviations == ()
        graph, _ = _build_graph(json.loads(path.read_bytes()), path)
        kinds |= {k for e in graph["events"].values() for k in e["predecessor_dependency_types"].values()}
    assert kinds == {"tool_call_ids_matched", "full_match"}  # calls by id; the summary by its text
    assert "agent_loop" not in expected_shapes()  # not in the default workload


def test_the_validator_refuses_a_shared_segment_from_the_wrong_event(sessions):
    """The restart rule is not a blanket pass: without it, the event after a compaction deviates."""
    pytest.importorskip("inference_perf")
    from fastgen.validate import check_file_against

    strict = {"agent_loop": agent_loop.shape(SMALL).__class__(1, 100, "chain")}
    assert any("expected shared(<-" in d for path, _ in sessions for d in check_file_against(path, strict).deviations)


def _time(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_gaps_follow_the_timing_distributions(sessions):
    after_tools = []
    for _, spans in sessions:
        for before, after in zip(spans, spans[1:]):
            gap = (_time(after["start_time"]) - _time(before["end_time"])) // timedelta(milliseconds=1)
            if _calls(before):
                after_tools.append(gap)
                assert 0 <= gap <= TIMING.tool_exec_ms.cap
    # the slowest of 2-4 log-normal draws with median 1 s: most gaps are above the single-draw median
    assert np.median(after_tools) > 1000


def test_log_normal_draws_have_their_median_and_p90():
    rng = np.random.default_rng(3)
    d = LogNormal(1000, 5000, 10**6)
    draws = np.array([d.draw(rng) for _ in range(20000)])
    assert abs(np.median(draws) - 1000) < 60
    assert abs(np.quantile(draws, 0.9) - 5000) < 300
    assert abs(draws.mean() - d.mean) / d.mean < 0.05
    assert max(LogNormal(1000, 5000, 6000).draw(rng) for _ in range(2000)) == 6000


def test_a_summary_that_cannot_fit_below_the_trigger_is_refused_with_its_yaml_path():
    with pytest.raises(SpecError, match="summary"):
        AgentLoopSpec(compact_trigger=3000, summary=Range(2500, 2900))
    doc = "format: 1\nscenarios:\n  agent_loop: {compact_trigger: 3000, summary: {lo: 2500, hi: 2900}}\n"
    with pytest.raises(WorkloadError, match=r"scenarios\.agent_loop.*summary.*compact_trigger"):
        parse_workload(doc, source="w.yaml")


def test_a_log_normal_out_of_order_or_mixed_with_a_range_is_one_clear_line():
    with pytest.raises(WorkloadError, match=r"timing\.think_gap_ms: log-normal .* use median <= p90 <= cap"):
        parse_workload(
            "format: 1\ntiming: {think_gap_ms: {median: 900, p90: 100, cap: 5}}\nscenarios: {agent_loop: {}}\n",
            source="w.yaml",
        )
    with pytest.raises(WorkloadError) as err:
        parse_workload(
            "format: 1\ntiming: {think_gap_ms: {median: 900, hi: 100}}\nscenarios: {agent_loop: {}}\n",
            source="w.yaml",
        )
    assert "timing.think_gap_ms.hi: unknown key; this value takes one of {median, p90, cap}; {lo, hi}" in str(err.value)
    assert ".Range" not in str(err.value) and ".LogNormal" not in str(err.value)


def _as_sent(messages: list[dict]) -> list[dict]:
    """The messages as a replay sends them: an assistant message that made tool calls goes out as the calls (the
    live answer in its slot); the reports a join's spawning message keeps beside them are for the graph builder."""
    return [{k: v for k, v in m.items() if k != "content"} if m.get("tool_calls") else m for m in messages]


def _by_id(spans: list[dict]) -> dict[str, dict]:
    return {span["span_id"]: span for span in spans}


def _joins(spans: list[dict]) -> list[tuple[dict, dict, list[dict]]]:
    """(join, spawn, each child's last request) of a session, by what each span says it carries (fastgen.after)."""
    ids = _by_id(spans)
    out = []
    for span in spans:
        carried = [w for w in span["attributes"]["fastgen.after"].split() if not w.startswith("~")]
        if len(carried) > 1:
            out.append((span, ids[carried[0]], [ids[c] for c in carried[1:]]))
    return out


def test_sub_agent_sessions_count_exactly_what_a_replay_sends(sub_sessions, builtin, rendered_prompt):
    joins = 0
    for _, spans in sub_sessions:
        joins += len(_joins(spans))
        for span in spans:
            a = span["attributes"]
            sent = {**a, "gen_ai.input.messages": json.dumps(_as_sent(_messages(span)))}
            assert a["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(sent)
            assert a["gen_ai.usage.output_tokens"] == _output_tokens(builtin, json.loads(a["gen_ai.output.messages"]))
    assert joins == SUB.sessions


def test_children_start_from_their_task_and_their_reports_return_to_the_join(sub_sessions):
    for _, spans in sub_sessions:
        ((join, spawn, lasts),) = _joins(spans)
        calls = _calls(spawn)
        assert [c["name"] for c in calls] == ["delegate_task"] * len(calls) and 2 <= len(calls) <= 3
        children = [s for s in spans if s["attributes"]["fastgen.turn_kind"] == "subagent"]
        firsts = [s for s in children if s["attributes"]["fastgen.turn"] == 1]
        parent_system = _messages(spawn)[0]
        for call, first in zip(calls, sorted(firsts, key=lambda s: s["span_id"])):
            system, task = _messages(first)
            assert system["role"] == "system" and system != parent_system  # a context of its own
            assert task == {"role": "user", "content": call["arguments"]["prompt"]}
            assert _time(first["start_time"]) >= _time(spawn["end_time"])
        history = _messages(join)
        k = len(calls)
        made = history[-k - 1]
        assert [c["id"] for c in made["tool_calls"]] == [c["id"] for c in calls]
        reports = [json.loads(s["attributes"]["gen_ai.output.messages"])[0]["parts"][0]["content"] for s in lasts]
        for result, report, last in zip(history[-k:], reports, lasts):
            assert result["role"] == "tool" and result["content"].startswith(report)  # as the harness returns it
            assert report in made["content"]  # and where inference-perf's builder links it
            assert _time(join["start_time"]) >= _time(last["end_time"])
        assert sum(len(c["tool_calls"]) for c in history if c.get("tool_calls")) > k  # the loop went on before


def test_inference_perf_makes_the_join_wait_for_every_child(sub_sessions):
    pytest.importorskip("inference_perf")
    from fastgen.validate import _build_graph, check_file_against

    shapes = {"agent_loop": agent_loop.shape(SUB)}
    for path, spans in sub_sessions:
        assert check_file_against(path, shapes).deviations == ()
        graph, _ = _build_graph(json.loads(path.read_bytes()), path)
        events = {eid.split("_", 2)[2]: e for eid, e in graph["events"].items()}
        ((join, spawn, lasts),) = _joins(spans)
        deps = {
            eid.split("_", 2)[2]: kind for eid, kind in events[join["span_id"]]["predecessor_dependency_types"].items()
        }
        assert deps == {spawn["span_id"]: "tool_call_ids_matched", **{s["span_id"]: "full_match" for s in lasts}}
        for span in spans:
            if span["attributes"]["fastgen.turn_kind"] == "subagent" and span["attributes"]["fastgen.turn"] == 1:
                first = events[span["span_id"]]["predecessor_dependency_types"]
                assert {eid.split("_", 2)[2]: kind for eid, kind in first.items()} == {spawn["span_id"]: "temporal"}


def test_without_the_reports_in_the_spawning_message_the_join_does_not_wait(sub_sessions, tmp_path):
    """The hidden reports are what links the children: taken out, the validator reports the join's missing edges."""
    pytest.importorskip("inference_perf")
    from fastgen.validate import check_file_against

    path, spans = sub_sessions[0]
    ((join, _, _),) = _joins(spans)
    messages = _messages(join)
    for m in messages:
        m.pop("content", None) if m.get("tool_calls") else None
    join["attributes"]["gen_ai.input.messages"] = json.dumps(messages)
    doc = json.loads(path.read_bytes())
    doc["spans"] = spans
    broken = tmp_path / "agent_loop" / path.name
    broken.parent.mkdir()
    broken.write_text(json.dumps(doc))
    deviations = check_file_against(broken, {"agent_loop": agent_loop.shape(SUB)}).deviations
    assert any("(causal)" in d and "predecessors" in d for d in deviations), deviations


def test_the_request_cap_is_there_because_inference_perf_compares_each_request_with_every_earlier_one(
    builtin, tmp_path, monkeypatch
):
    # MOST_REQUESTS' reason, with inference-perf's own graph builder: before a session's first request it compares
    # each request's messages with those of every earlier request (decompose_input, message by message): at least
    # n(n-1)/2 comparisons for n requests, each request's share growing with n. A 1,104-request session took 37.5 s
    # of the replay's parent this way, no other session dispatched meanwhile (docs/fidelity.md).
    from inference_perf.datagen.replay import otel_trace_to_replay_graph as graph

    compared = 0
    equal = graph.messages_equal

    def counted(a, b):
        nonlocal compared
        compared += 1
        return equal(a, b)

    monkeypatch.setattr(graph, "messages_equal", counted)
    counts = {}
    for turns in (23, 95):
        loop = dataclasses.replace(SMALL, sessions=1, turns=Range(turns, turns))
        ((_, spans),) = write_sessions(builtin, Spec({"agent_loop": loop}, TIMING), tmp_path / str(turns))
        calls, _ = graph.build_raw_calls(spans, include_errors=True)
        compared = 0
        graph.build_graph(calls)
        assert compared >= len(calls) * (len(calls) - 1) // 2, (len(calls), compared)  # every earlier request
        counts[len(calls)] = compared
    (few, few_compared), (many, many_compared) = sorted(counts.items())
    assert many >= 4 * few - 4 and many_compared / many >= 2.5 * few_compared / few, counts  # a request's share grows
    with pytest.raises(SpecError, match="builds a session's whole graph before its first request.*at most 256"):
        AgentLoopSpec(turn_strata=(Stratum(percent=100, turns=Range(200, 300)),))
    with pytest.raises(SpecError, match=r"turns make sessions of up to \d+ requests.*at most 256"):
        AgentLoopSpec(turns=Range(300, 300))  # one task is no exception


def test_a_fan_out_that_explodes_the_session_or_misses_the_loop_is_refused_with_its_yaml_path():
    with pytest.raises(SpecError, match="at most 256"):
        AgentLoopSpec(subagents=Range(60, 60), subagent_turns=Range(5, 5))
    doc = "format: 1\nscenarios:\n  agent_loop: {subagents: {lo: 60, hi: 60}, subagent_turns: {lo: 5, hi: 5}}\n"
    with pytest.raises(WorkloadError, match=r"scenarios\.agent_loop.*subagents.*at most 256"):
        parse_workload(doc, source="w.yaml")
    with pytest.raises(SpecError, match=r"subagents must be \{lo: 0, hi: 0\} \(none\) or at least 1"):
        AgentLoopSpec(subagents=Range(0, 2))  # a spawn that drew no children would answer with nothing
    with pytest.raises(SpecError, match="spawn_at must name an answer of the loop"):
        AgentLoopSpec(turns=Range(3, 8), subagents=Range(1, 2), spawn_at=Range(2, 5))


def test_recorded_outputs_with_sub_agents_are_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    result = run_fastgen(
        "--workload", "agent", "--tokenizer", "builtin", "--scale", "0.1", "--budget-scale", "0.1",
        "--outputs", "recorded", "--output-dir", str(out / "traces"), "--config-dir", str(out / "configs"),
    )  # fmt: skip
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fastgen: error")]
    assert "--outputs recorded" in line and "--outputs live" in line
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


def test_the_read_side_sees_each_request_as_sent(sub_sessions, rendered_prompt):
    """analyze and the exports read requests through traces.read_session: no hidden report reaches them, in the join
    or in any request after it (their shared prefix is what the join sent), and each counts as recorded."""
    pytest.importorskip("inference_perf")
    from fastgen.traces.requests import read_session

    for path, spans in sub_sessions:
        ids = _by_id(spans)
        session = read_session(path)
        assert len(session.requests) == len(spans)
        hidden_before = 0
        for request in session.requests:
            span = ids[request.event_id.split("_", 2)[2]]
            recorded = _messages(span)
            hidden_before += any(m.get("tool_calls") and m.get("content") for m in recorded)
            assert list(request.messages) == _as_sent(recorded)
            sent = {**span["attributes"], "gen_ai.input.messages": json.dumps(list(request.messages))}
            assert rendered_prompt.tokens(sent) == request.recorded_input_tokens
        assert hidden_before >= 2  # the join and the requests after it carried the hidden reports in the file


def test_every_span_states_its_plan_with_the_same_attribute_keys(sub_sessions):
    # inference-perf unifies a corpus's attributes with Arrow: a key some spans lack is null in the others
    keys = {frozenset(span["attributes"]) for _, spans in sub_sessions for span in spans}
    assert len(keys) == 1 and "fastgen.after" in next(iter(keys))


# --- field-shaped sessions: tasks, turn strata, edits, the opening kept, a share of sessions with sub-agents --------

FIELD = dataclasses.replace(
    SUB,
    sessions=10,
    tasks=Range(2, 3),
    next_task=Range(40, 80),
    turn_strata=(Stratum(80, Range(1, 3)), Stratum(20, Range(8, 10))),
    edit_percent=50,
    edit=Range(60, 120),
    compact_keep="opening",
    even_waits=True,
    subagent_percent=40,
    spawn_at=Range(1, 1),
)


def _kind(span: dict) -> str:
    return span["attributes"]["fastgen.turn_kind"]


@pytest.fixture(scope="module")
def field_sessions(builtin, tmp_path_factory):
    return write_sessions(builtin, Spec({"agent_loop": FIELD}, TIMING), tmp_path_factory.mktemp("field"))


def test_field_shaped_sessions_pass_inference_perfs_graph_builder(field_sessions):
    shapes = {"agent_loop": agent_loop.shape(FIELD)}
    for path, _ in field_sessions:
        assert check_file_against(path, shapes).deviations == (), path.name


def test_strata_and_subagent_shares_are_fixed_by_the_session_index(field_sessions):
    long = [i for i in range(100) if FIELD.session_turns(i) == Range(8, 10)]
    # the stratum's percent of any hundred sessions, to one session (a low-discrepancy sequence), not a draw's
    assert abs(len(long) - 20) <= 1
    assert abs(sum(FIELD.session_spawns(i) for i in range(100)) - 40) <= 1
    spawning = {p.name for p, spans in field_sessions if any(_kind(s) == "subagent" for s in spans)}
    assert spawning == {f"session_{i:04d}.json" for i in range(FIELD.sessions) if FIELD.session_spawns(i)}


def test_later_tasks_follow_a_text_answer_after_think_time_and_edits_are_one_patch(field_sessions):
    texts_followed = edits = 0
    for _, spans in field_sessions:
        main = [s for s in spans if _kind(s) not in ("subagent", "compaction")]
        for before, after in zip(main, main[1:]):
            answer = json.loads(before["attributes"]["gen_ai.output.messages"])[0]["parts"]
            if answer[0]["type"] == "text" and after["attributes"]["fastgen.after"].split()[0] == before["span_id"]:
                texts_followed += 1
            calls = [p for p in answer if p["type"] == "tool_call"]
            if calls and calls[0]["name"] == "apply_patch":
                assert len(calls) == 1
                edits += 1
    assert texts_followed >= FIELD.sessions  # at least one later task a session (tasks >= 2)
    assert edits > 0


def test_even_waits_put_the_waits_before_later_tasks_at_the_think_times_quantiles():
    spec = Spec({"agent_loop": dataclasses.replace(FIELD, sessions=400, even_waits=True)}, TIMING)
    waits = np.array([agent_loop._even_wait(spec, i, job) for i in range(400) for job in range(2)])
    d = TIMING.think_gap_ms
    assert isinstance(d, LogNormal)
    # 800 waits: their median and p90 within 5 % of the distribution's (random draws stray by about a tenth)
    assert abs(np.median(waits) / d.median - 1) < 0.05
    assert abs(np.percentile(waits, 90) / d.p90 - 1) < 0.05
    assert waits.max() <= d.cap


def test_a_compaction_that_keeps_the_opening_restarts_from_it(builtin, tmp_path):
    spec = dataclasses.replace(FIELD, sessions=2, turn_strata=(), turns=Range(8, 8), subagents=Range(0, 0))
    sessions = write_sessions(builtin, Spec({"agent_loop": spec}, TIMING), tmp_path)
    for path, spans in sessions:
        first = _messages(spans[0])
        resumed = [_messages(s) for s, b in zip(spans[1:], spans) if _kind(b) == "compaction"]
        assert resumed, "no compaction"
        for messages in resumed:
            assert messages[: len(first)] == first  # system prompt, repository map and the first task
        assert check_file_against(path, {"agent_loop": agent_loop.shape(spec)}).deviations == ()


@pytest.mark.parametrize(
    "field, says",
    [
        ("tasks: {lo: 0, hi: 2}", "tasks must be at least 1 task a session"),
        ("turn_strata: [{percent: 60, turns: {lo: 2, hi: 5}}]", "turn_strata percents must add up to 100"),
        ("turn_strata: [{percent: 100, turns: {lo: 0, hi: 5}}]", "turn_strata turns must be at least 1"),
        ("turn_strata: [{percent: 0, turns: {lo: 1, hi: 5}}]", "turn_strata.0.percent: expected an integer >= 1"),
        ("edit_percent: 101", "edit_percent: expected an integer <= 100, got 101"),
        ("edit_percent: 30\n    edit: {lo: 0, hi: 0}", "edit must be at least 1 token when edit_percent"),
        ("compact_keep: all", "compact_keep: input should be 'system' or 'opening'"),
        ("subagent_percent: -1", "subagent_percent: expected an integer >= 0, got -1"),
        ("next_task: {lo: 9, hi: 2}", "range 9..2 is empty"),
        ("even_waits: sometimes", "even_waits: input should be a valid boolean"),
        ("compact_keep: opening\n    task: {lo: 30000, hi: 39000}", "summary must leave the new prompt (opening"),
        ("tasks: {lo: 1, hi: 20}\n    turns: {lo: 10, hi: 14}", "tasks make sessions of up to"),
    ],
)
def test_a_bad_field_shape_value_is_one_line_naming_it(field, says):
    doc = f"format: 1\nscenarios:\n  agent_loop:\n    {field}\n"
    with pytest.raises(WorkloadError) as err:
        parse_workload(doc, source="w.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("w.yaml: scenarios.agent_loop"), message
    assert says in message, message


def test_the_field_workload_holds_the_published_statistics_a_small_scale_can(tmp_path):
    # a fifth of the sessions at a tenth of the budgets: the shares, counts and times hold there; token means scale
    # with the budgets, and the p99 of steps needs the full count (docs/fidelity.md has the full-scale table)
    args = ["--workload", "field", "--scale", "0.2", "--budget-scale", "0.1", "--tokenizer", "builtin", "--quiet"]
    result = run_fastgen(*args, "--output-dir", str(tmp_path / "t"), "--config-dir", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    measured = traffic_stats(read_traffic([tmp_path / "t"]))
    assert measured["sessions"] == 20
    by_key = {stat.key: stat for stat in PUBLISHED}
    held = ("cached_share", "steps_p50", "calls_mean", "tool_p50", "tool_p90", "human_p50", "human_p90")
    for key in (*held, "subagent_share", "cross_share"):
        assert within(by_key[key], measured[key], by_key[key].published), (key, measured[key])
    assert within(by_key["input_mean"], measured["input_mean"], 0.1 * by_key["input_mean"].published)
    # the size docs/fidelity.md quotes for this scale is the one written here
    (megabytes,) = quoted("fidelity.md", r"--scale 0\.2 --budget-scale 0\.1`: (\d+) MB of trace files")
    assert int(megabytes) == round(trace_and_dataset_bytes(tmp_path / "t")[0] / 1e6)
