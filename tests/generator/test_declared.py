"""The declared scenarios (chain, fan): steps from the workload file, every count exact, every graph the declared one
as inference-perf's own builder finds it, and scenarios 1 and 2 written as declared forms."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from _support import ROOT
from conftest import SMALL, run_fastgen, write_sessions
from fastgen.errors import SpecError, WorkloadError
from fastgen.generator.scenarios import chain, default_spec, fan, scenario1, scenario2
from fastgen.generator.scenarios.chain import ChainSpec
from fastgen.generator.scenarios.fan import FanSpec
from fastgen.generator.scenarios.steps import Block, Call, Step
from fastgen.generator.spec import Range, Spec
from fastgen.generator.workload import WORKLOADS_DIR, load_workload, parse_workload, spec_from_document, workload_yaml
from test_dataset import _output_tokens

R = Range
# Every tool, parallel calls, a patch, a loop (repeat), text answers before and after calls
CHAIN = ChainSpec(
    sessions=2,
    system=200,
    tools=900,
    repo_map=800,
    steps=(
        Step(
            add=(Block("prose", R(40, 80), "Task: find why the export drops rows."), Block("code", R(100, 300))),
            calls=(
                Call("read_file", Block("numbered_code", R(100, 300))),
                Call("search_code", Block("search", R(50, 150))),
                Call("list_dir", Block("tree", R(40, 90))),
            ),
        ),
        Step(calls=(Call("read_file", Block("numbered_code", R(80, 200))),), repeat=2),
        Step(text=Block("prose", R(60, 120))),
        Step(
            add=(Block("prose", R(10, 30)),),
            calls=(Call("apply_patch", Block("logline", R(20, 60)), diff=R(40, 100)),),
        ),
        Step(
            calls=(Call("run_tests", Block("logline", R(100, 250))), Call("run_command", Block("logline", R(30, 80))))
        ),
        Step(add=(Block("prose", R(10, 30)),), text=Block("plan", R(40, 90)), repeat=2),
    ),
    concurrency=(2,),
)
FAN = FanSpec(
    sessions=2,
    system=200,
    tools=900,
    repo_map=800,
    root=Step(add=(Block("prose", R(60, 120)), Block("logline", R(300, 600))), text=Block("prose", R(30, 60))),
    branches=R(3, 5),
    branch=Step(add=(Block("prose", R(20, 40), "Candidate fix:"),), text=Block("prose", R(80, 160))),
    stagger_ms=R(1000, 5000),
    concurrency=(2,),
)
# a root that calls tools: each branch carries the calls and their results, and hangs off the root by the ids
FAN_CALLS = dataclasses.replace(
    FAN,
    root=Step(
        add=(Block("prose", R(60, 120)),),
        calls=(Call("read_file", Block("numbered_code", R(100, 200))), Call("search_code", Block("search", R(40, 90)))),
    ),
    stagger_ms=R(0, 0),
)


@pytest.fixture(scope="module")
def chains(builtin, tmp_path_factory):
    return write_sessions(builtin, Spec({"chain": CHAIN}), tmp_path_factory.mktemp("chain"))


@pytest.fixture(scope="module")
def fans(builtin, tmp_path_factory):
    root = tmp_path_factory.mktemp("fan")
    texts = write_sessions(builtin, Spec({"fan": FAN}), root / "text")
    return texts + write_sessions(builtin, Spec({"fan": FAN_CALLS}), root / "calls")


def _messages(span: dict) -> list[dict]:
    return json.loads(span["attributes"]["gen_ai.input.messages"])


def _output(span: dict) -> dict:
    (message,) = json.loads(span["attributes"]["gen_ai.output.messages"])
    return message


def test_every_count_is_exact(chains, fans, builtin, rendered_prompt):
    for _, spans in chains + fans:
        for span in spans:
            a = span["attributes"]
            assert a["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(a)
            assert a["gen_ai.usage.output_tokens"] == _output_tokens(builtin, json.loads(a["gen_ai.output.messages"]))


def test_every_span_of_a_directory_has_the_same_attribute_keys(chains, fans):
    # inference-perf unifies a corpus's attributes with Arrow: a key some spans lack is null in the others
    for sessions in (chains, fans):
        assert len({frozenset(span["attributes"]) for _, spans in sessions for span in spans}) == 1


def test_chain_requests_follow_the_steps_with_their_budgets(chains, builtin):
    requests = chain.requests(CHAIN)
    for _, spans in chains:
        assert len(spans) == len(requests) == 8
        for k, (span, step) in enumerate(zip(spans, requests)):
            messages = _messages(span)
            new = messages[len(messages) - len(step.add) :] if step.add else []
            for message, block in zip(new, step.add):
                assert message["role"] == "user"
                assert block.tokens.lo <= builtin.count(message["content"]) <= block.tokens.hi
            parts = _output(span)["parts"]
            if step.text is not None:
                (part,) = parts
                assert step.text.tokens.lo <= builtin.count(part["content"]) <= step.text.tokens.hi
                continue
            assert [p["name"] for p in parts] == [c.tool for c in step.calls]
            # the next request answers every call by id, after the assistant message that made them, each result
            # within its block's budget
            after = _messages(spans[k + 1])
            start = len(messages)
            assert [c["id"] for c in after[start]["tool_calls"]] == [p["id"] for p in parts]
            results = after[start + 1 : start + 1 + len(parts)]
            assert [m["tool_call_id"] for m in results] == [p["id"] for p in parts]
            for message, call in zip(results, step.calls):
                assert call.result.tokens.lo <= builtin.count(message["content"]) <= call.result.tokens.hi
            if step.calls[0].tool == "read_file":
                assert results[0]["content"].startswith("1\t")  # numbered_code: as read_file returns a file


def test_fan_branches_carry_the_root_and_its_answer_and_start_as_staggered(fans):
    for path, spans in fans:
        root, branches = spans[0], spans[1:]
        assert 3 <= len(branches) <= 5
        carried = len(_messages(root)) + 1 + len(_output(root)["parts"] if "calls" in str(path) else [])
        for branch in branches:
            assert _messages(branch)[: len(_messages(root))] == _messages(root)
            assert len(_messages(branch)) == carried + 1
        starts = {b["start_time"] for b in branches}
        assert (len(starts) == 1) == ("calls" in str(path))  # stagger 0: all at once; 1-5 s: each its own


def test_inference_perf_builds_exactly_the_declared_graphs(chains, fans):
    pytest.importorskip("inference_perf")
    from fastgen.validate import _build_graph, check_file_against

    for path, _ in chains:
        assert check_file_against(path, {"chain": chain.shape(CHAIN)}).deviations == ()
    for path, _ in fans:
        spec = FAN_CALLS if "calls" in str(path) else FAN
        assert check_file_against(path, {"fan": fan.shape(spec)}).deviations == ()
    kinds = set()
    for path, _ in chains + fans:
        graph, _ = _build_graph(json.loads(path.read_bytes()), path)
        kinds |= {k for e in graph["events"].values() for k in e["predecessor_dependency_types"].values()}
    assert kinds == {"tool_call_ids_matched", "full_match"}  # calls by id, text answers by their text


def _without_answer(path: Path, out: Path, span_index: int) -> Path:
    """The file with the answer the span's history carries (the last assistant message) taken out of it."""
    doc = json.loads(path.read_bytes())
    attributes = doc["spans"][span_index]["attributes"]
    messages = json.loads(attributes["gen_ai.input.messages"])
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    attributes["gen_ai.input.messages"] = json.dumps(messages[:last] + messages[last + 1 :])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc))
    return out


