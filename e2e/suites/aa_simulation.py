"""The decision rule's error rate and power, measured: whole reports (every section, every B/A, the summary) built by
fastgen.results from synthetic runs whose truth is known, hundreds of seeds in minutes.

    python -m e2e.suites.aa_simulation [--seeds 200] [--repeats 1 2 3] [--gaps 0.05 0.1 0.2 0.3 0.5] [--sessions 20]
        [--calibration]

A synthetic run replays the sessions of two configs, shaped as the e2e dataset's: a scenario-1 config (`sessions`
sessions of six turns, turns 3 and 5 recorded tool calls) and a scenario-3 one (`sessions` sessions of 2-6 turns,
arriving over 10 s). Both sides replay the same sessions (the same prompts, the same cached tokens but for a race on
each session's first turn, which finds the shared prefix cached in 70 % of runs), and each request's TTFT is its
uncached tokens at 40 us each, times a run effect (lognormal, sigma RUN_SIGMA: the machine that run met) and the
request's own noise (lognormal, sigma REQUEST_SIGMA), plus an exponential jitter of 5 ms. Output tokens per second
follow the run effect. An A/A pair draws both sides from that one model; an A/B multiplies B's TTFTs by 1 + gap.

Printed, per repeat count: for A/A, the share of seeds whose report claims any difference (the rule's family-wise
false-positive rate; the summary's headline figures alone, too), and the share of single B/A intervals that exclude 1
before margins and correction (their calibration: about 5 % when the intervals are right); for each gap, the share of
seeds whose summary claims scenario3's TTFT p50 or p95, B higher. --calibration instead measures, for 2 to 20
sessions and two runs a side, how often one TTFT p50 and one hit-ratio interval exclude 1 in A/A (with the rule's
floor of inference.MIN_SESSIONS lifted).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Optional

import numpy as np

from fastgen.results import inference
from fastgen.results.compare import build_sections
from fastgen.results.report import Pair, Side
from fastgen.results.runs import ConfigRun, Repeat, RequestRecord, SessionRecord
from fastgen.results.stats import hit_ratio, percentile_ms

__all__ = ["claims", "main", "synthetic_pair"]

RUN_SIGMA = 0.05  # a run's effect on every latency in it
REQUEST_SIGMA = 0.3
DECODE_SIGMA = 0.1  # a request's own noise in time per output token
PREFILL_S_PER_TOKEN = 40e-6
JITTER_S = 0.005
SHARED_PREFIX = 1800  # tokens every session's first prompt shares with the others
FIRST_TURN_HIT = 0.7  # how often a first turn finds the shared prefix cached (who prefilled first is a race)
CONFIGS = (("scenario1/c10", "scenario1", 6), ("scenario3/c100_noisy", "scenario3_noisy", 0))


def _sessions(rng: np.random.Generator, count: int, turns: int) -> list[list[int]]:
    """Each session's prompt tokens turn by turn (the dataset: the same on both sides): a first prompt of 2-3 K
    tokens, then 300-900 new tokens a turn; `turns` each, or 2-6 where 0."""
    found = []
    for _ in range(count):
        n = turns or int(rng.integers(2, 7))
        first = int(rng.integers(2000, 3000))
        found.append(list(np.cumsum([first, *rng.integers(300, 900, n - 1)])))
    return found


def _run(
    name: str,
    trace_dir: str,
    dataset: list[list[int]],
    rng: np.random.Generator,
    *,
    repeat: int,
    gap: float,
    run_sigma: float,
) -> Repeat:
    effect = math.exp(rng.normal(0.0, run_sigma))
    requests, sessions = [], []
    for s, prompts in enumerate(dataset):
        start = s * 0.5
        shared = SHARED_PREFIX if s and rng.random() < FIRST_TURN_HIT else 0
        clock = start
        for t, prompt in enumerate(prompts, 1):
            cached = shared if t == 1 else int(prompts[t - 2]) // 16 * 16
            ttft = (prompt - cached) * PREFILL_S_PER_TOKEN * effect * math.exp(rng.normal(0.0, REQUEST_SIGMA))
            ttft = (ttft + rng.exponential(JITTER_S)) * (1.0 + gap)
            kind = "tool_call" if trace_dir == "scenario1" and t in (3, 5) else "text"
            tpot = 0.01 * effect * math.exp(rng.normal(0.0, DECODE_SIGMA))
            latency = ttft + 64 * tpot
            requests.append(
                RequestRecord(
                    session=f"session-{s}",
                    trace_dir=trace_dir,
                    turn=t,
                    kind=kind,
                    start=clock,
                    end=clock + latency,
                    prompt_tokens=int(prompt),
                    cached_tokens=cached,
                    output_tokens=64,
                    ttft=ttft,
                    latency=latency,
                    ntpot=latency / 64,
                    tpot=tpot,
                    failed=False,
                    itl=tpot,
                    repeat=repeat,
                    config=name,
                    answered="text",
                )
            )
            clock += latency + 0.2
        sessions.append(SessionRecord(f"session-{s}", True, start, clock, repeat))
    identity = {"outputs": "recorded", "server": {"engine": "vllm", "kv_capacity_tokens": 1_000_000}}
    return Repeat(repeat, Path("."), "completed", identity=identity, requests=requests, sessions=sessions)


def synthetic_pair(
    seed: int, *, repeats: int, gap: float = 0.0, sessions: int = 20, run_sigma: float = RUN_SIGMA
) -> Pair:
    """Two sides that replay one synthetic dataset `repeats` times each; B's TTFTs x (1 + gap)."""
    data_rng = np.random.default_rng(10_000 + seed)  # the dataset: shared by both sides
    datasets = {name: _sessions(data_rng, sessions, turns) for name, _, turns in CONFIGS}
    sides = []
    for index, side_gap in enumerate((0.0, gap)):
        rng = np.random.default_rng([seed, index])
        runs = {}
        for name, trace_dir, _ in CONFIGS:
            run = ConfigRun(name, concurrency=10 if name.startswith("scenario1") else 100)
            run.repeats = [
                _run(name, trace_dir, datasets[name], rng, repeat=k, gap=side_gap, run_sigma=run_sigma)
                for k in range(1, repeats + 1)
            ]
            runs[name] = run
        sides.append(Side("AB"[index], runs))
    return Pair(sides[0], sides[1])


