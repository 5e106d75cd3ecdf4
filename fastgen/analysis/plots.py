"""An analysis as charts: hit % by turn per scenario, hit % against KV capacity (the sweep: where the knee is, the
capacity a scenario needs), and stable against noisy. Drawn by results.plots (matplotlib, the `plots` extra)."""

from __future__ import annotations

from collections import defaultdict

from ..results.report import Plot
from .analyze import TargetResult

__all__ = ["analysis_plots", "sweep_capacities"]


def sweep_capacities(smallest: int, largest: int, points: int = 8) -> list[int]:
    """Geometric steps from the smallest capacity that holds one request to one that holds a whole replay."""
    largest = max(largest, smallest + 1)
    ratio = (largest / smallest) ** (1 / (points - 1))
    return sorted({int(smallest * ratio ** i) for i in range(points)})


def _scenario(name: str) -> str:
    return name.split("/")[0]


def analysis_plots(results: list[TargetResult], sweep: dict[str, list[tuple[int, float]]]) -> list[Plot]:
    plots = []
    by_scenario: dict[str, list[TargetResult]] = defaultdict(list)
    for result in results:
        by_scenario[_scenario(result.name)].append(result)
    for scenario, group in sorted(by_scenario.items()):
        labels = sorted({label for r in group for label in r.by_label}, key=lambda x: (not x.isdigit(), int(x)
                                                                                       if x.isdigit() else 0, x))
        plots.append(Plot(f"{scenario}_hit_by_turn", f"{scenario}: predicted hit ratio by turn (unbounded cache)",
                          "turn (scenario 2: 0 is the root)", "hit %", labels, {
                              r.name: [r.percent(r.by_label[t][1], r.by_label[t][0]) if t in r.by_label else None
                                       for t in labels] for r in group}))
        swept = [r for r in group if r.name in sweep]
        if swept:
            capacities = sorted({c for r in swept for c, _ in sweep[r.name]})
            plots.append(Plot(f"{scenario}_hit_by_capacity", f"{scenario}: predicted hit ratio against KV capacity",
                              "KV capacity (tokens)", "hit %", capacities, {
                                  r.name: [dict(sweep[r.name]).get(c) for c in capacities] for r in swept},
                              log_x=True))
    layouts = [r for r in results if r.name.endswith(("_stable", "_noisy"))]
    if layouts:
        levels = sorted({r.name.rsplit("_", 1)[0] for r in layouts})
        series = {}
        for layout in ("stable", "noisy"):
            found = {r.name.rsplit("_", 1)[0]: r for r in layouts if r.name.endswith("_" + layout)}
            series[f"{layout}, unbounded"] = [found[l].percent(found[l].cached_infinite) if l in found else None
                                              for l in levels]
            if any(r.cached_capacity is not None for r in found.values()):
                series[f"{layout}, at capacity"] = [found[l].percent(found[l].cached_capacity) if l in found else
                                                    None for l in levels]
        plots.append(Plot("stable_vs_noisy", "Stable against noisy prompt layouts (predicted)", "config", "hit %",
                          levels, series))
    return plots
