"""Replay every generated config with the real inference-perf against the local fake server, and check the run.

    python -m e2e.suites.run [--workdir .e2e] [--only scenario1/c10 ...] [--metrics default|prometheus]

1. Pick a free loopback port, and generate a small dataset with the real command (`python -m fastgen ...
   --base-url http://127.0.0.1:PORT --absolute-paths`): the configs point at the server as generated, no edits.
2. Serve it (server.ServerThread) with the dataset's own tokenizer folder.
3. For each config, one at a time: reset the server (empty prefix cache and records), run inference-perf from the
   config's folder with a time limit, read its session reports, run the checks (checks.py).
4. Print one row per config and exit 1 if any check failed.

Everything lands under the work folder: traces/, configs/, reports/ (where the configs send them), logs/ (each
run's inference-perf output) and records/ (what the server saw, one JSON line per request).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import yaml

from fastgen.bakeoff.plan import select_configs
from fastgen.formats.config_document import ConfigDocument
from fastgen.formats.rows import trace_dir_of

from ..checks.replayed import Outcome, check_run
from .replay import run_inference_perf
from ..checks.reports import clear_reports, read_reports
from ..engines.server import ServerThread
from .runner import suite_parser

__all__ = ["Dataset", "run_e2e", "summary_table", "main"]

CONFIG_TIMEOUT_S = 300  # the slowest config replays in well under a minute; this only catches a hang


@dataclass(frozen=True)
class Dataset:
    """The fastgen arguments of the e2e dataset.

    The defaults are small enough that all 17 configs replay in minutes on 2 cores, and large enough that every
    scenario keeps its shape: 4 scenario-1 sessions, 2 scenario-2 sets, 20 scenario-3 sessions arriving over 10 s,
    prompts of a few K tokens. The recorded think and tool gaps (up to 6 s, not scaled by budget_scale) are capped
    at 1 s: uncapped they are most of the run's time, and no check depends on them.
    """

    scale: float = 0.04
    budget_scale: float = 0.02
    arrival_window: int = 10
    max_wait_ms: int = 1000
    metrics: str = "default"
    prometheus_url: Optional[str] = None  # None: a loopback port nobody listens on (queries are refused at once)
    tokenizer: str = "builtin"  # or a tokenizer folder (the server serves the dataset's own copy of it)
    workload: Optional[str] = None  # a shipped workload's name or a file; None: the benchmark's (default)
    # the server answers each request with its span's recorded output under tool-call ids of its own (a model making
    # the recorded k parallel calls, which no real model promises); False: its own short answers, one call where a
    # tool is forced
    recorded_answers: bool = False

    def arguments(self, workdir: Path, base_url: str) -> list[str]:
        prometheus = self.prometheus_url or f"http://127.0.0.1:{free_port()}"
        return [
            *(["--workload", self.workload] if self.workload else []),
            "--tokenizer",
            self.tokenizer,
            "--scale",
            str(self.scale),
            "--budget-scale",
            str(self.budget_scale),
            "--arrival-window",
            str(self.arrival_window),
            "--max-wait-ms",
            str(self.max_wait_ms),
            "--metrics",
            self.metrics,
            "--prometheus-url",
            prometheus,
            "--base-url",
            base_url,
            "--output-dir",
            str(workdir / "traces"),
            "--config-dir",
            str(workdir / "configs"),
            "--workers",
            "2",
            "--absolute-paths",
            "--quiet",
        ]


def free_port() -> int:
    """A loopback port nobody listens on now; the server binds it after generation wrote it into the configs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(workdir: Path, base_url: str, dataset: Dataset) -> None:
    """The real command in a real process, as a user would run it."""
    cmd = [sys.executable, "-m", "fastgen", *dataset.arguments(workdir, base_url)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"fastgen failed ({result.returncode}): {result.stderr.strip()}")


def config_files(config_root: Path, only: Optional[list[str]] = None) -> list[Path]:
    """The configs in the design's order (scenario, then concurrency), or just the named ones (`scenario1/c10`)."""
    return [run.path for run in select_configs(config_root, only)]


def replay_one(server: ServerThread, path: Path, workdir: Path, *, timeout_s: float) -> Outcome:
    config = yaml.safe_load(path.read_text())
    name = f"{path.parent.name}/{path.stem}"
    trace_dir = Path(trace_dir_of(ConfigDocument(config).replay)).name
    clear_reports(config, path.parent)
    server.reset()
    started = time.monotonic()
    code = run_inference_perf(path, log=workdir / "logs" / f"{name}.log", timeout_s=timeout_s)
    outcome = Outcome(config=name, trace_dir=trace_dir, seconds=time.monotonic() - started)
    records = list(server.records)
    _dump(records, workdir / "records" / f"{name}.jsonl")
    try:
        reports = read_reports(config, path.parent)
    except (OSError, ValueError) as exc:
        reports = None
        outcome.failures.append(f"cannot read the session reports: {exc}")
    return check_run(outcome, exit_code=code, records=records, reports=reports, stage=ConfigDocument(config).stage)