def test_a_history_missing_an_answer_deviates(chains, fans, tmp_path):
    pytest.importorskip("inference_perf")
    from fastgen.validate import check_file_against

    text_fan = next(path for path, _ in fans if "text" in str(path))
    broken = _without_answer(text_fan, tmp_path / "fan" / "session_0000.json", 2)
    assert check_file_against(broken, {"fan": fan.shape(FAN)}).deviations != ()
    # the chain's fourth request carries a text answer (step 3 answers with text)
    broken = _without_answer(chains[0][0], tmp_path / "chain" / "session_0000.json", 4)
    assert check_file_against(broken, {"chain": chain.shape(CHAIN)}).deviations != ()


def test_the_shape_and_configs_follow_the_declared_steps():
    assert chain.shape(CHAIN) == chain.Shape(8, 8, "chain", frozenset({0, 1, 2, 4, 5}))
    assert fan.shape(FAN) == fan.Shape(4, 6, "fan", frozenset())
    assert fan.shape(FAN_CALLS).tool_events == frozenset({0})
    spec = Spec({"chain": CHAIN, "fan": FAN})
    entries = chain.config_entries(spec) + fan.config_entries(spec)
    assert [(e.path, e.trace_dir, e.events_per_session) for e in entries] == [
        ("chain/c2.yml", "chain", 8),
        ("fan/c2.yml", "fan", 6),
    ]
    # the window check: the last request of the chain is its largest, a branch is larger than the root
    prompts = [r.prompt_tokens for r in chain.largest_requests(spec)]
    assert prompts == sorted(prompts) and len(prompts) == 8
    root, branch = fan.largest_requests(spec)
    assert branch.prompt_tokens > root.prompt_tokens


