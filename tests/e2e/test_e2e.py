"""e2e.suites.run on one config per scenario, through the same code path as `make e2e`; then the checks shown to bite.

The slice replays scenario1/c10, scenario2/c10_stagger and scenario3/c100_noisy with the real inference-perf
against the fake server (about 45 s on 2 cores). The tampering tests reuse that run's records and reports: each
breaks one thing the replay could get wrong and expects check_run to say so.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from e2e.checks.replayed import Outcome, check_run, join_problems
from e2e.checks.reports import read_reports
from e2e.suites.run import run_e2e
from fastgen.formats.rows import trace_dir_of

pytestmark = pytest.mark.slow


SLICE = ["scenario1/c10", "scenario2/c10_stagger", "scenario3/c100_noisy"]


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e")
    outcomes = run_e2e(workdir, only=SLICE, echo=lambda line: None)
    return workdir, {o.config: o for o in outcomes}


def rerun_checks(workdir: Path, name: str, tamper=None, *, exit_code: int = 0) -> list[str]:
    """check_run on a config's stored records and reports, after `tamper(records, reports)`."""
    path = workdir / "configs" / f"{name}.yml"
    config = yaml.safe_load(path.read_text())
    records = [json.loads(line) for line in (workdir / "records" / f"{name}.jsonl").read_text().splitlines()]
    reports = copy.deepcopy(read_reports(config, path.parent))
    if tamper:
        tamper(records, reports)
    trace_dir = Path(trace_dir_of(config["data"]["otel_trace_replay"])).name
    outcome = Outcome(config=name, trace_dir=trace_dir, seconds=0.0)
    return check_run(
        outcome, exit_code=exit_code, records=records, reports=reports, stage=config["load"]["stages"][0]
    ).failures


def with_messages(records: list[dict], count: int) -> list[dict]:
    return [r for r in records if len(r["body"]["messages"]) == count]


@pytest.mark.parametrize("name", SLICE)
def test_run_e2e_slice_config_passes_every_check(slice_run, name):
    _, outcomes = slice_run
    outcome = outcomes[name]
    assert outcome.ok, outcome.failures
    assert outcome.requests > outcome.sessions > 0
    assert 0 < outcome.server_hit < 100 and outcome.report_hit == pytest.approx(outcome.server_hit)


def test_run_e2e_slice_counts_every_span_of_the_small_dataset(slice_run):
    _, outcomes = slice_run
    # --scale 0.04: 4 scenario-1 sessions of 6 turns, 2 scenario-2 sets of root + 5 branches, 20 scenario-3 sessions.
    assert [(outcomes[n].requests, outcomes[n].sessions) for n in SLICE[:2]] == [(24, 4), (12, 2)]
    assert outcomes["scenario3/c100_noisy"].sessions == 20


def test_check_run_untouched_records_pass(slice_run):
    workdir, _ = slice_run
    assert rerun_checks(workdir, "scenario1/c10") == []


def test_check_run_nonzero_exit_code_fails(slice_run):
    workdir, _ = slice_run
    assert rerun_checks(workdir, "scenario1/c10", exit_code=1) == ["inference-perf exited with 1"]


def test_check_run_failed_session_in_the_report_fails(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):
        reports.sessions[0].update(success=False, error="request_failed")

    assert any("success=False error=request_failed" in f for f in rerun_checks(workdir, "scenario1/c10", tamper))


def test_check_run_missing_request_fails_the_count(slice_run):
    workdir, _ = slice_run
    failures = rerun_checks(workdir, "scenario1/c10", lambda records, reports: records.pop())
    assert failures[0] == "the server saw 23 requests, the sessions that ran have 24 events"
    assert any("was never sent" in f for f in failures)


def test_check_run_wrong_live_output_fails_the_extension(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):  # as if the next turn had carried another answer than the server gave
        with_messages(records, 4)[0]["response"]["message"]["content"] += " extra"

    assert any("message 4 is not span 0's live output" in f for f in rerun_checks(workdir, "scenario1/c10", tamper))


