"""`fastgen analyze`: what a prefix cache can hit on each config before any GPU runs."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from .options import Parser, int_in, positive_float, write_output

__all__ = ["analyze_parser", "run_analyze", "targets_of"]


def analyze_parser() -> Parser:
    p = Parser(
        prog="fastgen analyze",
        description="Predict the prefix-cache hit ratio of each config: the requests "
        "inference-perf sends, in its replay order, against engines that schedule as vLLM or SGLang do (their "
        "step budget, admission, chunked prefill, preemption), with an unbounded KV cache and, with a capacity, "
        "a bounded one; a point and the band that jittered replays span.",
    )
    p.add_argument(
        "dir", type=Path, help="a trace folder: a dataset (with its scenario folders) or one trace directory"
    )
    p.add_argument(
        "--configs",
        type=Path,
        metavar="CONFIG_DIR",
        help="the configs to simulate (default: DIR/../configs when it is there; without configs each "
        "trace directory is read once in file order, one session at a time)",
    )
    p.add_argument("--tokenizer", type=Path, help="the tokenizer folder (default: DIR/tokenizer)")
    p.add_argument(
        "--reading",
        choices=["auto", "template", "content"],
        default="auto",
        help="prompts as the chat template renders them, or content tokens only (auto: template when the "
        "tokenizer has one)",
    )
    _engine_options(p)
    p.add_argument(
        "--band",
        type=int_in(0, 64, "--band"),
        default=8,
        metavar="N",
        help="replay each config N more times under seeded jitter of arrivals and step lengths (and, calibrated "
        "from several runs, at each run's speeds): the range of hit ratios the interleaving allows, and the point "
        "their median (default 8; 0: the unjittered replay alone)",
    )
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="only these configs (scenario1/c10, 'scenario3/*')")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="also the hit %% at eight KV capacities per config, from one "
        "request to the whole replay (eight more simulations each, over a directory's sessions held in "
        "memory: the full default set takes twice as long)",
    )
    _service_options(p)
    _output_options(p)
    _capacity_options(p)
    return p


def _output_options(p: Parser) -> None:
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also the long tables in the terminal: hit %% by turn, per replica and the sweep's points (the JSON "
        "always holds them)",
    )
    p.add_argument("--plots", type=Path, metavar="DIR", help="PNG charts into DIR (matplotlib: fastgen[plots])")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    p.add_argument(
        "--workers",
        type=int_in(1, 1024, "--workers"),
        default=None,
        help="processes reading the trace files (unset: all cores; the figures do not depend on it)",
    )


def _capacity_options(p: Parser) -> None:
    g = p.add_argument_group("capacity under an SLO, predicted (--capacity)")
    g.add_argument(
        "--capacity",
        action="store_true",
        help="instead of the hit table, predict for each config the most sessions in flight whose replay meets "
        "--slo on the engine model (at the speeds and KV capacity given): the bakeoff's capacity search, each load "
        "simulated once, from the config's concurrency up to half its sessions; one line per config, with the hit "
        "there and the band's bracket. Exit 1 unless every config's capacity is bracketed",
    )
    g.add_argument(
        "--slo",
        metavar="NAME=VALUE",
        help="the SLO the loads are judged by, over every answer (tool calls too): ttft_p95_ms, tpot_p95_ms, "
        "session_p95_s, e.g. ttft_p95_ms=2000",
    )
    g.add_argument(
        "--width",
        type=positive_float("--width", most=10),
        default=0.10,
        help="with --capacity: stop when hi/lo - 1 is at most this (or the loads are neighbours); default 0.10",
    )


def _engine_options(p: Parser) -> None:
    """Whose engine the replay models and its cache: the engine, the server a run recorded, the block size, the
    definition of a hit, the KV capacity; then its scheduler's."""
    p.add_argument(
        "--engine",
        choices=["vllm", "sglang"],
        default=None,
        help="whose scheduler and prefix-cache rules: vllm (default: full blocks, registered when a step is "
        "scheduled) or sglang (radix cache at --block-size as its page size, filled as each prefill batch "
        "completes); --server-from's engine when given",
    )
    p.add_argument(
        "--server-from",
        type=Path,
        metavar="RUN_DIR",
        help="predict for the server a bakeoff run (or a folder above runs) was made against: its engine, KV "
        "capacity, block or page size and scheduler settings as the run recorded them; flags given override",
    )
    p.add_argument(
        "--block-size",
        type=int_in(1, 4096, "--block-size"),
        default=None,
        help="KV block size in tokens, or SGLang's page size (default: 16, vLLM's on GPU (its CPU build "
        "uses 32); 1, SGLang's; 512 with --definition aiperf, Mooncake's)",
    )
    p.add_argument(
        "--definition",
        choices=["vllm", "aiperf"],
        default="vllm",
        help="vllm: pooled cached / prompt tokens in replay order, infinite and at capacity; aiperf: "
        "AIPerf's analyze-trace cache_hit_rate over the same requests",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--kv-cache-tokens", type=int_in(1, 10**12, "--kv-cache-tokens"), metavar="N", help="a KV capacity in tokens"
    )
    size.add_argument(
        "--kv-cache-gib",
        type=positive_float("--kv-cache-gib"),
        metavar="G",
        help="a KV capacity in GiB, with --model-config for the bytes per token",
    )
    p.add_argument(
        "--model-config",
        type=Path,
        metavar="FILE",
        help="the model's config.json (layers, KV heads, head size, dtype), for --kv-cache-gib",
    )
    _scheduler_options(p)


