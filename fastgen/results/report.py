"""What a report is made of, before it is rendered: sections of tables and plots, with the two sides they compare.

Sections are plain data (numbers, not text), so report.json and report.md are two renderings of the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

from .ceilings import Ceilings
from .inference import benjamini_hochberg, compare, run_compare, run_figure
from .prompts import PromptCheck, check_prompts, without_offset
from .runs import ConfigRun, Repeat, RequestRecord
from .stats import MARGIN, Figure, Measure, Ratio

__all__ = ["Cell", "CompareOptions", "Pair", "Plot", "Section", "Side", "Table", "Tests"]

Cell = Optional[float | int | str | Figure | Ratio]


@dataclass(frozen=True)
class CompareOptions:
    include_incomplete: bool = False  # B/A of runs that are incomplete or failed too
    plateau: float = 1.0  # the steady-state window starts when plateau x the most sessions in flight are in flight
    slo_ttft_p95_ms: Optional[float] = None  # per scenario, the largest concurrency meeting it


@dataclass(frozen=True)
class Side:
    label: str  # the runs folder's name (the bakeoff --label)
    runs: dict[str, ConfigRun]
    ceilings: Optional[Ceilings] = None  # from `fastgen analyze --json`, when given for this side

    @property
    def engines(self) -> list[str]:
        return sorted({r.engine for r in self.runs.values() if r.engine})


def _by_repeat(runs: list[ConfigRun], keep: Callable[[RequestRecord], bool]) -> list[list[RequestRecord]]:
    """Requests grouped by repeat index, pooled over the configs (repeat K of each config together). Only the repeat
    indices that every config with such requests has: a repeat K that some configs lack would weigh the others alone
    (a median over repeats then leans to the configs that ran more often)."""
    per_run = [{repeat.index: [r for r in repeat.requests if keep(r)] for repeat in run.repeats} for run in runs]
    per_run = [{k: found for k, found in groups.items() if found} for groups in per_run]
    per_run = [groups for groups in per_run if groups]
    if not per_run:
        return []
    common = set.intersection(*(set(groups) for groups in per_run))
    return [[r for groups in per_run for r in groups[k]] for k in sorted(common)]


@dataclass
class Tests:
    """Every B/A the report computed, once each (the same figure in two tables is one test), and, once `decide` has
    run, which are differences: Benjamini-Hochberg (inference.py) over each of two families, the headline figures the
    summary looks at (`headline`: declared by the summary) and every other B/A of the tables. The report is built
    twice: the first build finds the tests, the second shows each one decided."""

    found: dict[Hashable, tuple[Figure, Figure, Ratio]] = field(default_factory=dict)
    claimed: Optional[set] = None
    headline: set = field(default_factory=set)
    _memo: dict = field(default_factory=dict)

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Anything the sections compute more than once over the same runs (both builds), computed once."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def get(self, key: Hashable, compute: Callable[[], tuple[Figure, Figure, Ratio]]) -> tuple[Figure, Figure, Ratio]:
        if key not in self.found:
            self.found[key] = compute()
        a, b, r = self.found[key]
        if self.claimed is not None and r.p is not None:
            r = replace(r, distinguishable=key in self.claimed)
        return a, b, r

    def tested(self, headline: Optional[bool] = None) -> list[Hashable]:
        """The tests (with a p-value); only the headline family's or only the others' with `headline`."""
        return [
            key
            for key, (_, _, r) in self.found.items()
            if r.p is not None and (headline is None or (key in self.headline) == headline)
        ]

    def too_few(self, headline: Optional[bool] = None) -> list[Hashable]:
        return [
            key
            for key, (_, _, r) in self.found.items()
            if r.too_few is not None and (headline is None or (key in self.headline) == headline)
        ]

    def decide(self) -> None:
        self.claimed = set()
        for family in (True, False):
            keys = self.tested(family)
            passed = benjamini_hochberg([self.found[key][2].p or 0.0 for key in keys])
            self.claimed |= {key for key, yes in zip(keys, passed) if yes}


def _ids(groups: list[list[RequestRecord]]) -> tuple:
    return tuple(tuple(id(r) for r in group) for group in groups)


@dataclass(frozen=True)
class Pair:
    a: Side
    b: Side
    options: CompareOptions = CompareOptions()
    tests: Tests = field(default_factory=Tests, compare=False)

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.a, self.b

    def _ceiling_sides(self) -> list[tuple[str, Ceilings]]:
        if self.a.ceilings is not None and self.a.ceilings is self.b.ceilings:
            return [("", self.a.ceilings)]  # one analysis serves both sides
        return [(f" {name}", side.ceilings) for name, side in (("A", self.a), ("B", self.b)) if side.ceilings]

    def ceiling_columns(self) -> list[str]:
        """Column names of the predicted ceilings, beside a hit ratio: "ceiling % inf" and "ceiling % cap" when one
        analysis serves both sides, else "ceiling A % inf" ... per side given one; none without an analysis."""
        columns = []
        for tag, ceilings in self._ceiling_sides():
            columns.append(f"ceiling{tag} % inf")
            if ceilings.capacity_tokens is not None:
                columns.append(f"ceiling{tag} % cap")
        return columns

    def ceiling_fleets(self) -> str:
        """A sentence naming the ceilings that are a fleet's (replicas behind a router), "" where none is."""
        fleets = [
            f"{tag.strip() or 'both sides'}: ceilings for {c.fleet()}" for tag, c in self._ceiling_sides() if c.fleet()
        ]
        if not fleets:
            return ""
        return (
            f" Behind a router the ceilings are the fleet's ({'; '.join(fleets)}): inf with each replica's cache "
            "unbounded, cap at each replica's capacity; they move with the routing policy, since a request meets only "
            "the cache of the replica it is sent to."
        )

    def ceiling_cells(self, names: list[str], turn: Optional[int] = None) -> list[Optional[float]]:
        cells = []
        for _, ceilings in self._ceiling_sides():
            infinite, capacity = ceilings.percent(names, turn)
            cells += [infinite] + ([capacity] if ceilings.capacity_tokens is not None else [])
        return cells

    def band_columns(self) -> list[str]:
        """Beside the ceilings, per side whose analysis has them: the band (lowest-highest hit % of analyze's
        replays of other interleavings) of the capacity ceiling, or of the unbounded one without a capacity."""
        return [
            f"ceiling{tag} band % {'cap' if kind == 'capacity' else 'inf'}"
            for tag, ceilings in self._ceiling_sides()
            if (kind := ceilings.band_kind())
        ]

    def band_cells(self, name: str) -> list[Optional[str]]:
        """One config's bands, as "low-high", for band_columns (a band is per config: it does not pool)."""
        cells: list[Optional[str]] = []
        for _, ceilings in self._ceiling_sides():
            kind = ceilings.band_kind()
            if kind is not None:
                band = ceilings.band(name, kind)
                cells.append(None if band is None else f"{band[0]:.1f}-{band[1]:.1f}")
        return cells

    def configs(self, scenario: str) -> list[str]:
        """The configs of a scenario (its config folder name) that both sides ran, in the design's order."""
        both = [name for name in self.a.runs if name in self.b.runs and self.a.runs[name].scenario == scenario]
        return sorted(both, key=lambda name: (self.a.runs[name].concurrency or 0, name))

    def requests(self, names: list[str], keep=lambda r: True) -> tuple[list[RequestRecord], list[RequestRecord]]:
        """Both sides' requests of these configs, pooled over configs and repeats, that `keep` accepts."""
        return (
            [r for n in names for r in self.a.runs[n].requests if keep(r)],
            [r for n in names for r in self.b.runs[n].requests if keep(r)],
        )

    def groups(self, side: Side, names: list[str], keep=lambda r: True) -> list[list[RequestRecord]]:
        return _by_repeat([side.runs[n] for n in names], keep)

    def left_out(self, names: list[str]) -> Optional[str]:
        """Why B/A of these configs is left out (a run on either side incomplete or failed), or None."""
        if self.options.include_incomplete:
            return None
        bad = sorted(
            {
                run.status
                for side in self.sides
                for n in names
                if (run := side.runs.get(n)) is not None and not run.usable
            }
        )
        return "/".join(bad) if bad else None

    def triple(
        self, measure: Measure, names: list[str], keep=lambda r: True, *, headline: bool = False
    ) -> tuple[Figure, Figure, Ratio]:
        """[A, B, B/A] of a measure over these configs' requests that `keep` accepts."""
        return self.triple_of(
            measure, self.groups(self.a, names, keep), self.groups(self.b, names, keep), names, headline=headline
        )

    def triple_of(
        self,
        measure: Measure,
        groups_a: list[list[RequestRecord]],
        groups_b: list[list[RequestRecord]],
        names: list[str],
        *,
        headline: bool = False,
    ) -> tuple[Figure, Figure, Ratio]:
        """(A, B, B/A) of a measure over requests already grouped by repeat (of these configs); a B/A of an
        incomplete run is left out (and not tested). `headline`: the summary's, tested in the headline family."""
        left_out = self.left_out(names)
        key = ("requests", measure.name, measure.margin, _ids(groups_a), _ids(groups_b), left_out)
        if headline:
            self.tests.headline.add(key)
        return self.tests.get(key, lambda: _left_out(self._compare(measure, groups_a, groups_b, names), left_out))

    def prompt_check(self, name: str) -> PromptCheck:
        """Were both sides of a config sent the same prompts (results/prompts.py; computed once)."""
        runs = (self.a.runs[name], self.b.runs[name])
        return self.tests.memo(("prompts", name), lambda: check_prompts(runs, (self.a.label, self.b.label)))

    def _compare(
        self, measure: Measure, groups_a: list[list[RequestRecord]], groups_b: list[list[RequestRecord]], names
    ) -> tuple[Figure, Figure, Ratio]:
        """compare(), but for a measure of prompt tokens (a hit ratio) over configs whose sides were sent the same
        prompts plus a constant, the B/A is tested without that constant: the offset's tokens, cached in every later
        request, lift one side's ratio, and the claim must not rest on them. The figures stay as the servers said."""
        a, b, r = compare(groups_a, groups_b, measure)
        offsets = {n: c for n in names if measure.of_prompts and (c := self.prompt_check(n)).verdict == "offset"}
        if not offsets or r.value is None:
            return a, b, r
        sides = [groups_a, groups_b]
        for name, check in offsets.items():
            index = 1 if check.offset > 0 else 0
            sides[index] = [
                [q for r_ in group for q in (without_offset([r_], abs(check.offset)) if r_.config == name else [r_])]
                for group in sides[index]
            ]
        _, _, r = compare(sides[0], sides[1], measure)
        whose = sorted({(self.b if c.offset > 0 else self.a).label + f"'s {abs(c.offset):,}" for c in offsets.values()})
        return a, b, replace(r, offset_free=f"{', '.join(whose)}-token prompt offset taken out")

    def run_sides(
        self,
        name: str,
        per_repeat: Callable[[Repeat, ConfigRun], Optional[float]],
        n: Callable[[Repeat], int] = lambda r: len(r.requests),
        *,
        upper: Optional[float] = None,
    ) -> tuple[Figure, Figure]:
        """A figure of whole runs of one config on each side, with no B/A (e.g. percentages of two cache sizes),
        its interval cut at `upper`."""
        a, b = (
            run_figure(
                [per_repeat(r, side.runs[name]) for r in side.runs[name].repeats],
                sum(n(r) for r in side.runs[name].repeats),
                upper,
            )
            for side in self.sides
        )
        return a, b

    def run_triple(
        self,
        name: str,
        per_repeat: Callable[[Repeat, ConfigRun], Optional[float]],
        n: Callable[[Repeat], int] = lambda r: len(r.requests),
        *,
        what: str,
        margin: float = MARGIN,
        headline: bool = False,
    ) -> tuple[Figure, Figure, Ratio]:
        """(A, B, B/A) of a figure of whole runs (one value per repeat) of one config, `what` naming it."""
        values = [[per_repeat(r, side.runs[name]) for r in side.runs[name].repeats] for side in self.sides]
        counts = [sum(n(r) for r in side.runs[name].repeats) for side in self.sides]
        left_out = self.left_out([name])
        key = ("runs", what, name, margin, tuple(map(tuple, values)), tuple(counts), left_out)
        if headline:
            self.tests.headline.add(key)
        return self.tests.get(
            key,
            lambda: _left_out(run_compare(values[0], values[1], n_a=counts[0], n_b=counts[1], margin=margin), left_out),
        )


def _left_out(triple: tuple[Figure, Figure, Ratio], left_out: Optional[str]) -> tuple[Figure, Figure, Ratio]:
    return triple if left_out is None else (triple[0], triple[1], Ratio(None, left_out=left_out))


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
    x: Sequence[Cell]
    series: dict[str, list[Optional[float]]]  # legend -> one value per x
    log_x: bool = False
    shade: dict[str, list[float]] = field(default_factory=dict)  # legend -> [x0, x1]: a span to shade (steady state)
    marks: Mapping[str, float] = field(
        default_factory=dict
    )  # legend -> x: a labelled vertical line (a chosen capacity)
    x_tokens: bool = False  # the x values are token counts: ticks read 420K, 1.2M

    @property
    def drawn(self) -> bool:
        """Whether there is anything to draw (a series with a value, or a mark): an empty chart is not written."""
        return bool(self.marks) or any(v is not None for values in self.series.values() for v in values)


@dataclass
class Section:
    id: str
    title: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # verdicts, in words
    problems: list[str] = field(default_factory=list)  # for the report's problems (e.g. prompts that differ)
