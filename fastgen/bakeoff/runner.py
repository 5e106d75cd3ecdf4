"""`fastgen bakeoff`: run the selected configs against one live server, one after another, the same way each time.

Before the first config the server is checked once (preflight.py): a named tool_choice it does not hold stops the
bakeoff with the engine's fix; no cached tokens reported, or no /metrics, is one warning line each. Then for each
config and each of its repeats (one after another): wait until the server is idle, empty its prefix cache and verify
that it did (reset.py), sample its /metrics while inference-perf replays the config (a subprocess in its own process
group, every path it is handed absolute), then record how it ended (status.py) and against what (identity.py, with
what the check found). A run done before is skipped when it completed and its identity still holds, unless `rerun`;
a label whose runs came from another server is refused before the first config. A server that stops answering ends
the bakeoff (every later run would fail the same way); a run that fails otherwise does not.

Behind a router the same is done to each replica (fleet.py: a lone server is a fleet of one), while the replay goes
through the router.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import yaml

from ..formats.config_dialect import check_label
from ..errors import FastgenError
from ..extras import require_extra
from ..version import __version__
from .fleet import Fleet, open_fleet
from .identity import check_label_server, identity_change, run_identity
from .plan import ConfigRun, replay_modes_of, run_config_text, select_configs
from .preflight import Preflight
from .reset import no_reset
from .runs import (
    LOG_FILE,
    METRICS_FILE,
    RUN_CONFIG_FILE,
    discard_partial,
    partial_folder,
    place_run,
    read_run,
    repeat_folder,
    write_run,
)
from .sampler import MetricsSampler
from .server import LiveServer, probe_server
from .status import PER_REQUEST_FILE, RunCounts, judge_run, read_counts

__all__ = [
    "BakeoffOptions",
    "DATASETS_CACHE",
    "RunOutcome",
    "datasets_cache",
    "inference_perf_command",
    "run_bakeoff",
    "run_inference_perf",
]

# `datasets` keeps an Arrow copy of every dataset file a config reads (hf_dataset_path): in the output folder, beside
# the runs it served, not in ~/.cache (the default set's copies are 2.6 GB); a dot folder is never taken for a label.
DATASETS_CACHE = ".datasets-cache"


def datasets_cache(out_dir: Path) -> Path:
    """Where the runs into out_dir keep `datasets`' cache."""
    return Path(out_dir).resolve() / DATASETS_CACHE


_POLL_S = 0.5


@dataclass(frozen=True)
class BakeoffOptions:
    url: str
    label: str
    config_dir: Path = Path("configs")
    out_dir: Path = Path("reports")  # runs go to out_dir/label/<scenario>/<config>/repeat-<K>/
    patterns: tuple[str, ...] = ()
    engine: Optional[str] = None  # None: tell from the server
    reset: bool = True
    rerun: bool = False
    scrape_interval_s: float = 5.0
    timeout_s: Optional[float] = None  # per run; None: no limit
    progress: bool = False
    repeats: int = 1  # runs of each config, one after another
    gpus: Optional[int] = None  # the server's GPU count, recorded only
    outputs: Optional[str] = None  # live, recorded; None: as the config says
    tool_call_max_tokens: Optional[str] = None  # floor, recorded; None: as the config says
    tool_choice: Optional[str] = None  # forced, as_recorded; None: as the config says
    tool_check: bool = True  # check before the first config that the server holds a named tool_choice
    # an engine behind a router (fleet.py): url is the router's; its replicas' URLs (() : as it lists them), its
    # routing policy (None: from router_metrics, its Prometheus endpoint)
    replicas: tuple[str, ...] = ()
    router_policy: Optional[str] = None
    router_metrics: Optional[str] = None


@dataclass
class RunOutcome:
    config: str
    status: str  # completed, incomplete, failed, skipped
    seconds: float = 0.0
    reason: str = ""
    folder: Optional[Path] = None
    details: dict = field(default_factory=dict)
    repeat: int = 1
    repeats: int = 1

    @property
    def name(self) -> str:
        """The config, and which repeat when there are several."""
        return self.config if self.repeats == 1 else f"{self.config} repeat {self.repeat}/{self.repeats}"