def _dump(records: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


def run_e2e(
    workdir: Path,
    *,
    dataset: Dataset = Dataset(),
    only: Optional[list[str]] = None,
    timeout_s: float = CONFIG_TIMEOUT_S,
    echo: Callable[[str], None] = print,
) -> list[Outcome]:
    """Generate, serve, replay and check; one Outcome per config, in order."""
    workdir = Path(workdir).resolve()
    port = free_port()
    generate(workdir, f"http://127.0.0.1:{port}", dataset)
    paths = config_files(workdir / "configs", only)
    outcomes = []
    answers_from = workdir / "traces" if dataset.recorded_answers else None
    server = ServerThread(
        workdir / "traces" / "tokenizer", port=port, answers_from=answers_from, fresh_call_ids=dataset.recorded_answers
    )
    with server:
        for path in paths:
            outcome = replay_one(server, path, workdir, timeout_s=timeout_s)
            echo(_line(outcome))
            outcomes.append(outcome)
    return outcomes


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def _line(o: Outcome) -> str:
    state = "ok" if o.ok else f"FAILED ({len(o.failures)})"
    return (
        f"{o.config}: {state}, {o.requests} requests, {o.sessions} sessions, cache hit {_pct(o.server_hit)} % "
        f"(report {_pct(o.report_hit)} %), {o.seconds:.1f} s"
    )


def summary_table(outcomes: list[Outcome]) -> str:
    rows: list[tuple] = [
        ("config", "traces", "requests", "sessions", "hit % server", "hit % report", "seconds", "result")
    ]
    rows += [
        (
            o.config,
            o.trace_dir,
            o.requests,
            o.sessions,
            _pct(o.server_hit),
            _pct(o.report_hit),
            f"{o.seconds:.1f}",
            "ok" if o.ok else "FAILED",
        )
        for o in outcomes
    ]
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    lines = [
        "  ".join(str(v).ljust(w) if c < 2 else str(v).rjust(w) for c, (v, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    for o in outcomes:
        lines += [f"{o.config}: {failure}" for failure in o.failures]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("run", __doc__, ".e2e")
    p.add_argument("--only", nargs="+", metavar="SCENARIO/NAME", help="replay just these configs, e.g. scenario1/c10")
    p.add_argument("--scale", type=float, default=Dataset.scale)
    p.add_argument("--budget-scale", type=float, default=Dataset.budget_scale)
    p.add_argument("--arrival-window", type=int, default=Dataset.arrival_window)
    p.add_argument(
        "--max-wait-ms",
        type=int,
        default=Dataset.max_wait_ms,
        help="cap on the recorded gaps between turns (15000 replays them as inference-perf would)",
    )
    p.add_argument(
        "--metrics",
        choices=["default", "prometheus"],
        default="default",
        help="metrics.type of the generated configs (prometheus adds scrape_interval + 2 s per config)",
    )
    p.add_argument("--prometheus-url", help="with --metrics prometheus: a real Prometheus (default: a closed port)")
    p.add_argument("--timeout", type=float, default=CONFIG_TIMEOUT_S, help="seconds per config before it is stopped")
    p.add_argument("--workload", help="a shipped workload (e.g. agent) or a file; default: the benchmark's")
    p.add_argument(
        "--recorded-answers",
        action="store_true",
        help="the server answers with each span's recorded output (every parallel call the recording made)",
    )
    args = p.parse_args(argv)
    started = time.monotonic()
    dataset = Dataset(
        scale=args.scale,
        budget_scale=args.budget_scale,
        arrival_window=args.arrival_window,
        max_wait_ms=args.max_wait_ms,
        metrics=args.metrics,
        prometheus_url=args.prometheus_url,
        workload=args.workload,
        recorded_answers=args.recorded_answers,
    )
    outcomes = run_e2e(args.workdir, dataset=dataset, only=args.only, timeout_s=args.timeout)
    print(summary_table(outcomes))
    failed = sum(not o.ok for o in outcomes)
    print(f"{len(outcomes)} configs, {failed} failed, {time.monotonic() - started:.0f} s in all")
    return 1 if failed or not outcomes else 0


if __name__ == "__main__":
    raise SystemExit(main())
