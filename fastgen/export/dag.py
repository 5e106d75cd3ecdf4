"""A replay as AIPerf's `dag_jsonl` dataset (AIPerf 0.13.0, dataset/loader/dag_jsonl.py): each session as
conversations that continue, fork and spawn one another, for AIPerf to replay with its own session arrivals.

    {"session_id": "s", "turns": [{"messages": [...], "tools": [...], "max_tokens": 44, "extra": {"tool_choice":
        "none"}, "delay": 0, "forks": ["s/1", "s/2"]}]}
    {"session_id": "s/1", "turns": [{"messages": [{"role": "user", ...}], "max_tokens": 85, "delay": 92}]}

The format, as its loader reads it: one conversation a line, `session_id` and `turns`, and `pre_session_spawns`
(conversations started, fire and forget, with it). A turn has `messages` (appended to the conversation's history,
after AIPerf's live answer to the turn before), `tools` (AIPerf sends the latest a history carries), `max_tokens`,
`extra` (merged into the request body), `delay` (ms after the turn before ends), `forks` (conversations that go on
from this turn's history and live answer; the conversation ends with that turn) and `spawns` (conversations that
start from an empty history; `{"children": [...], "join_at": K}` holds turn K until they end). A conversation no
other names is a root: AIPerf samples roots as sessions. Unknown keys are refused.

Each session's structure comes from inference-perf's own dependency graph of the file (traces.requests), whatever
its shape. A request's context parent is the predecessor whose whole prompt and answer open its prompt
(inference-perf's SHARED and OUTPUT segments); the rest is its delta. A request that is its parent's only such
successor is the next turn of the parent's conversation (a chain: one conversation of N turns); several each open a
conversation forked from the parent's turn (a fan: a root conversation of one turn, N forked ones). A request with
predecessors but no context parent (a new prompt, as after a compaction, or a delta with a system message, which
AIPerf refuses past a history's start) is spawned from its latest predecessor with its whole prompt; a file's
further roots are `pre_session_spawns` of its first; a wait on a conversation spawned from an earlier turn of the
same conversation is that spawn's `join_at`. Turns carry the messages inference-perf
sends (wire form) less the answers AIPerf puts its live ones in place of, `max_tokens` as inference-perf sends it,
`tool_choice` as its default force_recorded mode does (the recorded tool by name when the next request shows the
answer's one call, else "required"; "none" on text turns with tools) and `delay`, the recorded wait capped at the
config's max_wait_ms. The file holds each session the config replays once, in slot order.

Not carried, or not honoured by AIPerf 0.13.0:
- arrivals, concurrency and which sessions run how often: AIPerf's own options decide them.
- the wait before a forked or spawned conversation's first request: written as its `delay`, but AIPerf starts
  children when the parent's turn ends; and a turn whose spawns end after the turn before it goes as soon as they
  end, without its delay.
- tool-call ids: inference-perf rewrites those in `role: tool` messages to the live answer's; AIPerf sends them as
  recorded. Answers other than the context parent's (another predecessor's, a compaction's summary) stay recorded.
- a wait AIPerf cannot order (on a request neither an ancestor in the layout nor in a spawn joined) is dropped, and
  a spawn from a turn before its conversation's last joins that last turn (AIPerf joins every such spawn): both are
  listed in DagExport.unexpressed. So is a request without tools after one with them (AIPerf sends the earlier).
- the config's replay modes other than inference-perf's defaults (fastgen --outputs recorded, --tool-call-max-tokens
  recorded, --tool-choice as_recorded): the export is of the defaults. Forks need AIPerf's live answers.
- token counts: the format carries messages, and the server counts them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from .jsonl import write_jsonl
from ..errors import MissingExtraError, OutputError
from ..analysis.analyze import ConfigTarget, Corpus, target_slots
from ..traces.requests import ReplayRequest, SessionRequests, read_session

__all__ = ["DagExport", "dag_export", "read_export_session", "session_conversations", "write_dag"]


@dataclass
class DagExport:
    conversations: list[dict]  # the lines, in order: each session's root first, then the rest as they open
    sessions: int = 0
    requests: int = 0
    forks: int = 0  # conversations forked from another's turn
    spawns: int = 0  # conversations spawned, pre-session ones included
    unexpressed: list[str] = field(default_factory=list)  # one line per wait the layout drops or adds


@dataclass
class _Conversation:
    name: str
    events: list[str] = field(default_factory=list)  # in turn order
    how: str = "root"  # root, pre (a further root), fork, spawn
    parent: Optional[str] = None  # the event it is forked or spawned from


def dag_export(target: ConfigTarget, corpus: Corpus) -> DagExport:
    """The target's sessions (each once, in slot order) as dag_jsonl conversations."""
    export = DagExport([])
    names: set[str] = set()
    for index in dict.fromkeys(target_slots(target, corpus)):
        path = corpus.files[index]
        session = read_export_session(path)
        name = session.session_id if session.session_id not in names else f"{session.session_id}-{index}"
        lines, notes = session_conversations(session, target.load.max_wait_ms, name)
        for line in lines:
            if line["session_id"] in names:
                raise OutputError(
                    f"{path} names a conversation {line['session_id']!r} another session has; give each trace "
                    f"file its own session_id"
                )
            names.add(line["session_id"])
        export.conversations += lines
        export.sessions += 1
        export.requests += sum(len(line["turns"]) for line in lines)
        export.forks += sum(len(turn.get("forks", ())) for line in lines for turn in line["turns"])
        export.spawns += sum(len(line.get("pre_session_spawns", ())) for line in lines) + sum(
            1 if isinstance(entry, str) else len(entry["children"])
            for line in lines
            for turn in line["turns"]
            for entry in turn.get("spawns", ())
        )
        export.unexpressed += notes
    return export


