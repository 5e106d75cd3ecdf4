"""The generated dataset: structure, exact counts, budgets, layouts, sharing, window fit, determinism."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict

import pytest

from fastgen.generator.dataset import DatasetBuilder, Task, check_fits, directories
from fastgen.errors import SpecError
from fastgen.generator.scenarios import default_spec
from fastgen.generator.spec import TOOL_CALL_MIN_MAX_TOKENS, Range
from conftest import load_spans, trace_files


def _message_tokens(tok, message: dict) -> int:
    if "tool_calls" in message:
        return sum(
            tok.count(c["function"]["name"]) + tok.count(c["function"]["arguments"]) for c in message["tool_calls"]
        )
    return tok.count(message["content"])


def _output_tokens(tok, output: list[dict]) -> int:
    (message,) = output
    total = 0
    for part in message["parts"]:
        if part["type"] == "text":
            total += tok.count(part["content"])
        else:
            total += tok.count(part["name"]) + tok.count(
                json.dumps(part["arguments"], separators=(",", ":"), ensure_ascii=False)
            )
    return total


def test_dataset_has_every_directory_with_the_scaled_session_counts(small_dataset):
    spec = default_spec().scaled(sessions=0.04, budgets=0.05)
    counts = defaultdict(int)
    for path in trace_files(small_dataset / "traces"):
        counts[path.parent.name] += 1
    assert dict(counts) == {
        "scenario1": spec.scenario1.sessions,
        "scenario2_sync": spec.scenario2.sets,
        "scenario2_stagger": spec.scenario2.sets,
        "scenario3_stable": spec.scenario3.sessions,
        "scenario3_noisy": spec.scenario3.sessions,
    }
    assert set(counts) == set(directories(spec))


def test_every_span_of_every_file_has_the_same_keys_and_json_types(small_dataset):
    shapes = set()
    for path in trace_files(small_dataset / "traces"):
        doc = json.loads(path.read_bytes())
        assert isinstance(doc["session_id"], str) and set(doc) == {"session_id", "scenario", "spans"}
        for span in doc["spans"]:
            assert isinstance(span["span_id"], str) and span["start_time"].endswith("Z")
            shapes.add(tuple(sorted((k, type(v).__name__) for k, v in span["attributes"].items())))
            shapes.add(tuple(sorted((k, type(v).__name__) for k, v in span.items() if k != "attributes")))
    assert len(shapes) == 2, shapes


def content_tokens(tok, attributes: dict) -> int:
    """--count content: the tool catalog's JSON plus every message's content, each tokenized alone."""
    return tok.count(attributes["gen_ai.tool.definitions"]) + sum(
        _message_tokens(tok, m) for m in json.loads(attributes["gen_ai.input.messages"])
    )


def test_recorded_token_counts_are_the_servers_rendered_prompt_exactly(small_dataset, builtin, rendered_prompt):
    # the default with a tokenizer that has a chat template: --count template
    for path in trace_files(small_dataset / "traces"):
        for span in load_spans(path):
            a = span["attributes"]
            assert a["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(a), (path, span["span_id"])
            assert a["gen_ai.usage.output_tokens"] == _output_tokens(builtin, json.loads(a["gen_ai.output.messages"]))


def test_content_counts_reencode_exactly_and_are_below_the_template_counts(builtin):
    spec = default_spec().scaled(sessions=0.02, budgets=0.05)
    content = DatasetBuilder(builtin, spec, seed=3, model="m", count="content")
    template = DatasetBuilder(builtin, spec, seed=3, model="m", count="template")
    assert (content.count.name, template.count.name) == ("content", "template")
    for task in (Task(1, 0), Task(2, 0), Task(3, 1)):
        for (rel, a), (_, b) in zip(content.files_for(task), template.files_for(task), strict=True):
            spans_a, spans_b = json.loads(a)["spans"], json.loads(b)["spans"]
            for x, y in zip(spans_a, spans_b, strict=True):
                counted = x["attributes"]["gen_ai.usage.input_tokens"]
                assert counted == content_tokens(builtin, x["attributes"]), (rel, x["span_id"])
                # the same prompt: only the count differs, by the template's role markers and tools preamble
                assert 0 < y["attributes"]["gen_ai.usage.input_tokens"] - counted < 0.2 * counted


def test_tool_call_turns_reappear_with_their_ids_and_a_tool_result(small_dataset):
    for path in trace_files(small_dataset / "traces"):
        spans = load_spans(path)
        for span, nxt in zip(spans, spans[1:]):
            out = json.loads(span["attributes"]["gen_ai.output.messages"])[0]["parts"]
            if out[0]["type"] != "tool_call":
                continue
            messages = json.loads(nxt["attributes"]["gen_ai.input.messages"])
            assert messages[-2]["tool_calls"][0]["id"] == out[0]["id"]
            assert messages[-1] == {"role": "tool", "tool_call_id": out[0]["id"], "content": messages[-1]["content"]}


@pytest.fixture(scope="module")
def full_size(builtin):
    """One session index of every scenario at the design's full budgets, counted by content (what budgets are in)."""
    builder = DatasetBuilder(builtin, default_spec(), seed=42, model="m", count="content")
    return {
        rel: json.loads(data)
        for task in (Task(1, 0), Task(2, 0), Task(2, 49), Task(3, 0), Task(3, 7))
        for rel, data in builder.files_for(task)
    }