def inference_perf_command() -> list[str]:
    """inference-perf's console script beside this interpreter (a venv's bin/), else `python -m inference_perf`."""
    script = Path(sys.executable).with_name("inference-perf")
    if script.exists():
        return [str(script)]
    require_extra("bakeoff", "fastgen bakeoff")
    return [sys.executable, "-m", "inference_perf"]


def run_bakeoff(
    options: BakeoffOptions,
    *,
    echo: Callable[[str], None] = lambda line: None,
    on_outcome: Callable[[RunOutcome], None] = lambda outcome: None,
    warn: Optional[Callable[[str], None]] = None,
) -> list[RunOutcome]:
    """Run every selected config `options.repeats` times; one outcome a run, in order (each also to `on_outcome` as
    it ends). What the check before the first config found goes to `warn`, a line each (default: echo, after
    "warning: "). Ctrl-C stops the current run (its partial folder is removed) and propagates, with every finished
    run in place: the same command again goes on from there."""
    require_extra("bakeoff", "fastgen bakeoff")  # before any config, run folder or server is looked at
    warn = warn or (lambda line: echo(f"warning: {line}"))
    label = check_label(options.label)
    label_dir = Path(options.out_dir).resolve() / label  # inference-perf runs from each config's folder
    configs = select_configs(Path(options.config_dir).resolve(), list(options.patterns))
    command = inference_perf_command()
    model = _model_of(configs[0].path)
    server = probe_server(options.url, model, options.engine)
    fleet = open_fleet(
        server,
        model,
        replicas=options.replicas,
        policy=options.router_policy,
        router_metrics=options.router_metrics,
    )
    fleet.wait_started(echo)
    identity = fleet.server_identity(model, options.gpus)
    if not options.rerun:
        check_label_server(label_dir, identity)
    echo(
        f"{server.url}: {_describe(identity)}{fleet.describe()}; {len(configs)} config(s)"
        f"{f' x {options.repeats} repeats' if options.repeats > 1 else ''} into {label_dir} "
        f"(datasets' cache: {datasets_cache(options.out_dir)})"
    )
    # a named tool_choice is sent only in the forced mode: the check is moot when no config sends one
    forced = any(_tool_choice_of(c.path, options) == "forced" for c in configs)
    checked = fleet.check(model, tool_check=options.tool_check and forced)
    for line in checked.warnings:
        warn(line)
    runs = [(config, repeat) for config in configs for repeat in range(1, options.repeats + 1)]
    progress = _Progress(len(runs), enabled=options.progress, echo=echo)
    outcomes: list[RunOutcome] = []
    try:
        for number, (config, repeat) in enumerate(runs, start=1):
            outcome = _run_one(
                config,
                repeat,
                label_dir,
                fleet,
                model,
                options,
                command,
                checked,
                progress.stage_setter(number, config.name, repeat, options.repeats),
            )
            outcomes.append(outcome)
            on_outcome(outcome)
            progress.done(outcome)
            if outcome.details.get("server_died"):
                for later, k in runs[number:]:
                    outcomes.append(
                        RunOutcome(
                            later.name,
                            "failed",
                            reason="not run: the server stopped answering",
                            repeat=k,
                            repeats=options.repeats,
                        )
                    )
                    on_outcome(outcomes[-1])
                break
    finally:
        progress.close()
    return outcomes


def _describe(identity: dict) -> str:
    engine = " ".join(str(identity[k]) for k in ("engine", "version") if identity.get(k))
    capacity = identity.get("kv_capacity_tokens")
    kv = f", KV cache {capacity:,} tokens" if capacity else ", KV capacity not reported"
    return f"{engine}, serving {identity['model']}{kv}"


def _tool_choice_of(path: Path, options: BakeoffOptions) -> str:
    if options.tool_choice:
        return options.tool_choice
    try:
        return replay_modes_of(yaml.safe_load(path.read_text(encoding="utf-8"))["data"]["otel_trace_replay"])[2]
    except (OSError, ValueError, KeyError, TypeError):
        return "forced"  # unreadable here: its run says why; check the server as for a forced config


