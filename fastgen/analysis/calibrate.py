"""`fastgen analyze --calibrate RUN_DIR`: the service model's speeds as a bakeoff run measured them, queue apart, so
that the prediction is for that server (how many sessions overlap depends on how fast it serves them).

RUN_DIR is one run folder (OUT/LABEL/<scenario>/<config>/repeat-K, as `fastgen bakeoff` writes it) or a folder above
several (a config's repeats, a whole label). Each run is replayed through the engine model (engine.py) with the
requests sent when the run sent them (inference-perf's per-request records: `start_time`), against the server the
run recorded (serving.server_from: its engine, KV capacity and scheduler settings), so that the model's own queue
stands between each request's arrival and its first token. The speeds are the ones under which that replay's
summed time to first token and summed latency equal the run's:

    sum over timed requests of modelled TTFT    = sum of measured TTFT
    sum over all requests of modelled latency   = sum of measured latency

solved on the logarithms of the speeds, each by the secant method against the sum it moves most (_fit), from the
speeds TTFT alone gives (uncached prompt tokens / TTFT, output tokens / (latency - TTFT): what a queue-bound server
would look like if its queue were prefill). A TTFT is what the client saw: it carries the HTTP round trip and the
server's tokenization, which the fitted prefill speed absorbs. Runs are fitted one by one; the prediction uses the
speeds fitted to all of them pooled, and the band (analyze.py) spans the speeds of the runs taken alone, a config's
own runs' where it has some.

What this assumes: the runs are of the dataset being analyzed (their configs are looked up by name), every request
of a run succeeded (a run that lost requests had another queue: refused), the prompt and output tokens are the
server's own `usage` (output: inference-perf's count where it has one), requests without a TTFT (inference-perf does
not time tool-call turns) count in latency only.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from ..formats.run_folder import PER_REQUEST_FILE, has_reports, runs_at
from ..formats.run_record import RunRecord, read_run
from ..bakeoff.status import read_report
from ..errors import SpecError
from ..traces.blocks import PromptReading
from .analyze import AnalysisOptions, ConfigTarget, Corpus
from .engine_base import Served
from .secant import secant
from .schedule import ServiceModel
from .step_time import DEFAULT_INGEST_TOKENS_PER_S
from .serving import ServerSpec, server_from

__all__ = ["Calibration", "calibrate", "calibrated_options", "measured_speeds"]

_FIX = "give a run folder fastgen bakeoff wrote (OUT/LABEL/<scenario>/<config>/repeat-K) or a folder above runs"
_ROUNDS = 4
_TOLERANCE = 0.02  # relative: the fit stops when every sum is within 2 % of the runs'
_RANGE = math.log(100.0)  # a speed ends within a factor 100 of where the fit started it


@dataclass(frozen=True)
class Calibration:
    service: ServiceModel
    source: Path
    requests: int  # the requests the speeds were measured over
    server: str = ""  # "vllm 0.32.0, KV cache 16,448 tokens" from run.json; "" without one
    runs: tuple[ServiceModel, ...] = field(default_factory=tuple)  # the speeds fitted to each run alone
    run_configs: tuple[str, ...] = field(default_factory=tuple)  # the config each of those runs ran
    hits_matched: tuple[int, int] = (0, 0)  # (requests whose modelled hit equals the measured one, requests)
    jitter_s: float = 0.0  # the front end's time for the runs' median prompt: how far apart requests may arrive
    fit_error: float = 0.0  # the largest relative error of a fitted sum (TTFT, latency, cached TTFT) the fit left

    def describe(self) -> str:
        server = f" of {self.server}" if self.server else ""
        spread = ""
        if len(self.runs) > 1:
            low = min(r.prefill_tokens_per_s for r in self.runs), min(r.decode_tokens_per_s for r in self.runs)
            high = max(r.prefill_tokens_per_s for r in self.runs), max(r.decode_tokens_per_s for r in self.runs)
            spread = f"; runs alone: prefill {low[0]:,.0f}-{high[0]:,.0f}, decode {low[1]:,.1f}-{high[1]:,.1f} tokens/s"
        matched = (
            f"; on the runs' own send times the model gives {self.hits_matched[0]} of {self.hits_matched[1]} "
            f"requests the hit the server reported"
            if self.hits_matched[1]
            else ""
        )
        front = f"; front end {self.service.ingest_tokens_per_s:,.0f} tokens/s" + (
            f", each more decoding request {1 / self.service.decode_batch_tokens_per_s * 1000:,.1f} ms a step"
            if self.service.decode_batch_tokens_per_s != math.inf
            else ""
        )
        return (
            f"calibrated from {self.source}: {len(self.runs)} runs, {self.requests:,} requests{server}, the "
            f"queue modelled (summed TTFT and latency within {self.fit_error * 100:.1f} %){front}{spread}{matched}"
        )


def calibrated_options(
    options: AnalysisOptions,
    calibration: Optional[Calibration],
    *,
    prefill_tokens_per_s: Optional[float] = None,
    decode_tokens_per_s: Optional[float] = None,
) -> tuple[AnalysisOptions, Optional[str]]:
    """(the options with the calibration's speeds, the band's speeds and jitter, and any speed given in place of
    the fitted one; where the speeds come from, None: the defaults or given ones). A speed given replaces the
    fitted one, and the band then takes the point's speeds alone."""
    service, source, jitter = options.service, None, options.jitter
    speeds: tuple[tuple[str, ServiceModel], ...] = ()
    if calibration is not None:
        service, source = calibration.service, calibration.describe()
        if len(calibration.runs) > 1:
            speeds = tuple(zip(calibration.run_configs or ("",) * len(calibration.runs), calibration.runs))
        # requests sent together reach the scheduler within about one front-end time of each other, in any order
        jitter = replace(jitter, arrival_s=calibration.jitter_s, wake_s=calibration.jitter_s)
    given = {
        name: value
        for name, value in (
            ("prefill_tokens_per_s", prefill_tokens_per_s),
            ("decode_tokens_per_s", decode_tokens_per_s),
        )
        if value is not None
    }
    if given and source is not None:
        source += "; " + " and ".join(name.split("_")[0] for name in given) + " given"
    return replace(
        options, service=replace(service, **given), band_speeds=() if given else speeds, jitter=jitter
    ), source


