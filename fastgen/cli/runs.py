"""`fastgen bakeoff` (run the configs against a live server) and `fastgen compare` (two servers' runs, side by side)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import SpecError
from .options import Interrupted, Parser, add_replay_modes, int_in, positive_float, url_option

__all__ = ["bakeoff_parser", "compare_parser", "run_bakeoff_command", "run_compare"]


def bakeoff_parser() -> Parser:
    from ..engine_endpoints import ENGINES

    p = Parser(
        prog="fastgen bakeoff",
        description="Run the configs against a live server, one after another: "
        "empty its prefix cache before each (and verify it with a probe prompt), sample its /metrics while "
        "inference-perf replays it, and keep each run, with how it ended and against what, in LABEL's folder "
        "for fastgen compare. Exit 1 when any run is incomplete or failed.",
        epilog="vLLM needs VLLM_SERVER_DEV_MODE=1 (for /reset_prefix_cache), --enable-prompt-tokens-details "
        "and --enable-auto-tool-choice --tool-call-parser; SGLang needs --enable-metrics, --enable-cache-report "
        "and a --tool-call-parser that holds a named tool_choice (with 0.5.23, qwen3_coder did and hermes did "
        "not): a short request checks that before the first config. Ctrl-C stops the current config and keeps "
        "the finished ones; run the same command again to go on (a run is done again when the server, dataset, "
        "config or replay modes changed).",
    )
    p.add_argument(
        "--url", type=url_option("--url"), required=True, help="the server's base URL, e.g. http://gpu-host:8000"
    )
    p.add_argument(
        "--label",
        required=True,
        help="a name for this server's runs (e.g. vllm-h100): they go to OUT/LABEL/<scenario>/<config>/repeat-K/",
    )
    p.add_argument(
        "--configs",
        nargs="+",
        metavar="PATTERN",
        default=[],
        help="run only these configs: scenario1/c10, 'scenario3/*_noisy', or a scenario (default: all)",
    )
    p.add_argument("--config-dir", type=Path, default=Path("configs"), help="the configs fastgen generated")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("reports"),
        help="where the runs go; datasets' cache of the dataset files the configs read goes to OUT/.datasets-cache",
    )
    p.add_argument("--engine", choices=list(ENGINES), help="the server's engine (default: told by the server)")
    p.add_argument(
        "--no-reset",
        action="store_true",
        help="do not empty the prefix cache between configs (hit ratios then carry over)",
    )
    p.add_argument(
        "--no-tool-check",
        action="store_true",
        help="do not check before the first config that the server answers a named tool_choice with that "
        "tool (for servers and datasets without tool calls)",
    )
    _run_options(p)
    _capacity_options(p)
    return p


def _capacity_options(p: Parser) -> None:
    """--capacity CONFIG and its SLO, bounds, width and budget: the search for the largest load meeting the SLO."""
    g = p.add_argument_group("capacity search (--capacity)")
    g.add_argument(
        "--capacity",
        metavar="CONFIG",
        help="instead of running the configs, search the most sessions in flight at which CONFIG (e.g. "
        "scenario3/c100_noisy) meets --slo: each step is CONFIG at that concurrency (no arrival rate), an ordinary "
        "run in OUT/capacity/LABEL/CONFIG/sessions-N/; the outcome goes to capacity.json there. Exit 1 unless "
        "the search brackets the capacity",
    )
    g.add_argument("--slo", metavar="NAME=VALUE", help="the SLO the steps are judged by, e.g. ttft_p95_ms=2000")
    g.add_argument("--start", type=int_in(1, 10**6, "--start"), help="the first load (default: CONFIG's concurrency)")
    g.add_argument("--lowest", type=int_in(1, 10**6, "--lowest"), default=1, help="the smallest load tried")
    g.add_argument(
        "--highest",
        type=int_in(1, 10**6, "--highest"),
        help="the largest load tried (default and most: half CONFIG's sessions, so that a step has a steady state)",
    )
    g.add_argument(
        "--width",
        type=positive_float("--width", most=10),
        default=0.10,
        help="stop when hi/lo - 1 is at most this (or the loads are neighbours)",
    )
    g.add_argument(
        "--budget-minutes",
        type=positive_float("--budget-minutes", most=10**6),
        metavar="M",
        help="stop with what is known when the steps have taken M minutes (with --timeout, a step is counted at "
        "its limit before it starts)",
    )
    g.add_argument(
        "--plateau",
        type=positive_float("--plateau", most=1),
        default=1.0,
        metavar="F",
        help="a step's steady-state window starts when F x the most sessions in flight are in flight (as compare's)",
    )


def _run_options(p: Parser) -> None:
    """How each config's runs go: again or not, how many repeats, shards and GPUs, the metrics sampling, the
    timeout."""
    p.add_argument(
        "--rerun",
        action="store_true",
        help="run configs that completed before again (and use a LABEL whose runs came from another server)",
    )
    p.add_argument(
        "--repeat",
        type=int_in(1, 100, "--repeat"),
        default=1,
        metavar="N",
        help="run each config N times, one after another, the cache emptied before each (with --capacity: up to "
        "N runs of a step whose verdict is unclear, pooled)",
    )
    p.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="N",
        help="replay each config with N inference-perf processes at once, each its own share of the sessions "
        "(fastgen export shards), as N load generators would; compare merges their records into one run",
    )
    p.add_argument(
        "--gpus",
        type=int_in(1, 4096, "--gpus"),
        metavar="N",
        help="the server's GPU count, recorded for throughput per GPU-hour",
    )
    add_replay_modes(p, from_configs=True)
    _add_fleet_options(p)
    p.add_argument(
        "--scrape-interval",
        type=positive_float("--scrape-interval"),
        default=5.0,
        help="seconds between samples of the server's /metrics",
    )
    p.add_argument(
        "--timeout",
        type=positive_float("--timeout", most=10**7),
        default=None,
        metavar="S",
        help="stop a config that runs longer than this many seconds (default: no limit)",
    )


def _add_fleet_options(p: Parser) -> None:
    """--replica, --router-policy, --router-metrics: an engine fleet behind a router at --url."""
    p.add_argument(
        "--replica",
        type=url_option("--replica"),
        action="append",
        default=[],
        metavar="URL",
        help="--url is a router, and this is one of the engines behind it (repeat it for each): every replica's cache "
        "is emptied and verified, its /metrics sampled, its figures recorded (default: the replicas the router "
        "lists at GET /workers or /list_workers, if it lists any)",
    )
    p.add_argument(
        "--router-policy",
        metavar="NAME",
        help="the routing policy the router at --url runs with (its own --policy: cache_aware, round_robin, ...), "
        "recorded with every run",
    )
    p.add_argument(
        "--router-metrics",
        type=url_option("--router-metrics"),
        metavar="URL",
        help="the router's own Prometheus endpoint (vllm-router's and sglang-router's --prometheus-port), which "
        "names its policy",
    )


def run_bakeoff_command(args) -> int:
    from ..bakeoff import BakeoffOptions, RunOutcome
    from ..dataset_bakeoff import run_bakeoff
    from ..extras import require_extra

    require_extra("bakeoff", "fastgen bakeoff")
    if args.capacity is None and args.slo is not None:
        raise SpecError("--slo is for a capacity search; give --capacity CONFIG with it")
    options = BakeoffOptions(
        url=args.url,
        label=args.label,
        config_dir=args.config_dir,
        out_dir=args.out,
        patterns=tuple(args.configs),
        engine=args.engine,
        reset=not args.no_reset,
        rerun=args.rerun,
        scrape_interval_s=args.scrape_interval,
        timeout_s=args.timeout,
        progress=not args.quiet and sys.stderr.isatty(),
        repeats=args.repeat,
        shards=args.shards,
        gpus=args.gpus,
        outputs=args.outputs,
        tool_call_max_tokens=args.tool_call_max_tokens,
        tool_choice=args.tool_choice,
        tool_check=not args.no_tool_check,
        replicas=tuple(args.replica),
        router_policy=args.router_policy,
        router_metrics=args.router_metrics,
    )
    echo = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    if args.capacity is not None:
        return _run_capacity(args, options, echo)
    ended: list[RunOutcome] = []
    try:
        outcomes = run_bakeoff(
            options,
            echo=echo,
            on_outcome=ended.append,
            warn=lambda line: print(f"fastgen: warning: {line}", file=sys.stderr),
        )
    except KeyboardInterrupt:
        kept = sum(o.folder is not None for o in ended)
        raise Interrupted(
            f"{kept} finished run{'s' if kept != 1 else ''} kept in {args.out / args.label}, the unfinished one "
            f"removed; run the same command again to go on"
        ) from None
    counts = {s: sum(o.status == s for o in outcomes) for s in ("completed", "incomplete", "skipped", "failed")}
    configs = len(dict.fromkeys(o.config for o in outcomes))
    runs = f"{configs} configs" + (f" x {args.repeat} repeats" if args.repeat > 1 else "")
    print(
        f"{runs}: {counts['completed']} completed, {counts['incomplete']} incomplete, {counts['skipped']} skipped "
        f"(done before), {counts['failed']} failed; runs in {args.out / args.label}"
    )
    bad = [o for o in outcomes if o.status in ("incomplete", "failed")]
    for outcome in bad:
        print(f"  {outcome.name}: {outcome.status}: {outcome.reason}")
    return 1 if bad else 0


def _run_capacity(args, options, echo) -> int:
    from ..bakeoff.capacity_search import parse_slo
    from ..capacity_bakeoff import CapacityOptions, search_capacity

    if args.slo is None:
        raise SpecError("--capacity needs the SLO to meet: add --slo ttft_p95_ms=MS")
    if args.configs:
        raise SpecError("--capacity searches one config: give it there, not with --configs")
    slo = parse_slo(args.slo)
    unmeasured = [name for name in slo.targets() if name != "ttft_p95_ms"]
    if unmeasured:
        raise SpecError(f"--slo: {unmeasured[0]} is not measured by a capacity step yet; give ttft_p95_ms=MS only")
    capacity = CapacityOptions(
        bakeoff=options,
        config=args.capacity,
        slo=slo,
        start=args.start,
        lowest=args.lowest,
        highest=args.highest,
        width=args.width,
        repeats=args.repeat - 1,
        budget_s=None if args.budget_minutes is None else args.budget_minutes * 60,
        plateau=args.plateau,
    )
    try:
        result = search_capacity(
            capacity, echo=echo, warn=lambda line: print(f"fastgen: warning: {line}", file=sys.stderr)
        )
    except KeyboardInterrupt:
        raise Interrupted("the finished steps are kept; run the same command again to go on") from None
    print(f"{result.line}; steps in {result.folder}")
    return 0 if result.ok else 1


def compare_parser() -> Parser:
    p = Parser(
        prog="fastgen compare",
        description="Compare two servers' bakeoff runs: report.md (tables, and PNG "
        "plots with matplotlib) and report.json, scenario by scenario, each figure for A, B and B/A with the "
        "requests behind it and its spread.",
    )
    p.add_argument("runs_a", type=Path, metavar="RUNS_A", help="one server's runs (e.g. reports/vllm)")
    p.add_argument("runs_b", type=Path, metavar="RUNS_B", help="the other's (e.g. reports/sglang)")
    p.add_argument("--out", type=Path, required=True, help="the folder for report.md, report.json and the plots")
    p.add_argument(
        "--analysis",
        type=Path,
        metavar="FILE",
        help="the JSON of `fastgen analyze --json` for the same dataset: its predicted ceilings beside "
        "every hit ratio, for both sides (default: compare runs analyze for each side itself, at the engine, "
        "KV capacity and block size its runs recorded, on the configs and traces they replayed)",
    )
    p.add_argument("--analysis-a", type=Path, metavar="FILE", help="A's own analysis, instead of compare's")
    p.add_argument("--analysis-b", type=Path, metavar="FILE", help="B's own analysis, instead of compare's")
    p.add_argument(
        "--no-analysis",
        action="store_true",
        help="no ceilings unless given: compare does not run analyze itself (it reads every trace file)",
    )
    p.add_argument(
        "--include-incomplete",
        action="store_true",
        help="put runs that are incomplete or failed into the B/A ratios too (they are shown either way)",
    )
    p.add_argument(
        "--plateau",
        type=positive_float("--plateau", most=1),
        default=1.0,
        metavar="F",
        help="the steady-state window starts when F x the most sessions in flight at once are in flight",
    )
    p.add_argument(
        "--slo-ttft-p95-ms",
        type=positive_float("--slo-ttft-p95-ms", most=10**7),
        metavar="MS",
        help="per scenario and side, the largest concurrency whose TTFT p95 (of its text answers) is at most MS",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write over a report.md, report.json or plot compare did not "
        "write (or one edited since): it is kept as NAME.edited",
    )
    p.add_argument("--no-plots", action="store_true", help="tables only, even with matplotlib installed")
    return p


def _announced(quiet: bool):
    """recorded_ceilings, saying on stderr what it runs (analyze reads every trace file: it can take a while)."""
    from ..predicted import recorded_ceilings, recorded_setup

    def ceilings_for(label, runs):
        setup, _ = recorded_setup(runs)
        if setup is not None and not quiet:
            print(f"fastgen: {label}'s ceilings: {setup.describe()} (--no-analysis skips it)", file=sys.stderr)
        return recorded_ceilings(label, runs)

    return ceilings_for


def run_compare(args) -> int:
    from ..results import CompareOptions, compare_runs

    options = CompareOptions(
        include_incomplete=args.include_incomplete, plateau=args.plateau, slo_ttft_p95_ms=args.slo_ttft_p95_ms
    )
    report = compare_runs(
        args.runs_a,
        args.runs_b,
        args.out,
        plots=not args.no_plots,
        analysis=args.analysis,
        analysis_a=args.analysis_a,
        analysis_b=args.analysis_b,
        options=options,
        force=args.force,
        ceilings_for=None if args.no_analysis else _announced(args.quiet),
    )
    for problem in report.problems:
        print(f"fastgen: warning: {problem}", file=sys.stderr)
    for name in report.moved:
        print(f"fastgen: kept the file that was there as {args.out / name}", file=sys.stderr)
    if not args.quiet:
        plots = f"{len(report.plots)} plots" if report.plots else f"no plots ({report.plots_skipped or 'none'})"
        print(f"wrote {args.out / 'report.md'} and report.json: {len(report.configs)} configs compared, {plots}")
    return 0
