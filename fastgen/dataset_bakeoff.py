"""`fastgen bakeoff` as a library call: the bakeoff with the checks a dataset's workload asks for handed in.

The bakeoff is the read side and imports no generator, so whether a workload allows replaying with recorded outputs
(sub-agents do not) is the generator's answer (expectations.py). This module, above both, hands it in, so a program
calling fastgen.run_bakeoff is refused what the command refuses.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from .bakeoff import BakeoffOptions, RunOutcome
from .bakeoff import run_configs
from .generator.expectations import check_replay_outputs

__all__ = ["run_bakeoff", "with_dataset_checks"]


def with_dataset_checks(options: BakeoffOptions) -> BakeoffOptions:
    """The options with the dataset's outputs check, unless the caller handed in a check of its own."""
    if options.check_outputs is not None:
        return options
    return dataclasses.replace(options, check_outputs=check_replay_outputs)


def run_bakeoff(
    options: BakeoffOptions,
    *,
    echo: Callable[[str], None] = lambda line: None,
    on_outcome: Callable[[RunOutcome], None] = lambda outcome: None,
    warn: Optional[Callable[[str], None]] = None,
) -> list[RunOutcome]:
    """fastgen.bakeoff.run_configs with the dataset's checks (with_dataset_checks); the same outcomes."""
    return run_configs(with_dataset_checks(options), echo=echo, on_outcome=on_outcome, warn=warn)
