"""The `fastgen` command. Thin: parse, call the library, map fastgen's errors to one line and an exit code.

    fastgen [generate] [--workload FILE | --from-manifest MANIFEST] [--model M] [--tokenizer T] [--seed N] ...
    fastgen workload show [--workload FILE] [--scale F] [--budget-scale F] [--max-model-len N]
    fastgen validate DIR | fastgen validate --trace FILE [--verbose]
    fastgen verify DIR [--manifest FILE] | fastgen unpack DIR

Only the standard library is imported at module level: numpy, tokenizers and the generator are imported inside
main's error handling, so Ctrl-C during start-up is the same one line as Ctrl-C at any other time.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import signal
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .errors import FastgenError, SpecError
from .version import __version__

__all__ = ["main"]

DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"
DEFAULT_SEED = 42
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
_MAX_SEED = 2**63 - 1
_QUIET = ("--quiet", "-q")


class _Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs):
        super().__init__(allow_abbrev=False, formatter_class=argparse.ArgumentDefaultsHelpFormatter, **kwargs)
        self.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary on stderr")

    def error(self, message: str):  # one line, no usage dump
        self.exit(2, f"fastgen: error: {message} (see {self.prog} --help)\n")


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


def _url(what: str):
    def parse(text: str) -> str:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise argparse.ArgumentTypeError(f"{what} must be an http(s) URL such as http://gpu-host:8000, "
                                             f"got {text!r}")
        return text
    return parse


def _generate_parser() -> argparse.ArgumentParser:
    from .configs import METRICS_TYPES, SERVER_TYPES

    p = _Parser(prog="fastgen", description="Generate the coding-agent KV-cache benchmark: trace files for "
                "inference-perf's otel_trace_replay and one config per scenario and load level.",
                epilog="Other commands: fastgen workload show, fastgen validate DIR, fastgen verify DIR, fastgen unpack "
                "DIR (each with --help). `fastgen generate ...` is the same as `fastgen ...`. Your own workload: "
                "fastgen workload show > my.yaml, edit it, then fastgen --workload my.yaml.")
    p.add_argument("--version", action="version", version=f"fastgen {__version__}")
    p.add_argument("--model", default=argparse.SUPPRESS,
                   help=f"model name in the spans and server.model_name in the configs: the name your server serves "
                   f"(default: {DEFAULT_MODEL})")
    p.add_argument("--tokenizer", help="tokenizer.json, a model folder, a hub id (the local HF cache first, then a "
                   "download of its tokenizer files; HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE apply), or 'builtin' "
                   "(default: --model's tokenizer)")
    p.add_argument("--tokenizer-revision", metavar="REV",
                   help="with a hub id: the branch, tag or commit to use (the manifest records the commit)")
    p.add_argument("--seed", type=_int_in(0, _MAX_SEED, "--seed"), default=argparse.SUPPRESS,
                   help=f"seed of every RNG stream (default: {DEFAULT_SEED})")
    _add_workload_options(p)
    p.add_argument("--from-manifest", type=Path, metavar="MANIFEST",
                   help="regenerate the dataset a manifest describes, byte for byte: its workload, seed, model, "
                   "tokenizer and compression")
    p.add_argument("--output-dir", type=Path, default=Path("traces"), help="the trace folder")
    p.add_argument("--config-dir", type=Path, default=Path("configs"), help="the inference-perf config folder")
    p.add_argument("--workers", type=_int_in(1, 1024, "--workers"), default=os.cpu_count() or 1,
                   help="worker processes (the bytes are the same for every number)")
    p.add_argument("--server-type", choices=SERVER_TYPES, default="vllm", help="server.type of the configs")
    p.add_argument("--base-url", type=_url("--base-url"), default="http://localhost:8000",
                   help="server base URL written into the configs")
    p.add_argument("--prometheus-url", type=_url("--prometheus-url"),
                   help="Prometheus base URL; when given, the configs collect the server's metrics from it "
                   f"(--metrics prometheus; without --metrics default and this, {DEFAULT_PROMETHEUS_URL})")
    p.add_argument("--metrics", choices=METRICS_TYPES,
                   help="metrics.type of the configs (default: prometheus with --prometheus-url, else default: "
                   "client-side reports only, no Prometheus queries and no wait after the load)")
    p.add_argument("--max-wait-ms", type=_int_in(0, 10**7, "--max-wait-ms"),
                   help="cap on the recorded gaps the replay waits out between turns (max_wait_ms in the configs; "
                   "unset: inference-perf's 15000); for quick functional runs")
    p.add_argument("--absolute-paths", action="store_true", help="write absolute paths into the configs")
    p.add_argument("--compress", choices=["zstd"], help="write .json.zst files (fastgen unpack DIR restores .json)")
    p.add_argument("--level", type=_int_in(1, 22, "--level"), help="zstd level, with --compress zstd (unset: 3)")
    p.add_argument("--force", action="store_true", help="write into folders that hold other files; fastgen then "
                   "replaces only files its previous manifest lists and never overwrites one it did not write")
    return p


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", metavar="FILE",
                   help="a workload YAML file (`fastgen workload show > my.yaml` writes one to edit), or a shipped "
                   "one: default, 32k, smoke (default: default, the benchmark's numbers)")
    p.add_argument("--max-model-len", type=_int_in(1024, 10**8, "--max-model-len"), default=argparse.SUPPRESS,
                   help="context window every request must fit, max_tokens included (default: the workload's, "
                   "131072 in the default one)")
    p.add_argument("--scale", type=_positive_float("--scale"), default=1.0, help="multiply every session count")
    p.add_argument("--budget-scale", type=_positive_float("--budget-scale"), default=1.0,
                   help="multiply every token budget (small, fast datasets for tests)")
    p.add_argument("--arrival-window", type=_int_in(1, 86400, "--arrival-window"), default=argparse.SUPPRESS,
                   help="seconds over which the sessions of scenarios with arrivals (scenario 3) arrive: session_rate "
                   "in their configs (default: the workload's, 1200 in the default one)")


def _workload_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen workload", description="Print the effective workload as YAML: the shipped default, or "
                "--workload FILE, with --scale, --budget-scale, --max-model-len and --arrival-window applied. Edit it "
                "and generate with fastgen --workload FILE.")
    p.add_argument("action", choices=["show"], help="show: print the workload")
    _add_workload_options(p)
    return p


def _effective_workload(args):
    """The workload of --workload (the shipped default without it), with the command line's changes applied."""
    from .workload import default_workload, resolve_workload

    spec = resolve_workload(args.workload) if args.workload else default_workload()
    if hasattr(args, "max_model_len"):
        spec = dataclasses.replace(spec, max_model_len=args.max_model_len)
    if (args.scale, args.budget_scale) != (1.0, 1.0):
        spec = spec.scaled(sessions=args.scale, budgets=args.budget_scale)
    if hasattr(args, "arrival_window"):
        spec = spec.with_scenarios({name: dataclasses.replace(sc, arrival_window_s=args.arrival_window)
                                    for name, sc in spec.scenarios.items() if hasattr(sc, "arrival_window_s")})
    return spec


