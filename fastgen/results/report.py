"""What a report is made of, before it is rendered: sections of tables and plots, with the two sides they compare.

Sections are plain data (numbers, not text), so report.json and report.md are two renderings of the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .ceilings import Ceilings
from .runs import ConfigRun, RequestRecord

__all__ = ["Pair", "Plot", "Section", "Side", "Table"]

Cell = Optional[float | int | str]


@dataclass(frozen=True)
class Side:
    label: str  # the runs folder's name (the bakeoff --label)
    runs: dict[str, ConfigRun]

    @property
    def engines(self) -> list[str]:
        return sorted({r.engine for r in self.runs.values() if r.engine})


@dataclass(frozen=True)
class Pair:
    a: Side
    b: Side
    ceilings: Optional[Ceilings] = None  # from `fastgen analyze --json`, when given

    def ceiling_columns(self) -> list[str]:
        """Column names of the predicted ceilings, beside a hit ratio; none without an analysis."""
        if self.ceilings is None:
            return []
        return ["ceiling % (analyze, infinite)"] + (
            ["ceiling % at capacity"] if self.ceilings.capacity_tokens is not None else [])

    def ceiling_cells(self, names: list[str], turn: Optional[int] = None) -> list[Optional[float]]:
        if self.ceilings is None:
            return []
        infinite, capacity = self.ceilings.percent(names, turn)
        return [infinite] + ([capacity] if self.ceilings.capacity_tokens is not None else [])

    def configs(self, scenario: str) -> list[str]:
        """The configs of a scenario (its config folder name) that both sides ran, in the design's order."""
        both = [name for name in self.a.runs if name in self.b.runs and self.a.runs[name].scenario == scenario]
        return sorted(both, key=lambda name: (self.a.runs[name].concurrency or 0, name))

    def requests(self, names: list[str], keep=lambda r: True) -> tuple[list[RequestRecord], list[RequestRecord]]:
        """Both sides' requests of these configs, pooled, that `keep` accepts."""
        return ([r for n in names for r in self.a.runs[n].requests if keep(r)],
                [r for n in names for r in self.b.runs[n].requests if keep(r)])


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""


@dataclass
class Plot:
    name: str  # the PNG's file stem
    title: str
    x_label: str
    y_label: str
    x: list[Cell]
    series: dict[str, list[Optional[float]]]  # legend -> one value per x
    log_x: bool = False


@dataclass
class Section:
    id: str
    title: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # verdicts, in words
