"""`fastgen analyze --capacity --slo ...`: the most sessions in flight a config's replay carries under an SLO,
predicted by the engine model before any GPU runs (issue 47, item 4).

Each load is the config replayed with that many sessions in flight (its concurrent_sessions changed, as the bakeoff's
capacity search changes it) through the same engine model, speeds and KV capacity as analyze's hit ratio; its figures
are every answer's (text and tool call alike): time to the first token p95 (first token - sent), per output token
after the first p95, and a session's time p95 (its first request sent to its last answer). The model is
deterministic, so the search (bakeoff.capacity_search) measures each load once. The band is the same search over
each of the band's replays (its jitter and, calibrated from several runs, each run's speeds): the lowest and the
highest bracket they give.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np

from ..bakeoff.capacity_search import SLO, Capacity, Measured, Outcome, judge, search
from ..processes import file_progress
from ..traces.blocks import load_reading
from .analyze import AnalysisOptions, ConfigTarget, predict, target_slots
from .corpus import Corpus, Readers
from .schedule import Jitter, RequestOutcome, ServiceModel

__all__ = ["LoadFigures", "PredictedCapacity", "figures_at", "predict_capacities", "predict_capacity"]


@dataclass(frozen=True)
class LoadFigures:
    """What the engine model gives at one load: the SLO's figures (None where no answer gives one) and the hit."""

    sessions: int  # in flight
    requests: int
    ttft_p95_ms: Optional[float]
    tpot_p95_ms: Optional[float]
    session_p95_s: Optional[float]
    hit_percent: Optional[float]  # cached / prompt tokens, at the KV capacity given (else unbounded)

    def figures(self) -> dict[str, Optional[float]]:
        return {"ttft_p95_ms": self.ttft_p95_ms, "tpot_p95_ms": self.tpot_p95_ms, "session_p95_s": self.session_p95_s}


@dataclass(frozen=True)
class _Point:
    """A figure as judge() reads it: the model's value, with no interval (the model is deterministic)."""

    value: Optional[float]
    low: Optional[float] = None
    high: Optional[float] = None


@dataclass(frozen=True)
class PredictedCapacity:
    config: str
    capacity: Capacity  # the unjittered replay's search
    at: dict[int, LoadFigures]  # its simulated loads
    band: list[Capacity]  # the band's replays' searches (empty without a band)

    def hit_percent(self) -> Optional[float]:
        """The hit at the largest load that meets (else at the smallest that breaks)."""
        load = self.capacity.lo if self.capacity.lo is not None else self.capacity.hi
        return None if load is None else self.at[int(load)].hit_percent

    def band_range(self) -> Optional[tuple[Optional[float], Optional[float]]]:
        """(lowest lo, highest hi) over every replay's bracket, the unjittered one's included: None at an end a
        replay left open (no load met, or every load did); None without a band."""
        if not self.band:
            return None
        searches = [self.capacity, *self.band]
        los, his = [c.lo for c in searches], [c.hi for c in searches]
        return (
            None if None in los else min(lo for lo in los if lo is not None),
            None if None in his else max(hi for hi in his if hi is not None),
        )


def _p95(values: list[float]) -> Optional[float]:
    return float(np.percentile(values, 95)) if values else None  # numpy's linear interpolation, as compare's


def figures_at(
    target: ConfigTarget,
    corpus: Corpus,
    options: AnalysisOptions,
    sessions: int,
    *,
    replay: Optional[tuple[Jitter, ServiceModel]] = None,
) -> LoadFigures:
    """The target replayed with `sessions` in flight (its sessions held by the corpus), at the options' speeds, or
    under a band replay's (jitter, speeds)."""
    jitter, service = replay if replay is not None else (None, options.service)
    at = replace(target, load=replace(target.load, concurrent_sessions=sessions))
    fleet = options.fleet(options.capacity_tokens, jitter=jitter, service=service)
    outcomes = predict(at, corpus, fleet, service, jitter=jitter)
    return _figures(sessions, outcomes, _outputs(corpus, target_slots(target, corpus)))


def _outputs(corpus: Corpus, slots: list[int]) -> dict[tuple[int, str], int]:
    return {(i, r.event_id): r.output_tokens for i in set(slots) for r in corpus.session(i)}


