"""What every suite's command line shares: its parser (`--workdir`, the venvs of the real engines), fastgen run as a
user runs it (a process of its own from the checkout), and its end (each failure, the count and the time, the exit
code). The suites keep what they check; this keeps how they start and finish alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

__all__ = [
    "CHECKOUT",
    "VENVS",
    "add_venv",
    "analyze_for",
    "bakeoff",
    "compare",
    "exit_problem",
    "fastgen_command",
    "finish",
    "rows",
    "run_suite",
    "runs_table",
    "suite_parser",
]

CHECKOUT = Path(__file__).resolve().parents[2]  # fastgen runs from here, as `python -m fastgen` in a checkout
# Each real engine's venv: the variable that names another, where it goes otherwise, what it is. A suite installs the
# engine there if it is missing (e2e/real/), so CI's steps share one install each.
VENVS = {
    "vllm": ("FASTGEN_VLLM_VENV", ".e2e-vllm/venv", "the vLLM venv (Python 3.11)"),
    "sglang": ("FASTGEN_SGLANG_VENV", ".e2e-sglang/venv", "the SGLang venv (Python 3.11)"),
    "router": ("FASTGEN_ROUTER_VENV", ".e2e-router/venv", "vllm-router's venv"),
}


def suite_parser(name: str, doc: Optional[str], workdir: str) -> argparse.ArgumentParser:
    """The parser of `python -m e2e.suites.<name>`: the docstring's first paragraph, and `--workdir` (the scratch
    folder, git-ignored by its leading dot)."""
    p = argparse.ArgumentParser(prog=f"python -m e2e.suites.{name}", description=(doc or "").split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=Path(workdir), help=f"scratch folder (default {workdir})")
    return p


def add_venv(p: argparse.ArgumentParser, engine: str, flag: str = "--venv", use: str = "") -> None:
    """`flag`: the venv of a real engine, `$FASTGEN_<ENGINE>_VENV` or the shared default."""
    variable, default, what = VENVS[engine]
    p.add_argument(
        flag,
        type=Path,
        default=Path(os.environ.get(variable, default)),
        help=f"{what}{use}, installed there if missing (default: ${variable} or {default})",
    )


def fastgen_command(*args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
    """`python -m fastgen ARGS` from the checkout, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "fastgen", *args], capture_output=True, text=True, timeout=timeout_s, cwd=CHECKOUT
    )


def analyze_for(
    workdir: Path, label: str, calibrate_from: str, configs: Sequence[str], *options: str, out: Path
) -> subprocess.CompletedProcess:
    """`fastgen analyze` of `configs` of the workdir's dataset for the server `label`'s runs were made against
    (--server-from), at the speeds fitted to `calibrate_from`'s runs (--calibrate), with `options`; its JSON to
    `out`."""
    reports = workdir / "reports"
    return fastgen_command(
        "analyze",
        str(workdir / "traces"),
        "--configs",
        str(workdir / "configs"),
        "--only",
        *configs,
        "--server-from",
        str(reports / label),
        "--calibrate",
        str(reports / calibrate_from),
        "--json",
        str(out),
        *options,
        timeout_s=3600,
    )


def bakeoff(url: str, label: str, workdir: Path, *options: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
    """`fastgen bakeoff` of the engine at `url` under `label`, over `workdir/configs`, its runs into
    `workdir/reports/<label>`, with `options` (`--configs`, `--repeat`, `--scrape-interval`, ...)."""
    command = (
        "--url",
        url,
        "--label",
        label,
        "--config-dir",
        str(workdir / "configs"),
        "--out",
        str(workdir / "reports"),
    )
    return fastgen_command("bakeoff", *command, *options, timeout_s=timeout_s)


def compare(
    workdir: Path, labels: Sequence[str], *options: str, out: str = "report"
) -> tuple[subprocess.CompletedProcess, Optional[dict]]:
    """`fastgen compare` of `workdir/reports/<label>` for each label into `workdir/<out>`, with `options`: what it
    printed, and its report.json (None if it failed)."""
    sources = (str(workdir / "reports" / label) for label in labels)
    result = fastgen_command("compare", *sources, "--out", str(workdir / out), *options)
    return result, json.loads((workdir / out / "report.json").read_text()) if result.returncode == 0 else None


def runs_table(report: dict) -> dict:
    """The report.json's Runs table (a row a config, a column a figure of a side)."""
    return next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]


def rows(table: dict) -> list[dict]:
    """A report.json table's rows, each as column -> cell."""
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def exit_problem(result: subprocess.CompletedProcess, what: str, tail: int = 600) -> list[str]:
    """No lines if the command exited 0; else one: `what` exited N, with the ends of what it printed."""
    if result.returncode == 0:
        return []
    return [f"{what} exited {result.returncode}: {result.stdout[-tail:]} {result.stderr[-tail:]}"]


def finish(title: str, failures: list[str], started: float, where: Optional[Path] = None) -> int:
    """Each failure on a line of its own, then `title`: the count, the seconds since `started` (and where the
    results are); the exit code, 1 on any failure."""
    for failure in failures:
        print(f"FAILED: {failure}")
    place = "" if where is None else f"; results in {where}"
    print(f"{title}: {len(failures)} failures, {time.monotonic() - started:.0f} s{place}")
    return 1 if failures else 0


def run_suite(title: str, where: Optional[Path], run: Callable[..., list[str]], *args: Any) -> int:
    """`run(*args)` (a suite: it returns its failures), timed, and the end as `finish` says it."""
    started = time.monotonic()
    return finish(title, run(*args), started, where)
