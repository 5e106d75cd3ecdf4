"""The shape of the workload: token ranges, timing, the context window, and the Spec that holds every scenario's own.

Every number of the benchmark lives in a spec: each scenario's (its session count, token budgets, concurrency levels,
timing) in a frozen dataclass in its scenario module, what all share here. Nothing else hard-codes one; the manifest
records the spec.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Mapping, TypeVar

from annotated_types import Ge, Le, MinLen

from ..errors import SpecError

__all__ = [
    "STRICT_KEYS",
    "Range",
    "LogNormal",
    "Delay",
    "Timing",
    "ScenarioSpec",
    "Spec",
    "TemplateMargin",
    "Tokens",
    "Count",
    "Millis",
    "Seconds",
    "Window",
    "Levels",
    "DEFAULT_MAX_MODEL_LEN",
    "WORKLOAD_FORMAT",
    "TOOL_CALL_MIN_MAX_TOKENS",
    "TEMPLATE_OVERHEAD_BASE",
    "TEMPLATE_OVERHEAD_PER_MESSAGE",
]

DEFAULT_MAX_MODEL_LEN = 131072
# The version of the workload document (Spec.to_dict, workload files): a newer one is refused, not misread.
WORKLOAD_FORMAT = 1
# inference-perf sends max(4 x recorded, 4096) as max_tokens on a tool-call turn (override_tool_call_max_tokens):
# the server rejects a request whose prompt plus max_tokens exceeds its window, so the fit check uses it.
TOOL_CALL_MIN_MAX_TOKENS = 4096
# The chat template adds role markers and a tool preamble that the content counts do not include: the window check
# allows at least this much for it (more where the tokenizer's template is measured to add more: TemplateMargin).
TEMPLATE_OVERHEAD_BASE = 512
TEMPLATE_OVERHEAD_PER_MESSAGE = 8


@dataclass(frozen=True)
class TemplateMargin:
    """What the window check adds to a request's content tokens for the chat template: base + per_message x messages.
    Not part of the workload: it belongs to the tokenizer's template (DatasetBuilder measures it)."""

    base: int = TEMPLATE_OVERHEAD_BASE
    per_message: int = TEMPLATE_OVERHEAD_PER_MESSAGE


# The types of a spec's numbers, with the bounds a workload file is checked against (fastgen/generator/workload.py reads the
# annotations; nothing here imports pydantic, so generating does not pay for it). Units are in the field names or
# the scenario's docs: plain ints are token budgets, *_ms milliseconds, *_s seconds.
Tokens = Annotated[int, Ge(0), Le(10_000_000)]
Count = Annotated[int, Ge(1), Le(1_000_000)]
Millis = Annotated[int, Ge(0), Le(86_400_000)]
Seconds = Annotated[int, Ge(1), Le(86_400)]
Window = Annotated[int, Ge(1024), Le(100_000_000)]
Levels = Annotated[tuple[Count, ...], MinLen(1)]  # concurrency levels: one config each


STRICT_KEYS = {"extra": "forbid"}  # read by pydantic when a workload is loaded: an unknown key is an error


