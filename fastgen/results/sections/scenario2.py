"""Scenario 2, parallel fan-out: five branches from one root context. Does the first branch to start pay for the
shared prefix and its siblings reuse it, and does starting them together (sync) or apart (stagger) change that?"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..report import Pair, Section, Table
from ..runs import RequestRecord
from ..stats import hit_percent, peak, ratio, side_by_side, ttft_ms
from .common import abr, engine_metric

SCENARIO = "scenario2"


def roles(requests: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    """root, first (the branch of each session that started first) and later (its siblings)."""
    sessions: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in requests:
        sessions[r.session].append(r)
    found: dict[str, list[RequestRecord]] = {"root": [], "first": [], "later": []}
    for session in sorted(sessions):
        group = sessions[session]
        found["root"] += [r for r in group if r.kind == "root"]
        branches = sorted((r for r in group if r.kind == "branch"), key=lambda r: (r.start, r.turn))
        found["first"] += branches[:1]
        found["later"] += branches[1:]
    return found


def _layout(requests: list[RequestRecord]) -> str:
    dirs = sorted({r.trace_dir for r in requests if r.trace_dir})
    return "/".join(d.removeprefix(SCENARIO + "_") for d in dirs)


def build(pair: Pair) -> Optional[Section]:
    names = pair.configs(SCENARIO)
    if not names:
        return None
    section = Section(SCENARIO, "Scenario 2: parallel fan-out",
                      intro="A root request, then five branches from its context; sync starts them within a short "
                      "window, stagger spreads them out. TTFT p50 in ms.")
    per_config = Table("TTFT p50 of the root, the first branch to start and its later siblings",
                       ["config", "layout", "concurrency", *abr("root"), *abr("first branch"), *abr("later siblings")])
    cache = Table("Hit ratio and peak KV usage", ["config", *abr("hit %"), *pair.ceiling_columns(), *abr("peak KV %")],
                  note="Peak KV usage is the largest sampled value of the engine's KV-usage gauge during the run "
                  "(vllm:kv_cache_usage_perc, sglang:token_usage); empty where no metrics were sampled.")
    layouts: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for name in names:
        a_requests, b_requests = pair.requests([name])
        ra, rb = roles(a_requests), roles(b_requests)
        row = [name, _layout(a_requests), pair.a.runs[name].concurrency]
        for role in ("root", "first", "later"):
            row += side_by_side(lambda rs: ttft_ms(rs, 50), ra[role], rb[role])
        per_config.rows.append(row)
        kv = [peak(side.runs[name], engine_metric(side.runs[name], "kv_usage")) for side in (pair.a, pair.b)]
        kv = [None if v is None else 100 * v for v in kv]
        cache.rows.append([name, *side_by_side(hit_percent, a_requests, b_requests), *pair.ceiling_cells([name]),
                           kv[0], kv[1], ratio(*kv)])
        layouts[_layout(a_requests)][0].extend(a_requests)
        layouts[_layout(a_requests)][1].extend(b_requests)

    sync_stagger = Table("Sync against stagger (all load levels pooled)",
                         ["layout", *abr("first branch TTFT p50"), *abr("later siblings TTFT p50"),
                          "later/first A", "later/first B", *abr("hit %")],
                         note="later/first below 1: the siblings found the prefix the first branch computed.")
    for layout in sorted(layouts):
        a_requests, b_requests = layouts[layout]
        ra, rb = roles(a_requests), roles(b_requests)
        first = side_by_side(lambda rs: ttft_ms(rs, 50), ra["first"], rb["first"])
        later = side_by_side(lambda rs: ttft_ms(rs, 50), ra["later"], rb["later"])
        sync_stagger.rows.append([layout, *first, *later, ratio(first[0], later[0]), ratio(first[1], later[1]),
                                  *side_by_side(hit_percent, a_requests, b_requests)])
    section.tables += [per_config, sync_stagger, cache]
    return section