def test_check_run_branch_not_carrying_the_roots_live_output_fails(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):  # the assistant message is outside the match key: only the extension check sees it
        branch = max(records, key=lambda r: len(r["body"]["messages"]))
        next(m for m in branch["body"]["messages"] if m["role"] == "assistant")["content"] = "recorded text"

    failures = rerun_checks(workdir, "scenario2/c10_stagger", tamper)
    assert any(f.endswith("is not span 0's live output") for f in failures)


def test_check_run_tool_result_without_its_call_fails_the_pairing(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):
        tool = next(m for r in records for m in r["body"]["messages"] if m["role"] == "tool")
        tool["tool_call_id"] = "call_recorded"

    failures = rerun_checks(workdir, "scenario1/c10", tamper)
    assert any("answers tool call 'call_recorded', which no earlier message made" in f for f in failures)


def test_check_run_unnamed_tool_choice_on_a_tool_turn_fails(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):
        next(r for r in records if isinstance(r["body"].get("tool_choice"), dict))["body"]["tool_choice"] = "required"

    assert any("tool_choice 'required', expected" in f for f in rerun_checks(workdir, "scenario1/c10", tamper))


def test_check_run_report_cache_numbers_not_the_servers_fail(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):
        records[-1]["response"]["usage"]["prompt_tokens_details"]["cached_tokens"] += 16

    failures = rerun_checks(workdir, "scenario1/c10", tamper)
    assert any("the server answered" in f for f in failures) and any(f.startswith("cache hit:") for f in failures)


def test_check_run_sessions_arriving_together_fail_the_session_rate(slice_run):
    workdir, _ = slice_run

    def tamper(records, reports):
        for r in records:
            r["t"] = 1000.0

    failures = rerun_checks(workdir, "scenario3/c100_noisy", tamper)
    assert any("median 0.000 s apart, session_rate says 0.500 s" in f for f in failures)


def test_compare_reads_reports_of_configs_run_by_hand(slice_run):
    """No bakeoff: inference-perf's own reports, where the configs send them (reports/<label>/...), are runs too."""
    from fastgen.results import read_runs
    from fastgen.results.stats import hit_percent

    workdir, outcomes = slice_run
    runs, problems = read_runs(workdir / "reports" / "vllm")
    assert sorted(runs) == sorted(SLICE)
    # no run.json or metrics.jsonl there: nothing is missing that a hand run would have
    assert problems == []
    for name, run in runs.items():
        stage = yaml.safe_load((workdir / "configs" / f"{name}.yml").read_text())["load"]["stages"][0]
        assert run.status == "reports" and run.concurrency == stage["concurrent_sessions"]
        assert len(run.requests) == outcomes[name].requests
        assert hit_percent(run.requests) == pytest.approx(outcomes[name].server_hit)
        assert {r.kind for r in run.requests} <= {"text", "tool_call", "root", "branch"}


def test_join_problems_name_an_early_join_a_missing_report_and_a_spawn_sent_with_content():
    call = {"id": "call_1", "type": "function", "function": {"name": "delegate_task", "arguments": "{}"}}
    spawn = {"role": "assistant", "content": None, "tool_calls": [call]}
    messages = [
        {"role": "user", "content": "fix it"},
        spawn,
        {"role": "tool", "tool_call_id": "call_1", "content": "A"},
    ]
    children = [("child 1", "A", 5.0), ("child 2", "B", 9.0), ("child 3", "C", None)]
    assert join_problems("join", messages, 10.0, children[:1]) == []
    assert join_problems("join", messages, 8.0, children) == [
        "join went out before child 2's answer was out, whose report it carries",
        "join: no tool result holds child 2's report",
        "join went out before child 3's answer was out, whose report it carries",
        "join: no tool result holds child 3's report",
    ]
    messages[1] = {**spawn, "content": "A"}  # the trace's hidden reports, sent
    assert join_problems("join", messages, 10.0, children[:1]) == [
        "join sent a spawning message with content (the reports kept for the graph builder)"
    ]