def _scheduler_options(p: Parser) -> None:
    """The scheduler's limits, and the replicas and their router."""
    p.add_argument(
        "--batch-tokens",
        type=int_in(1, 10**9, "--batch-tokens"),
        metavar="N",
        help="tokens one engine step may compute: vLLM's --max-num-batched-tokens, SGLang's --chunked-prefill-size "
        "(default: the engine's on an 80 GB GPU, 8,192, or --server-from's)",
    )
    p.add_argument(
        "--max-running",
        type=int_in(1, 10**6, "--max-running"),
        metavar="N",
        help="requests an engine runs at once: vLLM's --max-num-seqs, SGLang's --max-running-requests",
    )
    p.add_argument(
        "--schedule-policy",
        choices=["fcfs", "lpm"],
        help="SGLang's --schedule-policy (default fcfs; lpm: longest cached prefix first)",
    )
    p.add_argument(
        "--replicas",
        type=int_in(1, 4096, "--replicas"),
        metavar="N",
        help="N engine replicas, each with the KV capacity given, behind a router (--router); default: the replicas "
        "the --server-from runs went through behind their router, else 1",
    )
    p.add_argument(
        "--router",
        choices=["round_robin", "consistent_hash", "cache_aware"],
        help="how requests reach the replicas (vllm-router's names): round_robin, consistent_hash (session "
        "affinity), cache_aware (longest routed prefix, as vllm-router's cache_aware); default: the policy the "
        "--server-from runs recorded behind a router, else round_robin",
    )


def _service_options(p: Parser) -> None:
    from ..analysis.schedule import DEFAULT_DECODE_TOKENS_PER_S, DEFAULT_PREFILL_TOKENS_PER_S

    p.add_argument(
        "--prefill-tokens-per-s",
        type=positive_float("--prefill-tokens-per-s", most=1e9),
        metavar="N",
        help=f"the simulated engine's prefill speed: a step's prompt tokens take 1/N seconds each (default "
        f"{DEFAULT_PREFILL_TOKENS_PER_S:,.0f}, or --calibrate's); a slower server keeps more sessions running "
        f"and waiting at once, which a capacity feels",
    )
    p.add_argument(
        "--decode-tokens-per-s",
        type=positive_float("--decode-tokens-per-s", most=1e9),
        metavar="N",
        help=f"its decode speed: a step that decodes lasts 1/N seconds more (a running request's tokens a "
        f"second; default {DEFAULT_DECODE_TOKENS_PER_S:g}, or --calibrate's)",
    )
    p.add_argument(
        "--calibrate",
        type=Path,
        metavar="RUN_DIR",
        help="fit both speeds to bakeoff runs of this dataset against the server to predict for (a repeat-K "
        "folder, or a folder above runs): each run's requests replayed through the engine model at the times "
        "they were sent, its queue modelled, until its summed TTFT and latency are the run's; "
        "--prefill-tokens-per-s/--decode-tokens-per-s override either",
    )


def targets_of(args):
    """(the targets, the tokenizer folder) of `dir`, --tokenizer and --configs."""
    from ..analysis.request import dataset_targets

    return dataset_targets(args.dir, tokenizer=args.tokenizer, configs=args.configs)