def read_export_session(path: Path) -> SessionRequests:
    """One trace file's requests as inference-perf replays them, or an OutputError naming the file."""
    try:
        return read_session(path)
    except (OutputError, MissingExtraError):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever makes the replay skip the file
        raise OutputError(
            f"{path} cannot be read as inference-perf reads it ({type(exc).__name__}: {str(exc)[:160]}); "
            f"regenerate or remove it"
        ) from None


def _continues(request: ReplayRequest, parent: ReplayRequest) -> bool:
    """Whether `request`'s prompt is `parent`'s, its answer, then a delta AIPerf may append (no system message)."""
    n = len(parent.messages)
    return (
        len(request.messages) > n + 1
        and request.messages[n].get("role") == "assistant"
        and request.messages[:n] == parent.messages
        and all(m.get("role") != "system" for m in request.messages[n + 1 :])
    )


def session_conversations(
    session: SessionRequests, max_wait_ms: int, name: Optional[str] = None
) -> tuple[list[dict], list[str]]:
    """(one session's conversations as dag_jsonl lines, the waits the layout drops or adds); the first conversation
    is named `name` (default: the session's id), the others name/1, name/2, ... in the order they open."""
    layout = _Layout(session, name or session.session_id)
    notes: list[str] = []
    forks, spawns, pre = layout.branches(notes)
    lines = []
    tools_at: dict[str, Optional[tuple]] = {}  # request -> the tools its history carries once it is sent
    for c in layout.conversations:
        turns = []
        for position, e in enumerate(c.events):
            r = layout.requests[e]
            parent = layout.context.get(e) if position or c.how == "fork" else None
            inherited = tools_at[parent] if parent is not None else None
            tools_at[e] = r.tools if r.tools is not None else inherited
            history = len(layout.requests[parent].messages) + 1 if parent is not None else 0
            item: dict = {"messages": list(r.messages[history:])}
            if r.tools is not None and r.tools != inherited:
                item["tools"] = list(r.tools)
            elif r.tools is None and inherited is not None:
                notes.append(f"{layout.name}: {_short(e)} is sent without tools; AIPerf sends an earlier turn's")
            item["max_tokens"] = r.max_tokens
            choice = _tool_choice(r, [layout.requests[s] for s in layout.continuations.get(e, ())])
            if choice is not None:
                item["extra"] = {"tool_choice": choice}
            # a root goes when its session starts; the rest after the request the layout starts them after
            item["delay"] = min(r.wait_ms, max_wait_ms) if layout.after[e] is not None else 0
            if forks.get(e):
                item["forks"] = forks[e]
            if spawns.get(e):
                item["spawns"] = _spawn_entries(spawns[e])
            turns.append(item)
        line: dict = {"session_id": c.name}
        if c.how == "root" and pre:
            line["pre_session_spawns"] = pre
        line["turns"] = turns
        lines.append(line)
    return lines, notes


