"""`fastgen analyze`: what a prefix cache will hit on each config, before any GPU runs.

One trace directory at a time, each session's requests are rebuilt as inference-perf sends them, tokenized and
kept as block ids (corpus, on a pool of processes, into a spill file); the directory's configs are then simulated
side by side (side_by_side, schedule) against engines that schedule as the real ones do (engine.py, rules.py), with
an infinite cache and, with a capacity, a finite one (cache), each session's own blocks forgotten once every config
has run it. Definitions, each named in the output:
- infinite: 100 x cached / prompt tokens, pooled, each request's hit at its first admission, under one engine's rules
  (rules.py; vLLM's by default: full blocks, chained hashes, the last prompt token always computed);
- at capacity: the same with the engine's admission, preemption and LRU eviction at that KV capacity;
- the band: the same replays again under seeded jitter of arrivals and step lengths (schedule.Jitter): the range of
  outcomes the interleaving of concurrent requests allows; with a band, the point is the median replay's;
- aiperf: AIPerf's analyze-trace cache_hit_rate (aiperf.py): file order, infinite cache.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from functools import partial
from typing import Callable, Iterator, Optional, Union

import numpy as np
import yaml

from ..errors import OutputError, SpecError
from ..formats.config_document import ConfigDocument
from ..formats.rows import trace_dir_of
from ..processes import file_progress
from ..traces.blocks import load_reading
from ..traces.graph import trace_files
from .aiperf import AiperfRate
from .cache import BlockCache
from .corpus import Corpus, Readers
from .engine_models import make_engine
from .routing import Fleet, Router
from .rules import ENGINE_RULES, CacheRules, SchedulerSettings
from .schedule import Jitter, Load, PlannedRequest, RequestOutcome, ServiceModel, replay_slots, simulate
from .side_by_side import Replay, run_side_by_side

__all__ = [
    "AnalysisOptions",
    "ConfigTarget",
    "Corpus",
    "TargetResult",
    "analyze",
    "config_targets",
    "directory_targets",
    "kv_bytes_per_token",
    "predict",
    "target_slots",
]


@dataclass(frozen=True)
class ConfigTarget:
    name: str  # scenario1/c10, or the trace directory's name without configs
    trace_dir: Path
    load: Load


BAND_REPLAYS = 8  # jittered replays per config and cache, for the band
STABLE_WITHIN_POINTS = 0.5  # a band narrower than this is shown as its point


@dataclass(frozen=True)
class AnalysisOptions:
    block_size: int = 16
    capacity_tokens: Optional[int] = None  # per replica
    reading: str = "auto"  # template when the tokenizer has a chat template, else content
    definition: str = "vllm"  # or "aiperf": AIPerf's analyze-trace cache_hit_rate
    sweep: bool = False  # hit % at a series of capacities, from one request to the whole replay's distinct blocks
    service: ServiceModel = ServiceModel()
    engine: str = "vllm"  # whose rules (rules.ENGINE_RULES)
    settings: Optional[SchedulerSettings] = None  # the engine's scheduler settings (None: its defaults, rules.py)
    band: int = BAND_REPLAYS  # jittered replays for the band (0: the point alone)
    jitter: Jitter = Jitter(seed=0)  # the perturbations of a band's replays (each replay its own seed)
    # (config, speeds) of each calibration run, fitted alone: the band's replays of a config take its own runs' speeds
    # in turn, or every run's where it has none
    band_speeds: tuple[tuple[str, ServiceModel], ...] = ()
    replicas: int = 1
    router: str = "round_robin"  # routing.POLICIES

    @property
    def rules(self) -> CacheRules:
        return ENGINE_RULES[self.engine]

    @property
    def scheduler(self) -> SchedulerSettings:
        return self.settings if self.settings is not None else self.rules.defaults

    def cache(self, capacity_tokens: Optional[int] = None) -> BlockCache:
        """An empty cache with these options' block size and engine rules."""
        return BlockCache(self.block_size, capacity_tokens, publish_after_prefill=self.rules.publish_after_prefill)

    def fleet(
        self,
        capacity_tokens: Optional[int] = None,
        jitter: Optional[Jitter] = None,
        service: Optional[ServiceModel] = None,
    ) -> Fleet:
        """Empty engines as these options describe them (each replica its own cache), behind their router."""
        engines = [
            make_engine(
                self.rules,
                self.scheduler,
                self.cache(capacity_tokens),
                service or self.service,
                noise=None if jitter is None else random.Random(jitter.seed * 1000 + replica + 1),
                step_cv=0.0 if jitter is None else jitter.step_cv,
                wake_s=0.0 if jitter is None else jitter.wake_s,
            )
            for replica in range(self.replicas)
        ]
        return Fleet(
            engines,
            Router(self.router, self.replicas, self.block_size),
            serial_ingest=True if jitter is None else jitter.serial_ingest,
        )

    def band_replays(self, config: Optional[str] = None) -> list[tuple[Jitter, ServiceModel]]:
        """(jitter, speeds) of each of the band's replays of `config`: seeds 1, 2, ...; the front end tokenizing one
        request at a time and all at once in turn; the speeds of the config's own calibration runs in turn (a run
        measures its server under that config's load), else every run's, each at least once (else the point's)."""
        if not self.band:
            return []
        own = [s for name, s in self.band_speeds if name == config]
        speeds = own or [s for _, s in self.band_speeds] or [self.service]
        count = max(self.band, len(self.band_speeds))  # every config replayed as often
        return [
            (
                replace(self.jitter, seed=self.jitter.seed + k + 1, serial_ingest=k % 2 == 0),
                speeds[(k // 2 + k) % len(speeds)],
            )
            for k in range(count)
        ]


@dataclass
class TargetResult:
    name: str
    trace_dir: str
    sessions: int
    requests: int = 0
    prompt_tokens: int = 0
    cached_infinite: int = 0
    cached_capacity: Optional[int] = None
    by_label: dict[str, list[Optional[int]]] = field(default_factory=dict)  # label -> [prompt, cached inf, cap or None]
    evicted_blocks: Optional[int] = None
    aiperf_cache_hit_rate: Optional[float] = None  # --definition aiperf
    sweep: list[tuple[int, float]] = field(default_factory=list)  # (capacity tokens, hit %) with --sweep
    # cached tokens of every replay, the unjittered one first, then the band's jittered ones (empty without a band)
    band_infinite: list[int] = field(default_factory=list)
    band_capacity: list[int] = field(default_factory=list)  # the same at the capacity
    preempted: Optional[int] = None  # requests preempted (vLLM) or retracted (SGLang) at the capacity
    replicas: list[dict] = field(default_factory=list)  # per replica: requests, prompt and cached tokens

    def percent(self, cached: Optional[int], prompt: Optional[int] = None) -> Optional[float]:
        prompt = self.prompt_tokens if prompt is None else prompt
        return None if cached is None or not prompt else 100.0 * cached / prompt

    def band(self, which: str) -> Optional[tuple[float, float]]:
        """(lowest, highest) hit % over the replays, the unjittered one and the jittered ones, unbounded ("infinite")
        or at capacity; None without a band."""
        replays = self.band_infinite if which == "infinite" else self.band_capacity
        if not replays:
            return None
        values = [self.percent(c) or 0.0 for c in replays]
        return min(values), max(values)

    def to_dict(self) -> dict:
        band_infinite, band_capacity = self.band("infinite"), self.band("capacity")
        return {
            "config": self.name,
            "trace_dir": self.trace_dir,
            "sessions": self.sessions,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "hit_percent_infinite": self.percent(self.cached_infinite),
            "hit_percent_capacity": self.percent(self.cached_capacity),
            "hit_percent_infinite_band": None if band_infinite is None else list(band_infinite),
            "hit_percent_capacity_band": None if band_capacity is None else list(band_capacity),
            "evicted_blocks": self.evicted_blocks,
            "preempted_requests": self.preempted,
            "replicas": self.replicas,
            "aiperf_cache_hit_rate": self.aiperf_cache_hit_rate,
            "sweep": [{"capacity_tokens": c, "hit_percent": h} for c, h in self.sweep],
            "by_turn": {
                label: {
                    "prompt_tokens": v[0],
                    "hit_percent_infinite": self.percent(v[1], v[0]),
                    "hit_percent_capacity": self.percent(v[2], v[0]) if v[2] is not None else None,
                }
                for label, v in self.by_label.items()
            },
        }


def kv_bytes_per_token(model_config: Path) -> int:
    """KV bytes per token from a Hugging Face config.json: 2 (K and V) x layers x KV heads x head size x dtype."""
    try:
        doc = json.loads(Path(model_config).read_text(encoding="utf-8"))
        doc = doc.get("text_config", doc)
        layers, heads = int(doc["num_hidden_layers"]), int(doc["num_attention_heads"])
        kv_heads = int(doc.get("num_key_value_heads") or heads)
        head_dim = int(doc.get("head_dim") or int(doc["hidden_size"]) // heads)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(
            f"--model-config {model_config} is not a model config.json with num_hidden_layers, "
            f"num_attention_heads and hidden_size ({exc})"
        ) from None
    dtype = str(doc.get("torch_dtype") or doc.get("dtype") or "bfloat16")
    size = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "fp8": 1}.get(dtype, 2)
    return 2 * layers * kv_heads * head_dim * size


def _stage(path: Path) -> tuple[Path, Load]:
    try:
        doc = ConfigDocument(yaml.safe_load(path.read_text(encoding="utf-8")))
        replay = doc.replay
        stage = doc.stage
        load = Load(
            concurrent_sessions=int(stage["concurrent_sessions"]),
            num_sessions=int(stage["num_sessions"]),
            session_rate=stage.get("session_rate"),
            base_seed=int(doc.base_seed_or(42)),
            max_wait_ms=int(replay.get("max_wait_ms", 15000)),
        )
        trace_dir = (path.parent / trace_dir_of(replay)).resolve()
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise OutputError(
            f"{path} is not an inference-perf otel_trace_replay config ({exc}); pass --configs with "
            f"the folder fastgen wrote"
        ) from None
    return trace_dir, load


def config_targets(config_dir: Path, trace_root: Path) -> list[ConfigTarget]:
    """Every config under config_dir, with the trace directory it replays (looked up under trace_root by name when
    the config's own path is not there, e.g. configs generated on another machine)."""
    from ..bakeoff.plan import select_configs

    targets = []
    for run in select_configs(config_dir):
        trace_dir, load = _stage(run.path)
        if not trace_dir.is_dir():
            trace_dir = Path(trace_root) / trace_dir.name
        if not trace_dir.is_dir():
            raise OutputError(
                f"{run.path} replays {trace_dir.name}, which is not in {trace_root}; analyze the "
                f"dataset those configs were generated for"
            )
        targets.append(ConfigTarget(run.name, trace_dir, load))
    return targets


def directory_targets(root: Path) -> list[ConfigTarget]:
    """Without configs: each trace directory under root (or root itself, where no folder under it holds traces),
    every session, one at a time, in file order (no shuffle)."""
    root = Path(root)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    # a dataset folder's own manifest.json and its tokenizer folder's files are JSON, not traces
    traces = [(f, files) for f in folders if not (f / "tokenizer.json").is_file() and (files := trace_files(f))]
    if not traces and root.is_dir():
        traces = [(root, trace_files(root))]
    targets = [
        ConfigTarget(folder.name, folder, Load(1, len(files), base_seed=-1)) for folder, files in traces if files
    ]
    if not targets:
        raise OutputError(f"no trace files (*.json, *.json.zst) in {root} or its folders; give a trace directory")
    return targets


def target_slots(target: ConfigTarget, corpus: Corpus) -> list[int]:
    """The file index of each session the target replays, in slot order."""
    if target.load.base_seed < 0:  # no config: file order
        return list(range(min(target.load.num_sessions, len(corpus.files))))
    return replay_slots(len(corpus.files), target.load.base_seed, target.load.num_sessions)


def predict(
    target: ConfigTarget,
    corpus: Corpus,
    fleet: Union[Fleet, BlockCache],
    service: ServiceModel = ServiceModel(),
    *,
    jitter: Optional[Jitter] = None,
) -> list[RequestOutcome]:
    """Every request of the target's replay with the tokens it found cached, against `fleet` (AnalysisOptions.fleet;
    a bare cache is one engine with no scheduler limits at `service`'s speeds)."""
    return simulate(corpus.session, target_slots(target, corpus), target.load, fleet, model=service, jitter=jitter)


def replay_requests(target: ConfigTarget, corpus: Corpus, service: ServiceModel = ServiceModel()):
    """(outcome, planned request) of every request of the target's replay, in the order they are admitted."""
    outcomes = predict(target, corpus, BlockCache(corpus.block_size), service)
    return [(o, corpus.request(o.file_index, o.event_id)) for o in outcomes]


def analyze(
    targets: list[ConfigTarget],
    tokenizer_dir: Path,
    options: AnalysisOptions = AnalysisOptions(),
    *,
    workers: Optional[int] = None,
    progress: bool = False,
) -> tuple[str, list[TargetResult]]:
    """(the prompt reading used, one result per target). A trace directory's configs are replayed side by side over
    one read of its files, on `workers` processes (default: one per core), which are let go as the replays pass
    them (kept for --sweep, which replays them again at each capacity); the figures do not depend on workers."""
    reading = load_reading(tokenizer_dir, options.reading)
    by_dir: dict[Path, list[ConfigTarget]] = {}
    for target in targets:
        by_dir.setdefault(target.trace_dir, []).append(target)
    results: dict[int, TargetResult] = {}
    names = set()
    with Readers(reading, options.block_size, workers, tools_as=options.engine) as readers:
        for trace_dir, group in by_dir.items():
            corpus = Corpus(trace_dir, reading, options.block_size, tools_as=options.engine)
            tallies = [_Tallies(target, target_slots(target, corpus), options) for target in group]
            tick = file_progress(f"read {trace_dir.name}:") if progress else None
            replays = [r for t in tallies for r in t.replays]
            if options.sweep:  # the sweep replays the sessions again at each capacity: keep them
                corpus.load({i for t in tallies for i in t.slots}, readers, tick)
                # the readers bind this directory's corpus now (B023): run_side_by_side reads to the end before it
                # returns, so late binding gave the same result, but a reader kept longer would read the next one's
                run_side_by_side(replays, partial(_held_sessions, corpus))
            else:
                run_side_by_side(replays, partial(corpus.stream, readers=readers, progress=tick))
            for target, tally in zip(group, tallies):
                results[id(target)] = result = tally.result()
                if options.sweep and options.definition != "aiperf":  # AIPerf's definition has no capacity
                    result.sweep = _sweep(target, corpus, options, result, largest_prompt=tally.largest_prompt)
            names.add(corpus.reading_name)
    changed = sorted(names - {reading.name})
    return (changed[0] if changed else reading.name), [results[id(t)] for t in targets]


def _held_sessions(corpus: Corpus, order: list[int]) -> Iterator[tuple[int, list[PlannedRequest]]]:
    """(index, session) of sessions the corpus holds (Corpus.load), in the order given."""
    return ((i, corpus.session(i)) for i in order)


@dataclass
class _Tally:
    """What one replay counted: its cached tokens in all, per label and per replica ([requests, prompt, cached])."""

    fleet: Fleet
    cached: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    by_replica: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_replica = [[0, 0, 0] for _ in self.fleet.engines]

    def count(self, outcome: RequestOutcome, _request: PlannedRequest) -> None:
        self.cached += outcome.cached_tokens
        self.labels[outcome.label] = self.labels.get(outcome.label, 0) + outcome.cached_tokens
        tally = self.by_replica[outcome.replica]
        tally[0] += 1
        tally[1] += outcome.prompt_tokens
        tally[2] += outcome.cached_tokens


def _median_replay(tallies: list[_Tally]) -> _Tally:
    """The replay whose cached tokens are the median of all (the lower middle of an even count; the unjittered one,
    first, where it ties with it): where the interleaving decides the outcome, the point is the middle outcome of
    the replays, not the one order that no jitter happens to give."""
    middle = sorted(t.cached for t in tallies)[(len(tallies) - 1) // 2]
    return next(t for t in tallies if t.cached == middle)


class _Tallies:
    """One target's replays (infinite cache; at capacity; each again under jitter for the band; or AIPerf's) and
    the figures gathered as they run."""

    def __init__(self, target: ConfigTarget, slots: list[int], options: AnalysisOptions) -> None:
        self.target, self.slots = target, slots
        self._result = TargetResult(target.name, target.trace_dir.name, len(slots))
        self._prompts: dict[str, int] = {}  # label -> prompt tokens (the same in every replay)
        self.largest_prompt = 0
        self._infinite: list[_Tally] = []  # the unjittered replay first, then the band's
        self._finite: list[_Tally] = []
        self._aiperf: Optional[AiperfRate] = None
        self.replays: list[Replay] = []
        if options.definition == "aiperf":
            self._aiperf = AiperfRate()
            self.replays.append(
                Replay(slots, target.load, options.fleet(), self._count_aiperf, on_forget=self._aiperf.forget)
            )
            return
        if options.replicas > len(slots):
            raise SpecError(
                f"{target.name} replays {len(slots)} sessions: {options.replicas} replicas would leave some without "
                f"any; give at most {len(slots)} replicas"
            )
        band = options.band_replays(target.name)
        self._infinite = self._replayed(options, band, None, on_start=self._count_infinite)
        if options.capacity_tokens is not None:
            self._finite = self._replayed(options, band, options.capacity_tokens, on_session=self._check_fits)

    def _replayed(
        self,
        options: AnalysisOptions,
        band: list[tuple[Jitter, ServiceModel]],
        capacity: Optional[int],
        *,
        on_start: Optional[Callable[[RequestOutcome, PlannedRequest], None]] = None,
        on_session: Optional[Callable[[list[PlannedRequest]], None]] = None,
    ) -> list[_Tally]:
        """The unjittered replay at `capacity` (None: unbounded) and the band's, added to self.replays, each counted
        in its own tally (the unjittered one's first); `on_start` (else its tally) and `on_session` are the
        unjittered replay's."""
        tallies = [_Tally(options.fleet(capacity))]
        tallies += [_Tally(options.fleet(capacity, jitter=j, service=s)) for j, s in band]
        first = tallies[0]
        self.replays.append(Replay(self.slots, self.target.load, first.fleet, on_start or first.count, on_session))
        self.replays += [
            Replay(self.slots, self.target.load, tally.fleet, tally.count, jitter=j)
            for tally, (j, _) in zip(tallies[1:], band)
        ]
        return tallies

    def _count_aiperf(self, outcome: RequestOutcome, request: PlannedRequest) -> None:
        assert self._aiperf is not None  # the callback of the replay made with it
        self._result.requests += 1
        self._result.prompt_tokens += outcome.prompt_tokens
        self._aiperf.add(request.blocks if request.tail is None else np.append(request.blocks, request.tail))

    def _count_infinite(self, outcome: RequestOutcome, request: PlannedRequest) -> None:
        result = self._result
        result.requests += 1
        result.prompt_tokens += outcome.prompt_tokens
        self._prompts[outcome.label] = self._prompts.get(outcome.label, 0) + outcome.prompt_tokens
        self.largest_prompt = max(self.largest_prompt, outcome.prompt_tokens)
        self._infinite[0].count(outcome, request)

    def _check_fits(self, session: list[PlannedRequest]) -> None:
        cache = self._finite[0].fleet.caches[0]
        for request in session:
            cache.check_fits(request.prompt_tokens, f"{self.target.name}, {request.event_id}")

    def result(self) -> TargetResult:
        result = self._result
        if self._aiperf is not None:
            result.aiperf_cache_hit_rate = self._aiperf.value
            return result
        infinite = _median_replay(self._infinite)
        result.cached_infinite = infinite.cached
        result.band_infinite = [t.cached for t in self._infinite] if len(self._infinite) > 1 else []
        finite = _median_replay(self._finite) if self._finite else None
        if finite is not None:
            result.cached_capacity = finite.cached
            result.band_capacity = [t.cached for t in self._finite] if len(self._finite) > 1 else []
            result.evicted_blocks = sum(cache.evicted for cache in finite.fleet.caches)
            result.preempted = sum(engine.preempted for engine in finite.fleet.engines)
        result.by_label = {
            label: [
                self._prompts[label],
                infinite.labels.get(label, 0),
                None if finite is None else finite.labels.get(label, 0),
            ]
            for label in sorted(self._prompts, key=_label_order)
        }
        if len(infinite.by_replica) > 1:
            result.replicas = [
                {"requests": r, "prompt_tokens": p, "cached_tokens": c, "hit_percent": 100.0 * c / p if p else None}
                for r, p, c in (finite or infinite).by_replica
            ]
        return result


def _sweep(
    target: ConfigTarget, corpus: Corpus, options: AnalysisOptions, result: TargetResult, *, largest_prompt: int
) -> list[tuple[int, float]]:
    bs = options.block_size
    distinct = result.prompt_tokens - result.cached_infinite  # what an unbounded cache ends up holding
    points = []
    for capacity in sweep_capacities(-(-largest_prompt // bs) * bs + bs, distinct + bs):
        outcomes = predict(target, corpus, options.fleet(capacity))
        points.append((capacity, 100.0 * sum(o.cached_tokens for o in outcomes) / result.prompt_tokens))
    return points


def _label_order(label: str):
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def sweep_capacities(smallest: int, largest: int, points: int = 8) -> list[int]:
    """Geometric steps from the smallest capacity that holds one request to one that holds a whole replay."""
    largest = max(largest, smallest + 1)
    ratio = (largest / smallest) ** (1 / (points - 1))
    return sorted({int(smallest * ratio**i) for i in range(points)})
