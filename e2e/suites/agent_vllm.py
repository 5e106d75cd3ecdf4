"""The example agent workload (`fastgen --workload agent`, docs/agents.md) replayed once by the real inference-perf
against a real vLLM on this machine's CPU (e2e/real/vllm.py: the tiny random model of e2e.suites.bakeoff_vllm, its
window, 1 GiB of KV cache).

    python -m e2e.suites.agent_vllm [--venv DIR] [--workdir .e2e-vllm/agent] [--outputs recorded|live]

DATASET scales the workload down to 2 sessions of 15 requests (12 tool-call answers of 1-4 parallel calls, two
compactions, a final answer) with prompts of 1.4-5.4 K tokens, its sub-agents left out (`subagents: {lo: 0, hi: 0}`):
recorded outputs send a join's spawning message as recorded, with the reports it keeps for inference-perf's graph
builder (fastgen refuses the two together); `make e2e` replays the sub-agents against the fake server, whose live
answers stand in that slot, and `--outputs live` replays them here. CONFIG (agent_loop/c5) runs once, as generated but
pointed at the server, with the recorded outputs (`--outputs recorded --tool-call-max-tokens recorded`, as
e2e.suites.bakeoff_vllm) and with the request bodies in inference-perf's per-request records. The checks:

- inference-perf exited 0, the stage completed, and every session succeeded with all its events completed;
- vLLM served as many requests as the sessions have spans (the growth of its `vllm:request_success_total`), and
  inference-perf recorded that many, none failed;
- every `role: tool` message of every request answers a tool call made earlier in the same request (the bodies
  inference-perf sent);
- every request's `prompt_tokens`, as vLLM counted it, is the span's recorded `input_tokens`: vLLM renders the k
  calls and k results after a parallel-call answer, and the restart from the summary after a compaction, as fastgen
  counted them;
- every sub-agent join (live outputs only) started, in inference-perf's own records, after each child it carries had
  ended, sent each child's report in a `role: tool` message and its spawning message without content (on
  2026-12-03: 2 joins of 2 sessions, 51 requests, 0 problems, 542 s).

Why recorded outputs: a live replay's tool results cannot all answer a call with this model, and it takes too long.
`--outputs live` runs it (inference-perf's defaults: the server's answers fed forward, the results' tool_call_ids
rewritten, a forced call's max_tokens at max(4 x recorded, 4096)), with the same checks but the last two; it prints
the pairing instead of failing on it. inference-perf pairs each recorded result with an unused live call of the same
tool name and leaves its recorded id where there is none. On a named turn the random model makes the forced call
(8 of 8, each result paired), but on a `tool_choice: "required"` turn it calls tools picked at random from the
catalog, 1 to 8 of them (fewer than recorded on 4 of 16 turns, more on 10), 4 times until max_tokens (4,096
tokens; 67 of the 74 live calls had arguments that are no JSON object). Measured on 2 cores (2026-12-03): of the
54 results following an answer, 32 kept a recorded id that no call in their request made, and 52 of the 74 live
calls had no result; vLLM answered all 30 requests with HTTP 200 (it checks no tool_call_id), both sessions
completed, in 585 s of replay (338 s in an earlier run). With the recorded max_tokens instead (13-74 tokens, 78 s)
the named calls were cut off before they closed and came back as text (6 of 6), leaving their results unanswered too.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Optional

import yaml

from fastgen.bakeoff.plan import run_config_text
from fastgen.bakeoff.sampler import parse_metrics
from fastgen.formats.config_document import ConfigDocument
from fastgen.formats.run_folder import PER_REQUEST_FILE
from fastgen.generator.workload import shipped_workload

from .bakeoff_vllm import MAX_MODEL_LEN, _recorded_inputs
from ..checks.replayed import _check_sessions, _check_tool_pairing, join_problems
from .replay import run_inference_perf
from ..checks.reports import clear_reports, read_reports
from .run import Dataset, generate
from ..checks.traces import load_session
from ..real.vllm import VllmServer, install
from ..real.engine_process import tiny_model
from .runner import add_venv, run_suite, suite_parser

__all__ = ["main", "run_agent_replay"]

CONFIG = "agent_loop/c5"
# 20 sessions x 0.1; budgets x 0.1: a 4,000-token compact_trigger, so each session compacts twice (at 0.02 every
# other request is a compaction), and the largest prompt (5.4 K; 7.7 K with live outputs) plus a forced call's
# 4,096-token floor (live outputs) stays inside MAX_MODEL_LEN
DATASET = Dataset(workload="agent", scale=0.1, budget_scale=0.1)
RECORDED_WORKLOAD = "agent-without-subagents.yaml"  # written into the workdir: the agent workload, no sub-agents
MODES = {"recorded": ("recorded", "recorded"), "live": ("live", "floor")}  # (outputs, tool-call max_tokens)
REPLAY_TIMEOUT_S = 900  # recorded outputs replay in about a minute; live ones took 338 and 585 s


def _served(server: VllmServer) -> float:
    """Requests vLLM has finished (vllm:request_success_total, summed over its finish reasons)."""
    return parse_metrics(server.metrics(), "vllm:").get("vllm:request_success_total", 0.0)


def _write_run_config(workdir: Path, url: str, outputs: str) -> tuple[Path, dict]:
    """CONFIG as generated, pointed at `url` and replayed in `outputs` mode, its per-request records holding the
    request bodies, in workdir/run (generation keeps its own folders)."""
    source = workdir / "configs" / f"{CONFIG}.yml"
    text = run_config_text(
        source.read_text(),
        config_dir=source.parent,
        url=url,
        engine="vllm",
        report_dir=workdir / "reports" / CONFIG,
        outputs=MODES[outputs][0],
        tool_call_max_tokens=MODES[outputs][1],
    )
    config = yaml.safe_load(text)
    config["report"]["request_lifecycle"]["per_request_fields"]["request"] = True
    path = workdir / "run" / f"{CONFIG}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, config


def _turn_summary(entries: list[dict]) -> list[str]:
    """What vLLM answered to each tool_choice (required: the recorded answer made several calls; a named tool: one),
    and the prompts around each compaction, from inference-perf's per-request records."""
    answers: dict[str, list[int]] = {}
    for e in entries:
        choice = e["body"].get("tool_choice")
        calls = len((e["info"].get("output_message") or {}).get("tool_calls") or [])
        answers.setdefault(choice if isinstance(choice, str) else "named" if choice else "unset", []).append(calls)
    lines = []
    for choice, counts in sorted(answers.items()):
        made = [c for c in counts if c]
        spread = f" ({min(made)}-{max(made)} calls each)" if made else ""
        lines.append(
            f"tool_choice {choice}: {len(counts)} requests, {len(made)} answered with tool calls{spread}, "
            f"{len(counts) - len(made)} with text"
        )
    parent = [e for e in entries if e["labels"].get("turn_kind") != "subagent"]  # children number their own turns
    by_turn = {(e["labels"].get("session"), int(e["labels"].get("turn", 0))): e for e in parent}
    for (session, turn), e in sorted(by_turn.items()):
        after = by_turn.get((session, turn + 1))
        if e["labels"].get("turn_kind") == "compaction" and after is not None:
            cached = (after["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
            lines.append(
                f"{session} turn {turn} compacts: a {e['usage'].get('prompt_tokens')}-token prompt, then "
                f"{after['usage'].get('prompt_tokens')} tokens from the summary, {cached} of them cached"
            )
    return lines


def _last_answer_pairing(entries: list[dict]) -> tuple[int, int, int, int]:
    """(role:tool messages after each request's last assistant message, those answering no call made earlier in the
    request, that assistant message's tool calls, those that no role:tool message answers), over the requests: each
    answer and its results counted once, in the request that follows the answer."""
    results = dangling = calls = alone = 0
    for e in entries:
        messages = e["body"].get("messages") or []
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
        if last is None:
            continue
        made = {c.get("id") for m in messages[: last + 1] for c in m.get("tool_calls") or []}
        answered = {m.get("tool_call_id") for m in messages[last + 1 :] if m.get("role") == "tool"}
        new = [m for m in messages[last + 1 :] if m.get("role") == "tool"]
        results += len(new)
        dangling += sum(m.get("tool_call_id") not in made for m in new)
        own = [c.get("id") for c in messages[last].get("tool_calls") or []]
        calls += len(own)
        alone += sum(i not in answered for i in own)
    return results, dangling, calls, alone


def _entries(folder: Path) -> list[dict]:
    """inference-perf's per-request records: labels, the body it sent, its record (info), the server's usage."""
    found = []
    for record in json.loads((folder / PER_REQUEST_FILE).read_text()):
        info: dict[str, Any] = record.get("info") or {}
        found.append(
            {
                "labels": info.get("labels") or {},
                "body": json.loads(record["request"]) if isinstance(record.get("request"), str) else {},
                "info": info,
                "usage": (info.get("response_metrics") or {}).get("server_usage") or {},
                "error": record.get("error"),
                "span": str(info.get("graph_event_id") or "").rsplit(":", 1)[-1].split("_", 2)[-1],
                "start": record.get("start_time"),
                "end": record.get("end_time"),
            }
        )
    return found


def _check_joins(entries: list[dict], spans: list) -> tuple[int, list[str]]:
    """(sub-agent joins, what is wrong with them): join_problems on inference-perf's own records, a join's start
    against the end of each child whose report it carries."""
    by_span = {e["span"]: e for e in entries}
    by_id = {s.span_id: s for s in spans}
    joins, wrong = 0, []
    for span in spans:
        if span.after is None or len(span.after) < 2 or span.span_id not in by_span:
            continue
        joins += 1
        join = by_span[span.span_id]
        children = [by_id[i] for i in span.after[1:]]
        wrong += join_problems(
            span.span_id,
            join["body"].get("messages") or [],
            join["start"],
            [(c.span_id, c.output.get("content") or "", (by_span.get(c.span_id) or {}).get("end")) for c in children],
        )
    return joins, wrong


def _dataset(workdir: Path, outputs: str) -> Dataset:
    """DATASET, for recorded outputs its workload without sub-agents (see the module docstring)."""
    if outputs != "recorded":
        return DATASET
    document = yaml.safe_load(shipped_workload(DATASET.workload or "agent").read_text())
    document["scenarios"]["agent_loop"]["subagents"] = {"lo": 0, "hi": 0}
    path = workdir / RECORDED_WORKLOAD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return dataclasses.replace(DATASET, workload=str(path))


def run_agent_replay(workdir: Path, venv: Path, outputs: str = "recorded") -> list[str]:
    workdir = Path(workdir).resolve()
    python = install(venv, quiet=True)
    model = tiny_model(python, venv, MAX_MODEL_LEN)
    generate(workdir, "http://127.0.0.1:9", _dataset(workdir, outputs))
    server = VllmServer(
        python,
        model,
        max_model_len=MAX_MODEL_LEN,
        kv_cache_gib=1,
        log=workdir / "logs" / "vllm.log",
    )
    with server:
        print(f"vLLM serving after {server.started_s:.0f} s")
        path, config = _write_run_config(workdir, server.base_url, outputs)
        clear_reports(config, path.parent)
        before, begun = _served(server), time.monotonic()
        code = run_inference_perf(path, log=workdir / "logs" / f"{CONFIG}.log", timeout_s=REPLAY_TIMEOUT_S)
        served = _served(server) - before
        seconds = time.monotonic() - begun
    failures = [] if code == 0 else [f"inference-perf exited {code}; its log: {workdir / 'logs' / CONFIG}.log"]
    try:
        reports = read_reports(config, path.parent)
    except (OSError, ValueError) as exc:
        return failures + [f"cannot read the session reports: {exc}"]
    failures += _check_sessions(reports, ConfigDocument(config).stage)
    sessions = [load_session(Path(s["file_path"])) for s in reports.sessions]
    spans = sum(len(session) for session in sessions)
    entries = _entries(reports.folder)
    failed = [e for e in entries if e["error"]]
    print(
        f"{CONFIG} ({outputs} outputs): {len(reports.sessions)} sessions, {spans} spans; vLLM served {served:.0f} "
        f"requests, inference-perf recorded {len(entries)} ({len(failed)} failed); {seconds:.0f} s"
    )
    if served != spans or len(entries) != spans:
        failures.append(f"vLLM served {served:.0f} requests, inference-perf recorded {len(entries)}, {spans} spans")
    failures += [f"a request failed: {e['labels']} {e['error']}" for e in failed[:5]]
    for line in _turn_summary(entries):
        print(f"  {line}")
    unanswered = [(e, line) for e in entries for line in _check_tool_pairing({"body": e["body"]})]
    results, dangling, calls, alone = _last_answer_pairing(entries)
    print(
        f"  the results of each request's last answer: {results}, {dangling} answering no call made earlier in "
        f"the request; that answer's calls: {calls}, {alone} answered by no result; over the whole histories "
        f"sent, {len(unanswered)} role:tool messages answer no call, in {len({id(e) for e, _ in unanswered})} of "
        f"{len(entries)} requests"
    )
    joins, wrong_joins = _check_joins(entries, [span for session in sessions for span in session])
    print(f"  sub-agent joins: {joins}, {len(wrong_joins)} problems")
    failures += wrong_joins[:5]
    if outputs == "recorded":
        failures += _recorded_checks(workdir, entries, unanswered)
    return failures


def _recorded_checks(workdir: Path, entries: list[dict], unanswered: list[tuple[dict, str]]) -> list[str]:
    """With recorded outputs, every role:tool message answers a call and vLLM counts each prompt as its span
    records it: the first failures of each."""
    failures = [f"{e['labels'].get('session')} turn {e['labels'].get('turn')}: {line}" for e, line in unanswered[:5]]
    recorded = _recorded_inputs(workdir / "traces")
    wrong = [
        f"{e['labels'].get('session')} turn {e['labels'].get('turn')}: vLLM counted "
        f"{e['usage'].get('prompt_tokens')} prompt tokens, the span records {want}"
        for e in entries
        if e["usage"].get("prompt_tokens")
        != (want := recorded.get((e["labels"].get("session"), int(e["labels"].get("turn", 0)))))
    ]
    print(f"  prompt tokens: {len(entries) - len(wrong)} of {len(entries)} counted by vLLM as recorded")
    return failures + wrong[:5]


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("agent_vllm", __doc__, ".e2e-vllm/agent")
    add_venv(p, "vllm")
    p.add_argument(
        "--outputs",
        choices=sorted(MODES),
        default="recorded",
        help="recorded (the check), or live: the server's answers fed forward (prints what the random model does)",
    )
    args = p.parse_args(argv)
    venv = args.venv.resolve()
    return run_suite("vLLM agent workload e2e", args.workdir, run_agent_replay, args.workdir, venv, args.outputs)


if __name__ == "__main__":
    raise SystemExit(main())
