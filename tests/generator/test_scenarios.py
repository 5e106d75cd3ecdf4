"""The scenario registry: a scenario defined only here plugs in and is generated, configured and validated; a spec
names the scenarios it generates; shapes and configs follow the spec's numbers."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from inference_perf.config import read_config

from conftest import run_fastgen
from fastgen import RunOptions, SpecError, generate, validate_tree
from fastgen.generator.shared_blocks import ScenarioBlocks
from fastgen.generator.content.budget import compose_block
from fastgen.generator.content.compose import Composer, Text
from fastgen.generator.messages import Output, SessionPlan, ToolCall, Turn, assistant_text, user
from fastgen.generator.scenarios import (
    ConfigEntry,
    Request,
    Scenario,
    Shape,
    default_spec,
    register,
    registered,
    scenario_named,
)
from fastgen.generator.scenarios.common import Chain, duration_ms
from fastgen.generator.spec import Range, ScenarioSpec, Spec, Timing
from fastgen.generator.streams import session_rng
from fastgen.generator.tools import ToolCatalog

TOY = "toy"


@dataclass(frozen=True)
class ToySpec(ScenarioSpec):
    """Two turns: a question about the repository, then a follow-up."""

    sessions: int = 3
    tools: int = 300
    system: int = 120
    repo_map: int = 400
    question: Range = Range(40, 80)
    answer: Range = Range(20, 40)
    concurrency: tuple[int, ...] = (2,)


def _plan(composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int) -> list[SessionPlan]:
    s = spec.scenarios[TOY]
    rng = session_rng(seed, 9, index)
    first = user(
        compose_block(composer, f"Question {index} about the repository:\n", "prose", s.question.draw(rng), rng)
    )
    answer = Output(composer.fill("prose", s.answer.draw(rng), rng))
    follow = user(compose_block(composer, "And the follow-up:\n", "prose", s.question.draw(rng), rng))
    second = Output(composer.fill("prose", s.answer.draw(rng), rng))
    head = (blocks.system, blocks.repo_map, first)
    start = index * 10_000
    end1 = start + duration_ms(spec.timing, blocks.catalog.tokens + sum(m.tokens for m in head), answer.tokens)
    messages = head + (answer.as_history(), follow)
    end2 = end1 + 500 + duration_ms(spec.timing, 1000, second.tokens)
    turns = (
        Turn(f"toy-{index}-t1", 1, head, answer, start, end1),
        Turn(f"toy-{index}-t2", 2, messages, second, end1 + 500, end2),
    )
    return [SessionPlan("toy_pairs", f"toy_pairs-{index:04d}", index, blocks.catalog, turns)]


def _largest(spec: Spec) -> list[Request]:
    s = spec.scenarios[TOY]
    return [Request("toy turn 2", s.tools + s.system + s.repo_map + 2 * s.question.hi + s.answer.hi, s.answer.hi, 5)]


def _configs(spec: Spec) -> list[ConfigEntry]:
    s = spec.scenarios[TOY]
    return [
        ConfigEntry(f"{TOY}/c{level}.yml", "toy_pairs", level, s.sessions, 2, about=f"c{level}: toy pairs")
        for level in s.concurrency
    ]


TOY_SCENARIO = Scenario(
    id=9,
    name=TOY,
    spec_type=ToySpec,
    layouts=("toy_pairs",),
    shape=lambda sc: Shape(2, 2, "chain"),
    plan=_plan,
    largest_requests=_largest,
    configs=_configs,
)


@pytest.fixture(scope="module")
def toy() -> Scenario:
    return register(TOY_SCENARIO)  # registering twice is a no-op


def _small(spec: Spec) -> Spec:
    return spec.scaled(sessions=0.04, budgets=0.05)


def _options(tmp_path: Path, spec: Spec, **kw) -> RunOptions:
    # one worker: this test process has threads (tokenizers, Arrow) that a fork would copy mid-flight
    return RunOptions(
        model="m",
        tokenizer="builtin",
        seed=7,
        spec=spec,
        output_dir=tmp_path / "traces",
        workers=1,
        config_dir=tmp_path / "configs",
        **kw,
    )


def test_a_scenario_defined_in_a_test_gets_files_configs_and_validation(toy, tmp_path, builtin):
    base = _small(default_spec())
    # only scenario 2 of the built-in ones, and the toy: a spec lists what it generates
    spec = Spec({"scenario2": base.scenario2, TOY: ToySpec()}, base.timing, base.max_model_len)

    records = generate(_options(tmp_path, spec), builtin)

    traces = tmp_path / "traces"
    dirs = sorted(p.name for p in traces.iterdir() if p.is_dir() and p.name != "tokenizer")
    assert dirs == ["scenario2_stagger", "scenario2_sync", "toy_pairs"]
    assert len(list((traces / "toy_pairs").glob("session_*.json"))) == 3
    assert len([r for r in records if r.path.startswith("toy_pairs/")]) == 3
    configs = sorted(p.relative_to(tmp_path / "configs").as_posix() for p in (tmp_path / "configs").rglob("*.yml"))
    assert configs == [
        "scenario2/c10_stagger.yml",
        "scenario2/c10_sync.yml",
        "scenario2/c25_stagger.yml",
        "scenario2/c25_sync.yml",
        "scenario2/c50_stagger.yml",
        "scenario2/c50_sync.yml",
        "toy/c2.yml",
    ]
    loaded = read_config(str(tmp_path / "configs" / "toy" / "c2.yml"))
    assert loaded.load.stages[0].num_sessions == 3
    assert (tmp_path / "configs" / "toy" / "c2.yml").read_text().splitlines()[2] == "# c2: toy pairs"
    reports = validate_tree(traces, workers=1)
    assert len(reports) == 3 + 2 * spec.scenario2.sets
    assert [r for r in reports if r.deviations] == []
    assert {r.events for r in reports if "toy_pairs" in r.path} == {2}
    doc = json.loads((traces / "toy_pairs" / "session_0001.json").read_bytes())
    assert [s["attributes"]["fastgen.scenario"] for s in doc["spans"]] == ["toy_pairs", "toy_pairs"]


def test_a_scenario_with_the_name_or_id_of_another_is_refused(toy):
    with pytest.raises(SpecError, match="same id as 'scenario3'"):
        register(dataclasses.replace(TOY_SCENARIO, name="toy2", id=3, layouts=("toy2",)))
    with pytest.raises(SpecError, match="same layout as 'toy'"):
        register(dataclasses.replace(TOY_SCENARIO, name="toy3", id=10))
    assert [s.name for s in registered()] == [
        "scenario1",
        "scenario2",
        "scenario3",
        "agent_loop",
        "chain",
        "fan",
        "chat",
        TOY,
    ]


def test_twelve_branches_give_thirteen_events_in_the_files_the_configs_and_validate(tmp_path, builtin):
    base = _small(default_spec())
    names = tuple(f"idea {{{k}}}" for k in range(12))  # braces of the user's own: written as they are
    spec = Spec({"scenario2": dataclasses.replace(base.scenario2, branches=names)}, base.timing, base.max_model_len)

    generate(_options(tmp_path, spec), builtin)

    doc = json.loads((tmp_path / "traces" / "scenario2_sync" / "session_0000.json").read_bytes())
    assert len(doc["spans"]) == 13
    letters = [
        json.loads(s["attributes"]["gen_ai.input.messages"])[-1]["content"].split(" ")[1] for s in doc["spans"][1:]
    ]
    assert letters == list("ABCDEFGHIJKL")
    assert (
        json.loads(doc["spans"][3]["attributes"]["gen_ai.input.messages"])[-1]["content"]
        == "Candidate C (idea {2}): idea {2}\n"
    )
    config = read_config(str(tmp_path / "configs" / "scenario2" / "c10_sync.yml"))
    assert config.load.worker_max_concurrency == 10 * 13
    reports = validate_tree(tmp_path / "traces", workers=1)
    assert [r.deviations for r in reports if r.deviations] == [] and {r.events for r in reports} == {13}


def test_library_window_check_gives_the_commands_one_line_error(tmp_path, builtin):
    spec = default_spec(max_model_len=20000)

    with pytest.raises(SpecError) as raised:
        generate(_options(tmp_path, spec), builtin)
    command = run_fastgen(
        "--tokenizer",
        "builtin",
        "--quiet",
        "--max-model-len",
        "20000",
        "--output-dir",
        str(tmp_path / "t2"),
        "--config-dir",
        str(tmp_path / "c2"),
    )

    assert command.returncode == 2
    assert command.stderr == f"fastgen: error: {raised.value}\n"
    assert "scenario 1 turn 5" in str(raised.value) and "--max-model-len 20000" in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_the_spec_a_manifest_records_loads_back_equal(toy):
    from fastgen.generator.workload import spec_from_document

    spec = _small(default_spec(max_model_len=65536))
    assert spec_from_document(json.loads(json.dumps(spec.to_dict()))) == spec
    with_toy = Spec({**spec.scenarios, TOY: ToySpec()}, spec.timing, spec.max_model_len)
    assert spec_from_document(json.loads(json.dumps(with_toy.to_dict()))) == with_toy
    assert scenario_named("scenario3").spec(spec).modules == spec.scenario3.modules


# common.Chain: the one loop every chained scenario (1, 3, chain, agent_loop) records its requests with

CATALOG = ToolCatalog((), "[]", 7)


def _text(s: str, tokens: int) -> Text:
    return Text(s, tokens)


def _call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "read_file", {"path": call_id}, json.dumps({"path": call_id}), 11)


def _wire_call(call_id: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "{call_id}"}}'},
    }


def _wires(messages) -> list[dict]:
    return [m.wire for m in messages]  # Message compares by identity: compare what goes on the wire


def test_chain_carries_each_answer_and_its_calls_results_into_the_next_request():
    timing = Timing()
    head = (user(_text("task", 30)),)
    chain = Chain(timing=timing, catalog=CATALOG, prefix="s-0001", messages=head, start_ms=1000)
    calls = Output(calls=(_call("call_a"), _call("call_b")))
    first = chain.send(calls)
    chain.carry([_text("file a", 40), _text("file b", 50)], gap=300)
    chain.add(user(_text("now fix it", 5)))
    second = chain.send(Output(_text("done", 9)))

    assert [t.span_id for t in chain.turns] == ["s-0001-t1", "s-0001-t2"] and [t.turn for t in chain.turns] == [1, 2]
    assert first.messages == head and first.start_ms == 1000
    assert first.end_ms == 1000 + duration_ms(timing, 7 + 30, 22)
    assert _wires(second.messages) == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "tool_calls": [_wire_call("call_a"), _wire_call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "file a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "file b"},
        {"role": "user", "content": "now fix it"},
    ]
    assert second.start_ms == first.end_ms + 300
    assert second.end_ms == second.start_ms + duration_ms(timing, 7 + 30 + 22 + 40 + 50 + 5, 9)
    assert first.after is None and second.after is None  # unstated: the scenario's Shape says the edges


def test_chain_started_with_after_states_each_request_continues_the_last():
    chain = Chain(timing=Timing(), catalog=CATALOG, prefix="p", messages=(), start_ms=0, after=(), turns=[])
    for word in ("one", "two", "three"):
        chain.add(user(_text(word, 1)))
        chain.send(Output(_text(f"re {word}", 2)), role="r", follows="x")
        chain.carry(gap=10)
    assert [t.after for t in chain.turns] == [(), ("p-t1",), ("p-t2",)]
    assert {(t.role, t.follows) for t in chain.turns} == {("r", "x")}


def test_chain_restart_drops_the_history_and_keeps_the_edge_and_the_clock():
    chain = Chain(timing=Timing(), catalog=CATALOG, prefix="p", messages=(user(_text("long", 900)),), start_ms=0)
    chain.after = ()
    compaction = chain.send(Output(_text("summary", 40)))
    summary = assistant_text(_text("summary", 40))
    chain.restart((summary,), gap=70)
    resumed = chain.send(Output(_text("go on", 3)))
    assert resumed.messages == (summary,) and resumed.after == ("p-t1",)
    assert resumed.start_ms == compaction.end_ms + 70 and resumed.turn == 2


def test_chain_carry_before_any_request_is_refused():
    chain = Chain(timing=Timing(), catalog=CATALOG, prefix="p", messages=(), start_ms=0)
    with pytest.raises(ValueError, match="chain p has sent no request"):
        chain.carry(gap=1)
