"""An analysis as charts: hit % by turn per scenario (unbounded, and at the capacity asked for), hit % against KV
capacity (the sweep: where the knee is, the capacity a scenario needs, with the capacity asked for marked), and stable
against noisy. Drawn by results.plots (matplotlib, the `plots` extra)."""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..results.report import Plot
from .analyze import TargetResult

__all__ = ["analysis_plots"]


def _scenario(name: str) -> str:
    return name.split("/")[0]


def analysis_plots(
    results: list[TargetResult], sweep: dict[str, list[tuple[int, float]]], *, capacity_tokens: Optional[int] = None
) -> list[Plot]:
    """The charts of an analysis; with `capacity_tokens` (the capacity asked for), the by-turn curves at it as well
    and a labelled vertical line at it on the sweep's chart."""
    plots = []
    by_scenario: dict[str, list[TargetResult]] = defaultdict(list)
    for result in results:
        by_scenario[_scenario(result.name)].append(result)
    for scenario, group in sorted(by_scenario.items()):
        plots += _by_turn(scenario, group, capacity_tokens)
        swept = [r for r in group if r.name in sweep]
        if swept:
            capacities = sorted({c for r in swept for c, _ in sweep[r.name]})
            marks = {} if capacity_tokens is None else {_capacity_label(capacity_tokens): capacity_tokens}
            plots.append(
                Plot(
                    f"{scenario}_hit_by_capacity",
                    f"{scenario}: predicted hit ratio against KV capacity",
                    "KV capacity (tokens)",
                    "hit %",
                    capacities,
                    {r.name: [dict(sweep[r.name]).get(c) for c in capacities] for r in swept},
                    log_x=True,
                    marks=marks,
                    x_tokens=True,
                )
            )
    layouts = [r for r in results if r.name.endswith(("_stable", "_noisy"))]
    if layouts:
        levels = sorted({r.name.rsplit("_", 1)[0] for r in layouts})
        series = {}
        for layout in ("stable", "noisy"):
            found = {r.name.rsplit("_", 1)[0]: r for r in layouts if r.name.endswith("_" + layout)}
            series[f"{layout}, unbounded"] = [
                found[lv].percent(found[lv].cached_infinite) if lv in found else None for lv in levels
            ]
            if any(r.cached_capacity is not None for r in found.values()):
                series[f"{layout}, at capacity"] = [
                    found[lv].percent(found[lv].cached_capacity) if lv in found else None for lv in levels
                ]
        plots.append(
            Plot(
                "stable_vs_noisy", "Stable against noisy prompt layouts (predicted)", "config", "hit %", levels, series
            )
        )
    return plots


def _capacity_label(capacity_tokens: int) -> str:
    return f"KV capacity asked for: {capacity_tokens:,} tokens"


def _by_turn(scenario: str, group: list[TargetResult], capacity_tokens: Optional[int]) -> list[Plot]:
    """Hit % by turn with an unbounded cache and, with a capacity, at it (index 1 of by_label's values: unbounded
    cached tokens; 2: at capacity)."""
    labels = sorted(
        {label for r in group for label in r.by_label}, key=lambda x: (not x.isdigit(), int(x) if x.isdigit() else 0, x)
    )

    def series(index: int) -> dict[str, list]:
        return {
            r.name: [r.percent(r.by_label[t][index], r.by_label[t][0]) if t in r.by_label else None for t in labels]
            for r in group
        }

    plots = [
        Plot(
            f"{scenario}_hit_by_turn",
            f"{scenario}: predicted hit ratio by turn (unbounded cache)",
            "turn (scenario 2: 0 is the root)",
            "hit %",
            labels,
            series(1),
        )
    ]
    if capacity_tokens is not None and any(r.cached_capacity is not None for r in group):
        plots.append(
            Plot(
                f"{scenario}_hit_by_turn_at_capacity",
                f"{scenario}: predicted hit ratio by turn ({capacity_tokens:,}-token KV cache)",
                "turn (scenario 2: 0 is the root)",
                "hit %",
                labels,
                series(2),
            )
        )
    return plots
