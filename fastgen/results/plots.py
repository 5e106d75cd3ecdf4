"""PNG charts of a report's plots, with matplotlib (the optional extra `fastgen[plots]`)."""

from __future__ import annotations

from pathlib import Path

from ..extras import import_extra, missing_extra
from .report import Plot

__all__ = ["draw_plot", "matplotlib_missing", "tokens_label", "write_plots"]


_DRAWING = "drawing plots"  # what needs the plots extra, for its message


def matplotlib_missing(command: str = _DRAWING) -> str | None:
    """Why no plots can be drawn here (the plots extra is missing: `command` needs it), or None."""
    return missing_extra("plots", command)


def tokens_label(tokens: float) -> str:
    """A token count as an axis reads it: 420K, 1.2M, 3B (512 below a thousand)."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if tokens >= scale * 0.9995:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:,.0f}"


def write_plots(plots: list[Plot], folder: Path) -> dict[str, str]:
    """Draw each plot into folder/<name>.png; {name: file name}. Deterministic bytes: no timestamps in the PNG."""
    plt = import_extra("matplotlib.pyplot", extra="plots", command=_DRAWING)

    written = {}
    folder.mkdir(parents=True, exist_ok=True)
    for plot in plots:
        figure = draw_plot(plot)
        name = f"{plot.name}.png"
        figure.savefig(folder / name, metadata={"Software": None})
        plt.close(figure)
        written[plot.name] = name
    return written


def draw_plot(plot: Plot):
    """One plot as a matplotlib Figure (the caller closes it)."""
    matplotlib = import_extra("matplotlib", extra="plots", command=_DRAWING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    categorical = not all(isinstance(x, (int, float)) for x in plot.x)
    xs = list(range(len(plot.x))) if categorical else [x for x in plot.x if isinstance(x, (int, float))]  # all
    for label, values in plot.series.items():
        points = [(x, v) for x, v in zip(xs, values) if v is not None]
        if points:
            (line,) = axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
            if not categorical and label in plot.shade:  # that side's steady-state window
                axes.axvspan(*plot.shade[label], color=line.get_color(), alpha=0.12, linewidth=0)
    for label, x in plot.marks.items():  # a line named in the legend, its value written at its top
        axes.axvline(x, color="black", linestyle="--", linewidth=1, label=label)
        axes.annotate(
            tokens_label(x) if plot.x_tokens else f"{x:g}",
            xy=(x, 0.02),
            xycoords=("data", "axes fraction"),
            xytext=(3, 0),
            textcoords="offset points",
            ha="left",
            va="bottom",
            fontsize=8,
        )
    if categorical:
        axes.set_xticks(xs, [str(x) for x in plot.x])
    elif plot.log_x:
        axes.set_xscale("log")
    if plot.x_tokens and not categorical:
        _token_ticks(axes, [x for x in xs if isinstance(x, (int, float))] + list(plot.marks.values()), log=plot.log_x)
    axes.set_title(plot.title)
    axes.set_xlabel(plot.x_label)
    axes.set_ylabel(plot.y_label)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    return figure


def _token_ticks(axes, values: list[float], *, log: bool) -> None:
    """Token counts on the x axis as 420K / 1.2M, few enough not to touch (at most 8; on a log axis at 1-2-5 steps,
    or whole decades over a wider range, with no labels on the minor ticks), turned 30 degrees."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    if log:
        axes.xaxis.set_major_locator(FixedLocator(_log_ticks([v for v in values if v > 0])))
        axes.xaxis.set_minor_formatter(NullFormatter())
    else:
        axes.xaxis.set_major_locator(MaxNLocator(nbins=6))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tokens_label(v)))
    axes.tick_params(axis="x", labelrotation=30)


def _log_ticks(values: list[float], most: int = 8) -> list[float]:
    """Round tick positions between the smallest and the largest value: the densest of 1-2-5 steps and decades
    that gives at most `most`; the two ends themselves when no such step gives two."""
    if not values:
        return []
    low, high = min(values), max(values)
    for subs in ((1, 2, 3, 5), (1, 2, 5), (1, 3), (1,)):
        ticks = [
            m * 10**k
            for k in range(int(f"{low:e}".split("e")[1]), int(f"{high:e}".split("e")[1]) + 1)
            for m in subs
            if low <= m * 10**k <= high
        ]
        if 2 <= len(ticks) <= most:
            return ticks
        if len(ticks) > most:
            continue
        return sorted({low, high})
    return ticks[:: -(-len(ticks) // most)]