def _inputs(doc) -> list[int]:
    return [s["attributes"]["gen_ai.usage.input_tokens"] for s in doc["spans"]]


def test_full_size_scenario1_budgets(full_size, builtin):
    doc = full_size["scenario1/session_0000.json"]
    first = json.loads(doc["spans"][0]["attributes"]["gen_ai.input.messages"])
    sizes = [builtin.count(m["content"]) for m in first]
    assert sizes[:3] == [2000, 40000, 15000] and 900 <= sizes[3] <= 1100
    assert builtin.count(doc["spans"][0]["attributes"]["gen_ai.tool.definitions"]) <= 8000
    outputs = [s["attributes"]["gen_ai.usage.output_tokens"] for s in doc["spans"]]
    assert (
        800 <= outputs[0] <= 1200
        and 500 <= outputs[1] <= 800
        and 500 <= outputs[3] <= 1000
        and 500 <= outputs[5] <= 1000
    )
    assert _inputs(doc) == sorted(_inputs(doc))


def test_full_size_scenario2_roots_span_the_range_and_layouts_share_content(full_size):
    lo, hi = (_inputs(full_size[f"scenario2_sync/session_{i:04d}.json"])[0] for i in (0, 49))
    assert lo == 55000 and hi == 95000
    sync, stagger = full_size["scenario2_sync/session_0000.json"], full_size["scenario2_stagger/session_0000.json"]
    for a, b in zip(sync["spans"], stagger["spans"]):
        for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.usage.input_tokens"):
            assert a["attributes"][key] == b["attributes"][key]
    assert [s["start_time"] for s in sync["spans"]] != [s["start_time"] for s in stagger["spans"]]
    branch_outputs = [s["attributes"]["gen_ai.usage.output_tokens"] for s in sync["spans"][1:]]
    assert len(branch_outputs) == 5 and all(1000 <= n <= 2000 for n in branch_outputs)


def test_full_size_scenario3_layouts_have_the_same_messages_in_another_order(full_size, builtin):
    stable, noisy = full_size["scenario3_stable/session_0000.json"], full_size["scenario3_noisy/session_0000.json"]
    for a, b in zip(stable["spans"], noisy["spans"]):
        ma, mb = (json.loads(s["attributes"]["gen_ai.input.messages"]) for s in (a, b))
        assert ma != mb and sorted(map(json.dumps, ma)) == sorted(map(json.dumps, mb))
        assert (
            a["start_time"] == b["start_time"]
            and a["attributes"]["gen_ai.usage.input_tokens"] == b["attributes"]["gen_ai.usage.input_tokens"]
        )
    head = json.loads(stable["spans"][0]["attributes"]["gen_ai.input.messages"])
    prefix = builtin.count(stable["spans"][0]["attributes"]["gen_ai.tool.definitions"]) + sum(
        builtin.count(m["content"]) for m in head[:4]
    )
    assert 89000 <= prefix <= 90000
    assert 4000 <= builtin.count(head[4]["content"]) <= 20000


