"""Put every trace file through inference-perf's own graph builder and check the graph has the scenario's shape.

The replay trusts the graph, not our intentions: an edge it infers from timing alone (`temporal`) makes a call wait
for the wrong predecessor, and an input without an `output` segment never gets the live answer fed forward. So the
checks below read `graph_to_dict` of the very functions `OTelTraceReplayDataGenerator` calls, in the same order.

The shapes the sessions must have are an argument: the plans state them (generator.expectations), and the read side
imports no generator. `fastgen validate` and fastgen.validate_tree hand in the ones a dataset's workload plans
(dataset_validation.py).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Protocol

from .errors import MissingExtraError, ValidationError
from .extras import require_extra
from .processes import context, file_progress, workers_for
from .traces.graph import build_graph, graph_api
from .traces.graph import read_trace as _read_trace

__all__ = ["FileReport", "Shapes", "check_file_against", "validate_tree_against", "summary_table", "describe_file"]

_CAUSAL = frozenset({"full_match", "tool_call_ids_matched"})
# `~*` in fastgen.after (generator.spans.after_attribute): any one timing edge. Spelled here, not imported: the read
# side loads nothing of the generator
FOLLOWS_ANY = "*"
_TRACE_PATTERNS = ("session_*.json", "session_*.json.zst")
_FILES_PER_WORKER = 100  # a worker pays a ~5 s import; at ~50 ms a file it needs ~100 files to earn it back


class _Shape(Protocol):
    """What the checks read of a planned shape (generator.scenarios.Shape): the read side imports no generator."""

    @property
    def fewest(self) -> int: ...
    @property
    def most(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool_events(self) -> Optional[frozenset[int]]: ...
    @property
    def restart_kind(self) -> Optional[str]: ...


# trace directory -> the shape its sessions must have
Shapes = Mapping[str, _Shape]


@dataclass(frozen=True)
class FileReport:
    path: str
    scenario: str
    events: int
    deviations: tuple[str, ...]  # one short human line each; empty means the file is fine


def _scenario_of(doc: dict, path: Path) -> str:
    spans = doc["spans"]
    name = (spans[0].get("attributes") or {}).get("fastgen.scenario") if spans else None
    return str(name) if name else path.parent.name


def _build_graph(doc: dict, path: Path) -> tuple[dict, list[str]]:
    graph, warned = build_graph(doc, path)
    return graph_api().graph_to_dict(graph), warned


def _analyse(path: Path, shapes: Shapes) -> tuple[str, dict | None, list[str]]:
    """(scenario, graph dict or None, deviations). Anything that makes the replay skip the session is a deviation."""
    scenario = path.parent.name
    try:
        doc = _read_trace(path)
        scenario = _scenario_of(doc, path)
        graph, warned = _build_graph(doc, path)
    except (ValidationError, MissingExtraError):
        raise
    except Exception as err:  # inference-perf logs these and skips the session: we report them instead
        return scenario, None, [f"unreadable: {type(err).__name__}: {str(err)[:200]}"]
    deviations = [f"inference-perf warned: {line[:200]}" for line in warned]
    return scenario, graph, deviations + _shape_deviations(scenario, graph, shapes)


def _shape_deviations(scenario: str, graph: dict, shapes: Shapes) -> list[str]:
    if scenario not in shapes:
        return [f"unknown scenario {scenario!r}, expected one of {', '.join(shapes)}"]
    shape = shapes[scenario]
    fewest, most = shape.fewest, shape.most
    ids = list(graph["events"])  # insertion order = inference-perf's (start_time, span_id) order
    index = {eid: i for i, eid in enumerate(ids)}
    out = []
    if not fewest <= len(ids) <= most:
        want = str(fewest) if fewest == most else f"{fewest} to {most}"
        out.append(f"{len(ids)} events, expected {want}")
    events = list(graph["events"].values())
    try:
        planned = _planned_edges(shape.kind, ids, events)
    except KeyError as err:
        return out + [f"fastgen.after names {err.args[0]!r}, a span this file does not have"]
    roots = [eid for eid, (after, follows) in zip(ids, planned) if not after and not follows]
    if graph["root_event_ids"] != roots:
        got, wanted = [index[r] for r in graph["root_event_ids"]], [index[r] for r in roots]
        out.append(f"roots {got}, expected {'only event ' + str(wanted[0]) if len(wanted) == 1 else wanted}")
    for i, (event, (after, follows)) in enumerate(zip(events, planned)):
        if after or follows:
            restarts = (
                bool(after)
                and shape.restart_kind is not None
                and (_turn_kind(events[index[after[0]]]) == shape.restart_kind)
            )
            out += _edge_deviations(i, event, after, follows, index, shared_from=ids[0] if restarts else None)
        out += _tool_flag_deviations(shape.tool_events, i, event["call"])
    return out


def _planned_edges(kind: str, ids: list[str], events: list[dict]) -> list[tuple[list[str], str]]:
    """Each event's planned edges as event ids: (the events whose outputs it carries, the one it continues first;
    the event it is only timed after, FOLLOWS_ANY, or ""). From each span's `fastgen.after` where the plan states it,
    else from the scenario's kind: a chain's event continues the one before it, a fan's the root."""
    by_span = {eid.split("_", 2)[2]: eid for eid in ids}  # event_NNN_<span_id>
    planned = []
    for i, event in enumerate(events):
        stated = (event["call"].get("attributes") or {}).get("fastgen.after")
        if stated is None:
            planned.append(([] if i == 0 else [ids[i - 1] if kind == "chain" else ids[0]], ""))
            continue
        words = stated.split()
        after = [by_span[w] for w in words if not w.startswith("~")]
        follows = next((w[1:] for w in words if w.startswith("~")), "")
        planned.append((after, follows if follows in ("", FOLLOWS_ANY) else by_span[follows]))
    return planned


