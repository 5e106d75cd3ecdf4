"""The answer of an analysis first: per config, the hit % unbounded and at the capacity asked for, whether that
capacity binds it (and by how many points), the knee of its sweep, and one line naming the configs it binds."""

from __future__ import annotations

from typing import Optional

from .analyze import AnalysisOptions, TargetResult
from .schedule import ServiceModel

__all__ = [
    "BINDS_ABOVE_POINTS",
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
    return cells


def summary_headers(options: AnalysisOptions) -> tuple:
    headers: tuple[str, ...] = ()
    if options.capacity_tokens is not None:
        headers += ("pt lost", f"binds (>{BINDS_ABOVE_POINTS:g} pt)")
    if options.sweep:
        headers += ("knee (tokens)",)
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
    }