def _run_workload(args) -> int:
    from .workload import workload_yaml

    sys.stdout.write(workload_yaml(_effective_workload(args)))
    return 0


# --tokenizer may point at the same tokenizer elsewhere (another machine's path): its sha256 is checked
_FROM_MANIFEST_TAKES = ("--workload", "--seed", "--model", "--scale", "--budget-scale", "--max-model-len",
                        "--arrival-window", "--compress", "--level")


def _given(args, option: str) -> bool:
    value = getattr(args, option.lstrip("-").replace("-", "_"), None)
    return value is not None and value is not False and not (option in ("--scale", "--budget-scale") and value == 1.0)


def _run_plan(args):
    """(workload, model, tokenizer name, its revision, seed, zstd level, manifest arguments, the sha256 the tokenizer
    must have)."""
    if args.from_manifest is None:
        if args.level is not None and not args.compress:
            raise _UsageError("--level needs --compress zstd")
        model, seed = getattr(args, "model", DEFAULT_MODEL), getattr(args, "seed", DEFAULT_SEED)
        tokenizer = args.tokenizer or model
        zstd_level = (3 if args.level is None else args.level) if args.compress else None
        arguments = {"model": model, "tokenizer": tokenizer, "seed": seed, "workload": args.workload or "default",
                     "scale": args.scale, "budget_scale": args.budget_scale,
                     "max_model_len": getattr(args, "max_model_len", None), "zstd_level": zstd_level,
                     "arrival_window": getattr(args, "arrival_window", None)}
        if args.tokenizer_revision:
            arguments["tokenizer_revision"] = args.tokenizer_revision
        return _effective_workload(args), model, tokenizer, args.tokenizer_revision, seed, zstd_level, arguments, None
    taken = [option for option in _FROM_MANIFEST_TAKES if _given(args, option)]
    if taken:
        raise _UsageError(f"--from-manifest takes the workload, seed, model and compression from the manifest; "
                          f"drop {taken[0]}")
    from .manifest import read_manifest_file
    from .workload import spec_from_document

    doc = read_manifest_file(args.from_manifest)
    arguments = doc.get("arguments") or {}
    try:
        spec = spec_from_document(doc["workload"], source=f"{args.from_manifest} (workload)")
        values = (arguments["model"], arguments["tokenizer"], arguments["seed"], arguments.get("zstd_level"))
        sha = doc["tokenizer"]["sha256"]
        commit = doc["tokenizer"].get("commit")  # a hub tokenizer: the very commit it was made with
    except (KeyError, TypeError):
        raise _UsageError(f"{args.from_manifest} records no workload, arguments or tokenizer (written by fastgen "
                          f"before 0.3?); regenerate with the options it was made with") from None
    model, tokenizer, seed, zstd_level = values
    revision = None if args.tokenizer else (args.tokenizer_revision or commit)
    return spec, model, args.tokenizer or tokenizer, revision, seed, zstd_level, arguments, sha


