"""`fastgen bakeoff --capacity CONFIG --slo ...`: the capacity search (bakeoff.capacity_search) run on a live server.

Each load the search asks for is a step: the config replayed at that many sessions in flight (its concurrency, set
through ConfigDocument.hold_in_flight: no arrival rate, so the load is the concurrency) by the bakeoff's own runner,
into an ordinary run folder under a folder named by the load (formats.run_folder.capacity_folder, step_label), so
`fastgen compare` reads any step. A step is judged by the report's own figures (results.inference.figure of the
report's TTFT p95, with its interval; the run's failed requests), over the report's steady-state window: the
requests that start inside it (results.stats.steady_window with --plateau, as the report's steady-state section
credits them), not whole sessions. A step whose run folder completed before is read, not run again (unless
--rerun); the outcome goes to capacity.json beside the steps, written atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import yaml

from .bakeoff import BakeoffOptions
from .bakeoff.capacity_search import SLO, Budget, Capacity, Measured, Outcome, Verdict, judge, search
from .bakeoff.plan import ConfigRun, select_configs
from .dataset_bakeoff import run_bakeoff
from .errors import SpecError
from .formats.atomic import write_atomically
from .formats.config_document import ConfigDocument
from .formats.run_folder import CAPACITY_FILE, capacity_folder, repeat_folder, step_label
from .formats.run_record import read_run
from .results.inference import figure
from .results.runs import read_runs
from .results.sections.common import TTFT
from .results.stats import in_window, steady_window

__all__ = ["CapacityOptions", "CapacityResult", "search_capacity", "step_config"]

CREDITED = "requests that start inside the steady-state window (the report's, with --plateau), every repeat of a step"


@dataclass(frozen=True)
class CapacityOptions:
    bakeoff: BakeoffOptions  # the server, label, config folder, out folder and replay modes; its patterns ignored
    config: str  # the one config searched: scenario3/c100_noisy
    slo: SLO
    start: Optional[int] = None  # None: the config's own concurrency
    lowest: int = 1
    highest: Optional[int] = None  # None: half the config's sessions (a steady window needs sessions to spare)
    width: float = 0.10
    repeats: int = 1  # more runs of a step whose verdict is unclear
    budget_s: Optional[float] = None
    plateau: float = 1.0


@dataclass(frozen=True)
class CapacityResult:
    capacity: Capacity
    line: str
    folder: Path
    replicas: int

    @property
    def ok(self) -> bool:
        return self.capacity.outcome is Outcome.BRACKETED


def step_config(text: str) -> tuple[int, int]:
    """(concurrency, sessions) of a generated config's YAML; SpecError where it sets no concurrency."""
    try:
        document = ConfigDocument(yaml.safe_load(text))
        concurrency, sessions = document.concurrent_sessions, document.stage.get("num_sessions")
    except (KeyError, IndexError, TypeError, AttributeError, yaml.YAMLError):
        concurrency = sessions = None
    if not isinstance(concurrency, int) or not isinstance(sessions, int):
        raise SpecError(
            "--capacity: the config's load stage sets no concurrent_sessions and num_sessions; "
            "give a config fastgen generated (a concurrency config, e.g. scenario3/c100_noisy)"
        )
    return concurrency, sessions


def _bounds(options: CapacityOptions, config: ConfigRun) -> tuple[int, int, int]:
    """(start, lowest, highest): the highest at most half the config's sessions, so a step has a steady window."""
    concurrency, sessions = step_config(config.path.read_text(encoding="utf-8"))
    most = max(1, sessions // 2)
    highest = options.highest or most
    if highest > most:
        raise SpecError(
            f"--highest {highest}: {config.name} replays {sessions} sessions, enough for at most {most} in flight "
            f"with a steady window; generate more sessions (a larger --scale) or lower --highest"
        )
    if options.lowest > highest:
        raise SpecError(f"--lowest {options.lowest} is above the highest load {highest}; lower --lowest")
    return options.start or min(concurrency, highest), options.lowest, highest


def search_capacity(
    options: CapacityOptions,
    *,
    echo: Callable[[str], None] = lambda line: None,
    warn: Optional[Callable[[str], None]] = None,
) -> CapacityResult:
    """Search the largest load meeting the SLO, step by step on the server; capacity.json written at the end."""
    found = select_configs(Path(options.bakeoff.config_dir).resolve(), [options.config])
    if len(found) != 1:
        raise SpecError(f"--capacity {options.config} names {len(found)} configs; name one, e.g. {found[0].name}")
    config = found[0]
    start, lowest, highest = _bounds(options, config)
    folder = capacity_folder(Path(options.bakeoff.out_dir).resolve(), options.bakeoff.label, config.name)
    step = _Stepper(options, config, folder, echo=echo, warn=warn)
    capacity = search(
        step.measure,
        start=start,
        lowest=lowest,
        highest=highest,
        width=options.width,
        repeats=options.repeats,
        budget=Budget(seconds=options.budget_s),
        # a step is counted at its time limit before it runs: the budget then never pays for half a step
        step_s=options.bakeoff.timeout_s or 0.0,
    )
    replicas = step.replicas
    line = capacity.line(options.slo) + _per_replica(capacity, replicas) + _unmeasured(step.figures)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / CAPACITY_FILE, _document(options, config, capacity, step, line=line))
    return CapacityResult(capacity, line, folder, replicas)