def _messages(doc, span: int = -1, key: str = "gen_ai.input.messages") -> list[dict]:
    return json.loads(doc["spans"][span]["attributes"][key])


def test_full_size_prompts_fence_every_file_they_show_and_close_it_before_what_follows(full_size):
    """Every shown file: a line with its path, ```python, the file, ```: the next header or file starts after the close
    (a file used to run into the next `### path` line, and scenario 3's last workspace file into "Your open files:")."""
    from e2e.checks.realism import file_sections

    def files(text: str) -> list[tuple[str, str]]:
        shown = file_sections(text)
        assert text.count("```python\n") == len(shown)
        for path, code in shown:  # the close comes right after the file's own text, and only then what follows
            block = f"{path}\n```python\n{code}```\n"
            assert block in text and "```" not in code
        return shown

    s1 = _messages(full_size["scenario1/session_0000.json"], 0)
    context = files(s1[2]["content"])
    assert len(context) >= 4 and context[-1][0].startswith("tests/")
    assert s1[2]["content"].endswith("```\n")
    root = _messages(full_size["scenario2_sync/session_0000.json"], 0)
    assert [len(files(m["content"])) for m in root if m["role"] == "user"] == [0, 0, 1, 0]
    for name in ("scenario3_stable/session_0000.json", "scenario3_stable/session_0007.json"):
        workspace = _messages(full_size[name], 0)[4]["content"]
        assert len(files(workspace)) >= 3
        assert "```\nYour open files:\n" in workspace and workspace.endswith("```\n")


def test_full_size_sessions_say_one_test_environment_and_plan_about_their_own_files(full_size):
    """A session's pytest logs all name one Python, pytest and plugins (they used to differ log to log); scenario 1's
    inspection plan names the module and test file the context shows (its pooled steps used to name random ones)."""
    from e2e.checks.realism import _PATH, file_sections

    doc = full_size["scenario1/session_0000.json"]
    texts = [m.get("content") or "" for m in _messages(doc)]
    platforms = [line for t in texts for line in t.splitlines() if line.startswith(("platform linux", "plugins: "))]
    assert len([p for p in platforms if p.startswith("platform")]) == 3 and len(set(platforms)) <= 2
    shown = [path for path, _ in file_sections(texts[2])]
    target, test_path = shown[0], shown[-1]  # the module the bug is in comes first, its tests last
    plan = _messages(doc, 1, "gen_ai.output.messages")[0]["parts"][0]["content"]
    named = _PATH.findall(plan)
    assert set(named) <= set(shown) and named.count(target) >= 3 and named.count(test_path) >= 3
    assert len(re.findall(r"^\d+\. ", plan, re.M)) >= 8


def test_scenario3_sessions_on_one_module_share_20_to_40_percent_of_their_workspace(builtin):
    spec = default_spec().scaled(sessions=0.2, budgets=0.25)  # 100 sessions on 25 modules
    builder = DatasetBuilder(builtin, spec, seed=5, model="m")
    by_module = defaultdict(list)
    for i in range(40):
        doc = json.loads(dict(builder.files_for(Task(3, i)))[f"scenario3_stable/session_{i:04d}.json"])
        workspace = json.loads(doc["spans"][0]["attributes"]["gen_ai.input.messages"])[4]["content"]
        by_module[workspace.splitlines()[0]].append(workspace)
    pairs = [(a, b) for group in by_module.values() for a, b in zip(group, group[1:])]
    assert pairs, "no two sessions drew the same module"
    for a, b in pairs:
        common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        shared_tokens = builtin.count(a[:common])
        for ws in (a, b):
            assert 0.2 <= shared_tokens / builtin.count(ws) <= 0.41


def _last_inputs(builder, spec) -> list[int]:
    return [
        json.loads(dict(builder.files_for(Task(3, i)))[f"scenario3_stable/session_{i:04d}.json"])["spans"][-1][
            "attributes"
        ]["gen_ai.usage.input_tokens"]
        for i in range(spec.scenario3.sessions)
    ]


