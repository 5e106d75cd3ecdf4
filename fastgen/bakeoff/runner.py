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

import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

import yaml

from .shards import SHARD_TOKENIZER, plan_shards, write_shards
from ..formats.config_dialect import check_label
from ..formats.config_document import ConfigDocument
from ..formats.rows import DATASET_SUFFIX, trace_dir_of
from ..formats.run_record import RunRecord, read_run, write_run
from ..errors import FastgenError
from ..extras import require_extra
from ..version import __version__
from .fleet import Fleet, open_fleet
from .inference_perf import inference_perf_command, run_inference_perf_all
from .identity import check_label_server, identity_change, run_identity
from .plan import ConfigRun, replay_modes_of, run_config_text, select_configs
from .preflight import Preflight
from .reset import no_reset
from ..formats.run_folder import (
    LOG_FILE,
    METRICS_FILE,
    RUN_CONFIG_FILE,
    SHARDS_FOLDER,
    partial_folder,
    repeat_folder,
    report_folders,
    shard_folder,
)
from .runs import (
    discard_partial,
    place_run,
)
from .sampler import MetricsSampler
from .server import LiveServer, probe_server
from .status import RunCounts, cached_tokens_warning, judge_run, read_counts

__all__ = [
    "BakeoffOptions",
    "DATASETS_CACHE",
    "RunOutcome",
    "datasets_cache",
    "run_configs",
]

# `datasets` keeps an Arrow copy of every dataset file a config reads (hf_dataset_path): in the output folder, beside
# the runs it served, not in ~/.cache (the default set's copies are 2.6 GB); a dot folder is never taken for a label.
DATASETS_CACHE = ".datasets-cache"


def datasets_cache(out_dir: Path) -> Path:
    """Where the runs into out_dir keep `datasets`' cache."""
    return Path(out_dir).resolve() / DATASETS_CACHE


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
    # (trace root, outputs mode) -> SpecError where the dataset's workload does not allow the mode a run replays in;
    # fastgen.run_bakeoff and the command hand in generator.expectations.check_replay_outputs (dataset_bakeoff.py)
    check_outputs: Optional[Callable[[Path, str], None]] = None
    # an engine behind a router (fleet.py): url is the router's; its replicas' URLs (() : as it lists them), its
    # routing policy (None: from router_metrics, its Prometheus endpoint)
    replicas: tuple[str, ...] = ()
    router_policy: Optional[str] = None
    router_metrics: Optional[str] = None
    shards: int = 1  # inference-perf processes a run, each replaying its own share of the sessions (shards.py)
    in_flight: Optional[int] = None  # a capacity search's step: the sessions in flight (None: the config's)


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


def _run_config_text(config: ConfigRun, server: LiveServer, partial: Path, options: BakeoffOptions) -> str:
    """The config as this run replays it: against this server, reporting into the partial folder, in these modes."""
    text = run_config_text(
        config.path.read_text(encoding="utf-8"),
        config_dir=config.path.parent,
        url=server.url,
        engine=server.engine.name,
        # sharded: each shard reports into its own folder below this one (shards/shard-NN)
        report_dir=partial / SHARDS_FOLDER if options.shards > 1 else partial,
        outputs=options.outputs,
        tool_call_max_tokens=options.tool_call_max_tokens,
        tool_choice=options.tool_choice,
        in_flight=options.in_flight,
    )
    if options.check_outputs is not None:
        replay = ConfigDocument(yaml.safe_load(text)).replay
        options.check_outputs(Path(trace_dir_of(replay)).parent, replay_modes_of(replay)[0])
    return text


def _not_run(runs: list[tuple[ConfigRun, int]], repeats: int) -> list[RunOutcome]:
    """The runs left when the server stopped answering: failed, each, without being tried."""
    reason = "not run: the server stopped answering"
    return [RunOutcome(config.name, "failed", reason=reason, repeat=k, repeats=repeats) for config, k in runs]


