"""The A/A check: one fake engine with random latency jitter, run by `fastgen bakeoff` under two labels, then
`fastgen compare` of the two after one, two and three repeats: the report claims no difference. And the A/B beside
it: a second engine whose misses cost ten times as much (PREFILL_US_PER_TOKEN x SLOW): the report claims the TTFT
gap, B higher, with one, two and three repeats.

    python -m e2e.suites.bakeoff_aa [--workdir .e2e-aa] [--seed N] [--configs PATTERN ...]

The engines imitate vLLM with an unbounded cache (fake_engine.py), each prefill charged its uncached tokens and a
random wait (JITTER_MS on average, exponential, from --seed), one prefill at a time. Rounds go first, second, slow
at --repeat 1, then 2, then 3 (the bakeoff resumes: each round runs one more repeat of each label), so a slow spell
of the machine falls on all three alike. After each round:

- first against second (the same engine under two labels): no B/A of the report is a difference (every one `~` or
  too few to tell), and the summary says so;
- first against slow: with one run a side, the summary says the times are too few to tell (a run's host moves all of
  its times together: one run a side cannot tell the engine from it) and claims no time; with two and three, it
  claims TTFT p50 or p95 of scenario3/c100_noisy higher on B.

Every compare is given --no-analysis (no ceilings needed). The false-positive rate over many seeds and the smallest gap
found at three repeats come from e2e/suites/aa_simulation.py (the rule over synthetic runs); this runs the real chain.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Optional

from .bakeoff import PREFILL_US_PER_TOKEN, FakeEngineProcess
from .run import Dataset, generate
from .runner import bakeoff, compare, exit_problem, run_suite, suite_parser

__all__ = ["main", "run_aa"]

CONFIGS = ("scenario3/c100_noisy",)  # the e2e dataset's one config with enough sessions to test (20)
GAP_CONFIG = "scenario3/c100_noisy"
JITTER_MS = 5.0
SLOW = 10.0  # B's misses cost this many times A's
REPEATS = (1, 2, 3)
LABELS = ("first", "second", "slow")


def _bakeoff(url: str, label: str, workdir: Path, *, repeats: int, configs: tuple[str, ...]) -> Optional[str]:
    result = bakeoff(url, label, workdir, "--repeat", str(repeats), "--scrape-interval", "1", "--configs", *configs)
    if result.returncode != 0:
        return f"fastgen bakeoff --label {label} --repeat {repeats} exited {result.returncode}: {result.stderr[-600:]}"
    return None


def _compare(workdir: Path, a: str, b: str, out: str) -> tuple[Optional[dict], Optional[str]]:
    result, report = compare(workdir, (a, b), "--no-analysis", "--no-plots", "--force", out=out)
    return report, None if report is not None else exit_problem(result, f"fastgen compare {a} {b}")[0]


def claimed(report: dict) -> list[str]:
    """Every B/A the report calls a difference: "section / table / row's first cell / column"."""
    found = []
    for section in report["sections"]:
        for table in section["tables"]:
            for row in table["rows"]:
                for column, cell in zip(table["columns"], row):
                    if isinstance(cell, dict) and cell.get("distinguishable") is True:
                        found.append(f"{section['id']} / {table['title']} / {row[0]} / {column}")
    return found


def summary(report: dict) -> list[str]:
    return next(s for s in report["sections"] if s["id"] == "summary")["findings"]


def check_aa(report: dict, repeats: int) -> list[str]:
    """The same engine under two labels: nothing claimed, anywhere, and the summary says so."""
    failures = [f"A/A with {repeats} repeats: the report claims {where}" for where in claimed(report)]
    if not any(line.startswith("No difference between A") for line in summary(report)):
        failures.append(f"A/A with {repeats} repeats: the summary does not say there is no difference")
    return failures


def check_gap(report: dict, repeats: int) -> list[str]:
    """Misses 10x slower on B: the summary claims scenario3/c100_noisy's TTFT, B higher (one run a side: too few to
    tell, and said so)."""
    lines = [line for line in summary(report) if line.startswith(f"{GAP_CONFIG}: TTFT p")]
    higher = [line for line in lines if float(line.split("B/A ")[1].split(" ")[0]) > 1]
    if repeats < 2:
        said = any(GAP_CONFIG in line and "one run a side" in line for line in summary(report))
        return [] if said and not lines else [f"A/B with 1 run: TTFT not said too few to tell: {summary(report)}"]
    if not higher:
        return [f"A/B with {repeats} repeats: the summary claims no TTFT gap on {GAP_CONFIG}: {summary(report)}"]
    return []


def run_aa(workdir: Path, seed: int, configs: tuple[str, ...] = CONFIGS) -> tuple[list[str], dict]:
    """(the failures, what each round found: claims and the gap's lines)."""
    workdir = Path(workdir).resolve()
    shutil.rmtree(workdir / "reports", ignore_errors=True)
    generate(workdir, "http://127.0.0.1:9", Dataset())
    tokenizer = workdir / "traces" / "tokenizer"
    jitter = ("--jitter-ms", str(JITTER_MS))
    failures: list[str] = []
    found: dict = {}
    with (
        FakeEngineProcess(
            tokenizer, workdir / "engines" / "same.jsonl", "vllm", extra=(*jitter, "--seed", str(seed))
        ) as same,
        FakeEngineProcess(
            tokenizer,
            workdir / "engines" / "slow.jsonl",
            "vllm",
            prefill_us=PREFILL_US_PER_TOKEN * SLOW,
            extra=(*jitter, "--seed", str(seed + 1)),
        ) as slow,
    ):
        urls = {"first": same.url, "second": same.url, "slow": slow.url}
        for repeats in REPEATS:
            began = time.monotonic()
            for label in LABELS:
                problem = _bakeoff(urls[label], label, workdir, repeats=repeats, configs=configs)
                if problem:
                    return failures + [problem], found
            aa, problem = _compare(workdir, "first", "second", f"report-aa-{repeats}")
            ab, problem_ab = _compare(workdir, "first", "slow", f"report-ab-{repeats}")
            if aa is None or ab is None:
                return failures + [p for p in (problem, problem_ab) if p], found
            failures += check_aa(aa, repeats) + check_gap(ab, repeats)
            found[repeats] = {
                "aa_claims": claimed(aa),
                "aa_tested": summary(aa)[0],
                "ab_lines": [line for line in summary(ab) if line.startswith(GAP_CONFIG)],
            }
            print(
                f"round {repeats}: {time.monotonic() - began:.0f} s; A/A claims {len(claimed(aa))}; A/B: "
                f"{found[repeats]['ab_lines'][:2]}",
                flush=True,
            )
    return failures, found


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("bakeoff_aa", __doc__, ".e2e-aa")
    p.add_argument("--seed", type=int, default=1, help="the jitter's seed (the slow engine's is seed + 1)")
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), help=f"configs to run (the gap is {GAP_CONFIG}'s)")
    args = p.parse_args(argv)
    return run_suite("A/A and A/B e2e", args.workdir, lambda: run_aa(args.workdir, args.seed, tuple(args.configs))[0])


if __name__ == "__main__":
    raise SystemExit(main())
