"""The report's sections, in the order they appear: one module each, a `build(pair) -> Section | None` (None when
neither side ran what the section is about). A new scenario's report is one new module here and one line below."""

from . import (
    answers,
    overview,
    prompts,
    replicas,
    scenario1,
    scenario2,
    scenario3,
    setup,
    slo,
    steady,
    summary,
    throughput,
)

SECTIONS = (
    answers,
    summary,
    setup,
    prompts,
    overview,
    replicas,
    steady,
    scenario1,
    scenario2,
    scenario3,
    throughput,
    slo,
)

__all__ = ["SECTIONS"]