@dataclass
class _Sent:
    """One request of a run as the client saw it."""

    event_id: str
    start: float  # seconds from the run's first request
    ttft: Optional[float]
    latency: float
    prompt: int
    cached: int
    output: int
    first: float = 0.0  # its first and last streamed token, on the run's clock, and how many it streamed
    last: float = 0.0
    tokens: int = 0


@dataclass
class _Run:
    folder: Path
    config: str
    server: ServerSpec
    sent: list[_Sent]


def calibrate(
    run_dir: Path, targets: list[ConfigTarget], reading: PromptReading, options: AnalysisOptions
) -> Calibration:
    """The speeds fitted to every run under `run_dir`, each replayed against the server it recorded; `targets` are
    the dataset's configs (each run's config is looked up among them by name), `reading` and `options` the
    analysis's (its block size, its engine's rules where a run records none). A SpecError names what is wrong."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SpecError(f"--calibrate {run_dir} is not a folder; {_FIX}")
    folders = _run_folders(run_dir)
    if not folders:
        raise SpecError(f"--calibrate {run_dir} holds no {PER_REQUEST_FILE}; {_FIX}")
    by_name = {t.name: t for t in targets}
    runs = [_read_run(folder, by_name) for folder in folders]
    corpora: dict[tuple[Path, int], Corpus] = {}
    plans = [_planned(run, by_name[run.config], corpora, reading) for run in runs]
    pooled, error = _fit(list(zip(runs, plans)), options)
    fitted = [pooled] if len(runs) == 1 else [_fit([pair], options, pooled)[0] for pair in zip(runs, plans)]
    matched = [_replay(run, plan, pooled, options) for run, plan in zip(runs, plans)]
    hits = (
        sum(
            sum(
                1
                for s in run.sent
                if abs((s.prompt - s.cached) - (plan[s.event_id].prompt_tokens - got[s.event_id][0]))
                < run.server.block_size
            )
            for run, plan, got in zip(runs, plans, matched)
        ),
        sum(len(run.sent) for run in runs),
    )
    return Calibration(
        pooled,
        run_dir,
        sum(len(run.sent) for run in runs),
        _server_name(runs[0]),
        tuple(fitted),
        tuple(run.config for run in runs),
        hits,
        pooled.ingest_seconds(int(statistics.median(s.prompt for run in runs for s in run.sent))),
        error,
    )


def measured_speeds(entries: list[dict]) -> tuple[Optional[float], Optional[float], int]:
    """(prefill tokens/s, decode tokens/s, requests used) as TTFT alone gives them: uncached prompt tokens / TTFT and
    output tokens / (latency - TTFT), summed over inference-perf per-request entries that have the figures; a speed
    is None where its time or tokens sum to nothing. The fit's starting point."""
    uncached = ttft_sum = output = decode_sum = 0.0
    used = 0
    for entry in entries:
        figures = _figures(entry)
        if figures is None or figures[3] is None:
            continue
        prompt, cached, out, timed, latency = figures
        ttft = float(timed or 0.0)
        uncached += max(0, prompt - cached)
        ttft_sum += ttft
        output += out
        decode_sum += max(0.0, latency - ttft)
        used += 1
    prefill = uncached / ttft_sum if uncached > 0 and ttft_sum > 0 else None
    decode = output / decode_sum if output > 0 and decode_sum > 0 else None
    return prefill, decode, used