def test_the_declared_forms_round_trip_through_the_document_and_scale():
    spec = Spec({"chain": CHAIN, "fan": FAN_CALLS})
    assert spec_from_document(json.loads(json.dumps(spec.to_dict()))) == spec  # the manifest's way
    assert parse_workload(workload_yaml(spec), source="w.yaml") == spec  # `fastgen workload show`'s
    small = spec.scaled(sessions=0.5, budgets=0.5)
    assert small.chain.steps[0].calls[0].result.tokens == R(50, 150)
    assert small.chain.steps[3].calls[0].diff == R(20, 50)
    assert small.chain.steps[1].repeat == 2 and small.fan.branches == FAN.branches  # counts stay
    assert small.fan.root.add[0].tokens == R(30, 60) and small.fan.stagger_ms == R(0, 0)
    shipped = load_workload(WORKLOADS_DIR / "declared.yaml")
    assert list(shipped.scenarios) == ["chain", "fan"]


_STEP = "{add: [{kind: prose, tokens: {lo: 5, hi: 9}}], text: {kind: prose, tokens: {lo: 5, hi: 9}}"


@pytest.mark.parametrize(
    "steps, says",
    [
        (f"[{_STEP}, bogus: 1}}]", r"^w\.yaml: scenarios\.chain\.steps\.0\.bogus: unknown key"),
        (
            f"[{_STEP}, rpeat: 2}}]",
            r"^w\.yaml: scenarios\.chain\.steps\.0\.rpeat: unknown key; did you mean 'repeat'\?$",
        ),
        (
            "[{add: [{kind: prose, tokens: {lo: 50, hi: 9}}], text: {kind: prose, tokens: {lo: 5, hi: 9}}}]",
            r"^w\.yaml: scenarios\.chain\.steps\.0\.add\.0\.tokens: range 50\.\.9 is empty or negative; use 0 <= lo "
            r"<= hi$",
        ),
        (
            f"[{_STEP}, calls: [{{tool: read_file, result: {{kind: code, tokens: {{lo: 1, hi: 2}}}}}}]}}]",
            r"^w\.yaml: scenarios\.chain\.steps\.0: a step answers with `text` or with `calls`.*got both$",
        ),
        (
            "[{add: [{kind: prose, tokens: {lo: 5, hi: 9}}], calls: [{tool: rm, result: {kind: code, tokens: {lo: 1, "
            "hi: 2}}}]}]",
            r"^w\.yaml: scenarios\.chain\.steps\.0\.calls\.0\.tool: input should be 'apply_patch', .*got \"rm\"$",
        ),
        (f"[{_STEP}}}, {{text: {{kind: prose, tokens: {{lo: 5, hi: 9}}}}}}]", r"steps\[1\] follows a text answer"),
    ],
)
def test_a_bad_step_is_one_line_with_its_yaml_path(steps, says):
    with pytest.raises(WorkloadError, match=says) as raised:
        parse_workload(f"format: 1\nscenarios:\n  chain:\n    steps: {steps}\n", source="w.yaml")
    assert "\n" not in str(raised.value)


