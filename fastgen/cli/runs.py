"""`fastgen bakeoff` (run the configs against a live server) and `fastgen compare` (two servers' runs, side by side)."""

from __future__ import annotations

import sys
from pathlib import Path

from .options import Parser, positive_float, url_option

__all__ = ["bakeoff_parser", "compare_parser", "run_bakeoff_command", "run_compare"]


def bakeoff_parser() -> Parser:
    from ..engines import ENGINES

    p = Parser(prog="fastgen bakeoff", description="Run the configs against a live server, one after another: "
               "empty its prefix cache before each, sample its /metrics while inference-perf replays it, and keep "
               "each run in LABEL's folder for fastgen compare.",
               epilog="vLLM needs VLLM_SERVER_DEV_MODE=1 (for /reset_prefix_cache) and --enable-prompt-tokens-details; "
               "SGLang needs --enable-metrics and --enable-cache-report. Ctrl-C stops the current config and keeps "
               "the finished ones; run the same command again to go on.")
    p.add_argument("--url", type=url_option("--url"), required=True, help="the server's base URL, e.g. "
                   "http://gpu-host:8000")
    p.add_argument("--label", required=True, help="a name for this server's runs (e.g. vllm-h100): they go to "
                   "OUT/LABEL/<scenario>/<config>/")
    p.add_argument("--configs", nargs="+", metavar="PATTERN", default=[],
                   help="run only these configs: scenario1/c10, 'scenario3/*_noisy', or a scenario (default: all)")
    p.add_argument("--config-dir", type=Path, default=Path("configs"), help="the configs fastgen generated")
    p.add_argument("--out", type=Path, default=Path("reports"), help="where the runs go")
    p.add_argument("--engine", choices=list(ENGINES), help="the server's engine (default: told by the server)")
    p.add_argument("--no-reset", action="store_true",
                   help="do not empty the prefix cache between configs (hit ratios then carry over)")
    p.add_argument("--rerun", action="store_true", help="run configs that completed before again")
    p.add_argument("--scrape-interval", type=positive_float("--scrape-interval"), default=5.0,
                   help="seconds between samples of the server's /metrics")
    p.add_argument("--timeout", type=positive_float("--timeout"), default=None, metavar="S",
                   help="stop a config that runs longer than this many seconds (default: no limit)")
    return p


def run_bakeoff_command(args) -> int:
    from ..bakeoff import BakeoffOptions, run_bakeoff

    options = BakeoffOptions(url=args.url, label=args.label, config_dir=args.config_dir, out_dir=args.out,
                             patterns=tuple(args.configs), engine=args.engine, reset=not args.no_reset,
                             rerun=args.rerun, scrape_interval_s=args.scrape_interval, timeout_s=args.timeout,
                             progress=not args.quiet and sys.stderr.isatty())
    echo = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    outcomes = run_bakeoff(options, echo=echo)
    counts = {status: sum(o.status == status for o in outcomes) for status in ("completed", "skipped", "failed")}
    failed = [o for o in outcomes if o.status == "failed"]
    print(f"{len(outcomes)} configs: {counts['completed']} completed, {counts['skipped']} skipped (done before), "
          f"{counts['failed']} failed; runs in {args.out / args.label}")
    for outcome in failed:
        print(f"  {outcome.config}: {outcome.reason}")
    return 1 if failed else 0


def compare_parser() -> Parser:
    p = Parser(prog="fastgen compare", description="Compare two servers' bakeoff runs: report.md (tables, and PNG "
               "plots with matplotlib) and report.json, scenario by scenario, each figure for A, B and B/A.")
    p.add_argument("runs_a", type=Path, metavar="RUNS_A", help="one server's runs (e.g. reports/vllm)")
    p.add_argument("runs_b", type=Path, metavar="RUNS_B", help="the other's (e.g. reports/sglang)")
    p.add_argument("--out", type=Path, required=True, help="the folder for report.md, report.json and the plots")
    p.add_argument("--analysis", type=Path, metavar="FILE",
                   help="the JSON of `fastgen analyze --json` for the same dataset: its predicted ceilings beside "
                   "every hit ratio")
    p.add_argument("--no-plots", action="store_true", help="tables only, even with matplotlib installed")
    return p


def run_compare(args) -> int:
    from ..results import compare_runs

    report = compare_runs(args.runs_a, args.runs_b, args.out, plots=not args.no_plots, analysis=args.analysis)
    for problem in report.problems:
        print(f"fastgen: warning: {problem}", file=sys.stderr)
    if not args.quiet:
        plots = f"{len(report.plots)} plots" if report.plots else f"no plots ({report.plots_skipped or 'none'})"
        print(f"wrote {args.out / 'report.md'} and report.json: {len(report.configs)} configs compared, {plots}")
    return 0
