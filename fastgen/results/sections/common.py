"""Small helpers every section uses: column names for A, B and B/A, the standard triples, a config's status, turn
kinds as recorded and as answered, the KV peaks."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from ...engine_endpoints import ENGINES
from ..inference import ALPHA
from ..report import Cell, Pair, Section, Table
from ..runs import ConfigRun, Repeat, RequestRecord
from ..stats import PERCENTILES, Figure, Ratio, kv_tokens, mean, peak, percentile_ms

__all__ = [
    "TEXT_ANSWERS",
    "TTFT",
    "abr",
    "engine_metric",
    "interval_text",
    "kind_of",
    "kv_peak_percent",
    "kv_peak_tokens",
    "kv_source",
    "number",
    "output_tokens_table",
    "ratio_state",
    "scenario_section",
    "status_cell",
    "ttft_columns",
    "ttft_triples",
]

# The one TTFT (and TPOT, ITL) the report shows, named in every table header that shows one: over the requests whose
# answer streamed text. inference-perf times content tokens only, so an answer that is a tool call has none; a turn
# recorded as a tool call that the engine answered with text has one (turn kinds: the Same prompts section).
TEXT_ANSWERS = "text answers"

KINDS = ("text", "tool_call", "root", "branch")


def number(value: Optional[float]) -> str:
    """A figure's value as every table and sentence prints it: 3,542, 56.0, 8.25; `-` for none."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def ratio_state(r: Ratio) -> str:
    """Where the report's rule leaves a B/A, for every place that prints it (the tables' marks, the first page's
    words): "left out" (an incomplete run), "none" (a side has no figure), "too few" (not tested: too few sessions or
    runs), "difference", "corrected" (its interval alone lies beyond the margin, not once the report's tests are
    corrected), "needs runs" (tested on an interval its runs cannot hold up: neither the same nor different),
    "same" (tested, not a difference) or "untested"."""
    if r.left_out:
        return "left out"
    if r.value is None:
        return "none"
    if r.too_few:
        return "too few"
    if r.distinguishable:
        return "difference"
    if r.p is not None and r.p < ALPHA:
        return "corrected"
    if r.informative is False and r.needs_runs:
        return "needs runs"
    return "same" if r.p is not None else "untested"


def interval_text(x: Figure | Ratio) -> str:
    """A figure's or B/A's 95 % interval as printed: "[low-high]" where it says something, "[needs 3 runs]" where it
    rests on too few degrees of freedom (inference.MIN_INTERVAL_RUNS; a B/A that is a difference even so keeps its
    range: it lies beyond the margin), "" without one."""
    if x.low is None or x.high is None:
        return ""
    ratio = isinstance(x, Ratio)
    if x.informative is False and not (isinstance(x, Ratio) and x.distinguishable):
        runs = f"{x.needs_runs} runs{' a side' if ratio else ''}" if x.needs_runs else "more sessions"
        return f"[needs {runs}]"
    show = (lambda v: f"{v:.2f}") if ratio else number
    return f"[{show(x.low)}-{show(x.high)}]"


def abr(measure: str) -> list[str]:
    return [f"{measure} A", f"{measure} B", f"{measure} B/A"]


def ttft_triples(pair: Pair, names: list[str], keep=lambda r: True) -> list[Cell]:
    """TTFT p50, p95, p99 in ms, each as A, B, B/A."""
    cells: list[Cell] = []
    for q in PERCENTILES:
        cells += pair.triple(TTFT[q], names, keep)
    return cells


def ttft_columns() -> list[str]:
    return [c for q in PERCENTILES for c in abr(f"TTFT p{q} ms")]


TTFT = {q: percentile_ms("ttft", q) for q in PERCENTILES}


def scenario_section(pair: Pair, scenario: str, title: str, intro: str) -> Optional[tuple[list[str], Section]]:
    """The configs of `scenario` that both sides ran, and the empty section that will report them; None when there
    are none, so that the report leaves the scenario out instead of showing empty tables."""
    names = pair.configs(scenario)
    if not names:
        return None
    return names, Section(scenario, title, intro=intro)


def kind_of(requests: list[RequestRecord]) -> str:
    """The recorded kinds of these requests, and, where the engines answered a recorded tool call otherwise, how
    often: "tool_call (answered with text 16 of 16)"."""
    kinds = Counter(r.kind for r in requests)
    text = "/".join(sorted(kinds)) if kinds else ""
    calls = [r for r in requests if r.kind == "tool_call" and r.answered is not None and not r.failed]
    other = Counter(r.answered for r in calls if r.answered != "tool_call")
    if other:
        text += " (answered with " + ", ".join(f"{k} {n} of {len(calls)}" for k, n in sorted(other.items())) + ")"
    return text


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


def _usage_gauge(run: ConfigRun) -> Optional[Callable[[dict], Optional[float]]]:
    """The engine's KV usage gauge, where it is fine enough to count tokens with (not rounded)."""
    engine = ENGINES.get(run.engine or "")
    return None if engine is None or engine.kv_usage_step else engine_metric(run, "kv_usage")


def kv_peak_tokens(repeat: Repeat, run: ConfigRun) -> Optional[float]:
    """Peak KV tokens in use over one run: the engine's count (SGLang's num_used_tokens) where it exports one, else
    its usage gauge x the recorded capacity where the gauge is not rounded (vLLM's); None otherwise."""
    return kv_tokens(repeat, engine_metric(run, "kv_used_tokens"), _usage_gauge(run))


def kv_peak_percent(repeat: Repeat, run: ConfigRun) -> Optional[float]:
    """Peak KV usage in % of the capacity: from the token count where there is one, else the usage gauge (as
    exported: SGLang's rounded to 1 %)."""
    tokens, capacity = kv_peak_tokens(repeat, run), repeat.server.get("kv_capacity_tokens")
    if tokens is not None and capacity:
        return 100.0 * tokens / capacity
    fraction = peak(repeat, engine_metric(run, "kv_usage"))
    return None if fraction is None else 100.0 * fraction


def kv_source(runs: list[ConfigRun]) -> str:
    """Where the KV peaks of these runs come from, in words, for a table's note."""
    found = []
    for run in runs:
        engine = ENGINES.get(run.engine or "")
        if engine is None:
            continue
        count = engine.metrics.get("kv_used_tokens")
        gauge = engine.metrics.get("kv_usage", ("-",))[0]
        if count and any(engine.metric(s, "kv_used_tokens") is not None for _, s in run.samples):
            text = f"{engine.name}: {count[0]} (a count of tokens)"
        elif engine.kv_usage_step:
            text = (
                f"{engine.name}: {gauge} only, rounded to {engine.kv_usage_step:.0%} of the cache: no count of "
                f"tokens and no B/A"
            )
        else:
            text = f"{engine.name}: {gauge} x the recorded capacity"
        if text not in found:
            found.append(text)
    return "; ".join(found) or "no KV metrics sampled"


OUTPUT_TOKENS = mean("output_tokens")
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
            table.rows.append([name, kind, *pair.triple(OUTPUT_TOKENS, [name], lambda r, k=kind: r.kind == k)])
    return table
