"""The `fastgen` command. Thin: parse, call the library, map fastgen's errors to one line and an exit code.

    fastgen [generate] [--workload FILE | --from-manifest MANIFEST] [--model M] [--tokenizer T] [--seed N] ...
    fastgen workload show [--workload FILE] [--scale F] [--budget-scale F] [--max-model-len N]
    fastgen validate DIR | fastgen validate --trace FILE [--verbose]
    fastgen verify DIR [--manifest FILE] | fastgen unpack DIR
    fastgen bakeoff --url URL --label NAME [--configs PATTERN ...]
    fastgen compare RUNS_A RUNS_B --out DIR
    fastgen analyze DIR [--configs CONFIG_DIR] [--kv-cache-tokens N] [--definition vllm|aiperf]
    fastgen export mooncake DIR --out FILE [--config NAME]
    fastgen export shards CONFIG --shards N --out DIR

One module per group of commands (generate, datasets, runs); this one picks the command and maps the errors.
Only the standard library is imported at module level: numpy, tokenizers and the generator are imported inside
main's error handling, so Ctrl-C during start-up is the same one line as Ctrl-C at any other time.
"""

from __future__ import annotations

import difflib
import signal
import sys

from ..errors import FastgenError, SpecError
from .analysis import analyze_parser, run_analyze
from .export import export_parser, run_export
from .datasets import run_unpack, run_validate, run_verify, unpack_parser, validate_parser, verify_parser
from .generate import generate_parser, run_generate
from .workload import run_workload, workload_parser
from .options import DEFAULT_MODEL, QUIET, Interrupted, UsageError
from .runs import bakeoff_parser, compare_parser, run_bakeoff_command, run_compare

__all__ = ["DEFAULT_MODEL", "main"]

_COMMANDS = {
    "generate": (generate_parser, run_generate),
    "workload": (workload_parser, run_workload),
    "validate": (validate_parser, run_validate),
    "verify": (verify_parser, run_verify),
    "unpack": (unpack_parser, run_unpack),
    "bakeoff": (bakeoff_parser, run_bakeoff_command),
    "compare": (compare_parser, run_compare),
    "analyze": (analyze_parser, run_analyze),
    "export": (export_parser, run_export),
}


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the same cleanup as Ctrl-C runs."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _split(argv: list[str]) -> tuple[str, list[str]]:
    """(command, its arguments); -q/--quiet may stand before the command name."""
    leading = argv[: next((i for i, a in enumerate(argv) if a not in QUIET), len(argv))]
    rest = argv[len(leading) :]
    if rest and not rest[0].startswith("-"):
        if rest[0] not in _COMMANDS:
            close = difflib.get_close_matches(rest[0], list(_COMMANDS), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise UsageError(
                f"unknown command '{rest[0]}'; {hint}commands: {', '.join(_COMMANDS)} (generating "
                f"needs no command: fastgen --help)"
            )
        return rest[0], leading + rest[1:]
    return "generate", leading + rest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        command, rest = _split(argv)
        parser, run = _COMMANDS[command]
        return run(parser().parse_args(rest))
    except (UsageError, SpecError) as exc:  # bad input: options, a workload, a spec that cannot fit
        print(f"fastgen: error: {exc}", file=sys.stderr)
        return 2
    except FastgenError as exc:
        print(f"fastgen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Interrupted says what its command kept; a bare Ctrl-C, the general rule
        said = str(exc) if isinstance(exc, Interrupted) else "the output was left as it was, with nothing partial"
        print(f"fastgen: interrupted; {said}", file=sys.stderr)
        return 130
    except Terminated:
        print("fastgen: terminated; the output was left as it was, with nothing partial", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)
