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
        "inference-perf sends, in its replay order, against an unbounded cache and, with a capacity, an LRU "
        "one, with vLLM's rules (full blocks, chained hashes).",
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
        default="vllm",
        help="whose prefix-cache rules: vllm (full blocks, registered when a request is scheduled) or "
        "sglang (radix cache at --block-size as its page size, filled as each prefill completes)",
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
        help="also the long tables in the terminal: hit %% by turn and the sweep's points (the JSON always holds them)",
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
        help=f"the simulated server's prefill speed: a request's first token comes after its uncached "
        f"prompt tokens / N seconds (default {DEFAULT_PREFILL_TOKENS_PER_S:,.0f}, or --calibrate's); a "
        f"slower server keeps more sessions running at once, which a capacity feels",
    )
    p.add_argument(
        "--decode-tokens-per-s",
        type=positive_float("--decode-tokens-per-s", most=1e9),
        metavar="N",
        help=f"its decode speed: a request ends its output tokens / N seconds after its first token "
        f"(default {DEFAULT_DECODE_TOKENS_PER_S:g}, or --calibrate's)",
    )
    p.add_argument(
        "--calibrate",
        type=Path,
        metavar="RUN_DIR",
        help="take both speeds from a bakeoff run against the server to predict for (a repeat-K folder, "
        "or a folder above runs, pooled): uncached prompt tokens / TTFT and output tokens / (latency - "
        "TTFT) over its requests; --prefill-tokens-per-s/--decode-tokens-per-s override either",
    )


def _service(args):
    """(the service model, where its speeds come from; None: the defaults or given)."""
    from dataclasses import replace

    from ..analysis.calibrate import calibrate
    from ..analysis.schedule import ServiceModel

    service, source = ServiceModel(), None
    if args.calibrate is not None:
        calibration = calibrate(args.calibrate)
        service, source = calibration.service, calibration.describe()
    given = {
        name: value
        for name, value in (
            ("prefill_tokens_per_s", args.prefill_tokens_per_s),
            ("decode_tokens_per_s", args.decode_tokens_per_s),
        )
        if value is not None
    }
    if given and source is not None:
        source += "; " + " and ".join(name.split("_")[0] for name in given) + " given"
    return replace(service, **given), source


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
    from ..analysis import AnalysisOptions, analyze, kv_bytes_per_token
    from ..analysis.report import analysis_document, analysis_table
    from ..analysis.rules import ENGINE_RULES
    from ..errors import OutputError
    from ..extras import require_extra

    require_extra("validate", "fastgen analyze")  # before any file is read: it reads them as inference-perf does
    if args.plots is not None:
        require_extra("plots", "fastgen analyze --plots")
    capacity = args.kv_cache_tokens
    if args.kv_cache_gib is not None:
        if args.model_config is None:
            raise UsageError("--kv-cache-gib needs --model-config (the model's config.json) for the bytes per token")
        capacity = int(args.kv_cache_gib * 2**30 // kv_bytes_per_token(args.model_config))
    if args.definition == "aiperf" and capacity is not None:
        raise UsageError("AIPerf's definition has no capacity (an infinite cache); drop --kv-cache-tokens/-gib")
    service, service_source = _service(args)
    targets, tokenizer = _targets(args)
    if args.only:
        from fnmatch import fnmatchcase

        targets = [
            t for t in targets if any(fnmatchcase(t.name, p) or fnmatchcase(t.name, p + "/*") for p in args.only)
        ]
        if not targets:
            raise UsageError(f"no config matches {' '.join(args.only)}")
    if args.definition == "aiperf" and args.engine != "vllm":
        raise UsageError("AIPerf's definition has no engine rules; drop --engine or --definition aiperf")
    rules = ENGINE_RULES[args.engine]
    block_size = args.block_size or (512 if args.definition == "aiperf" else rules.default_block_size)
    options = AnalysisOptions(
        block_size=block_size,
        capacity_tokens=capacity,
        reading=args.reading,
        definition=args.definition,
        sweep=args.sweep,
        engine=args.engine,
        service=service,
    )
    reading, results = analyze(
        targets, tokenizer, options, workers=args.workers, progress=not args.quiet and sys.stderr.isatty()
    )
    print(analysis_table(reading, options, results, verbose=args.verbose, service_source=service_source))
    if args.plots is not None and args.definition == "vllm":
        from ..results.plots import write_plots
        from ..analysis.plots import analysis_plots

        try:
            written = write_plots(
                analysis_plots(results, {r.name: r.sweep for r in results if r.sweep}, capacity_tokens=capacity),
                args.plots,
            )
        except OSError as exc:
            raise OutputError(
                f"cannot write the plots into {args.plots}: {exc.strerror}; choose another --plots"
            ) from None
        print(f"{len(written)} plots in {args.plots}")
    if args.json:
        try:
            document = analysis_document(reading, options, results, service_source=service_source)
            args.json.write_text(json.dumps(document, indent=1) + "\n")
        except OSError as exc:
            raise OutputError(f"cannot write {args.json}: {exc.strerror}; choose another --json") from None
    return 0


def export_parser() -> Parser:
    p = Parser(prog="fastgen export", description="Write a replay in another tool's trace format.")
    p.add_argument(
        "format",
        choices=["mooncake", "dag_jsonl"],
        help="mooncake: one JSON line per request with hash_ids, for "
        "AIPerf (analyze-trace, mooncake_trace), vLLM bench serve (timed_trace), SGLang bench_serving; "
        "dag_jsonl: one JSON line per conversation with the messages, sessions as turns, forks and spawns, "
        "for AIPerf's dag_jsonl dataset (--custom-dataset-type dag_jsonl)",
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
    if args.format == "dag_jsonl":
        return _export_dag(args, target, corpus)
    lines = mooncake_lines(target, corpus)
    write_mooncake(lines, args.out)
    if not args.quiet:
        print(
            f"wrote {len(lines)} requests of {target.name} ({len({r['session_id'] for r in lines})} sessions) to "
            f"{args.out}"
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
