"""The shape of the workload: token ranges, timing, the context window, and the Spec that holds every scenario's own.

Every number of the benchmark lives in a spec: each scenario's (its session count, token budgets, concurrency levels,
timing) in a frozen dataclass in its scenario module, what all share here. Nothing else hard-codes one; the manifest
records the spec.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import ClassVar, Mapping

from .errors import SpecError

__all__ = [
    "Range",
    "Timing",
    "ScenarioSpec",
    "Spec",
    "DEFAULT_MAX_MODEL_LEN",
    "TOOL_CALL_MIN_MAX_TOKENS",
    "TEMPLATE_OVERHEAD_BASE",
    "TEMPLATE_OVERHEAD_PER_MESSAGE",
]

DEFAULT_MAX_MODEL_LEN = 131072
# inference-perf sends max(4 x recorded, 4096) as max_tokens on a tool-call turn (override_tool_call_max_tokens):
# the server rejects a request whose prompt plus max_tokens exceeds its window, so the fit check uses it.
TOOL_CALL_MIN_MAX_TOKENS = 4096
# The chat template adds role markers and a tool preamble that the content counts do not include.
TEMPLATE_OVERHEAD_BASE = 512
TEMPLATE_OVERHEAD_PER_MESSAGE = 8


@dataclass(frozen=True)
class Range:
    """An inclusive integer range, drawn uniformly."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not (0 <= self.lo <= self.hi):
            raise SpecError(f"range {self.lo}..{self.hi} is empty or negative; use 0 <= lo <= hi")

    def draw(self, rng) -> int:
        return int(rng.integers(self.lo, self.hi + 1))

    def scaled(self, factor: float) -> "Range":
        return Range(_scale_tokens(self.lo, factor), _scale_tokens(self.hi, factor))


def _scale_tokens(n: int, factor: float) -> int:
    return max(1, int(round(n * factor))) if n > 0 else 0


def _scale_count(n: int, factor: float) -> int:
    return max(1, int(math.ceil(n * factor)))


@dataclass(frozen=True)
class Timing:
    """Synthetic durations, so that recorded spans look like a real server and overlap where the design says."""

    prefill_ms_per_1k_tokens: int = 40
    decode_ms_per_token: int = 25
    think_gap_ms: Range = Range(800, 2500)
    tool_exec_ms: Range = Range(1500, 6000)


class ScenarioSpec:
    """What every scenario's spec (a frozen dataclass in its scenario module) has: a session count and token budgets.

    `count_field` names the field that counts its session indices; `not_tokens` the int and Range fields that are
    not token budgets (counts, percentages, times), which --budget-scale leaves alone.
    """

    count_field: ClassVar[str] = "sessions"
    not_tokens: ClassVar[frozenset[str]] = frozenset()

    @property
    def count(self) -> int:
        return getattr(self, self.count_field)

    def scaled(self, *, sessions: float, budgets: float):
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

    `spec.NAME` is the spec of the scenario called NAME. Build the default one with `fastgen.scenarios.default_spec`.
    """

    scenarios: Mapping[str, ScenarioSpec]
    timing: Timing = field(default_factory=Timing)
    max_model_len: int = DEFAULT_MAX_MODEL_LEN

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
        return self.with_scenarios({name: sc.scaled(sessions=sessions, budgets=budgets)
                                    for name, sc in self.scenarios.items()})

    def with_scenarios(self, changed: Mapping[str, ScenarioSpec]) -> "Spec":
        """The same spec with some scenarios' specs replaced (the order stays)."""
        return dataclasses.replace(self, scenarios={name: changed.get(name, sc) for name, sc in self.scenarios.items()})

    @classmethod
    def from_dict(cls, doc: Mapping, spec_types: Mapping[str, type]) -> "Spec":
        """The spec that to_dict() wrote, given each scenario's spec type by name (the registry knows them)."""
        names = [name for name in doc if name not in ("timing", "max_model_len")]
        return cls({name: _from_fields(spec_types[name], doc[name]) for name in names},
                   _from_fields(Timing, doc["timing"]), int(doc["max_model_len"]))

    def to_dict(self) -> dict:
        return {**{name: dataclasses.asdict(sc) for name, sc in self.scenarios.items()},
                "timing": dataclasses.asdict(self.timing), "max_model_len": self.max_model_len}

    def tokens_over_window(self, prompt_tokens: int, max_tokens: int, messages: int) -> int:
        """How far a request (prompt + the max_tokens sent + chat-template margin) exceeds the window; <= 0 fits."""
        overhead = TEMPLATE_OVERHEAD_BASE + TEMPLATE_OVERHEAD_PER_MESSAGE * messages
        return prompt_tokens + max_tokens + overhead - self.max_model_len


def _from_fields(cls: type, fields: Mapping):
    """A spec dataclass from its asdict() form: Ranges from {lo, hi}, tuples from lists."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        value, hint = fields[f.name], hints[f.name]
        if hint is Range:
            value = Range(value["lo"], value["hi"])
        elif typing.get_origin(hint) is tuple:
            value = tuple(value)
        values[f.name] = value
    return cls(**values)
