"""What every command's parser shares: one-line errors, typed options, the defaults fastgen is known by, and the one
way a command writes a file an option names (write_output)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PROMETHEUS_URL",
    "DEFAULT_SEED",
    "DefaultsOnceFormatter",
    "Interrupted",
    "add_replay_modes",
    "MAX_SEED",
    "Parser",
    "QUIET",
    "UsageError",
    "int_in",
    "positive_float",
    "url_option",
    "warn",
    "write_output",
]

DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"
DEFAULT_SEED = 42
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
MAX_SEED = 2**63 - 1
QUIET = ("--quiet", "-q")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what a command kept and how to go on; main() prints it and exits 130 like any Ctrl-C."""


_STATES_ITS_DEFAULT = re.compile(r"\b(default|unset)\b", re.IGNORECASE)


class DefaultsOnceFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help once, and only where it says something: not for a default of
    None, False or an empty list, not for a positional, and not where the help already states the default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default in (None, False, argparse.SUPPRESS)
            or default == []
            or _STATES_ITS_DEFAULT.search(text)
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs):
        super().__init__(allow_abbrev=False, formatter_class=DefaultsOnceFormatter, **kwargs)
        self.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary on stderr")

    def error(self, message: str):  # one line, no usage dump
        self.exit(2, f"fastgen: error: {message} (see {self.prog} --help)\n")


def int_in(lo: int, hi: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be between {lo} and {hi}, got {value}")
        return value

    return parse


def positive_float(what: str, most: float = 1000):
    """A number above 0 and at most `most`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if not (0 < value <= most):
            raise argparse.ArgumentTypeError(f"{what} must be > 0 and <= {most:g}, got {text}")
        return value

    return parse


def url_option(what: str):
    def parse(text: str) -> str:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise argparse.ArgumentTypeError(
                f"{what} must be an http(s) URL such as http://gpu-host:8000, got {text!r}"
            )
        return text

    return parse


def warn(message: str) -> None:
    print(f"fastgen: warning: {message}", file=sys.stderr)


class UsageError(Exception):
    """Arguments that parse one by one but not together: exit 2, like argparse's own errors."""


def write_output(path: Path, data: bytes | str, option: str) -> None:
    """`data` into the file `option` (--json, --out, --timings) names, whole or not at all: through the atomic
    writer, so a failed write leaves no partial file and an existing one as it was; the failure as one line."""
    from ..errors import OutputError
    from ..formats.atomic import write_atomically

    try:
        write_atomically(path, data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}; choose another {option}") from None


def add_replay_modes(p: argparse.ArgumentParser, *, from_configs: bool) -> None:
    """--outputs, --tool-call-max-tokens and --tool-choice: how the configs replay. generate writes them into the
    configs (with defaults); with `from_configs` (bakeoff) they are unset unless given and override the configs."""
    from ..formats.config_dialect import OUTPUTS_MODES, TOOL_CALL_MAX_TOKENS_MODES, TOOL_CHOICE_MODES

    tail = "; default: as the configs say" if from_configs else ""
    p.add_argument(
        "--outputs",
        choices=OUTPUTS_MODES,
        default=None if from_configs else "live",
        help="what later turns' prompts hold where an earlier answer was: live, each engine's own answer "
        "(the agent loop as it runs; prompts differ between engines from turn 2 on), or recorded, the "
        "trace's answer (every engine replays the same prompts: the fair side-by-side)" + tail,
    )
    p.add_argument(
        "--tool-call-max-tokens",
        choices=TOOL_CALL_MAX_TOKENS_MODES,
        default=None if from_configs else "floor",
        help="max_tokens of forced tool-call turns: floor, inference-perf's max(4 x recorded, 4096), or "
        "recorded, the trace's length" + tail,
    )
    p.add_argument(
        "--tool-choice",
        choices=TOOL_CHOICE_MODES,
        default=None if from_configs else "forced",
        help="tool_choice sent: forced, inference-perf's (the recorded tool named, 'none' on text turns), or "
        "as_recorded, none (SGLang then renders every tool into the prompt as vLLM does: both engines are "
        "sent the same prompts)" + tail,
    )