def _fit(
    runs: list[tuple[_Run, dict]], options: AnalysisOptions, start: Optional[ServiceModel] = None
) -> tuple[ServiceModel, float]:
    """The speeds under which the modelled sums of `runs` equal the measured ones (module docstring): the decode
    step's shape (one request's, each more request's share) from the token times, then prefill, decode scale and
    front end, each by the secant method on its logarithm against the sum it moves most, in turn (Gauss-Seidel),
    until all three sums are within _TOLERANCE; (the speeds, the largest relative error of a sum left)."""
    entries = [(k, s) for k, (run, _) in enumerate(runs) for s in run.sent]
    targets = _sums(entries, {(k, s.event_id): (s.start + (s.ttft or 0.0), s.start + s.latency) for k, s in entries})
    alone, per_request = _decode_shape([run for run, _ in runs])
    if start is None:
        prefill, _, _ = measured_speeds(
            [
                {"ttft": s.ttft, "latency": s.latency, "prompt": s.prompt, "cached": s.cached, "output": s.output}
                for _, s in entries
            ]
        )
        cheap = [s for _, s in entries if s.ttft and s.cached >= 0.9 * s.prompt]
        ingest = sum(s.prompt for s in cheap) / sum(s.ttft or 0 for s in cheap) if cheap else None
        x = [math.log(prefill or 1000.0), 0.0, math.log(ingest or DEFAULT_INGEST_TOKENS_PER_S)]
    else:
        x = [math.log(start.prefill_tokens_per_s), math.log(start.decode_tokens_per_s * alone), 0.0]
        x[2] = math.log(start.ingest_tokens_per_s)

    def model(point: list[float]) -> ServiceModel:
        scale = math.exp(point[1])  # decode speeds, both shares at once
        return ServiceModel(
            math.exp(point[0]),
            scale / alone,
            math.exp(point[2]),
            scale / per_request if per_request > 0 else math.inf,
        )

    def sums(point: list[float]) -> list[float]:
        got: dict = {}
        service = model(point)
        for k, (run, plan) in enumerate(runs):
            got.update(
                {(k, event): (first, end) for event, (_, first, end) in _replay(run, plan, service, options).items()}
            )
        return _sums(entries, got)

    def errors(values: list[float]) -> list[float]:
        return [math.log(max(v, 1e-9) / t) if t > 0 else 0.0 for v, t in zip(values, targets)]

    # each speed against the sum it moves most: prefill -> TTFT, decode -> latency, front end -> the cached TTFT;
    # each within _RANGE of where it started (a sum that does not answer to a speed leaves it where it is)
    bounds = [(v - _RANGE, v + _RANGE) for v in x]
    e = errors(sums(x))
    for _ in range(_ROUNDS):
        if max(abs(v) for v in e) < _TOLERANCE:
            break
        for coordinate in range(3):
            if targets[coordinate] > 0:
                x, e = secant(
                    x, e, coordinate, bounds[coordinate], errors=lambda point: errors(sums(point)), tolerance=_TOLERANCE
                )
    return model(x), math.expm1(max(abs(v) for v in e))


