"""`fastgen bakeoff`: run the selected configs against one live server, one after another, the same way each time.

For each config: wait until the server is idle, empty its prefix cache, sample its /metrics while inference-perf
replays the config (a subprocess in its own process group, run from the config's folder), then record how it ended.
A config already completed with the same bytes is skipped unless `rerun`. A server that stops answering ends the
bakeoff (every later config would fail the same way); a config that fails otherwise does not.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..configs import check_label
from ..errors import FastgenError, ServerError
from ..version import __version__
from .plan import ConfigRun, run_config_text, select_configs
from .runs import (LOG_FILE, METRICS_FILE, RUN_CONFIG_FILE, discard_partial, partial_folder, place_run, read_run,
                   write_run)
from .sampler import MetricsSampler, parse_metrics
from .server import LiveServer, probe_server

__all__ = ["BakeoffOptions", "RunOutcome", "inference_perf_command", "run_bakeoff", "run_inference_perf"]

IDLE_WAIT_S = 120.0
_POLL_S = 0.5


@dataclass(frozen=True)
class BakeoffOptions:
    url: str
    label: str
    config_dir: Path = Path("configs")
    out_dir: Path = Path("reports")  # runs go to out_dir/label/<scenario>/<config>/
    patterns: tuple[str, ...] = ()
    engine: Optional[str] = None  # None: tell from the server
    reset: bool = True
    rerun: bool = False
    scrape_interval_s: float = 5.0
    timeout_s: Optional[float] = None  # per config; None: no limit
    progress: bool = False


@dataclass
class RunOutcome:
    config: str
    status: str  # completed, failed, skipped
    seconds: float = 0.0
    reason: str = ""
    folder: Optional[Path] = None
    details: dict = field(default_factory=dict)


def inference_perf_command() -> list[str]:
    """inference-perf's console script beside this interpreter (a venv's bin/), else `python -m inference_perf`."""
    script = Path(sys.executable).with_name("inference-perf")
    if script.exists():
        return [str(script)]
    if importlib.util.find_spec("inference_perf") is None:
        raise FastgenError("inference-perf is not installed here; install it with pip install 'fastgen[bakeoff]' "
                           "(inference-perf 0.7.0 needs Python 3.12)")
    return [sys.executable, "-m", "inference_perf"]


def run_bakeoff(options: BakeoffOptions, *, echo: Callable[[str], None] = lambda line: None) -> list[RunOutcome]:
    """Run every selected config; one outcome each, in order. Ctrl-C stops the current run (its partial folder is
    removed) and propagates, with every finished run in place."""
    label = check_label(options.label)
    configs = select_configs(options.config_dir, list(options.patterns))
    command = inference_perf_command()
    model = _model_of(configs[0].path)
    server = probe_server(options.url, model, options.engine)
    echo(f"{server.url}: {server.engine.name}, serving {model}; {len(configs)} config(s) into "
         f"{Path(options.out_dir) / label}")
    progress = _Progress(len(configs), enabled=options.progress, echo=echo)
    outcomes: list[RunOutcome] = []
    try:
        for number, config in enumerate(configs, start=1):
            folder = Path(options.out_dir) / label / config.name
            outcome = _run_one(config, folder, server, options, command, progress.stage_setter(number, config))
            outcomes.append(outcome)
            progress.done(outcome)
            if outcome.details.get("server_died"):
                outcomes += [RunOutcome(c.name, "failed", reason="not run: the server stopped answering")
                             for c in configs[number:]]
                break
    finally:
        progress.close()
    return outcomes


def _model_of(path: Path) -> str:
    import yaml

    try:
        return str(yaml.safe_load(path.read_text(encoding="utf-8"))["server"]["model_name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FastgenError(f"cannot read server.model_name from {path}: {exc}; regenerate the configs") from None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_one(config: ConfigRun, folder: Path, server: LiveServer, options: BakeoffOptions, command: list[str],
             stage: Callable[[str], None]) -> RunOutcome:
    config_sha = _sha256(config.path)
    previous = read_run(folder)
    if (previous and previous.get("status") == "completed" and previous.get("config_sha256") == config_sha
            and not options.rerun):
        return RunOutcome(config.name, "skipped", reason="completed before (--rerun runs it again)", folder=folder)
    discard_partial(folder)
    partial = partial_folder(folder)
    partial.mkdir(parents=True)
    try:
        return _replay(config, folder, partial, server, options, command, stage, config_sha)
    except BaseException:
        discard_partial(folder)
        raise


def _replay(config: ConfigRun, folder: Path, partial: Path, server: LiveServer, options: BakeoffOptions,
            command: list[str], stage: Callable[[str], None], config_sha: str) -> RunOutcome:
    record = {"config": config.name, "config_sha256": config_sha, "url": server.url, "engine": server.engine.name,
              "label": options.label, "fastgen": __version__, "scrape_interval_s": options.scrape_interval_s}
    if options.reset:
        stage("waiting until the server is idle")
        _wait_idle(server)
        stage("emptying the prefix cache")
        record["reset"] = server.reset_prefix_cache()
    else:
        record["reset"] = "none (--no-reset)"
    run_config = partial / RUN_CONFIG_FILE
    run_config.write_text(run_config_text(config.path.read_text(encoding="utf-8"), config_dir=config.path.parent,
                                          url=server.url, engine=server.engine.name, report_dir=partial),
                          encoding="utf-8")
    sampler = MetricsSampler(server.metrics_text, f"{server.engine.name}:", partial / METRICS_FILE,
                             options.scrape_interval_s).start()
    started_epoch, started = time.time(), time.monotonic()
    try:
        code = run_inference_perf(command, run_config, config.path.parent, partial / LOG_FILE, options.timeout_s, stage)
    finally:
        sampler.stop()
    seconds = time.monotonic() - started
    record.update(started=started_epoch, ended=time.time(), seconds=round(seconds, 3), exit_code=code,
                  metrics_samples=sampler.samples, metrics_errors=sampler.errors)
    died = not server.answers()
    reason = _failure(code, partial, died, options.timeout_s)
    record.update(status="failed" if reason else "completed", reason=reason or None)
    if not reason:
        record["warning"] = _cached_tokens_warning(partial, server)
    write_run(partial, record)
    place_run(folder)
    return RunOutcome(config.name, record["status"], seconds, reason or record.get("warning") or "", folder,
                      {"server_died": died})


def _cached_tokens_warning(partial: Path, server: LiveServer) -> Optional[str]:
    """A server that hit its prefix cache but reported no cached tokens in any response was started without
    cached-token reporting: every hit ratio of the report would read 0. Say so while there is time to restart it."""
    import json

    try:
        entries = json.loads((partial / "per_request_lifecycle_metrics.json").read_text(encoding="utf-8"))
        samples = [json.loads(line).get("metrics") or {} for line in (partial / METRICS_FILE).read_text().splitlines()]
    except (OSError, ValueError):
        return None
    reported = any(((((e.get("info") or {}).get("response_metrics") or {}).get("server_usage") or {})
                    .get("prompt_tokens_details") or {}).get("cached_tokens") for e in entries)
    hits = [v for v in (server.engine.metric(m, "cache_hits") for m in samples) if v is not None]
    if not reported and len(hits) >= 2 and hits[-1] > hits[0]:
        return (f"the server hit its prefix cache but reported no cached tokens; restart it with "
                f"{server.engine.cache_report_flag} or every hit ratio reads 0")
    return None


def _failure(code: int, partial: Path, died: bool, timeout_s: Optional[float]) -> str:
    if died:
        return "the server stopped answering during the run"
    if code == 124:
        return f"stopped after --timeout {timeout_s:g} s"
    if code != 0:
        return f"inference-perf exited with {code}: {_last_error(partial / LOG_FILE)}"
    if not (partial / "per_request_lifecycle_metrics.json").exists():
        return "inference-perf wrote no per-request report"
    return ""


def _last_error(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no log"
    errors = [line for line in lines if " - ERROR - " in line or line.startswith(("Error", "Traceback"))]
    tail = (errors or lines or ["no output"])[-1]
    return tail.split(" - ERROR - ")[-1].strip()[:300] + f" (see {log.name})"


def _wait_idle(server: LiveServer) -> None:
    """Wait until no request runs or waits (vLLM resets nothing while blocks are held); no metrics: go on."""
    deadline = time.monotonic() + IDLE_WAIT_S
    while True:
        try:
            sample = parse_metrics(server.metrics_text(), f"{server.engine.name}:")
        except (OSError, ServerError, ValueError):
            return
        busy = sum(server.engine.metric(sample, q) or 0 for q in ("running", "waiting"))
        if busy == 0:
            return
        if time.monotonic() > deadline:
            raise ServerError(f"{server.url} still has {busy:g} requests running or waiting after {IDLE_WAIT_S:g} s; "
                              f"stop the other load on it, or pass --no-reset")
        time.sleep(_POLL_S)


# inference-perf's log lines that tell where a run is
_STAGES = (("Loading tokenizer", "loading the tokenizer"), ("Schema validation passed", "loading the traces"),
           ("session-based run started", "replaying"), ("sessions completed", "sessions done"),
           ("Generating Reports", "writing reports"))


def run_inference_perf(command: list[str], config: Path, cwd: Path, log: Path, timeout_s: Optional[float],
                       stage: Callable[[str], None] = lambda line: None) -> int:
    """inference-perf's exit code, its output in `log`; 124 when it ran past timeout_s and was stopped (like
    timeout(1)). `stage` hears where the run is, from its log, twice a second."""
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
    started = time.monotonic()
    with open(log, "wb") as out:
        # its own process group: inference-perf forks load workers, and stopping it must stop all of them
        proc = subprocess.Popen([*command, "--config_file", str(config)], cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            watcher = _LogWatcher(log)
            while True:
                try:
                    return proc.wait(timeout=_POLL_S)
                except subprocess.TimeoutExpired:
                    pass
                elapsed = time.monotonic() - started
                stage(f"{watcher.stage()}, {elapsed:.0f} s")
                if timeout_s is not None and elapsed > timeout_s:
                    _kill(proc)
                    return 124
        except BaseException:
            _kill(proc)
            raise


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class _LogWatcher:
    """The stage of a run from the new lines of its log, and how many sessions have been dispatched."""

    def __init__(self, log: Path) -> None:
        self._log, self._offset, self._stage, self._sessions = log, 0, "starting inference-perf", 0

    def stage(self) -> str:
        try:
            with open(self._log, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return self._stage
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            self._sessions += "Dispatching session" in line
            for marker, name in _STAGES:
                if marker in line:
                    self._stage = name
        if self._stage == "replaying" and self._sessions:
            return f"replaying, {self._sessions} sessions started"
        return self._stage


class _Progress:
    """A tqdm bar over the configs (the current one and its stage beside it), or plain lines when not a terminal."""

    def __init__(self, total: int, *, enabled: bool, echo: Callable[[str], None]) -> None:
        self._echo, self._bar, self._total = echo, None, total
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="config", bar_format="{n_fmt}/{total_fmt} configs [{elapsed}] "
                             "{postfix}", file=sys.stderr, dynamic_ncols=True)

    def stage_setter(self, number: int, config: ConfigRun) -> Callable[[str], None]:
        if self._bar is None:
            self._echo(f"[{number}/{self._total}] {config.name}: running")
            return lambda text: None
        return lambda text: self._bar.set_postfix_str(f"{config.name}: {text}")

    def done(self, outcome: RunOutcome) -> None:
        line = f"{outcome.config}: {outcome.status}" + (f" in {outcome.seconds:.0f} s" if outcome.seconds else "") + (
            f" ({outcome.reason})" if outcome.reason else "")
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
            self._bar.update(1)
        else:
            self._echo(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