def test_a_fan_that_cannot_be_one_is_refused():
    with pytest.raises(SpecError, match="branch must answer with text"):
        dataclasses.replace(FAN, branch=FAN_CALLS.root)
    with pytest.raises(SpecError, match="repeat"):
        dataclasses.replace(FAN, root=dataclasses.replace(FAN.root, repeat=2))
    with pytest.raises(SpecError, match="at most 256"):
        dataclasses.replace(FAN, branches=R(2, 300))
    with pytest.raises(SpecError, match="diff is for apply_patch only"):
        Call("read_file", Block("code", R(1, 2)), diff=R(5, 9))


def test_a_chain_that_ends_on_calls_is_refused():
    # the results of the last calls would be drawn and never sent: no request follows
    with pytest.raises(SpecError, match=r"steps\[1\] is the last step and must answer with text"):
        dataclasses.replace(CHAIN, steps=(CHAIN.steps[0], FAN_CALLS.root))


# Scenarios 1 and 2 as declared forms: the same graphs from steps a workload could write


def _mirror_scenario1(s1: scenario1.Scenario1Spec) -> ChainSpec:
    """Scenario 1's six turns as steps: the same messages per turn, of the same kinds and budgets."""
    return ChainSpec(
        sessions=s1.sessions,
        system=s1.system,
        tools=s1.tools,
        repo_map=s1.repo_map,
        steps=(
            Step(
                add=(Block("code", R(s1.file_context, s1.file_context)), Block("prose", s1.bug_report)),
                text=Block("prose", s1.analysis),
            ),
            Step(add=(Block("prose", s1.inspect_request),), text=Block("plan", s1.inspection_plan)),
            Step(
                add=(Block("logline", s1.test_logs),),
                calls=(Call("apply_patch", Block("logline", s1.patch_result), diff=s1.patch),),
            ),
            Step(text=Block("prose", s1.explanation)),
            Step(
                add=(Block("logline", s1.failing_tests),),
                calls=(
                    Call(
                        "apply_patch",
                        Block(
                            "logline",
                            R(s1.patch_result.lo + s1.passing_tests.lo, s1.patch_result.hi + s1.passing_tests.hi),
                        ),
                        diff=s1.patch,
                    ),
                ),
            ),
            Step(text=Block("prose", s1.summary)),
        ),
        session_spacing_ms=s1.session_spacing_ms,
    )


