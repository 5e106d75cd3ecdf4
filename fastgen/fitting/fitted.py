"""A fitted workload (fit.py) checked and measured: validated as a workload file is, refused when its largest
request cannot fit the window, then generated at a small scale (a few sessions, the same budgets, the built-in
tokenizer) into a temporary folder and measured with the same statistics as the traces it was fitted to (traffic/stats.py).
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ..errors import SpecError
from ..generator.dataset import DatasetBuilder, Task
from ..generator.scenarios import in_spec
from ..generator.spec import Spec
from ..formats.tokenizer import load_tokenizer
from ..generator.workload import spec_from_document
from .chat_fit import fit_traffic
from .fit import refined
from ..traffic.read import Request, read_traffic
from ..traffic.stats import traffic_stats

__all__ = ["FittedWorkload", "checked_spec", "fit_and_measure", "generated_requests", "measure_fitted"]


@dataclass(frozen=True)
class FittedWorkload:
    spec: Spec
    unexpressed: tuple[str, ...]  # one line per statistic the fitted workload cannot express
    reference: dict[str, Optional[float]]  # the traces' statistics
    measured: dict[str, Optional[float]]  # the fitted workload's, generated at a small scale


def fit_and_measure(
    requests: Sequence[Request], *, max_model_len: int, sessions: int, family: str = "auto"
) -> FittedWorkload:
    """The workload fitted to the requests, generated at `sessions` sessions and refined once by what that missed,
    then measured again: what `fastgen workload fit` writes and the table it prints."""
    reference = traffic_stats(requests)
    fit = fit_traffic(requests, max_model_len=max_model_len, family=family)
    first = measure_fitted(checked_spec(fit.document), sessions=sessions)
    spec = checked_spec(refined(fit.document, reference, first))
    return FittedWorkload(spec, fit.unexpressed, reference, measure_fitted(spec, sessions=sessions))


def checked_spec(document: dict) -> Spec:
    """The spec of a fitted document; WorkloadError if it is not a valid workload, SpecError if its largest request
    cannot fit max_model_len (the message names --max-model-len)."""
    spec = spec_from_document(document, source="the fitted workload")
    for scenario in in_spec(spec):
        for request in scenario.largest_requests(spec):
            over = spec.tokens_over_window(request.prompt_tokens, request.max_tokens, request.messages)
            if over > 0:
                raise SpecError(
                    f"the fitted workload's largest request ({request.what}) can need {over} tokens more than "
                    f"--max-model-len {spec.max_model_len}; pass --max-model-len {_window_for(spec, over)} (or the "
                    f"window the traffic was served with)"
                )
    return spec


def _window_for(spec: Spec, over: int) -> int:
    """The next power of two that holds the largest request."""
    need = spec.max_model_len + over
    return 1 << (need - 1).bit_length()


def measure_fitted(spec: Spec, *, sessions: int, seed: int = 1) -> dict[str, Optional[float]]:
    """The statistics of `sessions` sessions of each scenario of the spec (whatever its own count), generated with
    the built-in tokenizer into a temporary folder that is removed afterwards."""
    return traffic_stats(generated_requests(spec, sessions=sessions, seed=seed))


def generated_requests(spec: Spec, *, sessions: int, seed: int = 1) -> list[Request]:
    """The requests of `sessions` sessions of each scenario of the spec, as read_traffic reads them back."""
    small = spec.with_scenarios(
        {name: dataclasses.replace(sc, sessions=sessions) for name, sc in spec.scenarios.items()}
    )
    builder = DatasetBuilder(load_tokenizer("builtin"), small, seed=seed, model="fitted")
    with tempfile.TemporaryDirectory(prefix="fastgen-fit-") as folder:
        root = Path(folder)
        for scenario in in_spec(small):
            for index in range(scenario.spec(small).count):
                for rel, data in builder.files_for(Task(scenario.id, index)):
                    path = root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
        return list(read_traffic([root]))
