"""The `fastgen` command. Thin: parse, call the pipeline, map fastgen's errors to one line and an exit code.

    fastgen [--model M] [--tokenizer T] [--seed N] [--output-dir D] [--config-dir C] [--workers N] ...
    fastgen validate DIR | fastgen validate --trace FILE [--verbose]
    fastgen verify DIR [--manifest FILE] | fastgen unpack DIR
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from . import __version__
from .errors import FastgenError, SpecError, ValidationError

__all__ = ["main"]

DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"
_MAX_SEED = 2**63 - 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        self.exit(2, f"fastgen: error: {message} (see fastgen --help)\n")


def _int_in(lo: int, hi: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be between {lo} and {hi}, got {value}")
        return value
    return parse


def _positive_float(what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if not (0 < value <= 1000):
            raise argparse.ArgumentTypeError(f"{what} must be > 0 and <= 1000, got {text}")
        return value
    return parse


def _generate_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen", description="Generate the coding-agent KV-cache benchmark traces and "
                "inference-perf configs. Subcommands: validate DIR, verify DIR, unpack DIR.")
    p.add_argument("--version", action="version", version=f"fastgen {__version__}")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model name in the spans and server.model_name in configs")
    p.add_argument("--tokenizer", help="tokenizer.json, a model folder, a hub id in the local HF cache, or 'builtin' "
                   "(default: --model's tokenizer)")
    p.add_argument("--seed", type=_int_in(0, _MAX_SEED, "--seed"), default=42)
    p.add_argument("--output-dir", type=Path, default=Path("traces"))
    p.add_argument("--config-dir", type=Path, default=Path("configs"))
    p.add_argument("--workers", type=_int_in(1, 1024, "--workers"), default=os.cpu_count() or 1)
    p.add_argument("--server-type", default="vllm", help="vllm or sglang, written into the configs")
    p.add_argument("--base-url", default="http://localhost:8000", help="server base URL written into the configs")
    p.add_argument("--prometheus-url", default="http://localhost:9090", help="Prometheus base URL for the configs")
    p.add_argument("--metrics", choices=["prometheus", "default"], default="prometheus",
                   help="metrics.type of the configs: prometheus (server metrics from --prometheus-url) or default "
                   "(client-side reports only, no Prometheus wait; for runs without Prometheus)")
    p.add_argument("--max-wait-ms", type=_int_in(0, 10**7, "--max-wait-ms"),
                   help="cap on the recorded gaps the replay waits out between turns (max_wait_ms in the configs; "
                   "default: inference-perf's 15000); for quick functional runs")
    p.add_argument("--max-model-len", type=_int_in(1024, 10**8, "--max-model-len"), default=131072)
    p.add_argument("--scale", type=_positive_float("--scale"), default=1.0, help="multiply every session count")
    p.add_argument("--budget-scale", type=_positive_float("--budget-scale"), default=1.0,
                   help="multiply every token budget (small, fast datasets for tests)")
    p.add_argument("--arrival-window", type=_int_in(1, 86400, "--arrival-window"), default=1200,
                   help="seconds over which scenario 3 sessions arrive (session_rate in its configs; default 1200)")
    p.add_argument("--absolute-paths", action="store_true", help="write absolute paths into the configs")
    p.add_argument("--compress", choices=["zstd"], help="write .json.zst files (fastgen unpack DIR restores .json)")
    p.add_argument("--level", type=_int_in(1, 22, "--level"), default=3, help="zstd level (default 3)")
    p.add_argument("--force", action="store_true", help="write into a folder that holds other files; fastgen then "
                   "removes only files its previous manifest lists and never overwrites one it did not write")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    return p


def _validate_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen validate", description="Check every trace with inference-perf 0.7.0's own graph builder.")
    p.add_argument("dir", nargs="?", type=Path, help="a dataset folder (or one scenario folder)")
    p.add_argument("--trace", type=Path, help="one trace file")
    p.add_argument("--verbose", action="store_true", help="with --trace: print the whole dependency graph")
    p.add_argument("--workers", type=_int_in(1, 1024, "--workers"), default=None)
    return p


def _run_generate(args) -> int:
    from .configs import SERVER_TYPES, render_configs, write_configs
    from .dataset import check_fits
    from .output import TOKENIZER_FOLDER, RunOptions, generate
    from .spec import Spec
    from .tokenizer import load_tokenizer

    import dataclasses

    spec = Spec(max_model_len=args.max_model_len).scaled(sessions=args.scale, budgets=args.budget_scale)
    spec = dataclasses.replace(spec, scenario3=dataclasses.replace(spec.scenario3, arrival_window_s=args.arrival_window))
    check_fits(spec)
    if args.server_type not in SERVER_TYPES:  # before anything is written; render_configs would refuse it too late
        raise SpecError(f"--server-type {args.server_type!r} is not supported; use {' or '.join(SERVER_TYPES)}")
    tokenizer_name = args.tokenizer or args.model
    tokenizer = load_tokenizer(tokenizer_name)
    ident = tokenizer.identity
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    say(f"fastgen {__version__}: tokenizer {ident.source} (sha256 {ident.sha256[:12]}, vocab {ident.vocab_size}, "
        f"{'additive' if tokenizer.additive else 'non-additive: counting whole texts'}), seed {args.seed}, "
        f"{args.workers} worker(s)")
    zstd_level = args.level if args.compress else None
    arguments = {"model": args.model, "tokenizer": tokenizer_name, "seed": args.seed, "scale": args.scale,
                 "budget_scale": args.budget_scale, "max_model_len": args.max_model_len, "zstd_level": zstd_level,
                 "arrival_window": args.arrival_window}
    options = RunOptions(model=args.model, tokenizer=tokenizer_name, seed=args.seed, spec=spec,
                         output_dir=args.output_dir, workers=args.workers,
                         progress=not args.quiet and sys.stderr.isatty(), arguments=arguments, zstd_level=zstd_level,
                         force=args.force)
    records = generate(options, tokenizer)
    rendered = render_configs(spec=spec, model=args.model, server_type=args.server_type, base_seed=args.seed,
                              trace_root=args.output_dir, config_root=args.config_dir,
                              tokenizer_dir=args.output_dir / TOKENIZER_FOLDER, absolute_paths=args.absolute_paths,
                              base_url=args.base_url, prometheus_url=args.prometheus_url,
                              metrics=args.metrics, max_wait_ms=args.max_wait_ms)
    written = write_configs(args.config_dir, rendered)
    traces = [r for r in records if not r.path.startswith(TOKENIZER_FOLDER + "/")]
    say(f"wrote {len(traces)} trace files ({sum(r.size for r in traces) / 1e9:.2f} GB) to {args.output_dir} "
        f"and {len(written)} configs to {args.config_dir}")
    return 0


def _run_validate(args) -> int:
    from .validate import describe_file, validate_tree, summary_table, check_file

    if args.trace:
        if args.verbose:
            print(describe_file(args.trace))
        report = check_file(args.trace)
        if not args.verbose:
            print(f"{args.trace}: {report.events} events, " + ("ok" if not report.deviations else "; ".join(report.deviations)))
        return 1 if report.deviations else 0
    if args.dir is None:
        raise ValidationError("give a dataset folder (fastgen validate DIR) or a file (--trace FILE)")
    reports = validate_tree(args.dir, workers=args.workers, progress=sys.stderr.isatty())
    print(summary_table(reports))
    return 1 if any(r.deviations for r in reports) else 0


def _verify_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen verify", description="Re-hash a dataset against its manifest (or another one).")
    p.add_argument("dir", type=Path)
    p.add_argument("--manifest", type=Path, help="compare with this manifest (e.g. a golden one) instead of DIR's")
    return p


def _unpack_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen unpack", description="Restore plain .json from .json.zst (inference-perf reads .json).")
    p.add_argument("dir", type=Path)
    return p


def _run_verify(args) -> int:
    from .verify import verify_tree

    report = verify_tree(args.dir, manifest=args.manifest)
    print(report.summary())
    return 0 if report.ok else 1


def _run_unpack(args) -> int:
    from .verify import unpack_tree

    print(f"restored {unpack_tree(args.dir)} .json files in {args.dir}")
    return 0


_SUBCOMMANDS = {"validate": (_validate_parser, _run_validate), "verify": (_verify_parser, _run_verify),
                "unpack": (_unpack_parser, _run_unpack)}


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the same cleanup as Ctrl-C runs."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if argv[:1] and argv[0] in _SUBCOMMANDS:
            parser, run = _SUBCOMMANDS[argv[0]]
            return run(parser().parse_args(argv[1:]))
        return _run_generate(_generate_parser().parse_args(argv))
    except FastgenError as exc:
        print(f"fastgen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fastgen: interrupted; the output was left as it was, with nothing partial", file=sys.stderr)
        return 130
    except Terminated:
        print("fastgen: terminated; the output was left as it was, with nothing partial", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)