def _validate_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen validate", description="Check every trace with inference-perf 0.7.0's own graph builder.")
    p.add_argument("dir", nargs="?", type=Path, help="a dataset folder (or one scenario folder)")
    p.add_argument("--trace", type=Path, help="one trace file")
    p.add_argument("--verbose", action="store_true", help="with --trace: print the whole dependency graph")
    p.add_argument("--workers", type=_int_in(1, 1024, "--workers"), default=None,
                   help="worker processes (unset: all cores)")
    return p


def _verify_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen verify", description="Re-hash a dataset against its manifest (or another one).")
    p.add_argument("dir", type=Path, help="a dataset folder (the one that holds manifest.json)")
    p.add_argument("--manifest", type=Path, help="compare with this manifest (e.g. a golden one) instead of DIR's")
    return p


def _unpack_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fastgen unpack", description="Restore plain .json from .json.zst (inference-perf reads .json).")
    p.add_argument("dir", type=Path, help="a dataset folder written with --compress zstd")
    return p


def _warn(message: str) -> None:
    print(f"fastgen: warning: {message}", file=sys.stderr)


def _config_options(args):
    from .configs import ConfigOptions

    metrics = args.metrics or ("prometheus" if args.prometheus_url else "default")
    return ConfigOptions(server_type=args.server_type, base_url=args.base_url,
                         prometheus_url=args.prometheus_url or DEFAULT_PROMETHEUS_URL, metrics=metrics,
                         max_wait_ms=args.max_wait_ms, absolute_paths=args.absolute_paths)