def _turn_kind(event: dict) -> str | None:
    return (event["call"].get("attributes") or {}).get("fastgen.turn_kind")


def _edge_deviations(
    i: int, event: dict, after: list[str], follows: str, index: dict[str, int], *, shared_from: str | None
) -> list[str]:
    """The planned edges against the graph's: exactly the causal ones, the one timing edge only where planned (any
    one, for FOLLOWS_ANY), and segments that take the prompt from the event it continues and its output live."""
    out = []
    deps = event["predecessor_dependency_types"]
    causal = {eid for eid, kind in deps.items() if kind in _CAUSAL}
    timed = [eid for eid, kind in deps.items() if kind not in _CAUSAL]
    timing_ok = timed == [follows] if follows and follows != FOLLOWS_ANY else len(timed) <= (follows == FOLLOWS_ANY)
    if causal != set(after) or not timing_ok:
        want = ", ".join(f"event {index[e]}" for e in after) + " (causal)" if after else ""
        if follows:
            timing = "one timing edge" if follows == FOLLOWS_ANY else f"event {index[follows]} (timing)"
            want += (", at most " if follows == FOLLOWS_ANY else ", ") + timing if want else timing
        out.append(f"event {i}: predecessors {_fmt_deps(deps, index) or 'none'}, expected {want}")
    segments = [(s["type"], s.get("source_event_id")) for s in event["call"]["input_segments"]]
    if after:
        src = after[0]
        shared = shared_from or src
        expected = [("shared", shared), ("output", src), ("unique", None)]
        want = f"shared(<-{index[shared]}) output(<-{index[src]}) unique"
    else:  # timed after a call whose text it does not carry: all its own
        expected, want = [("unique", None)], "unique"
    if segments != expected:
        got = " ".join(_fmt_segment(s, index) for s in event["call"]["input_segments"])
        out.append(f"event {i}: segments {got}, expected {want}")
    return out


def _tool_flag_deviations(tool_events: frozenset[int] | None, i: int, call: dict) -> list[str]:
    # Absent from the dict means False. The flag needs tool definitions on the span, not just a tool-call output.
    is_tool = bool(call.get("expected_output_is_tool_call"))
    if tool_events is not None:
        want = i in tool_events
    else:
        reasons = (call.get("attributes") or {}).get("gen_ai.response.finish_reasons")
        if reasons is None:
            return []
        want = reasons in (["tool_calls"], "tool_calls")
    if is_tool == want:
        return []
    return [f"event {i}: expected_output_is_tool_call {is_tool}, expected {want}"]


def _fmt_deps(deps: dict[str, str], index: dict[str, int]) -> str:
    return ", ".join(f"event {index.get(eid, eid)} {kind}" for eid, kind in deps.items())


def _fmt_segment(seg: dict, index: dict[str, int]) -> str:
    src = seg.get("source_event_id")
    return f"{seg['type']}(<-{index.get(src, src)})" if src is not None else seg["type"]


def check_file_against(path: Path, shapes: Shapes) -> FileReport:
    """One trace file (.json or .json.zst) against the shape `shapes` gives its trace directory; a file
    inference-perf cannot read is a deviation, not an exception."""
    path = Path(path)
    scenario, graph, deviations = _analyse(path, shapes)
    events = graph["event_count"] if graph else 0
    return FileReport(str(path), scenario, events, tuple(deviations))


def _trace_files(root: Path, directories) -> list[Path]:
    # The scenario folders, and root itself when it directly holds sessions; tokenizer/, manifest.json don't match.
    folders = [root, *(root / name for name in directories)]
    return sorted(p for d in folders if d.is_dir() for pattern in _TRACE_PATTERNS for p in d.glob(pattern))


def _spawn_pool(workers: int):
    # spawn: forking after a tokenizer or Arrow started threads can deadlock (processes.context says more).
    return context("spawn").Pool(workers)