def _model_of(path: Path) -> str:
    try:
        return str(yaml.safe_load(path.read_text(encoding="utf-8"))["server"]["model_name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FastgenError(f"cannot read server.model_name from {path}: {exc}; regenerate the configs") from None


def _run_one(
    config: ConfigRun,
    repeat: int,
    label_dir: Path,
    fleet: Fleet,
    model: str,
    options: BakeoffOptions,
    command: list[str],
    checked: Preflight,
    stage: Callable[[str], None],
) -> RunOutcome:
    server = fleet.front
    folder = repeat_folder(label_dir / config.name, repeat)
    partial = partial_folder(folder)
    text = run_config_text(
        config.path.read_text(encoding="utf-8"),
        config_dir=config.path.parent,
        url=server.url,
        engine=server.engine.name,
        report_dir=partial,
        outputs=options.outputs,
        tool_call_max_tokens=options.tool_call_max_tokens,
        tool_choice=options.tool_choice,
    )
    identity = run_identity(
        {**fleet.server_identity(model, options.gpus), **checked.record()},
        config_path=config.path,
        run_config=yaml.safe_load(text),
        reset=options.reset,
        router=fleet.router_identity(model),
    )
    previous = read_run(folder)
    again = None
    if previous and previous.get("status") == "completed" and not options.rerun:
        again = identity_change(previous.get("identity"), identity)
        if again is None:
            return RunOutcome(
                config.name,
                "skipped",
                reason="completed before; --rerun runs it again",
                folder=folder,
                repeat=repeat,
                repeats=options.repeats,
            )
    stage(f"running again ({again})" if again else "running")
    discard_partial(folder)
    partial.mkdir(parents=True)
    try:
        (partial / RUN_CONFIG_FILE).write_text(text, encoding="utf-8")
        record = {
            "config": config.name,
            "repeat": repeat,
            "repeats": options.repeats,
            "label": options.label,
            "fastgen": __version__,
            "scrape_interval_s": options.scrape_interval_s,
            "config_dir": Path(options.config_dir).resolve().as_posix(),  # for compare's own analyze (ceilings)
            "identity": identity,
        }
        return _replay(config, folder, record, fleet, model, options, command, checked.metrics_served, stage)
    except BaseException:
        discard_partial(folder, prune_to=label_dir)
        raise


def _replay(
    config: ConfigRun,
    folder: Path,
    record: dict,
    fleet: Fleet,
    model: str,
    options: BakeoffOptions,
    command: list[str],
    metrics: bool,
    stage: Callable[[str], None],
) -> RunOutcome:
    """One run; `metrics`: whether the server serves /metrics (without, no idle wait and no samples)."""
    partial = partial_folder(folder)
    server = fleet.front
    if options.reset:
        if metrics:
            stage("waiting until the server is idle")
            fleet.wait_idle()
        stage("emptying the prefix cache")
        record["reset"] = fleet.reset(model)
    else:
        record["reset"] = no_reset()
    before = fleet.starts()
    sampler = MetricsSampler(fleet.sample, partial / METRICS_FILE, options.scrape_interval_s)
    if metrics:
        sampler.start()
    else:
        (partial / METRICS_FILE).write_text("", encoding="utf-8")  # no samples, and no error lines either
    started_epoch, started = time.time(), time.monotonic()
    try:
        code = run_inference_perf(
            command,
            partial / RUN_CONFIG_FILE,
            config.path.parent,
            partial / LOG_FILE,
            options.timeout_s,
            stage,
            cache=datasets_cache(options.out_dir),
        )
    finally:
        if metrics:
            sampler.stop()
    seconds = time.monotonic() - started
    record.update(
        started=started_epoch,
        ended=time.time(),
        seconds=round(seconds, 3),
        exit_code=code,
        metrics_samples=sampler.samples,
        metrics_errors=sampler.errors,
    )
    dead = fleet.dead()
    died = dead is not None
    counts = read_counts(partial)
    restarted = None if died else fleet.restart(before, counts)
    status, reason = judge_run(
        exit_code=code,
        counts=counts,
        timeout_s=options.timeout_s,
        log=partial / LOG_FILE,
        died=died,
        restarted=restarted,
        who=dead or "the server",
    )
    record.update(status=status, reason=reason, **(counts or RunCounts()).record())
    if fleet.routed:
        record["fleet"] = fleet.figures(sampler.first, sampler.last)
    record["warning"] = _cached_tokens_warning(partial, server) if status != "failed" else None
    write_run(partial, record)
    place_run(folder)
    return RunOutcome(
        config.name,
        status,
        seconds,
        reason or record["warning"] or "",
        folder,
        {"server_died": died},
        repeat=record["repeat"],
        repeats=record["repeats"],
    )


def _cached_tokens_warning(partial: Path, server: LiveServer) -> Optional[str]:
    """A server that hit its prefix cache but reported no cached tokens in any response was started without
    cached-token reporting: every hit ratio of the report would read 0. Say so while there is time to restart it."""
    try:
        entries = json.loads((partial / PER_REQUEST_FILE).read_text(encoding="utf-8"))
        samples = [json.loads(line).get("metrics") or {} for line in (partial / METRICS_FILE).read_text().splitlines()]
    except (OSError, ValueError):
        return None
    reported = any(
        (
            (((e.get("info") or {}).get("response_metrics") or {}).get("server_usage") or {}).get(
                "prompt_tokens_details"
            )
            or {}
        ).get("cached_tokens")
        for e in entries
    )
    hits = [v for v in (server.engine.metric(m, "cache_hits") for m in samples) if v is not None]
    if not reported and len(hits) >= 2 and hits[-1] > hits[0]:
        return (
            f"the server hit its prefix cache but reported no cached tokens; restart it with "
            f"{server.engine.cache_report_flag} or every hit ratio reads 0"
        )
    return None


# inference-perf's log lines that tell where a run is
_STAGES = (
    ("Loading tokenizer", "loading the tokenizer"),
    ("Schema validation passed", "loading the traces"),
    ("session-based run started", "replaying"),
    ("sessions completed", "sessions done"),
    ("Generating Reports", "writing reports"),
)


def run_inference_perf(
    command: list[str],
    config: Path,
    cwd: Path,
    log: Path,
    timeout_s: Optional[float],
    stage: Callable[[str], None] = lambda line: None,
    *,
    cache: Optional[Path] = None,
) -> int:
    """inference-perf's exit code, its output in `log`; 124 when it ran past timeout_s and was stopped (like
    timeout(1)). `stage` hears where the run is, from its log, twice a second. `config` and `log` are made absolute
    here: inference-perf runs from `cwd`. `cache`: `datasets`' cache folder (HF_DATASETS_CACHE; None: its default),
    used offline (a dataset file is local: nothing to fetch)."""
    config, log = Path(config).resolve(), Path(log).resolve()
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
    env["HF_DATASETS_OFFLINE"] = "1"
    if cache is not None:
        env["HF_DATASETS_CACHE"] = str(Path(cache).resolve())
    started = time.monotonic()
    with open(log, "wb") as out:
        # its own process group: inference-perf forks load workers, and stopping it must stop all of them
        proc = subprocess.Popen(
            [*command, "--config_file", str(config)],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
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
    """A tqdm bar over the runs (the current one and its stage beside it), or plain lines when not a terminal: a
    run's first stage ("running", or why it runs again) and how it ended; a skipped run, only that."""

    def __init__(self, total: int, *, enabled: bool, echo: Callable[[str], None]) -> None:
        self._echo, self._bar, self._total = echo, None, total
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                unit="run",
                bar_format="{n_fmt}/{total_fmt} runs [{elapsed}] {postfix}",
                file=sys.stderr,
                dynamic_ncols=True,
            )

    def stage_setter(self, number: int, config: str, repeat: int, repeats: int) -> Callable[[str], None]:
        name = config if repeats == 1 else f"{config} repeat {repeat}/{repeats}"
        bar = self._bar
        if bar is not None:
            return lambda text: bar.set_postfix_str(f"{name}: {text}")
        said: list[str] = []

        def first(text: str) -> None:
            if not said:
                said.append(text)
                self._echo(f"[{number}/{self._total}] {name}: {text}")

        return first

    def done(self, outcome: RunOutcome) -> None:
        line = (
            f"{outcome.name}: {outcome.status}"
            + (f" in {outcome.seconds:.0f} s" if outcome.seconds else "")
            + (f" ({outcome.reason})" if outcome.reason else "")
        )
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
            self._bar.update(1)
        else:
            self._echo(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