def _run_generate(args) -> int:
    spec, model, tokenizer_name, revision, seed, zstd_level, arguments, sha = _run_plan(args)
    from .output import TOKENIZER_FOLDER, RunOptions, generate
    from .tokenizer import BUILTIN_NAME, load_tokenizer

    tokenizer = load_tokenizer(tokenizer_name, revision)
    if sha is not None and tokenizer.identity.sha256 != sha:
        raise _UsageError(f"tokenizer {tokenizer_name} is not the one {args.from_manifest} was made with (sha256 "
                          f"{tokenizer.identity.sha256[:12]}, not {sha[:12]}); the bytes would differ")
    if model == DEFAULT_MODEL and tokenizer_name not in (DEFAULT_MODEL, BUILTIN_NAME):
        _warn(f"--tokenizer {tokenizer_name} with the default --model {DEFAULT_MODEL}: the configs ask the server "
              f"for that model; pass --model with the name your server serves")
    if not tokenizer.has_chat_template:
        _warn(f"tokenizer {tokenizer_name} has no chat template; servers need one to render the prompts (add "
              f"chat_template to its tokenizer_config.json, or use the model's own tokenizer folder)")
    config_options = _config_options(args)
    ident = tokenizer.identity
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    metrics = ("metrics from Prometheus at " + config_options.prometheus_url if config_options.metrics == "prometheus"
               else "metrics: default (no Prometheus queries; give --prometheus-url to collect the server's)")
    say(f"fastgen {__version__}: model {model}, tokenizer {ident.source} (sha256 {ident.sha256[:12]}, "
        f"vocab {ident.vocab_size}, {'additive' if tokenizer.additive else 'non-additive: counting whole texts'}), "
        f"seed {seed}, {args.workers} worker(s), {args.server_type} at {args.base_url}, {metrics}")
    options = RunOptions(model=model, tokenizer=tokenizer_name, seed=seed, spec=spec,
                         output_dir=args.output_dir, workers=args.workers,
                         progress=not args.quiet and sys.stderr.isatty(), arguments=arguments, zstd_level=zstd_level,
                         force=args.force, config_dir=args.config_dir, configs=config_options)
    records = generate(options, tokenizer)
    traces = [r for r in records if not r.path.startswith(TOKENIZER_FOLDER + "/")]
    say(f"wrote {len(traces)} trace files ({sum(r.size for r in traces) / 1e9:.2f} GB) to {args.output_dir} "
        f"and the configs to {args.config_dir}")
    return 0


def _run_validate(args) -> int:
    from .validate import check_file, describe_file, summary_table, validate_tree

    if args.trace:
        if args.verbose:
            print(describe_file(args.trace))
        report = check_file(args.trace)
        if not args.verbose:
            print(f"{args.trace}: {report.events} events, " + ("ok" if not report.deviations else "; ".join(report.deviations)))
        return 1 if report.deviations else 0
    if args.dir is None:
        raise _UsageError("give a dataset folder (fastgen validate DIR) or a file (--trace FILE)")
    reports = validate_tree(args.dir, workers=args.workers, progress=not args.quiet and sys.stderr.isatty())
    print(summary_table(reports))
    return 1 if any(r.deviations for r in reports) else 0


def _run_verify(args) -> int:
    from .verify import verify_tree

    report = verify_tree(args.dir, manifest=args.manifest)
    print(report.summary())
    return 0 if report.ok else 1


def _run_unpack(args) -> int:
    from .verify import unpack_tree

    restored = unpack_tree(args.dir)
    if not args.quiet:
        print(f"restored {restored} .json files in {args.dir}")
    return 0


_COMMANDS = {"generate": (_generate_parser, _run_generate), "workload": (_workload_parser, _run_workload),
             "validate": (_validate_parser, _run_validate),
             "verify": (_verify_parser, _run_verify), "unpack": (_unpack_parser, _run_unpack)}


class _UsageError(Exception):
    """Arguments that parse one by one but not together: exit 2, like argparse's own errors."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the same cleanup as Ctrl-C runs."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _split(argv: list[str]) -> tuple[str, list[str]]:
    """(command, its arguments); -q/--quiet may stand before the command name."""
    leading = argv[: next((i for i, a in enumerate(argv) if a not in _QUIET), len(argv))]
    rest = argv[len(leading):]
    if rest and not rest[0].startswith("-"):
        if rest[0] not in _COMMANDS:
            close = difflib.get_close_matches(rest[0], list(_COMMANDS), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise _UsageError(f"unknown command '{rest[0]}'; {hint}commands: {', '.join(_COMMANDS)} (generating "
                              f"needs no command: fastgen --help)")
        return rest[0], leading + rest[1:]
    return "generate", leading + rest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        command, rest = _split(argv)
        parser, run = _COMMANDS[command]
        return run(parser().parse_args(rest))
    except (_UsageError, SpecError) as exc:  # bad input: options, a workload, a spec that cannot fit
        print(f"fastgen: error: {exc}", file=sys.stderr)
        return 2
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