def run_configs(
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
    if options.shards != 1:  # a count no config can be split into is bad input: before the server is looked at
        for config in configs:
            plan_shards(config.path, options.shards)
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
                for later in _not_run(runs[number:], options.repeats):
                    outcomes.append(later)
                    on_outcome(later)
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
        return replay_modes_of(ConfigDocument(yaml.safe_load(path.read_text(encoding="utf-8"))).replay)[2]
    except (OSError, ValueError, KeyError, TypeError):
        return "forced"  # unreadable here: its run says why; check the server as for a forced config


def _model_of(path: Path) -> str:
    try:
        return str(ConfigDocument(yaml.safe_load(path.read_text(encoding="utf-8"))).model_name)
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
    text = _run_config_text(config, server, partial, options)
    identity = run_identity(
        {**fleet.server_identity(model, options.gpus), **checked.record()},
        config_path=config.path,
        run_config=yaml.safe_load(text),
        reset=options.reset,
        router=fleet.router_identity(model),
        shards=options.shards,
    )
    previous = read_run(folder)
    again = None
    if previous and previous.status == "completed" and not options.rerun:
        again = identity_change(previous.identity or None, identity)  # None: an older run that recorded none
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
        if options.shards > 1:
            stage("writing the shards")
            write_shards(partial / RUN_CONFIG_FILE, options.shards, partial / SHARDS_FOLDER)
        record = RunRecord(
            config=config.name,
            repeat=repeat,
            repeats=options.repeats,
            label=options.label,
            fastgen=__version__,
            scrape_interval_s=options.scrape_interval_s,
            config_dir=Path(options.config_dir).resolve().as_posix(),  # for compare's own analyze (ceilings)
            identity=identity,
            shards=options.shards,
        )
        return _replay(config, folder, record, fleet, model, options, command, checked.metrics_served, stage)
    except BaseException:
        discard_partial(folder, prune_to=label_dir)
        raise


def _replay(
    config: ConfigRun,
    folder: Path,
    record: RunRecord,
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
    reset = _reset(fleet, model, options, metrics, stage)
    before = fleet.starts()
    sampler = MetricsSampler(fleet.sample, partial / METRICS_FILE, options.scrape_interval_s)
    if metrics:
        sampler.start()
    else:
        (partial / METRICS_FILE).write_text("", encoding="utf-8")  # no samples, and no error lines either
    started_epoch, started = time.time(), time.monotonic()
    try:
        codes = run_inference_perf_all(
            command, _replays(config, partial, options.shards), options.timeout_s, stage, cache=_cache(partial, options)
        )
    finally:
        if metrics:
            sampler.stop()
        if options.shards > 1:
            _drop_shard_data(partial)
    seconds, ended = time.monotonic() - started, time.time()
    dead = fleet.dead()
    died = dead is not None
    counts = read_counts(partial)
    restarted = None if died else fleet.restart(before, counts)
    status, reason = _judge(codes, counts, partial, options, died=died, restarted=restarted, who=dead or "the server")
    record = replace(
        record,
        reset=reset,
        started=started_epoch,
        ended=ended,
        seconds=round(seconds, 3),
        exit_code=max(codes, key=lambda code: code != 0),
        metrics_samples=sampler.samples,
        metrics_errors=sampler.errors,
        status=status,
        reason=reason,
        **(counts or RunCounts()).record(),
        fleet=fleet.figures(sampler.first, sampler.last) if fleet.routed else None,
        warning=cached_tokens_warning(partial, server) if status != "failed" else None,
    )
    write_run(partial, record)
    place_run(folder)
    return RunOutcome(
        config.name,
        status,
        seconds,
        reason or record.warning or "",
        folder,
        {"server_died": died},
        repeat=record.repeat or 1,
        repeats=options.repeats,
    )


def _reset(fleet: Fleet, model: str, options: BakeoffOptions, metrics: bool, stage: Callable[[str], None]) -> dict:
    """The run record's reset: the prefix cache emptied and verified, once the server is idle where its /metrics
    tells; or --no-reset's."""
    if not options.reset:
        return no_reset()
    if metrics:
        stage("waiting until the server is idle")
        fleet.wait_idle()
    stage("emptying the prefix cache")
    return fleet.reset(model)


def _replays(config: ConfigRun, partial: Path, shards: int) -> list[tuple[Path, Path, Path]]:
    """(config, folder to run from, log) of each inference-perf process of a run: one, or one a shard."""
    if shards == 1:
        return [(partial / RUN_CONFIG_FILE, config.path.parent, partial / LOG_FILE)]
    return [(folder / RUN_CONFIG_FILE, folder, folder / LOG_FILE) for folder in report_folders(partial)]


def _cache(partial: Path, options: BakeoffOptions) -> Path:
    """`datasets`' cache of a run: the output folder's, shared by every run of the same dataset file; a sharded
    run's own, since its shards' dataset files are its own (and dropped with it, _drop_shard_data)."""
    return partial / SHARDS_FOLDER / DATASETS_CACHE if options.shards > 1 else datasets_cache(options.out_dir)


def _drop_shard_data(partial: Path) -> None:
    """The shards' dataset files (copies of the dataset's rows), their copies of the tokenizer and their Arrow cache,
    once the run has ended: a run folder keeps what tells what ran (each shard's config, the shards' manifest with
    the files' hashes) and the reports, not gigabytes of what the dataset holds already."""
    shutil.rmtree(partial / SHARDS_FOLDER / DATASETS_CACHE, ignore_errors=True)
    for folder in report_folders(partial):
        shutil.rmtree(folder / PurePosixPath(SHARD_TOKENIZER).name, ignore_errors=True)
        for path in folder.glob(f"*{DATASET_SUFFIX}"):
            path.unlink(missing_ok=True)


def _judge(
    codes: list[int],
    counts: Optional[RunCounts],
    partial: Path,
    options: BakeoffOptions,
    *,
    died: bool,
    restarted: Optional[str],
    who: str,
) -> tuple[str, Optional[str]]:
    """How a run ended. Sharded, it is completed only when every shard is (each shard judged on its own records, so
    that one shard's surplus can never hide another's losses); else as its worst shard, which it names."""
    if options.shards == 1:
        return judge_run(
            exit_code=codes[0],
            counts=counts,
            timeout_s=options.timeout_s,
            log=partial / LOG_FILE,
            died=died,
            restarted=restarted,
            who=who,
        )
    verdicts = [
        judge_run(
            exit_code=code,
            counts=read_counts(folder),
            timeout_s=options.timeout_s,
            log=folder / LOG_FILE,
            died=died,
            restarted=restarted,
            who=who,
        )
        for code, folder in zip(codes, report_folders(partial))
    ]
    for worst in ("failed", "incomplete"):
        bad = [(k, reason) for k, (status, reason) in enumerate(verdicts) if status == worst]
        if bad:
            k, reason = bad[0]
            more = f" (and {len(bad) - 1} more shard(s))" if len(bad) > 1 else ""
            return worst, f"{shard_folder(k)}: {reason}{more}"
    return "completed", None


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
