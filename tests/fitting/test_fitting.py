"""A workload fitted to traces (fastgen/fitting/fit.py) and checked by generating it (fitted.py), and `fastgen
workload fit`: the round trip from --workload agent, a Mooncake file of fastgen's own export, no text in the
written YAML, and each bad input one line with nothing written."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml

from conftest import run_fastgen
from fastgen.generator.workload import parse_workload, workload_yaml
from fastgen.traffic import PUBLISHED, read_traffic
from fastgen.fitting.fit import _int_range, _range, _slowest_of, _within_the_request_limit, fit_workload, refined
from fastgen.fitting.fitted import checked_spec, fit_and_measure, generated_requests
from fastgen.traffic.stats import within

MARKER = "zq-marker-7f3a9c1e"
# the statistics the agent workload expresses (steps_p99 equals the median for --workload agent's fixed turns; tool
# p90 over 20 sessions' few hundred gaps moves by more than its 25 %)
ROUND_TRIP = ("input_mean", "input_p50", "appended_mean", "cached_share", "output_mean", "output_p50", "steps_p50",
              "calls_mean", "tool_p50", "subagent_share", "cross_share")  # fmt: skip


@pytest.fixture(scope="module")
def agent_traces(tmp_path_factory) -> Path:
    """--workload agent's 20 sessions at a tenth of its budgets (the trace folder: traces and tokenizer)."""
    root = tmp_path_factory.mktemp("agent")
    result = run_fastgen("--workload", "agent", "--budget-scale", "0.1", "--tokenizer", "builtin", "-q", "--workers",
                         "2", "--output-dir", str(root / "traces"), "--config-dir", str(root / "configs"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return root / "traces"


def test_fit_of_the_agent_workload_gives_its_statistics_back(agent_traces):
    fitted = fit_and_measure(read_traffic([agent_traces]), max_model_len=131072, sessions=40)
    stats = {s.key: s for s in PUBLISHED}
    missed = [
        (key, fitted.reference[key], fitted.measured[key])
        for key in ROUND_TRIP
        if not within(stats[key], fitted.measured[key], fitted.reference[key])
    ]
    assert not missed
    agent = fitted.spec.agent_loop
    assert (agent.turns.lo, agent.turns.hi) == (12, 12) and (agent.subagents.lo, agent.subagents.hi) == (2, 3)
    assert agent.sessions == 20 and fitted.spec.max_model_len == 131072
    assert agent.tasks.hi == 1 and not agent.turn_strata and agent.subagent_percent == 100  # none of the field's
    assert [line.split(":")[0] for line in fitted.unexpressed] == ["output tokens per step"]


CHAT_WORKLOAD = """format: 1
scenarios:
  chat:
    sessions: 200
    turn_strata: [{percent: 60, turns: {lo: 1, hi: 1}}, {percent: 30, turns: {lo: 2, hi: 4}},
                  {percent: 10, turns: {lo: 5, hi: 12}}]
"""
# what a chat workload carries: no tool calls, so no tool latency
CHAT_ROUND_TRIP = ("input_mean", "input_p50", "appended_mean", "cached_share", "output_mean", "output_p50",
                   "steps_p50", "steps_p99", "calls_mean", "human_p50", "human_p90", "subagent_share",
                   "cross_share")  # fmt: skip


def test_fit_of_a_chat_workload_chooses_chat_and_gives_its_statistics_back(tmp_path):
    """Conversations without tools, most one request long and a tail of long ones, fit as chat (the agent loop would
    add a tool step to each) and come back within tolerance on every statistic they carry."""
    workload = tmp_path / "chat.yaml"
    workload.write_text(CHAT_WORKLOAD)
    result = run_fastgen("--workload", str(workload), "--tokenizer", "builtin", "-q", "--workers", "2",
                         "--output-dir", str(tmp_path / "traces"), "--config-dir", str(tmp_path / "configs"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    fitted = fit_and_measure(read_traffic([tmp_path / "traces"]), max_model_len=131072, sessions=200)
    stats = {s.key: s for s in PUBLISHED}
    missed = [
        (key, fitted.reference[key], fitted.measured[key])
        for key in CHAT_ROUND_TRIP
        if not within(stats[key], fitted.measured[key], fitted.reference[key])
    ]
    assert not missed
    assert list(fitted.spec.scenarios) == ["chat"] and fitted.reference["calls_mean"] == 0
    chat = fitted.spec.scenarios["chat"]
    assert chat.sessions == 200 and chat.tools == 0 and len(chat.turn_strata) == 4
    assert chat.turn_strata[0].turns.hi == 1 and chat.turn_strata[-1].turns.hi >= 10  # one-request sessions, the tail
    assert [line.split(":")[0] for line in fitted.unexpressed] == ["input tokens per request, median"]


@pytest.fixture(scope="module")
def field_traces(tmp_path_factory) -> Path:
    """--workload field's 20 sessions at a tenth of its budgets: several tasks a session, a tail of long sessions,
    sub-agents in some sessions."""
    root = tmp_path_factory.mktemp("field")
    result = run_fastgen("--workload", "field", "--scale", "0.2", "--budget-scale", "0.1", "--tokenizer", "builtin",
                         "-q", "--output-dir", str(root / "traces"), "--config-dir", str(root / "configs"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return root / "traces"


def _steps(requests) -> list[int]:
    return list(Counter(r.session for r in requests if not r.subagent).values())


@pytest.fixture(scope="module")
def fitted_field(field_traces):
    return fit_and_measure(read_traffic([field_traces]), max_model_len=262144, sessions=40)


def test_fit_of_the_field_workload_gives_its_sessions_shape_back(field_traces, fitted_field):
    stats = {s.key: s for s in PUBLISHED}
    for key in ("subagent_share", "human_p50", "human_p90", "steps_p50", "steps_p99"):
        assert within(stats[key], fitted_field.measured[key], fitted_field.reference[key]), (
            key, fitted_field.reference[key], fitted_field.measured[key])  # fmt: skip
    # steps p90 (no statistic of its own): within steps_p50's tolerance
    p90 = [np.percentile(_steps(r), 90, method="hazen") for r in
           (read_traffic([field_traces]), generated_requests(fitted_field.spec, sessions=40))]  # fmt: skip
    assert p90[1] == pytest.approx(p90[0], rel=stats["steps_p50"].tolerance), p90
    agent = fitted_field.spec.agent_loop
    assert (agent.tasks.lo, agent.tasks.hi) in ((3, 5), (3, 6)) and agent.even_waits
    assert 40 <= agent.subagent_percent <= 50 and len(agent.turn_strata) == 4
    assert agent.turn_strata[-1].turns.hi > 3 * agent.turn_strata[0].turns.hi  # the tail
    assert [line.split(":")[0] for line in fitted_field.unexpressed] == ["output tokens per step"]


def test_a_tail_beyond_the_request_limit_is_cut_and_said(fitted_field):
    document = fitted_field.spec.to_dict()
    agent = document["scenarios"]["agent_loop"]
    agent["turn_strata"][-1]["turns"] = {"lo": 300, "hi": 400}
    cut, most = _within_the_request_limit(document)
    assert most is not None and 10 < most < 256 // agent["tasks"]["hi"]
    assert cut["scenarios"]["agent_loop"]["turn_strata"][-1]["turns"] == {"lo": most, "hi": most}
    assert _within_the_request_limit(cut) == (cut, None)


def test_cli_fit_writes_a_workload_that_loads_and_prints_the_table(agent_traces, tmp_path):
    out, stats = tmp_path / "fitted.yaml", tmp_path / "fit.json"
    result = run_fastgen(
        "workload", "fit", str(agent_traces), "--out", str(out), "--check-sessions", "10", "--json", str(stats)
    )
    assert result.returncode == 0, result.stderr
    assert "| statistic | traces | fitted | tolerance | within |" in result.stdout
    assert "not expressed: output tokens per step" in result.stdout
    spec = parse_workload(out.read_text(), source=str(out))
    assert list(spec.scenarios) == ["agent_loop"]
    assert json.loads(stats.read_text())["traces"]["sessions"] == 20
    # the fitted workload generates as any workload file does
    again = run_fastgen("--workload", str(out), "--tokenizer", "builtin", "--scale", "0.1", "-q",
                        "--output-dir", str(tmp_path / "t"), "--config-dir", str(tmp_path / "c"))  # fmt: skip
    assert again.returncode == 0, again.stderr


@pytest.mark.slow  # the export's replay, then fit: 11 s
def test_cli_fit_reads_a_mooncake_export(agent_traces, tmp_path):
    lines = tmp_path / "agent.jsonl"
    export = run_fastgen("export", "mooncake", str(agent_traces / "agent_loop"), "--out", str(lines))
    assert export.returncode == 0, export.stderr
    out = tmp_path / "fitted.yaml"
    result = run_fastgen("workload", "fit", str(lines), "--out", str(out), "--check-sessions", "20")
    assert result.returncode == 0, result.stderr
    assert "not expressed: tool latency, human wait: Mooncake lines have no end times" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("| steps per session (main agent), med"))
    assert row.endswith("| yes |"), row
    # Mooncake lines say no tool call: the fit speaks chat, whose every request is a step of the conversation
    assert list(yaml.safe_load(out.read_text())["scenarios"]) == ["chat"]
    assert "fitted as: chat (chat where no request calls a tool; else --family)" in result.stdout
    # the user who knows the trace is an agent's says so
    agent = run_fastgen("workload", "fit", str(lines), "--out", str(out), "--check-sessions", "20", "--family", "agent")
    assert agent.returncode == 0, agent.stderr
    assert list(yaml.safe_load(out.read_text())["scenarios"]) == ["agent_loop"]
    assert "fitted as: agent_loop (--family)" in agent.stdout


def _chat(n: int, session: str, messages: list, output: dict, tokens: tuple, start_s: float, model: str) -> dict:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": session,
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps([output]),
        "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": f"read_{MARKER}"}]),
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
    }
    start = int(start_s * 1e9)
    return {"name": f"chat {n}", "start_time_unix_nano": start, "end_time_unix_nano": start + 2 * 10**9,
            "attributes": attributes}  # fmt: skip


def _marked_traces(folder: Path, *, model_of=lambda s: "m") -> None:
    """Four sessions of a tool loop (two steps of one call each, then a text answer), every message, tool name,
    argument and answer holding MARKER."""
    system = {"role": "system", "content": f"You are {MARKER}. " * 50}
    for s in range(4):
        name = f"s{s}"
        messages = [system, {"role": "user", "content": f"Task {s} {MARKER}: " + "fix it " * (20 + 10 * s)}]
        spans, t = [], 100.0 * s
        for step in range(3):
            call = {"type": "tool_call", "id": f"c{step}", "name": f"read_{MARKER}", "arguments": {"path": MARKER}}
            text = {"type": "text", "content": f"Done {MARKER}."}
            output = {"role": "assistant", "parts": [call if step < 2 else text]}
            spans.append(_chat(step, name, messages, output, (800 + 400 * step + 20 * s, 30), t, model_of(s)))
            wire = {"id": f"c{step}", "type": "function",
                    "function": {"name": f"read_{MARKER}", "arguments": json.dumps({"path": MARKER})}}  # fmt: skip
            messages = messages + [
                {"role": "assistant", "tool_calls": [wire]},
                {"role": "tool", "tool_call_id": f"c{step}", "content": f"{MARKER} line\n" * 40},
            ]
            t += 2 + 1.5 + step
        (folder / f"{name}.json").write_bytes(orjson.dumps({"spans": spans}))


def test_cli_fit_writes_no_text_of_the_traces(tmp_path):
    _marked_traces(tmp_path)
    out = tmp_path / "out" / "fitted.yaml"
    out.parent.mkdir()
    result = run_fastgen("workload", "fit", str(tmp_path), "--out", str(out), "--check-sessions", "4")
    assert result.returncode == 0, result.stderr
    assert out.is_file() and MARKER not in out.read_text()
    assert MARKER not in result.stdout + result.stderr
    agent = yaml.safe_load(out.read_text())["scenarios"]["agent_loop"]
    assert agent["turns"] == {"lo": 2, "hi": 2} and agent["parallel_calls"] == {"lo": 1, "hi": 1}


def test_a_fit_without_sub_agents_says_none_delegate(tmp_path):
    """Traces whose sessions spawn no sub-agent fit subagents {lo: 0, hi: 0} beside subagent_percent 0: the default's
    100 there once read as "every session delegates" in the written YAML."""
    _marked_traces(tmp_path)
    written = workload_yaml(checked_spec(fit_workload(read_traffic([tmp_path])).document))
    agent = yaml.safe_load(written)["scenarios"]["agent_loop"]
    assert (agent["subagents"], agent["subagent_percent"]) == ({"lo": 0, "hi": 0}, 0)
    assert parse_workload(written, source="the fitted workload").agent_loop.subagent_percent == 0


def _no_usage(folder: Path) -> list[str]:
    _marked_traces(folder)
    doc = orjson.loads((folder / "s1.json").read_bytes())
    del doc["spans"][1]["attributes"]["gen_ai.usage.output_tokens"]
    (folder / "s1.json").write_bytes(orjson.dumps(doc))
    return [str(folder)]


def _mixed(folder: Path) -> list[str]:
    _marked_traces(folder, model_of=lambda s: "m" if s else "other")
    return [str(folder)]


def _no_timestamps(folder: Path) -> list[str]:
    path = folder / "t.jsonl"
    path.write_text(json.dumps({"input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}) + "\n")
    return [str(path)]


def _small_window(folder: Path) -> list[str]:
    _marked_traces(folder)
    return [str(folder), "--max-model-len", "1024"]


@pytest.mark.parametrize(
    "make, code, message",
    [
        (_no_usage, 1, "has no gen_ai.usage.input_tokens/output_tokens; the traces must record token counts"),
        (_mixed, 1, "the traces mix models (m, other); measure one model's traffic at a time"),
        (_no_timestamps, 1, "has no 'timestamp'; the lines must carry timestamps (ms)"),
        (_small_window, 2, "more than --max-model-len 1024; pass --max-model-len 8192"),
    ],
)
def test_cli_fit_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, make, code, message):
    traces = tmp_path / "traces"
    traces.mkdir()
    args = make(traces)
    out = tmp_path / "fitted.yaml"
    result = run_fastgen("workload", "fit", *args, "--out", str(out), "--check-sessions", "4")
    assert result.returncode == code, result.stdout + result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists() and result.stdout == ""


def test_cli_fit_needs_out_and_takes_no_workload(tmp_path):
    result = run_fastgen("workload", "fit", "traces")
    assert result.returncode == 2 and "needs trace folders or files and --out FILE" in result.stderr
    out = tmp_path / "fitted.yaml"
    result = run_fastgen("workload", "fit", "traces", "--out", str(out), "--workload", "agent")
    assert result.returncode == 2 and "takes its workload from the traces; drop --workload" in result.stderr
    assert not out.exists()


def test_slowest_of_recovers_the_log_normal_of_one_tool():
    rng = np.random.default_rng(0)
    ks = rng.integers(1, 5, 20_000)
    sigma = math.log(6000 / 800) / 1.2816
    gaps = [max(800 * math.exp(sigma * rng.standard_normal()) for _ in range(k)) for k in ks]
    fitted = _slowest_of(gaps, list(ks))
    assert fitted["median"] == pytest.approx(800, rel=0.05) and fitted["p90"] == pytest.approx(6000, rel=0.08)


def test_ranges_are_uniforms_of_the_values_spread_and_mean():
    values = np.random.default_rng(1).integers(300, 2501, 5000)
    fitted = _range(values)
    assert fitted["lo"] == pytest.approx(300, abs=40) and fitted["hi"] == pytest.approx(2500, abs=40)
    assert _int_range([1, 2, 3, 4] * 50, least=1) == {"lo": 1, "hi": 4}
    assert _range([], least=1) == {"lo": 1, "hi": 1}


def test_refined_scales_the_prompt_budgets_by_the_input_it_missed():
    document = {"scenarios": {"agent_loop": {"system": 1000, "task": {"lo": 100, "hi": 300}, "compact_trigger": 50_000,
                "summary": {"lo": 1000, "hi": 2000}, "final_output": {"lo": 10, "hi": 20}}}}  # fmt: skip
    agent = refined(document, {"input_mean": 900.0}, {"input_mean": 1000.0})["scenarios"]["agent_loop"]
    assert agent["system"] == 900 and agent["task"] == {"lo": 90, "hi": 270} and agent["compact_trigger"] == 45_000
    assert agent["final_output"] == {"lo": 10, "hi": 20}  # answers are measured as they are: not scaled
    assert refined(document, {"input_mean": None}, {"input_mean": 1000.0}) is document
