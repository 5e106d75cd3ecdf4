"""`fastgen analyze`: what a prefix cache can hit on each config before any GPU runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .options import Parser, UsageError, int_in, positive_float

__all__ = ["analyze_parser", "export_parser", "run_analyze", "run_export"]


def analyze_parser() -> Parser:
    p = Parser(prog="fastgen analyze", description="Predict the prefix-cache hit ratio of each config: the requests "
               "inference-perf sends, in its replay order, against an unbounded cache and, with a capacity, an LRU "
               "one, with vLLM's rules (full blocks, chained hashes).")
    p.add_argument("dir", type=Path, help="a trace folder: a dataset (with its scenario folders) or one trace directory")
    p.add_argument("--configs", type=Path, metavar="CONFIG_DIR",
                   help="the configs to simulate (default: DIR/../configs when it is there; without configs each "
                   "trace directory is read once in file order, one session at a time)")
    p.add_argument("--tokenizer", type=Path, help="the tokenizer folder (default: DIR/tokenizer)")
    p.add_argument("--reading", choices=["auto", "template", "content"], default="auto",
                   help="prompts as the chat template renders them, or content tokens only (auto: template when the "
                   "tokenizer has one)")
    p.add_argument("--block-size", type=int_in(1, 4096, "--block-size"), default=None,
                   help="KV block size in tokens (default 16, vLLM's; 1 approximates SGLang's radix cache; 512 with "
                   "--definition aiperf, Mooncake's)")
    p.add_argument("--definition", choices=["vllm", "aiperf"], default="vllm",
                   help="vllm: pooled cached / prompt tokens in replay order, infinite and at capacity; aiperf: "
                   "AIPerf's analyze-trace cache_hit_rate over the same requests")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--kv-cache-tokens", type=int_in(1, 10**12, "--kv-cache-tokens"), metavar="N",
                      help="a KV capacity in tokens")
    size.add_argument("--kv-cache-gib", type=positive_float("--kv-cache-gib"), metavar="G",
                      help="a KV capacity in GiB, with --model-config for the bytes per token")
    p.add_argument("--model-config", type=Path, metavar="FILE",
                   help="the model's config.json (layers, KV heads, head size, dtype), for --kv-cache-gib")
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="only these configs (scenario1/c10, 'scenario3/*')")
    p.add_argument("--sweep", action="store_true", help="also the hit %% at eight KV capacities per config, from one "
                   "request to the whole replay (eight more simulations each, over a directory's sessions held in "
                   "memory: the full default set takes twice as long)")
    p.add_argument("--plots", type=Path, metavar="DIR", help="PNG charts into DIR (matplotlib: fastgen[plots])")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--workers", type=int_in(1, 1024, "--workers"), default=None,
                   help="processes reading the trace files (unset: all cores; the figures do not depend on it)")
    return p


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
    from ..errors import OutputError

    capacity = args.kv_cache_tokens
    if args.kv_cache_gib is not None:
        if args.model_config is None:
            raise UsageError("--kv-cache-gib needs --model-config (the model's config.json) for the bytes per token")
        capacity = int(args.kv_cache_gib * 2**30 // kv_bytes_per_token(args.model_config))
    if args.definition == "aiperf" and capacity is not None:
        raise UsageError("AIPerf's definition has no capacity (an infinite cache); drop --kv-cache-tokens/-gib")
    targets, tokenizer = _targets(args)
    if args.only:
        from fnmatch import fnmatchcase

        targets = [t for t in targets if any(fnmatchcase(t.name, p) or fnmatchcase(t.name, p + "/*")
                                             for p in args.only)]
        if not targets:
            raise UsageError(f"no config matches {' '.join(args.only)}")
    if args.plots is not None:
        from ..results.plots import matplotlib_missing

        if matplotlib_missing():
            raise UsageError(f"--plots needs matplotlib: {matplotlib_missing()}")
    block_size = args.block_size or (512 if args.definition == "aiperf" else 16)
    options = AnalysisOptions(block_size=block_size, capacity_tokens=capacity, reading=args.reading,
                              definition=args.definition, sweep=args.sweep)
    reading, results = analyze(targets, tokenizer, options, workers=args.workers,
                               progress=not args.quiet and sys.stderr.isatty())
    print(analysis_table(reading, options, results))
    if args.plots is not None and args.definition == "vllm":
        from ..results.plots import write_plots
        from ..analysis.plots import analysis_plots

        try:
            written = write_plots(analysis_plots(results, {r.name: r.sweep for r in results if r.sweep}), args.plots)
        except OSError as exc:
            raise OutputError(f"cannot write the plots into {args.plots}: {exc.strerror}; choose another --plots") \
                from None
        print(f"{len(written)} plots in {args.plots}")
    if args.json:
        try:
            args.json.write_text(json.dumps(analysis_document(reading, options, results), indent=1) + "\n")
        except OSError as exc:
            raise OutputError(f"cannot write {args.json}: {exc.strerror}; choose another --json") from None
    return 0


def export_parser() -> Parser:
    p = Parser(prog="fastgen export", description="Write a replay in another tool's trace format.")
    p.add_argument("format", choices=["mooncake"], help="mooncake: one JSON line per request with hash_ids, for "
                   "AIPerf (analyze-trace, mooncake_trace), vLLM bench serve (timed_trace), SGLang bench_serving")
    p.add_argument("dir", type=Path, help="a dataset folder, or one trace directory")
    p.add_argument("--out", type=Path, required=True, help="the JSON-lines file to write")
    p.add_argument("--config", metavar="NAME", help="the config whose replay to export (e.g. scenario1/c10; "
                   "required when DIR has configs beside it and more than one of them)")
    p.add_argument("--configs", type=Path, metavar="CONFIG_DIR", help="the configs (default: DIR/../configs)")
    p.add_argument("--tokenizer", type=Path, help="the tokenizer folder (default: DIR/tokenizer)")
    p.add_argument("--reading", choices=["auto", "template", "content"], default="auto")
    p.add_argument("--block-size", type=int_in(1, 4096, "--block-size"), default=512,
                   help="tokens per hash id (Mooncake's 512)")
    return p


def run_export(args) -> int:
    from ..analysis.analyze import Corpus
    from ..export import mooncake_lines, write_mooncake
    from ..traces.blocks import load_reading

    targets, tokenizer = _targets(args)
    if args.config:
        targets = [t for t in targets if t.name == args.config.removesuffix(".yml")]
        if not targets:
            raise UsageError(f"no config {args.config!r} replays a trace directory of {args.dir}")
    elif len(targets) > 1:
        raise UsageError(f"{args.dir} has {len(targets)} configs or trace directories "
                         f"({', '.join(t.name for t in targets[:4])}, ...); pick one with --config NAME, or give one "
                         f"trace directory")
    (target,) = targets
    corpus = Corpus(target.trace_dir, load_reading(tokenizer, args.reading), args.block_size)
    lines = mooncake_lines(target, corpus)
    write_mooncake(lines, args.out)
    if not args.quiet:
        print(f"wrote {len(lines)} requests of {target.name} ({len({l['session_id'] for l in lines})} sessions) to "
              f"{args.out}")
    return 0
