"""PNG charts of a report's plots, with matplotlib (the optional extra `fastgen[plots]`)."""

from __future__ import annotations

from pathlib import Path

from .report import Plot

__all__ = ["matplotlib_missing", "write_plots"]


def matplotlib_missing() -> str | None:
    """Why no plots can be drawn here, or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed; pip install 'fastgen[plots]'"
    return None


def write_plots(plots: list[Plot], folder: Path) -> dict[str, str]:
    """Draw each plot into folder/<name>.png; {name: file name}. Deterministic bytes: no timestamps in the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = {}
    folder.mkdir(parents=True, exist_ok=True)
    for plot in plots:
        figure, axes = plt.subplots(figsize=(6.4, 3.6), dpi=100)
        categorical = not all(isinstance(x, (int, float)) for x in plot.x)
        xs = list(range(len(plot.x))) if categorical else plot.x
        for label, values in plot.series.items():
            points = [(x, v) for x, v in zip(xs, values) if v is not None]
            if points:
                (line,) = axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
                if not categorical and label in plot.shade:  # that side's steady-state window
                    axes.axvspan(*plot.shade[label], color=line.get_color(), alpha=0.12, linewidth=0)
        if categorical:
            axes.set_xticks(xs, [str(x) for x in plot.x])
        elif plot.log_x:
            axes.set_xscale("log")
        axes.set_title(plot.title)
        axes.set_xlabel(plot.x_label)
        axes.set_ylabel(plot.y_label)
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        name = f"{plot.name}.png"
        figure.savefig(folder / name, metadata={"Software": None})
        plt.close(figure)
        written[plot.name] = name
    return written
