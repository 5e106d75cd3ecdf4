"""Every config either side ran: how it ended, its requests, its pooled hit ratio, its time and its metric samples."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Section, Table
from ..stats import hit_percent, ratio

SCENARIO = None  # every scenario


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) | set(pair.b.runs))
    table = Table("Runs", ["config", "status A", "status B", "requests A", "requests B", "hit % A", "hit % B",
                           "hit % B/A", *pair.ceiling_columns(), "seconds A", "seconds B", "metric samples A",
                           "metric samples B"],
                  note="hit %: 100 x cached / prompt tokens, as the server reported them, pooled over the config's "
                  "requests. Status `reports`: inference-perf's reports without a bakeoff record (run by hand). Ceilings, "
                  "with --analysis: what `fastgen analyze` predicts an ideal cache (unbounded, and at its capacity) "
                  "hits on the same requests with recorded outputs; the gap is eviction or sharing the engine missed.")
    for name in names:
        runs = [side.runs.get(name) for side in (pair.a, pair.b)]
        hits = [hit_percent(r.requests) if r else None for r in runs]
        table.rows.append([name, *[r.status if r else "not run" for r in runs],
                           *[len(r.requests) if r else None for r in runs], hits[0], hits[1], ratio(*hits),
                           *pair.ceiling_cells([name]), *[r.seconds if r else None for r in runs], *[len(r.samples) if r else None for r in runs]])
    return Section("runs", "Runs", tables=[table])