def _decode_shape(runs: list[_Run]) -> tuple[float, float]:
    """(seconds a decode step takes for one request, seconds each more decoding request adds), up to one scale
    (the fit's), from the runs' token times: each request's seconds per streamed token against how many requests
    streamed beside it on average, the median at each (rounded) count, then weighted least squares over those
    medians (a stall or a burst of coalesced chunks moves a median little). A slope that does not come out positive
    is none (1, 0); an intercept that does not is a tenth of the slope (the line through the origin)."""
    points: dict[int, list[float]] = {}
    for run in runs:
        windows = [(s.first, s.last, s.tokens) for s in run.sent if s.tokens >= 3 and s.last > s.first]
        for first, last, tokens in windows:
            overlap = sum(max(0.0, min(last, b) - max(first, a)) for a, b, _ in windows)
            points.setdefault(max(1, round(overlap / (last - first))), []).append((last - first) / (tokens - 1))
    medians = [(n, statistics.median(times), len(times)) for n, times in points.items()]
    if len(medians) < 2:
        return 1.0, 0.0
    weight = sum(w for _, _, w in medians)
    mean_n = sum(n * w for n, _, w in medians) / weight
    mean_t = sum(t * w for _, t, w in medians) / weight
    spread = sum(w * (n - mean_n) ** 2 for n, _, w in medians)
    slope = sum(w * (n - mean_n) * (t - mean_t) for n, t, w in medians) / spread if spread > 0 else 0.0
    intercept = mean_t - slope * mean_n
    if slope <= 0:
        return 1.0, 0.0
    if intercept <= 0:
        slope = sum(w * n * t for n, t, w in medians) / sum(w * n * n for n, _, w in medians)
        intercept = 0.1 * slope
    return intercept, slope


def _sums(entries: list[tuple[int, _Sent]], times: dict) -> list[float]:
    """(summed TTFT of the timed requests, summed latency, summed TTFT of the timed requests that found at least
    90 % of their prompt cached: the front end's share) for `times`: (run, event id) -> (first token, end)."""
    ttft = latency = cheap = 0.0
    for k, s in entries:
        first, end = times[(k, s.event_id)]
        if s.ttft is not None:
            ttft += first - s.start
            if s.cached >= 0.9 * s.prompt:
                cheap += first - s.start
        latency += end - s.start
    return [ttft, latency, cheap]


def _replay(run: _Run, plan: dict, service: ServiceModel, options: AnalysisOptions) -> dict:
    """event id -> (cached tokens, first token, end) of the run's requests sent to the engine model at their recorded
    start times, against the run's own server."""
    spec = run.server
    engine_options = replace(
        options,
        engine=spec.engine,
        settings=spec.settings,
        block_size=spec.block_size,
        service=service,
        replicas=1,
    )
    fleet = engine_options.fleet(spec.capacity_tokens)
    got: dict[str, list] = {}

    def admitted(served: Served, _t: float, _replica: int) -> None:
        got[served.ref] = [served.hit or 0, None, None]

    def done(served: Served, t: float) -> None:
        got[served.ref][1:] = [served.first_token_s, t]

    fleet.connect(admitted, done)
    pending = sorted(run.sent, key=lambda s: s.start)
    index = 0
    while True:
        when, what = fleet.next_time()
        arrival = pending[index].start if index < len(pending) else math.inf
        if when == math.inf and arrival == math.inf:
            break
        if when < arrival or (when == arrival and what == 0):
            fleet.advance()
            continue
        sent = pending[index]
        request = plan[sent.event_id]
        served = Served(
            sent.event_id,
            request.blocks,
            prompt=request.prompt_tokens,
            output=sent.output,
            max_new=request.max_tokens if request.max_tokens is not None else sent.output,
            arrival=sent.start,
            seq=index,
        )
        fleet.submit(served, sent.event_id, sent.start)
        index += 1
    return {event: tuple(values) for event, values in got.items()}


def _read_run(folder: Path, targets: dict[str, ConfigTarget]) -> _Run:
    record = read_run(folder) or RunRecord()
    config = record.config
    if config not in targets:
        raise SpecError(
            f"--calibrate: {folder} ran {config or 'a config it does not name'}, which is not a config of the "
            f"dataset analyzed; calibrate from a run of this dataset's configs"
        )
    entries = _entries(folder)
    failed = [e for e in entries if not isinstance(e, dict) or e.get("error") is not None]
    lost = (record.requests or {}).get("failed") or 0
    if failed or lost:
        raise SpecError(
            f"--calibrate: {folder} lost {max(len(failed), lost)} of its requests (failed), so its queue was not "
            f"the one a complete run has; calibrate from runs that completed"
        )
    sent = [_sent(entry) for entry in entries]
    # in the order they were sent: a sharded run's records come shard after shard
    known = sorted((s for s in sent if s is not None), key=lambda s: (s.start, s.event_id))
    if not known:
        raise SpecError(
            f"--calibrate {folder}: none of its {len(entries)} requests has the prompt, cached and output tokens and "
            f"the latency to calibrate from (a server that reports no usage); calibrate from a completed run, or "
            f"give --prefill-tokens-per-s and --decode-tokens-per-s"
        )
    first = min(s.start for s in known)
    for s in known:
        s.start -= first
        s.first -= first
        s.last -= first
    return _Run(folder, config, server_from(folder), known)


