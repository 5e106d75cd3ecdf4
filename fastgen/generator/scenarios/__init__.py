"""The scenarios: one module each, and the registry every stage looks them up in (base.py).

The benchmark's three (BUILTIN, the default workload) and more agent shapes (MORE, generated when a workload names
them) are registered here; a scenario defined elsewhere (a plugin, a test) calls `register` with its
SCENARIO and is then generated, configured and validated wherever a spec names it.
"""

from __future__ import annotations

from ..spec import DEFAULT_MAX_MODEL_LEN, Spec, Timing
from . import agent_loop, chain, chat, fan, scenario1, scenario2, scenario3
from .base import (
    ConfigEntry,
    Request,
    Scenario,
    Shape,
    in_spec,
    layouts,
    register,
    registered,
    scenario_by_id,
    scenario_named,
    scenario_of_layout,
)

__all__ = [
    "BUILTIN",
    "MORE",
    "ConfigEntry",
    "Request",
    "Scenario",
    "Shape",
    "default_spec",
    "in_spec",
    "layouts",
    "register",
    "registered",
    "scenario_by_id",
    "scenario_named",
    "scenario_of_layout",
]

BUILTIN: tuple[Scenario, ...] = tuple(register(m.SCENARIO) for m in (scenario1, scenario2, scenario3))
# Agent shapes beyond the benchmark's three: generated when a workload names them, never by default. chain and fan
# are declared in the workload file itself, step by step (steps.py); chat is a conversation without tools
MORE: tuple[Scenario, ...] = tuple(register(m.SCENARIO) for m in (agent_loop, chain, fan, chat))


def default_spec(*, timing: Timing | None = None, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> Spec:
    """The benchmark's workload: the built-in scenarios with their specs' defaults."""
    return Spec({s.name: s.spec_type() for s in BUILTIN}, timing or Timing(), max_model_len)
