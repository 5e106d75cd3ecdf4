"""Small helpers every section uses: column names for A, B and B/A, the standard triples, a config's status."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from ...engines import ENGINES
from ..report import Cell, Pair, Section, Table
from ..runs import ConfigRun, RequestRecord
from ..stats import PERCENTILES, mean, percentile_ms

__all__ = [
    "abr",
    "content_turn",
    "engine_metric",
    "kind_of",
    "output_tokens_table",
    "scenario_section",
    "status_cell",
    "ttft_columns",
    "ttft_triples",
]

KINDS = ("text", "tool_call", "root", "branch")


def abr(measure: str) -> list[str]:
    return [f"{measure} A", f"{measure} B", f"{measure} B/A"]


def content_turn(r: RequestRecord) -> bool:
    """A turn that streams content (text, a root, a branch), so it has a TTFT, TPOT and ITL; tool calls do not."""
    return r.kind != "tool_call"


def ttft_triples(pair: Pair, names: list[str], keep=lambda r: True) -> list[Cell]:
    """TTFT p50, p95, p99 in ms, each as A, B, B/A."""
    cells: list[Cell] = []
    for q in PERCENTILES:
        cells += pair.triple(percentile_ms("ttft", q), names, keep)
    return cells


def ttft_columns() -> list[str]:
    return [c for q in PERCENTILES for c in abr(f"TTFT p{q} ms")]


def scenario_section(pair: Pair, scenario: str, title: str, intro: str) -> Optional[tuple[list[str], Section]]:
    """The configs of `scenario` that both sides ran, and the empty section that will report them; None when there
    are none, so that the report leaves the scenario out instead of showing empty tables."""
    names = pair.configs(scenario)
    if not names:
        return None
    return names, Section(scenario, title, intro=intro)


def kind_of(requests: list[RequestRecord]) -> str:
    kinds = Counter(r.kind for r in requests)
    return "/".join(sorted(kinds)) if kinds else ""


def status_cell(pair: Pair, name: str) -> str:
    """ "ok" when both sides' runs of the config completed, else what did not (with the failed counts)."""
    parts = []
    for tag, side in (("A", pair.a), ("B", pair.b)):
        run = side.runs.get(name)
        if run is None:
            parts.append(f"{tag} not run")
        elif not run.usable:
            parts.append(
                f"{tag} {run.status} ({run.requests_failed}/{run.requests_total} requests, "
                f"{run.sessions_failed}/{run.sessions_total} sessions failed)"
            )
    return "; ".join(parts) or "ok"


def engine_metric(run: ConfigRun, quantity: str) -> Callable[[dict], Optional[float]]:
    """A function of one /metrics sample: `quantity` under the run's engine's names (None: not exported)."""
    engine = ENGINES.get(run.engine or "")
    return lambda sample: engine.metric(sample, quantity) if engine else None


OUTPUT_NOTE = (
    "Output tokens per request of each turn kind, as inference-perf counted them: with live outputs each "
    "engine answers with its own, so later prompts and decode work differ; read latencies beside these."
)


def output_tokens_table(pair: Pair, names: list[str]) -> Table:
    """Mean output tokens per request by config and turn kind, for each side: what stands behind the latencies."""
    table = Table(
        "Output tokens per request, by turn kind", ["config", "kind", *abr("output tokens")], note=OUTPUT_NOTE
    )
    for name in names:
        kinds = {r.kind for r in pair.a.runs[name].requests + pair.b.runs[name].requests}
        for kind in [k for k in KINDS if k in kinds] + sorted(kinds - set(KINDS)):
            table.rows.append([name, kind, *pair.triple(mean("output_tokens"), [name], lambda r, k=kind: r.kind == k)])
    return table
