"""What a scenario is, and the registry of them: the one list every stage iterates.

A scenario module owns everything about its scenario: its spec (a frozen dataclass of ScenarioSpec), its layouts
(the trace directories one session index writes, from the same content), its session plan, its largest requests
(for the window check), its config entries and the dependency graph each session must have. It ends with
`SCENARIO = Scenario(...)`: registered, it is generated, configured and validated wherever a spec names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Callable, Optional

from ...errors import SpecError
from ..spec import ScenarioSpec, Spec

__all__ = [
    "MOST_REQUESTS",
    "MOST_REQUESTS_WHY",
    "Scenario",
    "Shape",
    "Request",
    "ConfigEntry",
    "register",
    "registered",
    "scenario_named",
    "in_spec",
    "scenario_by_id",
    "scenario_of_layout",
    "layouts",
]


# The most requests one session may have. inference-perf 0.7.0 does finish a longer session (measured, issue 34: one
# of 1,104 requests among five short ones, every request answered; fastgen's configs size worker_max_concurrency for
# every queued event, so worker slots are not the limit), but before its first request it builds the session's graph
# whole, in its parent and again in the worker the session is pinned to, comparing each request's messages with
# every earlier request's (decompose_input): 37.5 s in the parent for that session (151 MB of small prompts), no
# other session dispatched meanwhile, one short session took 105 s for 1.5 s (queued behind the long one's events on
# its worker, by the delay), and the replay's peak PSS was 3.2 GiB against 0.4 GiB without it. docs/fidelity.md has
# the measurement.
MOST_REQUESTS = 256
# Why, in the refusals' words
MOST_REQUESTS_WHY = (
    "inference-perf builds a session's whole graph before its first request, stalling the other sessions for a time "
    "that grows with the square of its requests"
)


@dataclass(frozen=True)
class Shape:
    """The dependency graph inference-perf's graph builder must find in each session of a scenario."""

    fewest: int  # events
    most: int
    kind: str  # "chain": each event hangs off the one before it; "fan": every event after the first off the root
    tool_events: Optional[frozenset[int]] = None  # the events that answer with a tool call; None: as each span says
    # A turn kind (fastgen.turn_kind) after which the session starts over from its first messages (a compaction): the
    # next event's shared segment is then the one every request of the session begins with, found in event 0
    restart_kind: Optional[str] = None


@dataclass(frozen=True)
class Request:
    """The largest request a turn of a scenario can send: what the window check adds up."""

    what: str  # e.g. "scenario 1 turn 5"
    prompt_tokens: int
    max_tokens: int  # what inference-perf sends as max_tokens for it
    messages: int


@dataclass(frozen=True)
class ConfigEntry:
    """One config file: where it goes, which trace directory it replays, and its single load stage."""

    path: str  # relative to the config root, e.g. "scenario1/c10.yml"
    trace_dir: str  # relative to the trace root, e.g. "scenario1"
    concurrent_sessions: int
    num_sessions: int
    events_per_session: int  # the most requests one session can have queued at once
    session_rate: Optional[float] = None
    about: str = ""  # what the name means for the load, for the file's header

    @property
    def scenario(self) -> str:
        return PurePosixPath(self.path).parent.name

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).stem


@dataclass(frozen=True)
class Scenario:
    id: int  # part of every RNG stream key of the scenario: unique, and never reused for other content
    name: str  # the key of its spec in Spec.scenarios, and its config folder
    spec_type: type  # a ScenarioSpec dataclass; its defaults are the benchmark's numbers
    layouts: tuple[str, ...]  # trace directories, each written from the same content
    shape: Callable[[Any], Shape]  # of the scenario's own spec (spec_type): a spec with 12 branches has 13 events
    plan: Callable  # (composer, blocks, spec, *, seed, index) -> one SessionPlan per layout, in layout order
    largest_requests: Callable[[Spec], list[Request]]
    configs: Callable[[Spec], list[ConfigEntry]]

    def spec(self, spec: Spec) -> ScenarioSpec:
        return spec.scenarios[self.name]


_REGISTRY: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Add a scenario; its name, id and layouts must be new (a clash would mix two scenarios' files or streams)."""
    for other in _REGISTRY.values():
        if other.name == scenario.name and other is scenario:
            return scenario
        clash = (
            "name"
            if other.name == scenario.name
            else "id"
            if other.id == scenario.id
            else "layout"
            if set(other.layouts) & set(scenario.layouts)
            else None
        )
        if clash:
            raise SpecError(f"scenario {scenario.name!r} has the same {clash} as {other.name!r}; give it its own")
    _REGISTRY[scenario.name] = scenario
    return scenario


def registered() -> tuple[Scenario, ...]:
    """Every registered scenario, by id."""
    return tuple(sorted(_REGISTRY.values(), key=lambda s: s.id))


def scenario_named(name: str) -> Scenario:
    if name not in _REGISTRY:
        raise SpecError(f"no scenario is called {name!r}; the known ones: {', '.join(s.name for s in registered())}")
    return _REGISTRY[name]


def in_spec(spec: Spec) -> tuple[Scenario, ...]:
    """The scenarios a spec holds, in its order: what a run generates and configures."""
    return tuple(scenario_named(name) for name in spec.scenarios)


def scenario_by_id(scenario_id: int) -> Scenario:
    for scenario in _REGISTRY.values():
        if scenario.id == scenario_id:
            return scenario
    raise SpecError(f"no scenario has id {scenario_id}")


def scenario_of_layout(layout: str) -> Optional[Scenario]:
    return next((s for s in _REGISTRY.values() if layout in s.layouts), None)


def layouts(spec: Spec | None = None) -> tuple[str, ...]:
    """Every trace directory of the spec's scenarios (of every registered one without a spec)."""
    return tuple(layout for s in (in_spec(spec) if spec is not None else registered()) for layout in s.layouts)
