"""The largest load that meets an SLO, bracketed by measuring (issue 47): the SLO as data, and the search, pure.

The search is handed `measure(load) -> Measured` and never looks at a clock: the caller says how long one step
takes (`step_s`) and how much time and how many steps it may spend, and each Measured says the seconds it took.
It expands geometrically from the start until it holds a load that meets and one that breaks, then bisects on a
log scale until hi/lo - 1 <= width (or, for whole loads, until they are neighbours). A step whose verdict is
unclear is measured again, up to `repeats` more times; one still unclear counts as not meeting, so the capacity
it reports is one the measurements showed, never one they only failed to rule out.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Callable, Mapping, Optional, Protocol

from ..errors import SpecError

__all__ = ["SLO", "Budget", "Capacity", "Measured", "Outcome", "Step", "Verdict", "judge", "parse_slo", "search"]

GROWTH = 2.0  # the factor between loads while no bracket is held yet


@dataclass(frozen=True)
class SLO:
    """Targets on a step's figures; each None is not asked. Figures carry the same names."""

    ttft_p95_ms: Optional[float] = None  # time to the first streamed delta (text or tool call), p95
    tpot_p95_ms: Optional[float] = None  # per output token after the first, p95
    session_p95_s: Optional[float] = None  # a session's whole time, tool waits included, p95

    def targets(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def __str__(self) -> str:
        return ",".join(f"{name}={value:g}" for name, value in self.targets().items())


def parse_slo(text: str) -> SLO:
    """`ttft_p95_ms=2000,tpot_p95_ms=100` as an SLO; SpecError naming the bad piece and what is accepted."""
    known = [f.name for f in fields(SLO)]
    values: dict[str, float] = {}
    for piece in (p.strip() for p in text.split(",")):
        name, sep, raw = piece.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise SpecError(f"--slo: {piece!r} is not NAME=VALUE with NAME one of {', '.join(known)}")
        if name in values:
            raise SpecError(f"--slo: {name} is given twice; give each target once")
        try:
            value = float(raw)
        except ValueError:
            raise SpecError(f"--slo: {name}={raw.strip()!r} is not a number; give a positive number") from None
        if not math.isfinite(value) or value <= 0:
            raise SpecError(f"--slo: {name}={raw.strip()} must be a positive number")
        values[name] = value
    return SLO(**values)


class FigureLike(Protocol):
    """A measured figure with its interval (results.stats.Figure is one): low/high None when it has none."""

    @property
    def value(self) -> Optional[float]: ...
    @property
    def low(self) -> Optional[float]: ...
    @property
    def high(self) -> Optional[float]: ...


class Verdict(enum.Enum):
    MEETS = "meets"
    BREAKS = "breaks"
    UNCLEAR = "unclear"  # a target's interval straddles it, or a figure has no value
    FAILED = "failed"  # requests failed: the server, not the load, decided the step


def judge(slo: SLO, figures: Mapping[str, FigureLike]) -> Verdict:
    """Meets when every target's figure is below it beyond doubt (its interval's top, or its value when it has no
    interval), breaks when one is above it beyond doubt, unclear otherwise."""
    verdicts = []
    for name, target in slo.targets().items():
        fig = figures.get(name)
        if fig is None or fig.value is None:
            verdicts.append(Verdict.UNCLEAR)
            continue
        low = fig.value if fig.low is None else fig.low
        high = fig.value if fig.high is None else fig.high
        verdicts.append(Verdict.BREAKS if low > target else Verdict.MEETS if high <= target else Verdict.UNCLEAR)
    if Verdict.BREAKS in verdicts:
        return Verdict.BREAKS
    return Verdict.UNCLEAR if Verdict.UNCLEAR in verdicts else Verdict.MEETS


@dataclass(frozen=True)
class Measured:
    """One step's measurement: its verdict, the figures behind it, its failed requests and the seconds it took."""

    verdict: Verdict
    figures: Mapping[str, float]
    seconds: float = 0.0
    failed: int = 0
    requests: int = 0


@dataclass(frozen=True)
class Step:
    load: float
    attempt: int  # 1, then 2.. for a repeat of an unclear step
    measured: Measured


@dataclass(frozen=True)
class Budget:
    steps: Optional[int] = None  # measurements, repeats included
    seconds: Optional[float] = None  # with step_s, the time they may take


class Outcome(enum.Enum):
    BRACKETED = "bracketed"  # lo meets, hi breaks, within the width
    BELOW_LOWEST = "below the lowest load"  # the lowest load allowed already breaks the SLO
    ABOVE_HIGHEST = "above the highest load"  # the highest load allowed still meets it
    SERVER_FAILED = "server failed"  # a step's requests failed
    OUT_OF_BUDGET = "out of budget"  # stopped with what it knew
    NO_BUDGET = "no budget"  # too small for one step: nothing measured


@dataclass(frozen=True)
class Capacity:
    outcome: Outcome
    lo: Optional[float]  # the largest load measured to meet the SLO
    hi: Optional[float]  # the smallest load measured to break it (or stay unclear)
    steps: tuple[Step, ...]
    seconds: float  # what the steps said they took

    def line(self, slo: SLO, *, simulated: bool = False) -> str:
        """The outcome in one line, with what was measured (or, `simulated`, what a model predicted: no seconds)."""
        tried = ", ".join(f"{s.load:g} {s.measured.verdict.value}" for s in self.steps) or "nothing"
        lo, hi, last = _g(self.lo), _g(self.hi), self.steps[-1] if self.steps else None
        head = {
            Outcome.BRACKETED: f"capacity under {slo}: between {lo} (meets) and {hi} (breaks)",
            Outcome.BELOW_LOWEST: f"no load meets {slo}: the lowest allowed, {hi}, already breaks it",
            Outcome.ABOVE_HIGHEST: f"every load meets {slo}: the highest allowed, {lo}, still meets it",
            Outcome.SERVER_FAILED: f"the server failed requests at load {last.load:g} "
            f"({last.measured.failed} of {last.measured.requests})"
            if last
            else "the server failed requests",
            Outcome.OUT_OF_BUDGET: f"out of budget with the bracket [{lo}, {hi}] (lo meets, hi breaks)",
            Outcome.NO_BUDGET: "the budget is too small for one step; nothing was measured",
        }[self.outcome]
        if simulated:
            return f"{head}; simulated: {tried} ({len(self.steps)} load{'' if len(self.steps) == 1 else 's'})"
        return f"{head}; measured: {tried} ({len(self.steps)} steps, {self.seconds:.0f} s)"


def _g(load: Optional[float]) -> str:
    return "-" if load is None else f"{load:g}"


class _Stop(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


@dataclass
class _Search:
    measure: Callable[[float], Measured]
    budget: Budget
    step_s: float
    repeats: int
    steps: list[Step]
    seconds: float = 0.0

    def verdict(self, load: float) -> Verdict:
        """The load measured (again while unclear, up to `repeats` more times); an unclear one left counts as not
        meeting. _Stop when the budget cannot pay for the next measurement or the server failed requests."""
        for attempt in range(1, self.repeats + 2):
            if self.budget.steps is not None and len(self.steps) >= self.budget.steps:
                raise _Stop(Outcome.OUT_OF_BUDGET)
            if self.budget.seconds is not None and self.seconds + self.step_s > self.budget.seconds:
                raise _Stop(Outcome.OUT_OF_BUDGET)
            measured = self.measure(load)
            self.steps.append(Step(load, attempt, measured))
            self.seconds += measured.seconds
            if measured.verdict is Verdict.FAILED or measured.failed:
                raise _Stop(Outcome.SERVER_FAILED)
            if measured.verdict is not Verdict.UNCLEAR:
                return measured.verdict
        return Verdict.BREAKS


def search(
    measure: Callable[[float], Measured],
    *,
    start: float,
    lowest: float,
    highest: float,
    width: float = 0.10,
    repeats: int = 2,
    budget: Budget = Budget(),
    step_s: float = 0.0,
    whole: bool = True,
) -> Capacity:
    """Bracket the largest load in [lowest, highest] whose measurement meets the SLO to hi/lo - 1 <= width (whole
    loads: to neighbours, if that is wider); see the module's docstring."""
    if not 0 < lowest <= highest or width <= 0 or repeats < 0:
        raise SpecError(f"capacity search: need 0 < lowest <= highest and width > 0 (got {lowest}, {highest}, {width})")
    state = _Search(measure, budget, step_s, repeats, [])
    lo: Optional[float] = None
    hi: Optional[float] = None
    if (budget.steps is not None and budget.steps < 1) or (budget.seconds is not None and budget.seconds < step_s):
        return Capacity(Outcome.NO_BUDGET, None, None, (), 0.0)
    try:
        load = _round(min(max(start, lowest), highest), whole)
        while lo is None or hi is None:  # expand from the start until one meets and one breaks
            if state.verdict(load) is Verdict.MEETS:
                lo = load
                if load >= highest:
                    raise _Stop(Outcome.ABOVE_HIGHEST)
                load = max(_round(min(load * GROWTH, highest), whole), load + (1 if whole else 0))
            else:
                hi = load
                if load <= lowest:
                    raise _Stop(Outcome.BELOW_LOWEST)
                load = min(_round(max(load / GROWTH, lowest), whole), load - (1 if whole else 0))
        while not _narrow(lo, hi, width, whole):  # bisect on a log scale
            mid = _round(math.sqrt(lo * hi), whole)
            if not lo < mid < hi:
                break
            if state.verdict(mid) is Verdict.MEETS:
                lo = mid
            else:
                hi = mid
        outcome = Outcome.BRACKETED
    except _Stop as stop:
        outcome = stop.outcome
    return Capacity(outcome, lo, hi, tuple(state.steps), state.seconds)


def _round(load: float, whole: bool) -> float:
    return float(max(1, round(load))) if whole else load


def _narrow(lo: float, hi: float, width: float, whole: bool) -> bool:
    return hi / lo - 1 <= width or (whole and hi - lo <= 1)