def _mirror_scenario2(s2: scenario2.Scenario2Spec) -> FanSpec:
    """Scenario 2's root and branches: bug report, module and logs adding up to its root_prompt range, sync."""
    fixed = s2.tools + s2.system + s2.repo_map
    rest = R(s2.root_prompt.lo - fixed - s2.bug_report.lo, s2.root_prompt.hi - fixed - s2.bug_report.hi)
    module = R(rest.lo // 3, rest.hi // 3)  # a third of the rest, as scenario 2 sizes its module (below its cap)
    return FanSpec(
        sessions=s2.sets,
        system=s2.system,
        tools=s2.tools,
        repo_map=s2.repo_map,
        root=Step(
            add=(
                Block("prose", s2.bug_report),
                Block("code", module),
                Block("logline", R(rest.lo - module.lo, rest.hi - module.hi)),
            ),
            text=Block("prose", s2.root_output),
        ),
        branches=R(len(s2.branches), len(s2.branches)),
        branch=Step(add=(Block("prose", R(15, 30)),), text=Block("prose", s2.branch_output)),
        stagger_ms=R(0, 0),
        session_spacing_ms=s2.set_spacing_ms,
    )


def _structure(path: Path) -> list[tuple]:
    """Each event as inference-perf's builder makes it, less its bytes: its predecessors and their kinds, its
    segments (type, message count, source) and whether it answers with a tool call."""
    from fastgen.validate import _build_graph

    graph, _ = _build_graph(json.loads(path.read_bytes()), path)
    index = {eid: i for i, eid in enumerate(graph["events"])}
    return [
        (
            sorted((index[p], kind) for p, kind in e["predecessor_dependency_types"].items()),
            [(s["type"], s["message_count"], index.get(s.get("source_event_id"))) for s in e["call"]["input_segments"]],
            bool(e["call"].get("expected_output_is_tool_call")),
        )
        for e in graph["events"].values()
    ]


@pytest.fixture(scope="module")
def benchmark_and_declared(builtin, tmp_path_factory):
    """A session of scenarios 1 and 2 (sync) at a tenth of their budgets, and of their declared forms."""
    base = default_spec().scaled(sessions=0.02, budgets=0.1)
    s1, s2 = base.scenario1, base.scenario2
    root = tmp_path_factory.mktemp("mirror")
    real = write_sessions(builtin, Spec({"scenario1": s1, "scenario2": s2}, base.timing), root / "real")
    declared = write_sessions(
        builtin, Spec({"chain": _mirror_scenario1(s1), "fan": _mirror_scenario2(s2)}), root / "declared"
    )
    by_dir: dict[str, list] = {}
    for path, spans in real + declared:
        by_dir.setdefault(path.parent.name, []).append((path, spans))
    return s1, s2, by_dir


def test_scenario1_declared_as_a_chain_builds_the_same_graph_and_budgets(benchmark_and_declared, builtin):
    pytest.importorskip("inference_perf")
    s1, _, by_dir = benchmark_and_declared
    (real_path, real), (declared_path, declared) = by_dir["scenario1"][0], by_dir["chain"][0]

    assert _structure(declared_path) == _structure(real_path)
    assert len(declared) == scenario1.EVENTS
    answers = [s1.analysis, s1.inspection_plan, None, s1.explanation, None, s1.summary]
    for spans in (real, declared):  # each text answer within the range scenario 1's spec gives it, on both sides
        for span, budget in zip(spans, answers):
            if budget is not None:
                assert budget.lo <= span["attributes"]["gen_ai.usage.output_tokens"] <= budget.hi
    added = {1: s1.bug_report, 2: s1.inspect_request, 3: s1.test_logs, 5: s1.failing_tests}
    for number, budget in added.items():
        assert budget.lo <= builtin.count(_messages(declared[number - 1])[-1]["content"]) <= budget.hi
    for spans in (real, declared):  # the patch's result: its budget, or the tool's summary line where that is longer
        result = _messages(spans[3])[-1]
        line = builtin.count(result["content"].split("\n")[0] + "\n")
        assert result["role"] == "tool" and result["content"].startswith("Patch applied to ")
        assert s1.patch_result.lo <= builtin.count(result["content"]) <= max(s1.patch_result.hi, line)


def test_scenario2_declared_as_a_fan_builds_the_same_graph_and_budgets(benchmark_and_declared, builtin):
    pytest.importorskip("inference_perf")
    _, s2, by_dir = benchmark_and_declared
    (real_path, real), (declared_path, declared) = by_dir["scenario2_sync"][0], by_dir["fan"][0]

    assert _structure(declared_path) == _structure(real_path)
    assert len(declared) == 1 + len(s2.branches)
    for spans in (real, declared):
        root = spans[0]["attributes"]
        content = builtin.count(root["gen_ai.tool.definitions"]) + sum(
            builtin.count(m["content"]) for m in json.loads(root["gen_ai.input.messages"])
        )
        assert s2.root_prompt.lo <= content <= s2.root_prompt.hi
        assert s2.root_output.lo <= root["gen_ai.usage.output_tokens"] <= s2.root_output.hi
        for branch in spans[1:]:
            assert s2.branch_output.lo <= branch["attributes"]["gen_ai.usage.output_tokens"] <= s2.branch_output.hi
    assert s2.bug_report.lo <= builtin.count(_messages(declared[0])[2]["content"]) <= s2.bug_report.hi


def test_fastgen_writes_and_validates_the_shipped_declared_workload(tmp_path):
    result = run_fastgen(
        *SMALL,
        "--workers",
        "1",
        "--workload",
        "declared",
        "--output-dir",
        str(tmp_path / "traces"),
        "--config-dir",
        str(tmp_path / "configs"),
    )
    assert result.returncode == 0, result.stderr
    traces = tmp_path / "traces"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir() and p.name != "tokenizer") == ["chain", "fan"]
    configs = sorted(p.relative_to(tmp_path / "configs").as_posix() for p in (tmp_path / "configs").rglob("*.yml"))
    assert configs == ["chain/c20.yml", "chain/c5.yml", "fan/c10.yml", "fan/c25.yml"]
    validated = run_fastgen("validate", str(traces))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    total = next(line.split() for line in validated.stdout.splitlines() if line.startswith("total"))
    assert total[-1] == "0" and int(total[1]) > 0  # failed, of every file
    manifest = json.loads((traces / "manifest.json").read_bytes())
    recorded = spec_from_document(manifest["workload"])
    assert recorded == load_workload(WORKLOADS_DIR / "declared.yaml").scaled(sessions=0.04, budgets=0.05)