class _Layout:
    """One session's requests laid out as conversations (the rules in the module's docstring)."""

    def __init__(self, session: SessionRequests, name: str) -> None:
        self.name = name
        self.requests = requests = {r.event_id: r for r in session.requests}
        order = {event: i for i, event in enumerate(requests)}
        # the predecessors the replay waits for (a request without messages is not sent), each started before
        self.waits = {
            e: sorted((p for p in r.predecessors if p in order and order[p] < order[e]), key=order.__getitem__)
            for e, r in requests.items()
        }
        self.context: dict[str, str] = {}  # request -> its context parent
        for e, r in requests.items():
            fits = [p for p in self.waits[e] if _continues(r, requests[p])]
            if fits:
                self.context[e] = max(fits, key=lambda p: (len(requests[p].messages), order[p]))
        self.continuations: dict[str, list[str]] = defaultdict(list)
        for e, p in self.context.items():
            self.continuations[p].append(e)
        self.conversations: list[_Conversation] = []
        self.home: dict[str, int] = {}  # request -> its conversation
        self.after: dict[str, Optional[str]] = {}  # request -> the request the layout starts it after
        for e in requests:
            self._place(e)
        self.turn = {e: i for c in self.conversations for i, e in enumerate(c.events)}

    def _place(self, e: str) -> None:
        parent = self.context.get(e)
        if parent is not None and self.continuations[parent] == [e]:  # its parent's next turn
            self.home[e], self.after[e] = self.home[parent], parent
            self.conversations[self.home[e]].events.append(e)
            return
        if parent is not None:
            how = "fork"
        elif self.waits[e]:
            how, parent = "spawn", self.waits[e][-1]
        else:
            how = "pre" if self.conversations else "root"
        self.home[e], self.after[e] = len(self.conversations), parent
        label = f"{self.name}/{len(self.conversations)}" if self.conversations else self.name
        self.conversations.append(_Conversation(label, [e], how, parent))

    def branches(self, notes: list[str]):
        """(forks and spawns by the request they branch from, the pre-session spawns); the waits the layout drops
        or adds go to `notes`."""
        join_at: dict[int, int] = {}  # spawned conversation -> the turn of its spawner's conversation that waits
        for e, waits in self.waits.items():
            ordered = set()
            step: Optional[str] = e
            while step is not None:  # what AIPerf runs before e: the turns, forks and spawns above it
                ordered.add(step)
                step = self.after[step]
            for p in waits:
                if p in ordered:
                    continue
                spawned = self.conversations[self.home[p]]
                if (
                    spawned.how == "spawn"
                    and spawned.parent is not None
                    and self.home[spawned.parent] == self.home[e]
                    and self.turn[spawned.parent] < self.turn[e]
                ):
                    join_at[self.home[p]] = min(join_at.get(self.home[p], self.turn[e]), self.turn[e])
                else:
                    notes.append(f"{self.name}: {_short(e)} waits for {_short(p)}, which AIPerf cannot order; dropped")
        forks: dict[str, list[str]] = defaultdict(list)
        spawns: dict[str, list[tuple[Optional[int], str]]] = defaultdict(list)  # request -> (join turn or None, id)
        pre: list[str] = []
        for index, c in enumerate(self.conversations):
            if c.how == "pre":
                pre.append(c.name)
            elif c.how == "fork" and c.parent is not None:
                forks[c.parent].append(c.name)
            elif c.how == "spawn" and c.parent is not None:
                spawner = self.conversations[self.home[c.parent]]
                joins = join_at.get(index)
                if joins is None and self.turn[c.parent] < len(spawner.events) - 1:
                    joins = len(spawner.events) - 1
                    notes.append(
                        f"{self.name}: {_short(spawner.events[-1])} waits for {c.name} to end (AIPerf joins a spawn "
                        f"from a turn before the last); added"
                    )
                spawns[c.parent].append((joins, c.name))
        return forks, spawns, pre


def _spawn_entries(children: list[tuple[Optional[int], str]]) -> list[Union[str, dict]]:
    """A turn's spawns: bare ids (no join: the conversation's last turn), then one entry per join turn."""
    entries: list[Union[str, dict]] = [child for joins, child in children if joins is None]
    for joins in sorted({j for j, _ in children if j is not None}):
        entries.append({"children": [child for j, child in children if j == joins], "join_at": joins})
    return entries


def _tool_choice(request: ReplayRequest, continuations: list[ReplayRequest]) -> Union[None, str, dict]:
    """inference-perf's force_recorded tool_choice: the recorded tool by name where the answer is one call to a tool
    the request carries, "required" for other tool calls, "none" for text answers, nothing without tools. The answer
    is read off a request that continues this one (the trace's recorded output is not in the graph's requests)."""
    if not request.tools:
        return None
    if not request.is_tool_call:
        return "none"
    names = None
    if continuations:  # its prompt is this one's, then the recorded answer
        answer = continuations[0].messages[len(request.messages)]
        names = [(call.get("function") or {}).get("name") for call in answer.get("tool_calls") or ()]
    offered = {(tool.get("function") or {}).get("name") for tool in request.tools}
    if names and len(names) == 1 and names[0] in offered:
        return {"type": "function", "function": {"name": names[0]}}
    return "required"


def _short(event_id: str) -> str:
    return event_id.split("_", 2)[-1] if event_id.startswith("event_") else event_id


def write_dag(conversations: list[dict], out: Path) -> None:
    """The lines into `out` (through a temporary file beside it, so a failed write leaves no partial file)."""
    write_jsonl(conversations, out)
