"""`fastgen analyze`: what a prefix cache can hit on each config before any GPU runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .options import Parser, UsageError, int_in, positive_float

__all__ = ["analyze_parser", "export_parser", "run_analyze", "run_export"]


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
        default=1,
        metavar="N",
        help="N engine replicas, each with the KV capacity given, behind a router (--router)",
    )
    p.add_argument(
        "--router",
        choices=["round_robin", "consistent_hash", "cache_aware"],
        default="round_robin",
        help="how requests reach the replicas (vllm-router's names): round_robin, consistent_hash (session "
        "affinity), cache_aware (longest routed prefix, as vllm-router's cache_aware)",
    )
    p.add_argument(
        "--band",
        type=int_in(0, 64, "--band"),
        default=8,
        metavar="N",
        help="replay each config N more times under seeded jitter of arrivals and step lengths (and, calibrated "
        "from several runs, at each run's speeds): the range of hit ratios the interleaving allows (default 8; "
        "0: the point alone)",
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
    return p


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


def _service(args, targets, tokenizer, options):
    """(the options with the service model and band speeds, where the speeds come from; None: defaults or given)."""
    from ..analysis.calibrate import calibrate, calibrated_options
    from ..traces.blocks import load_reading

    calibration = None
    if args.calibrate is not None:
        every = _all_targets(args) or targets
        calibration = calibrate(args.calibrate, every, load_reading(tokenizer, args.reading), options)
    return calibrated_options(
        options,
        calibration,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
        decode_tokens_per_s=args.decode_tokens_per_s,
    )


def _all_targets(args):
    """Every config of the dataset (a run to calibrate from may be of one --only leaves out); None without configs."""
    from ..analysis import config_targets

    config_dir = args.configs or (args.dir.resolve().parent / "configs")
    if args.configs is not None or (config_dir / "manifest.json").is_file():
        return config_targets(config_dir, args.dir)
    return None


def _targets(args):
    from ..analysis import config_targets
    from ..analysis.analyze import directory_targets

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir} is not a folder; give the trace folder fastgen wrote (e.g. traces)")
    tokenizer = args.tokenizer or _tokenizer_of(args.dir)
    if not tokenizer.exists():
        raise UsageError(f"no tokenizer at {tokenizer}; pass --tokenizer with the dataset's tokenizer folder")
    config_dir = args.configs or (args.dir.resolve().parent / "configs")
    if args.configs is not None or (config_dir / "manifest.json").is_file():
        return config_targets(config_dir, args.dir), tokenizer
    return directory_targets(args.dir), tokenizer


def _tokenizer_of(folder: Path) -> Path:
    # a dataset's own folder, or the one beside a trace directory of it
    return folder / "tokenizer" if (folder / "tokenizer").exists() else folder.parent / "tokenizer"


def run_analyze(args) -> int:
    from ..analysis import analyze
    from ..analysis.report import analysis_document, analysis_table
    from ..errors import OutputError
    from ..extras import require_extra

    require_extra("validate", "fastgen analyze")  # before any file is read: it reads them as inference-perf does
    if args.plots is not None:
        require_extra("plots", "fastgen analyze --plots")
    server = _server(args)
    targets, tokenizer = _targets(args)
    if args.only:
        from fnmatch import fnmatchcase

        targets = [
            t for t in targets if any(fnmatchcase(t.name, p) or fnmatchcase(t.name, p + "/*") for p in args.only)
        ]
        if not targets:
            raise UsageError(f"no config matches {' '.join(args.only)}")
    options = _options(args, server)
    options, service_source = _service(args, targets, tokenizer, options)
    reading, results = analyze(
        targets, tokenizer, options, workers=args.workers, progress=not args.quiet and sys.stderr.isatty()
    )
    server_line = None
    if server is not None:  # as predicted: the flags given in place of what the runs recorded
        from dataclasses import replace

        server_line = replace(
            server, settings=options.scheduler, capacity_tokens=options.capacity_tokens, block_size=options.block_size
        ).describe()
    print(
        analysis_table(
            reading, options, results, verbose=args.verbose, service_source=service_source, server=server_line
        )
    )
    if args.plots is not None and args.definition == "vllm":
        from ..results.plots import write_plots
        from ..analysis.plots import analysis_plots

        try:
            written = write_plots(
                analysis_plots(
                    results, {r.name: r.sweep for r in results if r.sweep}, capacity_tokens=options.capacity_tokens
                ),
                args.plots,
            )
        except OSError as exc:
            raise OutputError(
                f"cannot write the plots into {args.plots}: {exc.strerror}; choose another --plots"
            ) from None
        print(f"{len(written)} plots in {args.plots}")
    if args.json:
        try:
            document = analysis_document(reading, options, results, service_source=service_source, server=server_line)
            args.json.write_text(json.dumps(document, indent=1) + "\n")
        except OSError as exc:
            raise OutputError(f"cannot write {args.json}: {exc.strerror}; choose another --json") from None
    return 0


def _server(args):
    """The server --server-from names (analysis.serving.ServerSpec), or None."""
    if args.server_from is None:
        return None
    from ..analysis.serving import server_from

    server = server_from(args.server_from)
    if args.engine is not None and args.engine != server.engine:
        raise UsageError(
            f"--engine {args.engine}, but {args.server_from}'s runs were against {server.engine}; drop --engine, "
            f"or give runs of a {args.engine} server"
        )
    return server


def _options(args, server):
    """AnalysisOptions from the flags, over --server-from's server where given, over the engine's defaults."""
    from dataclasses import replace

    from ..analysis import AnalysisOptions, kv_bytes_per_token
    from ..analysis.rules import ENGINE_RULES

    engine = args.engine or (server.engine if server is not None else "vllm")
    capacity = args.kv_cache_tokens
    if args.kv_cache_gib is not None:
        if args.model_config is None:
            raise UsageError("--kv-cache-gib needs --model-config (the model's config.json) for the bytes per token")
        capacity = int(args.kv_cache_gib * 2**30 // kv_bytes_per_token(args.model_config))
    if capacity is None and server is not None:
        capacity = server.capacity_tokens
    if args.definition == "aiperf":
        if capacity is not None:
            raise UsageError("AIPerf's definition has no capacity (an infinite cache); drop --kv-cache-tokens/-gib")
        if args.engine not in (None, "vllm") or server is not None:
            raise UsageError(
                "AIPerf's definition has no engine rules; drop --engine/--server-from or --definition aiperf"
            )
    rules = ENGINE_RULES[engine]
    block_size = args.block_size or (
        512 if args.definition == "aiperf" else server.block_size if server is not None else rules.default_block_size
    )
    settings = server.settings if server is not None else rules.defaults
    given = {
        "batch_tokens": args.batch_tokens,
        "max_running": args.max_running,
        "policy": args.schedule_policy,
    }
    if args.schedule_policy == "lpm" and engine != "sglang":
        raise UsageError("--schedule-policy lpm is SGLang's; vLLM schedules FCFS (drop it, or --engine sglang)")
    settings = replace(settings, **{k: v for k, v in given.items() if v is not None})
    return AnalysisOptions(
        block_size=block_size,
        capacity_tokens=capacity,
        reading=args.reading,
        definition=args.definition,
        sweep=args.sweep,
        engine=engine,
        settings=settings,
        band=0 if args.definition == "aiperf" else args.band,
        replicas=args.replicas,
        router=args.router,
    )


def export_parser() -> Parser:
    p = Parser(prog="fastgen export", description="Write a replay in another tool's trace format.")
    p.add_argument(
        "format",
        choices=["mooncake", "dag_jsonl", "mooncake_sessions"],
        help="mooncake: one JSON line per request with hash_ids, for "
        "AIPerf (analyze-trace, mooncake_trace), vLLM bench serve (timed_trace), SGLang bench_serving; "
        "dag_jsonl: one JSON line per conversation with the messages, sessions as turns, forks and spawns, "
        "for AIPerf's dag_jsonl dataset (--custom-dataset-type dag_jsonl); "
        "mooncake_sessions: one JSON line per request with its whole prompt, each session's first at a start drawn "
        "from a Poisson process at the config's session_rate and the rest after their recorded waits, for AIPerf's "
        "mooncake_trace dataset with --fixed-schedule (sessions that arrive as a Poisson process)",
    )
    p.add_argument("dir", type=Path, help="a dataset folder, or one trace directory")
    p.add_argument("--out", type=Path, required=True, help="the JSON-lines file to write")
    p.add_argument(
        "--config",
        metavar="NAME",
        help="the config whose replay to export (e.g. scenario1/c10; "
        "required when DIR has configs beside it and more than one of them)",
    )
    p.add_argument("--configs", type=Path, metavar="CONFIG_DIR", help="the configs (default: DIR/../configs)")
    p.add_argument("--tokenizer", type=Path, help="the tokenizer folder (default: DIR/tokenizer)")
    p.add_argument("--reading", choices=["auto", "template", "content"], default="auto")
    p.add_argument(
        "--block-size", type=int_in(1, 4096, "--block-size"), default=512, help="tokens per hash id (Mooncake's 512)"
    )
    p.add_argument(
        "--session-rate",
        type=positive_float("--session-rate", most=1e6),
        help="mooncake_sessions: sessions a second of the Poisson process (default: the config's session_rate)",
    )
    return p


def run_export(args) -> int:
    from ..analysis.analyze import Corpus
    from ..export import mooncake_lines, write_mooncake
    from ..extras import require_extra
    from ..traces.blocks import load_reading

    require_extra("validate", "fastgen export")  # before any file is read: it reads them as inference-perf does
    targets, tokenizer = _targets(args)
    if args.config:
        targets = [t for t in targets if t.name == args.config.removesuffix(".yml")]
        if not targets:
            raise UsageError(f"no config {args.config!r} replays a trace directory of {args.dir}")
    elif len(targets) > 1:
        raise UsageError(
            f"{args.dir} has {len(targets)} configs or trace directories "
            f"({', '.join(t.name for t in targets[:4])}, ...); pick one with --config NAME, or give one "
            f"trace directory"
        )
    (target,) = targets
    corpus = Corpus(target.trace_dir, load_reading(tokenizer, args.reading), args.block_size)
    if args.session_rate is not None and args.format != "mooncake_sessions":
        raise UsageError("--session-rate is the rate of mooncake_sessions' arrivals; drop it, or export that format")
    if args.format == "dag_jsonl":
        return _export_dag(args, target, corpus)
    if args.format == "mooncake_sessions":
        return _export_sessions(args, target, corpus)
    lines = mooncake_lines(target, corpus)
    write_mooncake(lines, args.out)
    if not args.quiet:
        print(
            f"wrote {len(lines)} requests of {target.name} ({len({r['session_id'] for r in lines})} sessions) to "
            f"{args.out}"
        )
    return 0


def _export_sessions(args, target, corpus) -> int:
    from ..export import mooncake_sessions, write_mooncake

    rate = args.session_rate or target.load.session_rate
    if not rate:
        raise UsageError(
            f"{target.name} has no session_rate (its sessions start as slots free up); give --session-rate R"
        )
    export = mooncake_sessions(target, corpus, rate)
    write_mooncake(export.lines, args.out)
    if not args.quiet:
        print(
            f"wrote {export.sessions} sessions of {target.name} ({len(export.lines)} requests) to {args.out}, "
            f"starting as a Poisson process of {rate:.6g} sessions a second over {export.window_s:.6g} s; replay "
            f"with: aiperf profile --input-file {args.out} --custom-dataset-type mooncake_trace --fixed-schedule "
            f"(with --model, --url, --endpoint-type chat, --tokenizer)"
        )
    return 0


def _export_dag(args, target, corpus) -> int:
    from ..export import dag_export, write_dag

    export = dag_export(target, corpus)
    write_dag(export.conversations, args.out)
    if not args.quiet:
        print(
            f"wrote {export.sessions} sessions of {target.name} ({export.requests} requests in "
            f"{len(export.conversations)} conversations, {export.forks} forked, {export.spawns} spawned) to {args.out}"
        )
        for note in export.unexpressed[:5]:
            print(f"  not as inference-perf replays it: {note}")
        if len(export.unexpressed) > 5:
            print(f"  ... and {len(export.unexpressed) - 5} more")
    return 0