def test_the_example_in_the_docs_is_a_workload():
    text = (ROOT / "docs" / "workload.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = parse_workload("format: 1\n" + example, source="docs/workload.md")
    assert list(spec.scenarios) == ["chain", "fan"] and chain.events(spec.chain) == 4


def test_a_chain_without_a_shared_prefix_opens_each_session_with_its_own_line(builtin, rendered_prompt, tmp_path):
    one_step = (Step(add=(Block("prose", R(40, 80), "Task: say what to change."),), text=Block("prose", R(10, 20))),)
    shared = dataclasses.replace(CHAIN, sessions=4, steps=one_step)
    own = dataclasses.replace(shared, shared_prefix=False)
    firsts = {}
    for name, spec in (("shared", shared), ("own", own)):
        sessions = write_sessions(builtin, Spec({"chain": spec}), tmp_path / name)
        firsts[name] = [_messages(spans[0])[0]["content"] for _, spans in sessions]
        for _, spans in sessions:  # the opening line is counted: every prompt's tokens are still exact
            assert spans[0]["attributes"]["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(spans[0]["attributes"])
    assert len(set(firsts["shared"])) == 1  # one system prompt for every session
    opening = [text.split("\n", 1) for text in firsts["own"]]
    assert all(rest == firsts["shared"][0] for _, rest in opening)  # the same system prompt below its own line
    lines = [line for line, _ in opening]
    assert [line.split(" ", 1)[1] for line in lines] == [f"is the id of session {i}." for i in range(4)]
    assert len({line[:2] for line in lines}) > 1  # the lines differ from their first characters, not only at the end


def test_shared_prefix_takes_a_yaml_boolean_only():
    with pytest.raises(WorkloadError) as raised:
        parse_workload('format: 1\nscenarios:\n  chain:\n    shared_prefix: "no"\n', source="w.yaml")
    assert str(raised.value).startswith("w.yaml: scenarios.chain.shared_prefix: ")
    assert (
        parse_workload("format: 1\nscenarios:\n  chain:\n    shared_prefix: false\n", source="w").chain.shared_prefix
        is False
    )
