"""Small helpers every section uses: column names for A, B and B/A, and time bins of a run."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from ...engines import ENGINES
from ..runs import ConfigRun, RequestRecord
from ..stats import PERCENTILES, side_by_side, ttft_ms

__all__ = ["abr", "engine_metric", "kind_of", "ttft_triples"]


def abr(measure: str) -> list[str]:
    return [f"{measure} A", f"{measure} B", f"{measure} B/A"]


def ttft_triples(a: list[RequestRecord], b: list[RequestRecord]) -> list[Optional[float]]:
    """TTFT p50, p95, p99 in ms, each as A, B, B/A."""
    cells: list[Optional[float]] = []
    for q in PERCENTILES:
        cells += side_by_side(lambda rs, q=q: ttft_ms(rs, q), a, b)
    return cells


def ttft_columns() -> list[str]:
    return [c for q in PERCENTILES for c in abr(f"TTFT p{q} ms")]


def kind_of(requests: list[RequestRecord]) -> str:
    kinds = Counter(r.kind for r in requests)
    return "/".join(sorted(kinds)) if kinds else ""


def engine_metric(run: ConfigRun, quantity: str) -> Callable[[dict], Optional[float]]:
    """A function of one /metrics sample: `quantity` under the run's engine's names (None: not exported)."""
    engine = ENGINES.get(run.engine or "")
    return lambda sample: engine.metric(sample, quantity) if engine else None