def test_every_request_fits_the_window_with_inference_perfs_max_tokens(builtin):
    """A tight window forces tool results to shrink; the prompt the server renders plus max_tokens still fits (the
    template counts are that prompt's tokens)."""
    # Tool results of up to 2,000 tokens that may shrink to 10: the window check counts them at their minimum.
    small = default_spec(max_model_len=12000).scaled(sessions=0.04, budgets=0.06)
    spec = small.with_scenarios({"scenario3": dataclasses.replace(small.scenario3, tool_output=Range(10, 2000))})
    check_fits(spec)
    builder = DatasetBuilder(builtin, spec, seed=1, model="m")
    assert builder.count.name == "template"
    for i in range(spec.scenario3.sessions):
        doc = json.loads(dict(builder.files_for(Task(3, i)))[f"scenario3_stable/session_{i:04d}.json"])
        for span in doc["spans"]:
            a = span["attributes"]
            max_tokens = a["gen_ai.usage.output_tokens"]
            if a["gen_ai.response.finish_reasons"] == ["tool_calls"]:
                max_tokens = max(4 * max_tokens, TOOL_CALL_MIN_MAX_TOKENS)
            assert a["gen_ai.usage.input_tokens"] + max_tokens <= 12000
    roomy = dataclasses.replace(spec, max_model_len=10**6)
    tight_inputs = _last_inputs(builder, spec)
    roomy_inputs = _last_inputs(DatasetBuilder(builtin, roomy, seed=1, model="m"), roomy)
    assert any(t < r for t, r in zip(tight_inputs, roomy_inputs)), "the window never forced a tool result to shrink"


def test_check_fits_refuses_a_window_too_small_for_the_spec():
    with pytest.raises(SpecError, match="--max-model-len"):
        check_fits(default_spec(max_model_len=100000))
    check_fits(default_spec())


def test_scenario_prefixes_are_their_own(full_size):
    """No scenario's prompt prefix is a prefix of another's: system prompts and tool catalogs differ."""
    firsts = {name.split("/")[0].split("_")[0]: doc["spans"][0]["attributes"] for name, doc in full_size.items()}
    systems = {k: json.loads(a["gen_ai.input.messages"])[0]["content"] for k, a in firsts.items()}
    catalogs = {k: a["gen_ai.tool.definitions"] for k, a in firsts.items()}
    assert len(set(systems.values())) == len(set(catalogs.values())) == 3
    for a in systems:
        for b in systems:
            if a != b:
                assert systems[a][:40] != systems[b][:40] and catalogs[a][:300] != catalogs[b][:300]


def test_same_seed_same_bytes_other_seed_same_structure(builtin):
    spec = default_spec().scaled(sessions=0.02, budgets=0.03)
    a = DatasetBuilder(builtin, spec, seed=42, model="m").files_for(Task(1, 1))
    b = DatasetBuilder(builtin, spec, seed=42, model="m").files_for(Task(1, 1))
    c = DatasetBuilder(builtin, spec, seed=43, model="m").files_for(Task(1, 1))
    assert a == b
    assert a[0][1] != c[0][1]
    assert [len(s["attributes"]) for s in json.loads(a[0][1])["spans"]] == [
        len(s["attributes"]) for s in json.loads(c[0][1])["spans"]
    ]


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # the test process's own
def test_prepare_in_worker_processes_gives_the_same_bytes_as_building_lazily(builtin):
    # prepare() hands its pieces (pools, catalog stages with their RNG state) to forked processes and back; the
    # bytes must equal those of a builder that never prepared and built everything on first use, in this process.
    from fastgen.generator.workers import build_pieces

    spec = default_spec().scaled(sessions=0.02, budgets=0.03)
    prepared = DatasetBuilder(builtin, spec, seed=5, model="m")
    prepared.prepare(build_pieces(prepared, 2))
    lazy = DatasetBuilder(builtin, spec, seed=5, model="m")
    for task in (Task(1, 0), Task(2, 0), Task(3, 1)):
        assert prepared.files_for(task) == lazy.files_for(task), task


def test_prepare_pieces_are_every_pool_and_catalog_once():
    from fastgen.generator.content.kinds import KINDS
    from fastgen.generator.dataset import pieces

    assert sorted(pieces(default_spec()), key=repr) == sorted(
        [("pool", k) for k in KINDS] + [("catalog", s) for s in (1, 2, 3)], key=repr
    )
