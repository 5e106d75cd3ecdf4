"""An analysis as terminal tables and as JSON: the summary first (one row per config: hit % unbounded and at the
capacity, what the capacity costs, the sweep's knee; a line naming the configs the capacity binds), then, with
verbose, the long tables (per turn or branch index, the sweep's points), which the JSON always holds."""

from __future__ import annotations

import dataclasses
from typing import Optional

from .analyze import STABLE_WITHIN_POINTS, AnalysisOptions, TargetResult
from .summary import (
    BINDS_ABOVE_POINTS,
    KNEE_WITHIN_POINTS,
    binding_line,
    hit_cell,
    service_line,
    service_origin,
    summary_cells,
    summary_fields,
    summary_headers,
    summary_legend,
)

__all__ = ["analysis_document", "analysis_table"]

ANALYSIS_FORMAT = 1


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(rows: list[tuple]) -> list[str]:
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    return [
        "  ".join(str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(r, widths)))
        for r in rows
    ]


def analysis_table(
    reading: str,
    options: AnalysisOptions,
    results: list[TargetResult],
    *,
    verbose: bool = False,
    service_source: Optional[str] = None,
    server: Optional[str] = None,
) -> str:
    """The summary; with verbose, the tables by turn, per replica and of the sweep after it. `service_source` says
    where the service model's speeds come from (default: the defaults, or given), `server` what --server-from read."""
    if options.definition == "aiperf":
        return _aiperf_table(reading, options, results)
    capacity = f"{options.capacity_tokens:,} tokens" if options.capacity_tokens is not None else "none given"
    lines = [
        f"prompts read as: {reading} ({'the chat template with tools and the generation prompt' if reading == 'template' else 'content tokens, no chat template'}); "
        f"block size {options.block_size}; KV capacity {capacity}",
        "hit % infinite: cached / prompt tokens, each request's hit when the engine first admits it, with an "
        f"unbounded cache ({options.rules.describe(options.block_size)}); hit % capacity: the same with the "
        "engine's admission, preemption and LRU eviction at the capacity",
        server or f"scheduler: {options.scheduler.describe(options.engine)}",
        *summary_legend(options),
        service_line(options.service, service_source),
        "",
    ]
    rows = [
        (
            "config",
            "sessions",
            "requests",
            "prompt tokens",
            "hit % infinite",
            "hit % capacity",
            *summary_headers(options),
        )
    ]
    rows += [
        (
            r.name,
            r.sessions,
            r.requests,
            f"{r.prompt_tokens:,}",
            hit_cell(r, "infinite"),
            hit_cell(r, "capacity"),
            *summary_cells(r, options),
        )
        for r in results
    ]
    lines += _table(rows)
    bound = binding_line(results, options)
    lines += [""] + ([bound] if bound else [])
    if not verbose:
        lines.append(f"by turn{' and the sweep' if options.sweep else ''}: --verbose, or in --json")
        return "\n".join(lines)
    lines += _long_tables(results, options)
    return "\n".join(lines)


def _aiperf_table(reading: str, options: AnalysisOptions, results: list[TargetResult]) -> str:
    """The summary under AIPerf's definition of the hit ratio."""
    lines = [
        f"prompts read as: {reading}; block size {options.block_size}; definition: AIPerf's analyze-trace "
        "cache_hit_rate (mean over requests of the leading run of hash ids seen before, over the request's "
        "ids; infinite cache; replay order, as fastgen export mooncake writes the lines)",
        "",
    ]
    rows: list[tuple] = [("config", "sessions", "requests", "prompt tokens", "cache_hit_rate")]
    rows += [
        (r.name, r.sessions, r.requests, f"{r.prompt_tokens:,}", f"{r.aiperf_cache_hit_rate:.6f}") for r in results
    ]
    return "\n".join(lines + _table(rows))


def _long_tables(results: list[TargetResult], options: AnalysisOptions) -> list[str]:
    lines = ["", "by turn (scenario 2: 0 is the root, 1-5 the branches)"]
    rows: list[tuple] = [("config", "turn", "prompt tokens", "hit % infinite", "hit % capacity")]
    for r in results:
        for label, (prompt, cached, cached_cap) in r.by_label.items():
            rows.append(
                (r.name, label, f"{prompt:,}", _pct(r.percent(cached, prompt)), _pct(r.percent(cached_cap, prompt)))
            )
    lines += _table(rows)
    if options.replicas > 1:
        lines += ["", f"per replica ({options.router} router)"]
        rows = [("config", "replica", "requests", "prompt tokens", "hit %")]
        rows += [
            (r.name, str(k), str(replica["requests"]), f"{replica['prompt_tokens']:,}", _pct(replica["hit_percent"]))
            for r in results
            for k, replica in enumerate(r.replicas)
        ]
        lines += _table(rows)
    if options.sweep:
        lines += ["", "sweep: hit % at each KV capacity"]
        rows = [("config", "KV capacity (tokens)", "hit %")]
        rows += [(r.name, f"{capacity:,}", _pct(hit)) for r in results for capacity, hit in r.sweep]
        lines += _table(rows)
    return lines


def analysis_document(
    reading: str,
    options: AnalysisOptions,
    results: list[TargetResult],
    *,
    service_source: Optional[str] = None,
    server: Optional[str] = None,
) -> dict:
    return {
        "format": ANALYSIS_FORMAT,
        "reading": reading,
        "definition": options.definition,
        "block_size": options.block_size,
        "capacity_tokens": options.capacity_tokens,
        # what compare prints beside the ceilings: the cache rules the simulation followed
        "engine": options.engine,
        "rules": (
            options.rules.describe(options.block_size)
            + "; replay order of the config's schedule"
            + ("; LRU eviction at capacity" if options.capacity_tokens is not None else "")
        ),
        "server": server,
        "scheduler": {**dataclasses.asdict(options.scheduler), "described": options.scheduler.describe(options.engine)},
        "replicas": options.replicas,
        "router": options.router,
        "band": {
            "replays": len(options.band_replays()),
            "jitter": dataclasses.asdict(options.jitter),
            "speeds": [{"config": name, **dataclasses.asdict(s)} for name, s in options.band_speeds],
            "shown_above_points": STABLE_WITHIN_POINTS,
        },
        "service_model": {
            "prefill_tokens_per_s": options.service.prefill_tokens_per_s,
            "decode_tokens_per_s": options.service.decode_tokens_per_s,
            "source": service_origin(options.service, service_source),
        },
        "binds_above_points": BINDS_ABOVE_POINTS,
        "knee_within_points": KNEE_WITHIN_POINTS,
        "definitions": {
            "hit_percent_infinite": "100 x cached / prompt tokens, pooled, each request's hit at its first admission "
            "in the simulated engine, unbounded cache, the last prompt token always computed; with a band, the "
            "median over the unjittered replay and the band's",
            "hit_percent_capacity": "the same with the engine's admission, preemption and LRU eviction of blocks "
            "no running request holds, at the capacity (per replica)",
            "hit_percent_infinite_band": "[lowest, highest] hit % infinite over the unjittered replay and the band's "
            "jittered ones",
            "hit_percent_capacity_band": "the same at the capacity",
        },
        "configs": [{**r.to_dict(), **summary_fields(r)} for r in results],
    }
