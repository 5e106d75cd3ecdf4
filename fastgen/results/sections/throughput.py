"""Throughput of every config both sides ran: completed sessions per hour, output tokens per second, failures."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Section, Table
from ..runs import ConfigRun
from ..stats import ratio
from .common import abr

SCENARIO = None  # every scenario


def sessions_per_hour(run: ConfigRun) -> Optional[float]:
    """Completed sessions over the span from the first session's start to the last one's end."""
    if not run.sessions:
        return None
    span = max(s.end for s in run.sessions) - min(s.start for s in run.sessions)
    done = sum(s.success for s in run.sessions)
    return 3600.0 * done / span if span > 0 else None


def output_tokens_per_s(run: ConfigRun) -> Optional[float]:
    requests = [r for r in run.requests if not r.failed and r.output_tokens is not None]
    if not requests:
        return None
    span = max(r.end for r in requests) - min(r.start for r in requests)
    return sum(r.output_tokens for r in requests) / span if span > 0 else None


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs),
                   key=lambda n: (pair.a.runs[n].scenario, pair.a.runs[n].concurrency or 0, n))
    if not names:
        return None
    table = Table("Throughput", ["config", "status A", "status B", *abr("sessions/h"), *abr("output tok/s"),
                                 "failed sessions A", "failed sessions B", "failed requests A", "failed requests B"],
                  note="sessions/h: completed sessions over the span from the first session's start to the last "
                  "one's end; output tok/s: output tokens of successful requests over the span of all requests.")
    for name in names:
        ra, rb = pair.a.runs[name], pair.b.runs[name]
        sph = [sessions_per_hour(ra), sessions_per_hour(rb)]
        tps = [output_tokens_per_s(ra), output_tokens_per_s(rb)]
        table.rows.append([name, ra.status, rb.status, *sph, ratio(*sph), *tps, ratio(*tps),
                           sum(not s.success for s in ra.sessions), sum(not s.success for s in rb.sessions),
                           sum(r.failed for r in ra.requests), sum(r.failed for r in rb.requests)])
    return Section("throughput", "Throughput", tables=[table])