def _planned(run: _Run, target: ConfigTarget, corpora: dict, reading: PromptReading) -> dict:
    """event id -> the planned request (blocks at the run's block size) of each request the run sent."""
    key = (target.trace_dir, run.server.block_size, run.server.engine)
    if key not in corpora:
        corpora[key] = Corpus(target.trace_dir, reading, run.server.block_size, tools_as=run.server.engine)
    corpus = corpora[key]
    plan: dict = {}
    for index in range(len(corpus.files)):
        for request in corpus.session(index):
            plan.setdefault(request.event_id, request)
    missing = [s.event_id for s in run.sent if s.event_id not in plan]
    if missing:
        raise SpecError(
            f"--calibrate: {run.folder} sent {missing[0]} (and {len(missing) - 1} more) that {target.trace_dir} "
            f"does not hold; calibrate from a run of this dataset"
        )
    return plan


def _sent(entry: dict) -> Optional[_Sent]:
    figures = _figures(entry)
    event = ((entry.get("info") or {}).get("graph_event_id")) if isinstance(entry, dict) else None
    start = entry.get("start_time") if isinstance(entry, dict) else None
    if figures is None or not event or not isinstance(start, (int, float)):
        return None
    prompt, cached, output, ttft, latency = figures
    times = ((entry.get("info") or {}).get("response_metrics") or {}).get("output_token_times") or []
    times = [float(t) for t in times if isinstance(t, (int, float))]
    return _Sent(
        str(event),
        float(start),
        ttft,
        latency,
        prompt,
        cached,
        output,
        times[0] if times else 0.0,
        times[-1] if times else 0.0,
        len(times),
    )


def _figures(entry: dict) -> Optional[tuple[int, int, int, Optional[float], float]]:
    """(prompt, cached, output tokens, TTFT s or None, latency s) of a successful request, else None. Also reads
    the flat form measured_speeds is given by _fit."""
    if not isinstance(entry, dict) or entry.get("error") is not None:
        return None
    if "latency" in entry:
        return entry["prompt"], entry["cached"], entry["output"], entry["ttft"], entry["latency"]
    usage = ((entry.get("info") or {}).get("response_metrics") or {}).get("server_usage") or {}
    computed = entry.get("computed_metrics") or {}
    prompt = usage.get("prompt_tokens")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    output = computed.get("output_tokens")
    output = usage.get("completion_tokens") if output is None else output
    ttft, latency = computed.get("time_to_first_token"), computed.get("request_latency")
    if prompt is None or output is None or latency is None:
        return None
    try:
        figures = (int(prompt), int(cached), int(output), None if ttft is None else float(ttft), float(latency))
    except (TypeError, ValueError):
        return None
    if figures[4] < 0 or (figures[3] is not None and not 0 <= figures[3] <= figures[4]):
        return None
    return figures


def _run_folders(run_dir: Path) -> list[Path]:
    """run_dir when it is a run, else every finished run below it (not .partial or replaced .old- folders): a folder
    with a run record and per-request reports, its own or, when it ran sharded, its shards'."""
    return [f for f in runs_at(run_dir) if has_reports(f)]


def _entries(folder: Path) -> list:
    """Every request the run recorded (its shards' merged, when it ran sharded)."""
    if (entries := read_report(folder, PER_REQUEST_FILE)) is None:
        raise SpecError(f"--calibrate: {folder} has a {PER_REQUEST_FILE} that is not a list of requests; {_FIX}")
    return entries


def _server_name(run: _Run) -> str:
    spec = run.server
    name = f"{spec.engine} {spec.version}" if spec.version else spec.engine
    return name + (f", KV cache {spec.capacity_tokens:,} tokens" if spec.capacity_tokens else "")