def claims(pair: Pair) -> dict:
    """What one report decides: its tests, the claimed ones, the headline claims, and intervals excluding 1."""
    sections = build_sections(pair)
    summary = next(s for s in sections if s.id == "summary").findings
    found = pair.tests.found
    tested = [found[key][2] for key in pair.tests.tested()]
    return {
        "tested": len(tested),
        "claimed": len(pair.tests.claimed or ()),
        "headline": [line for line in summary if line.startswith(("scenario1/", "scenario3/"))],
        "excluding_one": sum(r.low is not None and r.high is not None and not r.low <= 1 <= r.high for r in tested),
    }


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({100.0 * count / total:.1f} %)" if total else "-"


def measure(
    seeds: int, repeats: list[int], gaps: list[float], sessions: int, *, run_sigma: float, gap_seeds: int
) -> None:
    for k in repeats:
        began = time.monotonic()
        any_claim = headline = excluding = tested = 0
        for seed in range(seeds):
            found = claims(synthetic_pair(seed, repeats=k, sessions=sessions, run_sigma=run_sigma))
            any_claim += found["claimed"] > 0
            headline += bool(found["headline"])
            excluding += found["excluding_one"]
            tested += found["tested"]
        print(
            f"A/A, {k} run(s) a side, {sessions} sessions a config, run effect sigma {run_sigma:g}: reports claiming "
            f"any difference "
            f"{_share(any_claim, seeds)}, a headline one {_share(headline, seeds)}; single 95 % intervals excluding 1 "
            f"{_share(excluding, tested)} ({tested // max(1, seeds)} tests a report); {time.monotonic() - began:.0f} s",
            flush=True,
        )
        for gap in gaps:
            detected = 0
            for seed in range(gap_seeds):
                pair = synthetic_pair(seed, repeats=k, gap=gap, sessions=sessions, run_sigma=run_sigma)
                detected += any(
                    line.startswith("scenario3/c100_noisy: TTFT p") and float(line.split("B/A ")[1].split(" ")[0]) > 1
                    for line in claims(pair)["headline"]
                )
            print(
                f"  A/B, TTFT x {1 + gap:.2f} on B: scenario3's TTFT gap claimed in {_share(detected, gap_seeds)}",
                flush=True,
            )


def calibration(seeds: int, counts: list[int]) -> None:
    """How often one interval excludes 1 in A/A, by sessions (two runs a side), with the rule's floor lifted."""
    floor = inference.MIN_SESSIONS
    inference.MIN_SESSIONS = 2
    try:
        for sessions in counts:
            outside = {"ttft p50": 0, "hit %": 0}
            tried = {"ttft p50": 0, "hit %": 0}
            for seed in range(seeds):
                pair = synthetic_pair(seed, repeats=2, sessions=sessions)
                groups = [[r.requests for r in side.runs["scenario3/c100_noisy"].repeats] for side in pair.sides]
                for label, measure_ in (("ttft p50", percentile_ms("ttft", 50)), ("hit %", hit_ratio())):
                    ratio = inference.compare(groups[0], groups[1], measure_)[2]
                    if ratio.low is not None and ratio.high is not None:
                        tried[label] += 1
                        outside[label] += not ratio.low <= 1 <= ratio.high
            print(
                f"{sessions:>3} sessions, 2 runs a side: 95 % intervals excluding 1: "
                + ", ".join(f"{label} {_share(outside[label], tried[label])}" for label in outside),
                flush=True,
            )
    finally:
        inference.MIN_SESSIONS = floor


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.suites.aa_simulation", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--gaps", type=float, nargs="*", default=[0.05, 0.1, 0.2, 0.3, 0.5])
    p.add_argument("--sessions", type=int, default=20, help="sessions of each config")
    p.add_argument("--run-sigma", type=float, default=RUN_SIGMA, help="sigma of a run's lognormal effect on latencies")
    p.add_argument("--gap-seeds", type=int, default=100, help="seeds of each A/B gap")
    p.add_argument("--calibration", action="store_true", help="intervals by session count (2-20), A/A, two runs")
    args = p.parse_args(argv)
    if args.calibration:
        calibration(args.seeds, [2, 3, 4, 6, 8, 12, 20])
    else:
        measure(args.seeds, args.repeats, args.gaps, args.sessions, run_sigma=args.run_sigma, gap_seeds=args.gap_seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
