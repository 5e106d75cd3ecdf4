"""Scenario 2, parallel fan-out: five branches from one root context. Does the first branch to start pay for the
shared prefix and its siblings reuse it, and does starting them together (sync) or apart (stagger) change that?"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from ..report import Pair, Section, Table
from ..runs import RequestRecord
from ..stats import hit_ratio, ratio
from .common import (
    TEXT_ANSWERS,
    TTFT,
    abr,
    kv_peak_percent,
    kv_peak_tokens,
    kv_source,
    output_tokens_table,
    scenario_section,
    status_cell,
)

SCENARIO = "scenario2"
TITLE = "Scenario 2: parallel fan-out"
INTRO = (
    "A root request, then five branches from its context; sync starts them within a short window, stagger "
    f"spreads them out. TTFT p50 in ms, of {TEXT_ANSWERS}."
)
HIT = hit_ratio()
KV_NOTE = (
    "Peak KV: the largest sampled count of KV tokens in use by running requests during a run, in tokens and in % of "
    "the KV capacity the run recorded (percentages of two cache sizes are not compared): "
)


def roles(requests: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    """root, first (the branch of each session that started first) and later (its siblings); a session of each
    repeat on its own (the same session id recurs in every repeat, on another clock)."""
    sessions: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for r in requests:
        sessions[(r.repeat, r.session)].append(r)
    found: dict[str, list[RequestRecord]] = {"root": [], "first": [], "later": []}
    for key in sorted(sessions):
        group = sessions[key]
        found["root"] += [r for r in group if r.kind == "root"]
        branches = sorted((r for r in group if r.kind == "branch"), key=lambda r: (r.start, r.turn))
        found["first"] += branches[:1]
        found["later"] += branches[1:]
    return found


def _layout(requests: list[RequestRecord]) -> str:
    dirs = sorted({r.trace_dir for r in requests if r.trace_dir})
    return "/".join(d.removeprefix(SCENARIO + "_") for d in dirs)


def _role_triples(pair: Pair, names: list[str]) -> dict[str, tuple]:
    groups = [[roles(g) for g in pair.groups(side, names)] for side in pair.sides]
    return {
        role: pair.triple_of(TTFT[50], [g[role] for g in groups[0]], [g[role] for g in groups[1]], names)
        for role in ("root", "first", "later")
    }


def build(pair: Pair) -> Optional[Section]:
    if (opened := scenario_section(pair, SCENARIO, TITLE, INTRO)) is None:
        return None
    names, section = opened
    per_config = Table(
        f"TTFT p50 of the root, the first branch to start and its later siblings ({TEXT_ANSWERS})",
        ["config", "layout", "concurrency", "status", *abr("root"), *abr("first branch"), *abr("later siblings")],
    )
    cache = Table(
        "Hit ratio and peak KV usage",
        ["config", *abr("hit %"), *pair.ceiling_columns(), "peak KV % A", "peak KV % B", *abr("peak KV tokens")],
        note=KV_NOTE
        + kv_source([side.runs[n] for side in pair.sides for n in names])
        + ". Empty where no metrics were sampled or no capacity recorded.",
    )
    layouts: dict[str, list[str]] = defaultdict(list)
    for name in names:
        a_requests, _ = pair.requests([name])
        triples = _role_triples(pair, [name])
        per_config.rows.append(
            [
                name,
                _layout(a_requests),
                pair.a.runs[name].concurrency,
                status_cell(pair, name),
                *triples["root"],
                *triples["first"],
                *triples["later"],
            ]
        )
        kv = pair.run_sides(name, kv_peak_percent, upper=100.0)
        cache.rows.append(
            [
                name,
                *pair.triple(HIT, [name]),
                *pair.ceiling_cells([name]),
                *kv,
                *pair.run_triple(name, kv_peak_tokens, what="peak KV tokens"),
            ]
        )
        layouts[_layout(a_requests)].append(name)

    sync_stagger = _sync_stagger(pair, layouts)
    section.tables += [per_config, sync_stagger, cache, output_tokens_table(pair, names)]
    return section


def _sync_stagger(pair: Pair, layouts: dict[str, list[str]]) -> Table:
    sync_stagger = Table(
        f"Sync against stagger (all load levels pooled; TTFT of {TEXT_ANSWERS})",
        [
            "layout",
            *abr("first branch TTFT p50"),
            *abr("later siblings TTFT p50"),
            "later/first A",
            "later/first B",
            *abr("hit %"),
        ],
        note="later/first below 1: the siblings found the prefix the first branch computed.",
    )
    for layout in sorted(layouts):
        triples = _role_triples(pair, layouts[layout])
        first, later = triples["first"], triples["later"]
        sync_stagger.rows.append(
            [
                layout,
                *first,
                *later,
                ratio(first[0].value, later[0].value),
                ratio(first[1].value, later[1].value),
                *pair.triple(HIT, layouts[layout]),
            ]
        )
    return sync_stagger
