"""`fastgen analyze`: what a prefix cache can hit on each config before any GPU runs."""

from __future__ import annotations

import json
from pathlib import Path

from .options import Parser, UsageError, int_in, positive_float

__all__ = ["analyze_parser", "run_analyze"]


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
    p.add_argument("--block-size", type=int_in(1, 4096, "--block-size"), default=16,
                   help="KV block size in tokens (vLLM's default 16; 1 approximates SGLang's radix cache)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--kv-cache-tokens", type=int_in(1, 10**12, "--kv-cache-tokens"), metavar="N",
                      help="a KV capacity in tokens")
    size.add_argument("--kv-cache-gib", type=positive_float("--kv-cache-gib"), metavar="G",
                      help="a KV capacity in GiB, with --model-config for the bytes per token")
    p.add_argument("--model-config", type=Path, metavar="FILE",
                   help="the model's config.json (layers, KV heads, head size, dtype), for --kv-cache-gib")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    return p


def run_analyze(args) -> int:
    from ..analysis import AnalysisOptions, analyze, config_targets, kv_bytes_per_token
    from ..analysis.analyze import directory_targets
    from ..analysis.report import analysis_document, analysis_table
    from ..errors import OutputError

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir} is not a folder; give the trace folder fastgen wrote (e.g. traces)")
    capacity = args.kv_cache_tokens
    if args.kv_cache_gib is not None:
        if args.model_config is None:
            raise UsageError("--kv-cache-gib needs --model-config (the model's config.json) for the bytes per token")
        capacity = int(args.kv_cache_gib * 2**30 // kv_bytes_per_token(args.model_config))
    tokenizer = args.tokenizer or args.dir / "tokenizer"
    if not tokenizer.exists():
        raise UsageError(f"no tokenizer at {tokenizer}; pass --tokenizer with the dataset's tokenizer folder")
    config_dir = args.configs or (args.dir.resolve().parent / "configs")
    if args.configs is not None or (config_dir / "manifest.json").is_file():
        targets = config_targets(config_dir, args.dir)
    else:
        targets = directory_targets(args.dir)
    options = AnalysisOptions(block_size=args.block_size, capacity_tokens=capacity, reading=args.reading)
    reading, results = analyze(targets, tokenizer, options)
    print(analysis_table(reading, options, results))
    if args.json:
        try:
            args.json.write_text(json.dumps(analysis_document(reading, options, results), indent=1) + "\n")
        except OSError as exc:
            raise OutputError(f"cannot write {args.json}: {exc.strerror}; choose another --json") from None
    return 0