@dataclass(frozen=True)
class Range:
    """An inclusive integer range, drawn uniformly: {lo, hi} in a workload file."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    lo: Annotated[int, Ge(0), Le(100_000_000)]
    hi: Annotated[int, Ge(0), Le(100_000_000)]

    def __post_init__(self) -> None:
        if not (0 <= self.lo <= self.hi):
            raise SpecError(f"range {self.lo}..{self.hi} is empty or negative; use 0 <= lo <= hi")

    def draw(self, rng) -> int:
        return int(rng.integers(self.lo, self.hi + 1))

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    def scaled(self, factor: float) -> "Range":
        return Range(_scale_tokens(self.lo, factor), _scale_tokens(self.hi, factor))


@dataclass(frozen=True)
class LogNormal:
    """A duration with a long right tail, as think times and tool latencies are: {median, p90, cap} in milliseconds
    in a workload file. Half the draws fall below `median`, nine in ten below `p90`; none above `cap`."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    median: Annotated[int, Ge(1), Le(86_400_000)]
    p90: Annotated[int, Ge(1), Le(86_400_000)]
    cap: Annotated[int, Ge(1), Le(86_400_000)]

    def __post_init__(self) -> None:
        if not (self.median <= self.p90 <= self.cap):
            raise SpecError(
                f"log-normal {{median: {self.median}, p90: {self.p90}, cap: {self.cap}}} is out of order; "
                "use median <= p90 <= cap"
            )

    @property
    def sigma(self) -> float:
        """The spread of the underlying normal: p90 = median x e^(1.2816 sigma)."""
        return math.log(self.p90 / self.median) / _Z90

    def draw(self, rng) -> int:
        # math.exp, not numpy's: glibc's is correctly rounded, so a draw is the same integer on every machine
        return min(self.cap, int(round(self.median * math.exp(self.sigma * float(rng.standard_normal())))))

    @property
    def mean(self) -> float:
        """The mean of the log-normal (median x e^(sigma^2 / 2)), at most `cap`: what sizing notes go by."""
        return min(float(self.cap), self.median * math.exp(self.sigma**2 / 2))


_Z90 = 1.2815515655446004  # the standard normal's 90th percentile


# A duration a workload draws: uniform over {lo, hi}, or log-normal {median, p90, cap}
Delay = Range | LogNormal


def _as_written(value: Any) -> str:
    """A value as a workload file writes it: {lo: 2, hi: 5}, [{percent: 60, turns: {lo: 2, hi: 5}}], 40000."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            "{" + ", ".join(f"{f.name}: {_as_written(getattr(value, f.name))}" for f in dataclasses.fields(value)) + "}"
        )
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_as_written(v) for v in value) + "]"
    return repr(value)


def _scale_tokens(n: int, factor: float) -> int:
    return max(1, int(round(n * factor))) if n > 0 else 0


def _scale_count(n: int, factor: float) -> int:
    return max(1, int(math.ceil(n * factor)))


@dataclass(frozen=True)
class Timing:
    """Synthetic durations, so that recorded spans look like a real server and overlap where the design says."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    prefill_ms_per_1k_tokens: Millis = 40
    decode_ms_per_token: Millis = 25
    think_gap_ms: Delay = Range(800, 2500)  # after a text answer, before the user's next message
    tool_exec_ms: Delay = Range(1500, 6000)  # after a tool-call answer: the tools run (in parallel: the slowest)


_ScenarioSpecT = TypeVar("_ScenarioSpecT", bound="ScenarioSpec")