def validate_tree_against(
    root: Path, shapes: Shapes, *, workers: int | None = None, progress: bool = False
) -> list[FileReport]:
    """Every session file under root's scenario folders (the trace directories `shapes` names) or in root itself,
    checked in parallel against its directory's shape, sorted by path."""
    require_extra("validate", "fastgen validate")  # before any file is read, and before workers that would each fail
    root = Path(root)
    paths = _trace_files(root, shapes)
    if not paths:
        raise ValidationError(f"no session_*.json or session_*.json.zst files under {root} or its scenario folders")
    if workers is None:
        workers = workers_for(len(paths), _FILES_PER_WORKER)
    workers = max(1, min(workers, len(paths)))
    chunksize = max(1, min(32, len(paths) // (workers * 4)))
    reports, tick = [], file_progress("validated") if progress else None
    # One worker runs in-process: no spawn and no second multi-second import.
    with _spawn_pool(workers) if workers > 1 else contextlib.nullcontext() as pool:
        check = functools.partial(check_file_against, shapes=shapes)
        results = pool.imap(check, paths, chunksize=chunksize) if pool else map(check, paths)
        for done, report in enumerate(results, 1):
            reports.append(report)
            if tick:
                tick(done, len(paths))
    return sorted(reports, key=lambda r: r.path)


def summary_table(reports, *, max_deviations: int = 3) -> str:
    """One row per directory (files, events, ok, failed), a total, then the first deviations of each directory."""
    by_dir: dict[str, list[FileReport]] = {}
    for r in reports:
        by_dir.setdefault(Path(r.path).parent.name, []).append(r)
    rows: list[tuple] = [("directory", "files", "events", "ok", "failed")]
    notes = []
    for name, group in sorted(by_dir.items()):
        failed = [r for r in group if r.deviations]
        rows.append((name, len(group), sum(r.events for r in group), len(group) - len(failed), len(failed)))
        first = [f"{name}/{Path(r.path).name}: {d}" for r in failed for d in r.deviations][:max_deviations]
        notes += [f"  {line}" for line in first]
    failed_total = sum(1 for r in reports if r.deviations)
    rows.append(("total", len(reports), sum(r.events for r in reports), len(reports) - failed_total, failed_total))
    widths = [max(len(str(row[c])) for row in rows) for c in range(5)]
    lines = [
        "  ".join(str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    return "\n".join(lines + (["deviations (first few per directory):", *notes] if notes else []))


def describe_file(path: Path, shapes: Shapes) -> str:
    """The --verbose view of one file: every event as inference-perf sees it, then the deviations from its shape."""
    path = Path(path)
    scenario, graph, deviations = _analyse(path, shapes)
    lines = [f"{path}  scenario={scenario}"]
    if graph is not None:
        index = {eid: i for i, eid in enumerate(graph["events"])}
        lines[0] += f"  events={graph['event_count']}  roots={[index[r] for r in graph['root_event_ids']]}"
        by_span = {eid.split("_", 2)[2]: i for eid, i in index.items()}
        for i, event in enumerate(graph["events"].values()):
            lines += _describe_event(i, event, index, by_span)
    lines.append(f"deviations: {len(deviations) or 'none'}")
    return "\n".join(lines + [f"  {d}" for d in deviations])


def _describe_event(i: int, event: dict, index: dict[str, int], by_span: dict[str, int]) -> list[str]:
    call = event["call"]
    lines = [
        f"event {i} {event['event_id']}: t={event['t_start_ms']}..{event['t_end_ms']} ms  wait_ms={event['wait_ms']}",
        f"  predecessors: {_fmt_deps(event['predecessor_dependency_types'], index) or 'none (root)'}",
    ]
    stated = (call.get("attributes") or {}).get("fastgen.after")
    if stated is not None:  # what the plan means, beside what inference-perf found
        words = stated.split()
        carried = [f"event {by_span.get(w, w)}" for w in words if not w.startswith("~")]
        timed = [w[1:] for w in words if w.startswith("~")]
        plan = f"carries the output of {', '.join(carried)}" if carried else "carries no earlier output"
        if timed:
            plan += "; timed after " + (
                "any one earlier event" if timed[0] == FOLLOWS_ANY else f"event {by_span.get(timed[0], timed[0])}"
            )
        lines.append(f"  planned: {plan}")
    for seg in call["input_segments"]:
        src = seg.get("source_event_id")
        source = f"  source=event {index.get(src, src)}" if src is not None else ""
        lines.append(f"  segment {seg['type']}: {seg['message_count']} msg, {seg['token_count']} tok{source}")
    lines.append(
        f"  expected_output_is_tool_call={bool(call.get('expected_output_is_tool_call'))}"
        f"  total_input_tokens={call['total_input_tokens']}  expected_output_tokens={call['expected_output_tokens']}"
    )
    return lines
