"""The agent_loop scenario: parallel tool calls answered by id, compaction to a new prefix, log-normal gaps; every
count exact, every graph as inference-perf's own builder finds it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from fastgen.errors import SpecError, WorkloadError
from fastgen.generator.dataset import DatasetBuilder, Task
from fastgen.generator.scenarios import agent_loop
from fastgen.generator.scenarios.agent_loop import AgentLoopSpec
from fastgen.generator.spec import LogNormal, Range, Spec, Timing
from fastgen.generator.workload import parse_workload
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


@pytest.fixture(scope="module")
def sessions(builtin, tmp_path_factory):
    """(path, spans) of each session of a small agent_loop spec, written as the generator writes them."""
    builder = DatasetBuilder(builtin, Spec({"agent_loop": SMALL}, TIMING), seed=7, model="m")
    root = tmp_path_factory.mktemp("agent_loop")
    out = []
    for index in range(SMALL.sessions):
        for rel, data in builder.files_for(Task(agent_loop.SCENARIO_ID, index)):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            out.append((path, json.loads(data)["spans"]))
    return out


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
    from fastgen.validate import _build_graph, check_file, expected_shapes

    shapes = {"agent_loop": agent_loop.shape(SMALL)}
    kinds = set()
    for path, _ in sessions:
        assert check_file(path, shapes).deviations == ()
        graph, _ = _build_graph(json.loads(path.read_bytes()), path)
        kinds |= {k for e in graph["events"].values() for k in e["predecessor_dependency_types"].values()}
    assert kinds == {"tool_call_ids_matched", "full_match"}  # calls by id; the summary by its text
    assert "agent_loop" not in expected_shapes()  # not in the default workload


def test_the_validator_refuses_a_shared_segment_from_the_wrong_event(sessions):
    """The restart rule is not a blanket pass: without it, the event after a compaction deviates."""
    pytest.importorskip("inference_perf")
    from fastgen.validate import check_file

    strict = {"agent_loop": agent_loop.shape(SMALL).__class__(1, 100, "chain")}
    assert any("expected shared(<-" in d for path, _ in sessions for d in check_file(path, strict).deviations)


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
