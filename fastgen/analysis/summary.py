"""The answer of an analysis first: per config, the hit % unbounded and at the capacity asked for (each with its band
where the interleaving of concurrent requests moves it), whether that capacity binds it (and by how many points),
the knee of its sweep, the load spread over replicas, and one line naming the configs it binds."""

from __future__ import annotations

from typing import Optional

from .analyze import STABLE_WITHIN_POINTS, AnalysisOptions, TargetResult
from .schedule import ServiceModel

__all__ = [
    "BINDS_ABOVE_POINTS",
    "band_legend",
    "hit_cell",
    "load_spread",
    "KNEE_WITHIN_POINTS",
    "binding_line",
    "binds",
    "capacity_cost",
    "knee",
    "service_line",
    "service_origin",
    "summary_cells",
    "summary_fields",
    "summary_headers",
    "summary_legend",
]

BINDS_ABOVE_POINTS = 1.0  # a capacity binds a config whose at-capacity hit % is more than this below its unbounded one
KNEE_WITHIN_POINTS = 1.0  # a sweep's knee: the smallest capacity within this many points of the unbounded hit %


def capacity_cost(result: TargetResult) -> Optional[float]:
    """Points of hit % the capacity costs (unbounded - at capacity); None without a capacity."""
    unbounded, at_capacity = result.percent(result.cached_infinite), result.percent(result.cached_capacity)
    return None if unbounded is None or at_capacity is None else unbounded - at_capacity


def binds(result: TargetResult) -> Optional[bool]:
    cost = capacity_cost(result)
    return None if cost is None else cost > BINDS_ABOVE_POINTS


def hit_cell(result: TargetResult, which: str) -> str:
    """The hit % unbounded ("infinite") or at capacity, with its band where the band is wider than
    STABLE_WITHIN_POINTS: "52.8 (49.0-55.1)"."""
    value = result.percent(result.cached_infinite if which == "infinite" else result.cached_capacity)
    if value is None:
        return "-"
    band = result.band(which)
    if band is None or band[1] - band[0] <= STABLE_WITHIN_POINTS:
        return f"{value:.1f}"
    return f"{value:.1f} ({band[0]:.1f}-{band[1]:.1f})"


def load_spread(result: TargetResult) -> Optional[float]:
    """The busiest replica's prompt tokens over the mean replica's (1.00: even); None with one replica."""
    if len(result.replicas) < 2:
        return None
    tokens = [r["prompt_tokens"] for r in result.replicas]
    mean = sum(tokens) / len(tokens)
    return max(tokens) / mean if mean else None


def band_legend(options: AnalysisOptions) -> Optional[str]:
    """What the band in brackets is, one line; None without a band."""
    if not options.band:
        return None
    jitter = options.jitter
    speeds = (
        f", at the {len(options.band_speeds)} calibration runs' own speeds in turn, a config's own runs' where it has "
        f"some"
        if options.band_speeds
        else ""
    )
    return (
        f"(low-high): the band, the lowest and highest hit % over the unjittered replay and "
        f"{len(options.band_replays())} under seeded jitter (requests up to {jitter.arrival_s * 1000:g} ms late, an idle "
        f"engine starting up to {jitter.wake_s * 1000:g} ms later, step lengths +-{jitter.step_cv * 100:g} %{speeds}), "
        f"the point their median; shown where wider than {STABLE_WITHIN_POINTS:g} point"
    )


def knee(result: TargetResult) -> Optional[int]:
    """The smallest swept capacity (tokens) within KNEE_WITHIN_POINTS of the unbounded hit %; None without a sweep
    or when no swept capacity gets there."""
    unbounded = result.percent(result.cached_infinite)
    if unbounded is None:
        return None
    return next((c for c, hit in sorted(result.sweep) if hit >= unbounded - KNEE_WITHIN_POINTS), None)


def service_origin(service: ServiceModel, source: Optional[str] = None) -> str:
    """Where the service model's speeds come from: `source` when given, else the defaults or given."""
    if source is not None:
        return source
    return "the defaults" if service == ServiceModel() else "given"


def service_line(service: ServiceModel, source: Optional[str] = None) -> str:
    """The speeds the schedule was simulated at, and where they come from."""
    return (
        f"service model: prefill {service.prefill_tokens_per_s:,.0f} tokens/s, decode "
        f"{service.decode_tokens_per_s:,.1f} tokens/s ({service_origin(service, source)}); it decides which "
        f"requests overlap"
    )


def summary_cells(result: TargetResult, options: AnalysisOptions) -> tuple:
    """The summary's cells after the config's own: what the capacity costs and the knee, where asked for."""
    cells: tuple[str, ...] = ()
    if options.capacity_tokens is not None:
        cost, bound = capacity_cost(result), binds(result)
        cells += ("-" if cost is None else f"{cost:.1f}", "-" if bound is None else ("yes" if bound else "no"))
    if options.sweep:
        point = knee(result)
        cells += (f"{point:,}" if point is not None else ("beyond the sweep" if result.sweep else "-"),)
    if options.replicas > 1:
        spread = load_spread(result)
        cells += ("-" if spread is None else f"{spread:.2f}",)
    return cells


def summary_headers(options: AnalysisOptions) -> tuple:
    headers: tuple[str, ...] = ()
    if options.capacity_tokens is not None:
        headers += ("pt lost", f"binds (>{BINDS_ABOVE_POINTS:g} pt)")
    if options.sweep:
        headers += ("knee (tokens)",)
    if options.replicas > 1:
        headers += ("load spread",)
    return headers


def summary_legend(options: AnalysisOptions) -> list[str]:
    """What the summary's own columns mean, a line each."""
    lines = []
    if options.capacity_tokens is not None:
        lines.append(f"pt lost: hit % infinite - hit % capacity; binds: more than {BINDS_ABOVE_POINTS:g} point lost")
    if options.sweep:
        lines.append(
            f"knee: the smallest swept KV capacity within {KNEE_WITHIN_POINTS:g} point of hit % infinite "
            f"(beyond the sweep: none of the swept capacities)"
        )
    if options.replicas > 1:
        lines.append(
            f"{options.replicas} replicas behind a {options.router} router, each with the KV capacity given; hit % "
            "infinite and capacity are the fleet's, pooled over all its requests, each replica its own cache "
            "(unbounded, or at the capacity): a request meets only the cache of the replica the router sends it to, "
            "so they move with the router; load spread: the busiest replica's prompt tokens over the mean (1.00: "
            "even); per replica: --verbose, --json"
        )
    band = band_legend(options)
    if band:
        lines.append(band)
    return lines


def binding_line(results: list[TargetResult], options: AnalysisOptions) -> Optional[str]:
    """One line naming the configs the capacity binds; None without a capacity."""
    if options.capacity_tokens is None:
        return None
    bound = [r.name for r in results if binds(r)]
    rule = f"at-capacity hit % more than {BINDS_ABOVE_POINTS:g} point below unbounded"
    capacity = f"the KV capacity of {options.capacity_tokens:,} tokens"
    if not bound:
        return f"{capacity} binds none of the {len(results)} configs ({rule})"
    return f"{capacity} binds {len(bound)} of {len(results)} configs ({rule}): {', '.join(bound)}"


def summary_fields(result: TargetResult) -> dict:
    """The summary's figures of one config, for the JSON."""
    cost = capacity_cost(result)
    return {
        "capacity_cost_points": cost,
        "capacity_binds": binds(result),
        "knee_capacity_tokens": knee(result) if result.sweep else None,
        "load_spread": load_spread(result),
    }