def _figures(sessions: int, outcomes: list[RequestOutcome], outputs: dict[tuple[int, str], int]) -> LoadFigures:
    ttft, tpot = [], []
    spans: dict[int, list[float]] = {}
    for o in outcomes:
        if o.first_token_s is not None:
            ttft.append(1000.0 * (o.first_token_s - o.start_s))
            out = outputs.get((o.file_index, o.event_id), 0)
            if o.end_s is not None and out > 1:
                tpot.append(1000.0 * (o.end_s - o.first_token_s) / (out - 1))
        if o.end_s is not None:
            span = spans.setdefault(o.slot, [o.start_s, o.end_s])
            span[0], span[1] = min(span[0], o.start_s), max(span[1], o.end_s)
    prompt = sum(o.prompt_tokens for o in outcomes)
    return LoadFigures(
        sessions=sessions,
        requests=len(outcomes),
        ttft_p95_ms=_p95(ttft),
        tpot_p95_ms=_p95(tpot),
        session_p95_s=_p95([end - start for start, end in spans.values()]),
        hit_percent=100.0 * sum(o.cached_tokens for o in outcomes) / prompt if prompt else None,
    )


def load_bounds(target: ConfigTarget, slots: list[int]) -> tuple[int, int]:
    """(start, highest): the config's own concurrency, and half its sessions (the bakeoff's capacity search's
    highest, so that the two search the same loads)."""
    highest = max(1, len(slots) // 2)
    return min(target.load.concurrent_sessions, highest), highest


def predict_capacity(
    target: ConfigTarget, corpus: Corpus, options: AnalysisOptions, slo: SLO, *, width: float = 0.10
) -> PredictedCapacity:
    """The search for the most sessions in flight meeting `slo` on the model, and on each of the band's replays."""
    start, highest = load_bounds(target, target_slots(target, corpus))

    def searched(replay: Optional[tuple[Jitter, ServiceModel]]) -> tuple[Capacity, dict[int, LoadFigures]]:
        seen: dict[int, LoadFigures] = {}

        def measure(load: float) -> Measured:
            seen[int(load)] = got = figures_at(target, corpus, options, int(load), replay=replay)
            points = {name: _Point(value) for name, value in got.figures().items()}
            shown = {name: value for name, value in got.figures().items() if value is not None}
            return Measured(judge(slo, points), shown, requests=got.requests)

        found = search(measure, start=start, lowest=1, highest=highest, width=width, repeats=0)
        return found, seen

    capacity, at = searched(None)
    band = [searched(replay)[0] for replay in options.band_replays(target.name)]
    return PredictedCapacity(target.name, capacity, at, band)


def predict_capacities(
    targets: list[ConfigTarget],
    tokenizer_dir: Path,
    options: AnalysisOptions,
    slo: SLO,
    *,
    width: float = 0.10,
    workers: Optional[int] = None,
    progress: bool = False,
) -> list[PredictedCapacity]:
    """One prediction per target; each trace directory read once, its replayed sessions held in memory."""
    reading = load_reading(tokenizer_dir, options.reading)
    found: dict[int, PredictedCapacity] = {}
    by_dir: dict[Path, list[ConfigTarget]] = {}
    for target in targets:
        by_dir.setdefault(target.trace_dir, []).append(target)
    with Readers(reading, options.block_size, workers, tools_as=options.engine) as readers:
        for trace_dir, group in by_dir.items():
            corpus = Corpus(trace_dir, reading, options.block_size, tools_as=options.engine)
            tick = file_progress(f"read {trace_dir.name}:") if progress else None
            corpus.load({i for t in group for i in target_slots(t, corpus)}, readers, tick)
            for target in group:
                found[id(target)] = predict_capacity(target, corpus, options, slo, width=width)
    return [found[id(t)] for t in targets]


def capacity_line(predicted: PredictedCapacity, slo: SLO) -> str:
    """One line per config: the search's outcome, the hit at the capacity, and the band."""
    capacity = predicted.capacity
    line = f"{predicted.config}: predicted {capacity.line(slo, simulated=True)}"
    hit = predicted.hit_percent()
    if hit is not None:
        where = capacity.lo if capacity.lo is not None else capacity.hi
        line += f"; hit {hit:.1f} % at {where:g} in flight"
    band = predicted.band_range()
    if band is None:
        return line + "; no band (--band 0)"
    lo, hi = ("-" if v is None else f"{v:g}" for v in band)
    return line + f"; band [{lo}, {hi}] over {len(predicted.band) + 1} replays"


def capacity_document(predicted: PredictedCapacity, slo: SLO) -> dict:
    """The prediction as JSON: the outcome, the bracket, the hit there, the band and every simulated load."""
    band = predicted.band_range()
    return {
        "config": predicted.config,
        "outcome": predicted.capacity.outcome.value,
        "bracketed": predicted.capacity.outcome is Outcome.BRACKETED,
        "lo": predicted.capacity.lo,
        "hi": predicted.capacity.hi,
        "hit_percent": predicted.hit_percent(),
        "band": None if band is None else list(band),
        "band_outcomes": [c.outcome.value for c in predicted.band],
        "line": capacity_line(predicted, slo),
        "loads": [dataclasses.asdict(predicted.at[load]) for load in sorted(predicted.at)],
    }
