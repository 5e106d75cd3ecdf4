"""Behind a router: how the load and the cache hits spread over the replicas, from each replica's own counters.

The bakeoff records, for a run through a router (`--replica`, or the replicas the router lists), each replica's
requests, prompt tokens and cached tokens over the run: the growth of its own /metrics counters from the first
sample to the last (run.json's `fleet`). This section puts them side by side: per replica, then the spread (how
evenly the router spread the requests, and how far apart the replicas' hit ratios are). A replica's figures are its
counters', not inference-perf's: the check `counters = requests` says whether the replicas' prompt tokens, summed,
are the prompt tokens the requests were answered with (a replica counting other clients' requests, or a restart,
would break it).
"""

from __future__ import annotations

import statistics
from typing import Optional

from ..report import Cell, Pair, Section, Side, Table
from ..runs import ConfigRun, Repeat
from ..inference import run_figure

SCENARIO = None  # every scenario

REPLICAS_NOTE = (
    "Each replica's counters over the run (vLLM: vllm:request_success, vllm:prompt_tokens, vllm:prefix_cache_hits; "
    "SGLang: sglang:num_requests, sglang:prompt_tokens, sglang:cached_tokens): one run's counts, or the mean over "
    "runs [its 95 % interval over runs, from two]. hit %: 100 x cached / prompt tokens; share: the replica's part of the requests."
)
SPREAD_NOTE = (
    "Imbalance: the busiest replica's requests over the mean (1.00 is even); hit % range: the lowest and the highest "
    "replica's hit ratio; fleet hit %: every replica's cached tokens over their prompt tokens. Mean over runs. "
    "Counters = requests: the replicas' prompt tokens summed equal the prompt tokens the run's requests were "
    "answered with (`yes` in every repeat)."
)


def _routed(run: Optional[ConfigRun]) -> bool:
    return run is not None and any(r.fleet for r in run.repeats)


def _rows(repeat: Repeat) -> list[dict]:
    rows = repeat.fleet.get("replicas")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _policy(run: ConfigRun) -> str:
    found = sorted({str(r.fleet.get("policy")) for r in run.repeats if r.fleet.get("policy")})
    return ", ".join(found) or "-"


def _percent(part: Optional[float], whole: Optional[float]) -> Optional[float]:
    return 100.0 * part / whole if part is not None and whole else None


def _replica_rows(name: str, tag: str, side: Side, run: ConfigRun) -> list[list[Cell]]:
    urls = sorted({str(row.get("url")) for repeat in run.repeats for row in _rows(repeat)})
    rows: list[list[Cell]] = []
    for url in urls:
        per = [next((row for row in _rows(r) if row.get("url") == url), {}) for r in run.repeats]
        requests = [row.get("requests") for row in per]
        n = sum(int(v) for v in requests if v is not None)
        totals = [sum(x.get("requests") or 0 for x in _rows(r)) for r in run.repeats]
        values = [
            requests,
            [row.get("prompt_tokens") for row in per],
            [row.get("cached_tokens") for row in per],
            [_percent(row.get("cached_tokens"), row.get("prompt_tokens")) for row in per],
            [_percent(row.get("requests"), total) for row, total in zip(per, totals)],
        ]
        cells: list[Cell] = [run_figure(v, n, upper=100.0 if i >= 3 else None) for i, v in enumerate(values)]
        if len(run.repeats) == 1:  # one run: its counts as they are (a figure reads 10.0 n=10)
            cells[:3] = [None if v[0] is None else int(v[0]) for v in values[:3]]
        rows.append([name, f"{tag}: {side.label}", _policy(run), url, *cells])
    return rows


def _spread(repeat: Repeat) -> dict[str, Optional[float]]:
    """One run's imbalance, lowest and highest replica hit %, and fleet hit %."""
    rows = _rows(repeat)
    requests = [row.get("requests") for row in rows]
    hits = [_percent(row.get("cached_tokens"), row.get("prompt_tokens")) for row in rows]
    total = repeat.fleet.get("sum") or {}
    known = [float(v) for v in requests if v is not None]
    mean = statistics.fmean(known) if known and len(known) == len(rows) else None
    return {
        "imbalance": max(known) / mean if mean else None,
        "hit_low": min((h for h in hits if h is not None), default=None),
        "hit_high": max((h for h in hits if h is not None), default=None),
        "fleet_hit": _percent(total.get("cached_tokens"), total.get("prompt_tokens")),
    }


def counters_match(repeat: Repeat) -> Optional[str]:
    """Why the replicas' summed prompt tokens are not the requests' (None: they are)."""
    counted = (repeat.fleet.get("sum") or {}).get("prompt_tokens")
    answered = sum(r.prompt_tokens or 0 for r in repeat.requests if not r.failed)
    if counted is None:
        return "a replica's counters were not read"
    if int(counted) != answered:
        return f"the replicas counted {int(counted):,} prompt tokens, the requests were answered with {answered:,}"
    return None


def _spread_row(name: str, tag: str, side: Side, run: ConfigRun) -> list[Cell]:
    n = sum(len(r.requests) for r in run.repeats)
    spreads = [_spread(r) for r in run.repeats if r.fleet]
    mismatches = [counters_match(r) for r in run.repeats if r.fleet]
    return [
        name,
        f"{tag}: {side.label}",
        _policy(run),
        max(len(_rows(r)) for r in run.repeats),
        *(
            run_figure([s[key] for s in spreads], n, upper=None if key == "imbalance" else 100.0)
            for key in ("imbalance", "hit_low", "hit_high", "fleet_hit")
        ),
        "yes" if not any(mismatches) else "NO",
    ]


def build(pair: Pair) -> Optional[Section]:
    names = sorted(
        name for name in set(pair.a.runs) | set(pair.b.runs) if any(_routed(s.runs.get(name)) for s in pair.sides)
    )
    if not names:
        return None
    replicas = Table(
        "Each replica's share",
        ["config", "side", "policy", "replica", "requests", "prompt tokens", "cached tokens", "hit %", "share %"],
        note=REPLICAS_NOTE,
    )
    spread = Table(
        "Spread across replicas",
        [
            "config",
            "side",
            "policy",
            "replicas",
            "imbalance",
            "hit % lowest",
            "hit % highest",
            "fleet hit %",
            "counters = requests",
        ],
        note=SPREAD_NOTE,
    )
    section = Section(
        "replicas", "Replicas", intro=__doc__.split("\n\n")[0].replace("\n", " "), tables=[spread, replicas]
    )
    for name in names:
        for tag, side in (("A", pair.a), ("B", pair.b)):
            run = side.runs.get(name)
            if run is None or not _routed(run):
                continue
            spread.rows.append(_spread_row(name, tag, side, run))
            replicas.rows += _replica_rows(name, tag, side, run)
            for repeat in run.repeats:
                why = counters_match(repeat) if repeat.fleet else None
                if why:
                    section.problems.append(f"{name} on {side.label}, repeat {repeat.index}: {why}")
    return section