class ScenarioSpec:
    """What every scenario's spec (a frozen dataclass in its scenario module) has: a session count and token budgets.

    `count_field` names the field that counts its session indices; `not_tokens` the int and Range fields that are
    not token budgets (counts, percentages, times), which --budget-scale leaves alone.
    """

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS
    count_field: ClassVar[str] = "sessions"
    if TYPE_CHECKING:  # every subclass is a dataclass (dataclasses.fields, replace and asdict take it)
        __dataclass_fields__: ClassVar[dict[str, Any]]
    answers: ClassVar[tuple[str, ...]] = ()  # Range fields of recorded outputs: never empty

    def __post_init__(self) -> None:
        for name in self.answers:
            self.require(getattr(self, name).lo >= 1, name, "must be at least 1 token")

    not_tokens: ClassVar[frozenset[str]] = frozenset()

    def require(self, ok: bool, field: str, rule: str) -> None:
        """A spec's own check, for __post_init__: a ValueError, so a workload file names the scenario."""
        if not ok:
            raise SpecError(f"{field} {rule}, got {_as_written(getattr(self, field))}")

    @property
    def count(self) -> int:
        return getattr(self, self.count_field)

    @property
    def spawns_subagents(self) -> bool:
        """Whether sessions delegate to sub-agents: the catalog then has the delegate tool, the blocks a sub-agent
        system prompt (`subagent_system` tokens)."""
        return False

    def scaled(self: _ScenarioSpecT, *, sessions: float, budgets: float) -> _ScenarioSpecT:
        changes: dict = {self.count_field: _scale_count(self.count, sessions)}
        for f in dataclasses.fields(self):
            if f.name in self.not_tokens or f.name == self.count_field:
                continue
            value = getattr(self, f.name)
            if isinstance(value, Range):
                changes[f.name] = value.scaled(budgets)
            elif isinstance(value, int) and not isinstance(value, bool):
                changes[f.name] = _scale_tokens(value, budgets)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Spec:
    """The whole workload: each scenario's spec by name (in the registry's order), timing and the context window.

    `spec.NAME` is the spec of the scenario called NAME. Build the default one with `fastgen.generator.scenarios.default_spec`.
    """

    scenarios: Mapping[str, ScenarioSpec]
    timing: Timing = field(default_factory=Timing)
    max_model_len: Window = DEFAULT_MAX_MODEL_LEN
    template_margin: TemplateMargin = field(default_factory=TemplateMargin)
    # Where max_model_len was set, for messages: the workload file that says it, or "" (--max-model-len, or the
    # default). Not part of the workload, and no part of its equality.
    window_from: str = field(default="", compare=False)

    def __getattr__(self, name: str):
        # only reached for names that are not fields; `scenarios` itself is missing while unpickling
        scenarios = self.__dict__.get("scenarios")
        if scenarios is not None and name in scenarios:
            return scenarios[name]
        raise AttributeError(f"{type(self).__name__!r} has no attribute or scenario {name!r}")

    def scaled(self, *, sessions: float = 1.0, budgets: float = 1.0) -> "Spec":
        """A spec with session counts and token budgets multiplied (used by tests and quick runs).

        Concurrency levels stay as named (the config files are the design's); configs cap num_sessions at the
        corpus size instead.
        """
        if not (sessions > 0 and budgets > 0):
            raise SpecError(f"scale factors must be > 0 (got sessions={sessions}, budgets={budgets})")
        return self.with_scenarios(
            {name: sc.scaled(sessions=sessions, budgets=budgets) for name, sc in self.scenarios.items()}
        )

    def with_scenarios(self, changed: Mapping[str, ScenarioSpec]) -> "Spec":
        """The same spec with some scenarios' specs replaced (the order stays)."""
        return dataclasses.replace(self, scenarios={name: changed.get(name, sc) for name, sc in self.scenarios.items()})

    def to_dict(self) -> dict:
        """The workload document: what a workload file holds, and what the manifest records (fastgen/generator/workload.py)."""
        return {
            "format": WORKLOAD_FORMAT,
            "max_model_len": self.max_model_len,
            "timing": dataclasses.asdict(self.timing),
            "scenarios": {name: dataclasses.asdict(sc) for name, sc in self.scenarios.items()},
        }

    def window_too_small(self, what: str, excess: int, *, lower: str) -> SpecError:
        """The error for a request (`what`) that needs `excess` tokens more than the window, naming where the window
        was set (the workload file's max_model_len, or --max-model-len) and how to make it fit."""
        if self.window_from:
            return SpecError(
                f"{what} can need {excess} tokens more than max_model_len {self.max_model_len} (set in "
                f"{self.window_from}); raise max_model_len there (or pass --max-model-len) or lower "
                f"{lower}"
            )
        return SpecError(
            f"{what} can need {excess} tokens more than --max-model-len {self.max_model_len}; raise "
            f"--max-model-len or lower {lower}"
        )

    def tokens_over_window(self, prompt_tokens: int, max_tokens: int, messages: int) -> int:
        """How far a request (content tokens + the max_tokens sent + the template margin) exceeds the window; <= 0
        fits."""
        overhead = self.template_margin.base + self.template_margin.per_message * messages
        return prompt_tokens + max_tokens + overhead - self.max_model_len
