"""The scenarios: one module each, and the registry every stage looks them up in (base.py).

The benchmark's three are registered here; a scenario defined elsewhere (a plugin, a test) calls `register` with its
SCENARIO and is then generated, configured and validated wherever a spec names it.
"""

from __future__ import annotations

from ..spec import DEFAULT_MAX_MODEL_LEN, Spec, Timing
from . import scenario1, scenario2, scenario3
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

__all__ = ["BUILTIN", "ConfigEntry", "Request", "Scenario", "Shape", "default_spec", "in_spec", "layouts",
           "register", "registered", "scenario_by_id", "scenario_named", "scenario_of_layout", "spec_from_dict"]

BUILTIN: tuple[Scenario, ...] = tuple(register(m.SCENARIO) for m in (scenario1, scenario2, scenario3))


def spec_from_dict(doc: dict) -> Spec:
    """The spec a manifest records (`Spec.to_dict`), its scenarios in id order."""
    names = sorted((name for name in doc if name not in ("timing", "max_model_len")), key=lambda n: scenario_named(n).id)
    ordered = {**{name: doc[name] for name in names}, "timing": doc["timing"], "max_model_len": doc["max_model_len"]}
    return Spec.from_dict(ordered, {name: scenario_named(name).spec_type for name in names})


def default_spec(*, timing: Timing | None = None, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> Spec:
    """The benchmark's workload: the built-in scenarios with their specs' defaults."""
    return Spec({s.name: s.spec_type() for s in BUILTIN}, timing or Timing(), max_model_len)