def _unmeasured(figures: list[dict]) -> str:
    """What an unclear step lacked, said: a step with no TTFT p95 counts as not meeting, so the bound it sets is
    one the measurements could not rule out, and the user needs to know why."""
    empty = sum(f.get("ttft_p95_ms") is None and f.get("status") != "failed" for f in figures)
    if not empty:
        return ""
    return (
        f"; {empty} step(s) had no TTFT p95 (too few text answers in the steady-state window: inference-perf times "
        f"no tool-call answer); a config with more sessions (a larger --scale) gives one"
    )


def _per_replica(capacity: Capacity, replicas: int) -> str:
    if replicas <= 1 or capacity.lo is None or capacity.hi is None:
        return ""
    return f"; per replica ({replicas} behind the router): {capacity.lo / replicas:g} to {capacity.hi / replicas:g}"


class _Stepper:
    """The search's `measure`: each call one run of the config at that load (its next repeat), read or run."""

    def __init__(self, options: CapacityOptions, config: ConfigRun, folder: Path, *, echo, warn) -> None:
        self.options, self.config, self.folder, self.echo, self.warn = options, config, folder, echo, warn
        self.attempts: dict[int, int] = {}
        self.figures: list[dict] = []  # per step, in the search's order: what capacity.json shows of it
        self.replicas = 1

    def measure(self, load: float) -> Measured:
        n = int(load)
        attempt = self.attempts[n] = self.attempts.get(n, 0) + 1
        step_dir = self.folder / step_label(n)
        run = repeat_folder(step_dir / self.config.name, attempt)
        previous = read_run(run)
        ran = not (previous and previous.status == "completed" and not self.options.bakeoff.rerun)
        if ran:
            self.echo(f"capacity step: {n} sessions in flight (run {attempt}) into {run}")
            bakeoff = replace(
                self.options.bakeoff, out_dir=self.folder, label=step_label(n), patterns=(self.config.name,)
            )
            run_bakeoff(replace(bakeoff, repeats=attempt, in_flight=n), echo=self.echo, warn=self.warn)
        else:
            self.echo(f"capacity step: {n} sessions in flight (run {attempt}): read from {run}")
        measured, shown = self._judged(step_dir, attempt, fresh=ran)
        self.figures.append({"load": n, "attempt": attempt, "folder": run.relative_to(self.folder).as_posix(), **shown})
        self.echo(f"capacity step: {n} sessions in flight: {measured.verdict.value} ({shown['ttft_p95_ms']})")
        return measured

    def _judged(self, step_dir: Path, attempt: int, *, fresh: bool) -> tuple[Measured, dict]:
        runs, _ = read_runs(step_dir)
        repeats = [
            r for r in (runs[self.config.name].repeats if self.config.name in runs else []) if r.index <= attempt
        ]
        last = next((r for r in repeats if r.index == attempt), None)
        if last is None:  # the runner kept no run: the server did not answer
            return Measured(Verdict.FAILED, {}, failed=1, requests=0), {"ttft_p95_ms": None, "status": "failed"}
        self.replicas = max(self.replicas, len((last.fleet or {}).get("replicas") or []))
        windows = [in_window(r.requests, steady_window(r.requests, self.options.plateau)) for r in repeats]
        ttft = figure(windows, TTFT[95])
        failed = last.requests_failed + (1 if last.status == "failed" and not last.requests_failed else 0)
        verdict = Verdict.FAILED if failed else judge(self.options.slo, {"ttft_p95_ms": ttft})
        shown = {
            "status": last.status,
            "ttft_p95_ms": _shown(ttft.value, ttft.low, ttft.high),
            "credited": sum(len(w) for w in windows),
            "requests": last.requests_total,
            "failed": last.requests_failed,
            "seconds": last.seconds,
        }
        seconds = (last.seconds or 0.0) if fresh else 0.0  # a step read from disk costs this search no time
        measured = Measured(verdict, {"ttft_p95_ms": ttft.value or 0.0}, seconds, failed, last.requests_total)
        return measured, shown


def _shown(value: Optional[float], low: Optional[float], high: Optional[float]) -> Optional[str]:
    if value is None:
        return None
    return f"{value:.0f} ms" + (f" [{low:.0f}, {high:.0f}]" if low is not None and high is not None else "")


def _document(options: CapacityOptions, config: ConfigRun, capacity: Capacity, step: _Stepper, *, line: str) -> str:
    verdicts = [{**shown, "verdict": s.measured.verdict.value} for s, shown in zip(capacity.steps, step.figures)]
    document = {
        "format": 1,
        "config": config.name,
        "label": options.bakeoff.label,
        "slo": options.slo.targets(),
        "load": "sessions in flight",
        "outcome": capacity.outcome.value,
        "lo": capacity.lo,
        "hi": capacity.hi,
        "width": options.width,
        "replicas": step.replicas,
        "per_replica": None
        if capacity.lo is None or capacity.hi is None
        else {"lo": capacity.lo / step.replicas, "hi": capacity.hi / step.replicas},
        "credited": CREDITED,
        "plateau": options.plateau,
        "steps": verdicts,
        "line": line,
    }
    return json.dumps(document, indent=2) + "\n"