def run_analyze(args) -> int:
    from ..analysis import analyze
    from ..analysis.report import analysis_document, analysis_table
    from ..analysis.request import matching_targets, server_of
    from ..extras import require_extra

    slo = _checked_capacity(args)
    require_extra("validate", "fastgen analyze")  # before any file is read: it reads them as inference-perf does
    if args.plots is not None:
        require_extra("plots", "fastgen analyze --plots")
    server = server_of(args.server_from, args.engine) if args.server_from is not None else None
    targets, tokenizer = targets_of(args)
    if args.only:
        targets = matching_targets(targets, args.only)
    options, service_source = _options(args, server, targets, tokenizer)
    if slo is not None:
        return _run_capacity(args, targets, tokenizer, options, service_source=service_source, slo=slo)
    reading, results = analyze(
        targets, tokenizer, options, workers=args.workers, progress=not args.quiet and sys.stderr.isatty()
    )
    server_line = None
    if server is not None:  # as predicted: the flags given in place of what the runs recorded
        from dataclasses import replace

        server_line = replace(
            server,
            settings=options.scheduler,
            capacity_tokens=options.capacity_tokens,
            block_size=options.block_size,
            replicas=options.replicas,
            router=options.router,
        ).describe()
    print(
        analysis_table(
            reading, options, results, verbose=args.verbose, service_source=service_source, server=server_line
        )
    )
    if args.plots is not None and args.definition == "vllm":
        _write_plots(args.plots, results, options)
    if args.json:
        document = analysis_document(reading, options, results, service_source=service_source, server=server_line)
        write_output(args.json, json.dumps(document, indent=1) + "\n", "--json")
    return 0


def _checked_capacity(args):
    """The SLO of --capacity (None without it); SpecError for flags that do not go together."""
    from ..bakeoff.capacity_search import parse_slo
    from ..errors import SpecError

    if not args.capacity:
        if args.slo is not None:
            raise SpecError("--slo is for a capacity prediction; add --capacity")
        return None
    if args.slo is None:
        raise SpecError("--capacity needs the SLO to meet: add --slo ttft_p95_ms=MS")
    for flag, given in (("--definition aiperf", args.definition == "aiperf"), ("--sweep", args.sweep)):
        if given:
            raise SpecError(f"--capacity predicts latency on the engine model; drop {flag}")
    if args.plots is not None:
        raise SpecError("--capacity draws no plots yet; drop --plots")
    return parse_slo(args.slo)


def _run_capacity(args, targets, tokenizer, options, *, service_source, slo) -> int:
    from ..analysis.capacity_predict import capacity_document, capacity_line, predict_capacities
    from ..analysis.summary import service_line, service_origin
    from ..bakeoff.capacity_search import Outcome

    predicted = predict_capacities(
        targets, tokenizer, options, slo, width=args.width, workers=args.workers, progress=False
    )
    kv = "unbounded" if options.capacity_tokens is None else f"{options.capacity_tokens:,} tokens per replica"
    print(f"{service_line(options.service, service_source)}; {options.engine} model, KV {kv}")
    lines = [capacity_line(p, slo) for p in predicted]
    print("\n".join(lines))
    if args.json:
        document = {
            "slo": slo.targets(),
            "engine": options.engine,
            "capacity_tokens": options.capacity_tokens,
            "replicas": options.replicas,
            "service": {
                **dataclasses.asdict(options.service),
                "source": service_origin(options.service, service_source),
            },
            "configs": [capacity_document(p, slo) for p in predicted],
        }
        write_output(args.json, json.dumps(document, indent=1) + "\n", "--json")
    return 0 if all(p.capacity.outcome is Outcome.BRACKETED for p in predicted) else 1


def _options(args, server, targets, tokenizer):
    """(AnalysisOptions from the flags, with the service speeds; where the speeds come from)."""
    from ..analysis.request import all_config_targets, analysis_options, served_options

    options = analysis_options(
        server=server,
        engine=args.engine,
        definition=args.definition,
        reading=args.reading,
        block_size=args.block_size,
        kv_cache_tokens=args.kv_cache_tokens,
        kv_cache_gib=args.kv_cache_gib,
        model_config=args.model_config,
        batch_tokens=args.batch_tokens,
        max_running=args.max_running,
        schedule_policy=args.schedule_policy,
        sweep=args.sweep,
        band=args.band,
        replicas=args.replicas,
        router=args.router,
    )
    return served_options(
        options,
        targets,
        tokenizer,
        calibrate_from=args.calibrate,
        every=all_config_targets(args.dir, args.configs) if args.calibrate is not None else None,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
        decode_tokens_per_s=args.decode_tokens_per_s,
    )


def _write_plots(folder: Path, results, options) -> None:
    from ..analysis.plots import analysis_plots
    from ..errors import OutputError
    from ..results.plots import write_plots

    sweeps = {r.name: r.sweep for r in results if r.sweep}
    try:
        written = write_plots(analysis_plots(results, sweeps, capacity_tokens=options.capacity_tokens), folder)
    except OSError as exc:
        raise OutputError(f"cannot write the plots into {folder}: {exc.strerror}; choose another --plots") from None
    print(f"{len(written)} plots in {folder}")
