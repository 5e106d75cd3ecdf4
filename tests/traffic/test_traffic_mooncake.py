"""Mooncake lines without session ids (traffic/mooncake.py): a trace generated here from known conversations, in the
form of Mooncake's public traces (every request starts with a service's system-prompt blocks; a conversation's next
request resends all but the last, partial block of the one before), read back into the same sessions, and the
statistics `workload fit` reads equal to those of the known sessions."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fastgen.traffic import read_traffic, traffic_stats
from fastgen.traffic.mooncake import SHARED_BRANCHES
from fastgen.traffic.read import TrafficError

BLOCK = 512


@dataclass
class _Trace:
    """Lines as Mooncake writes them, and each line's known conversation."""

    next_id: int = 0
    lines: list[dict] = field(default_factory=list)
    known: list[str] = field(default_factory=list)

    def fresh(self, n: int) -> list[int]:
        self.next_id += n
        return list(range(self.next_id - n, self.next_id))

    def send(self, session: str, full: list[int], at: int) -> None:
        """A request whose full blocks are `full`, and a fresh partial block after them."""
        partial = 1 + len(self.lines) % (BLOCK - 1)
        self.lines.append(
            {
                "timestamp": at,
                "input_length": len(full) * BLOCK + partial,
                "output_length": 100 + len(self.lines),  # unique: it names the request when read back
                "hash_ids": full + self.fresh(1),
            }
        )
        self.known.append(session)

    def conversation(self, session: str, system: list[int], *, turns: int, start: int, rng: random.Random) -> None:
        """`turns` requests, each extending the one before: its full blocks, then the partial block come back
        filled (another id) and the answer and the next message (more blocks); one in four forks in two branches."""
        full, at = system + self.fresh(rng.randint(1, 3)), start
        fork = turns >= 3 and rng.random() < 0.25
        for turn in range(turns):
            self.send(session, full, at)
            if fork and turn == 1:  # a parallel branch from here: one request that extends this prompt too
                self.send(session, full + self.fresh(rng.randint(1, 2)), at + 7)
            full, at = full + self.fresh(rng.randint(1, 4)), at + rng.randint(20_000, 300_000)

    def write(self, path: Path, *, sessions: bool = False) -> Path:
        order = sorted(range(len(self.lines)), key=lambda i: (self.lines[i]["timestamp"], i))
        rows = [{**self.lines[i], **({"session_id": self.known[i]} if sessions else {})} for i in order]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path


def _service(seed: int, *, conversations: int = 120) -> _Trace:
    """Two system prompts (one block, and two), conversations of 1-6 turns on each, starting over an hour; one in
    eight is a single request of only its system prompt and a partial block."""
    rng, trace = random.Random(seed), _Trace()
    systems = [trace.fresh(1), trace.fresh(2)]
    for c in range(conversations):
        system, start = systems[c % 2], rng.randint(0, 3_600_000)
        if c % 8 == 3:
            trace.send(f"c{c}", system, start)
        else:
            trace.conversation(f"c{c}", system, turns=rng.randint(1, 6), start=start, rng=rng)
    return trace


def _partition(sessions: list[str], keys: list[int]) -> set[frozenset[int]]:
    groups: dict[str, set[int]] = defaultdict(set)
    for session, key in zip(sessions, keys):
        groups[session].add(key)
    return {frozenset(g) for g in groups.values()}


def _inferred(path: Path) -> set[frozenset[int]]:
    requests = read_traffic([path])
    return _partition([r.session for r in requests], [r.output_tokens for r in requests])


def _known(trace: _Trace) -> set[frozenset[int]]:
    return _partition(trace.known, [line["output_length"] for line in trace.lines])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sessions_inferred_from_the_chains_are_the_known_conversations(tmp_path, seed):
    trace = _service(seed)
    inferred = _inferred(trace.write(tmp_path / "t.jsonl"))
    assert len(inferred) == 120
    assert inferred == _known(trace)


def test_the_statistics_fit_reads_are_those_of_the_known_sessions(tmp_path):
    trace = _service(4)
    inferred = traffic_stats(read_traffic([trace.write(tmp_path / "inferred.jsonl")]))
    known = traffic_stats(read_traffic([trace.write(tmp_path / "known.jsonl", sessions=True)]))
    assert inferred == known
    assert known["sessions"] == 120 and known["steps_p50"] > 1
    assert 10 < known["cached_share"] < 90  # the system blocks and each conversation's earlier turns


def test_a_system_prompt_a_conversation_starts_with_is_found_by_its_many_branches(tmp_path):
    # the first request of the trace is [system + partial]: nothing was sent before it, so only the branches
    # from its prompt (one a conversation) say that the system block is no conversation's
    rng, trace = random.Random(5), _Trace()
    system = trace.fresh(1)
    trace.send("alone", system, 0)
    for c in range(SHARED_BRANCHES):
        trace.conversation(f"c{c}", system, turns=2, start=1000 + c, rng=rng)
    inferred = _inferred(trace.write(tmp_path / "t.jsonl"))
    assert len(inferred) == SHARED_BRANCHES + 1 and inferred == _known(trace)


def test_a_prompt_other_conversations_went_past_first_is_shared_even_with_few_branches(tmp_path):
    rng, trace = random.Random(6), _Trace()
    system = trace.fresh(2)
    trace.conversation("a", system, turns=3, start=0, rng=rng)
    trace.send("alone", system, 10)  # after a's first request had gone past the system blocks
    trace.conversation("b", system, turns=2, start=20, rng=rng)
    assert _inferred(trace.write(tmp_path / "t.jsonl")) == _known(trace)


def test_a_conversation_opened_by_its_system_prompt_alone_splits_where_nothing_tells_it_apart(tmp_path):
    # [system + partial], then its next request: the partial block comes back as another id, so the next request
    # shares only the system block with it, as every other conversation does: a session of one, and a new one
    rng, trace = random.Random(9), _Trace()
    system = trace.fresh(1)
    trace.send("a", system, 0)
    trace.send("a", system + trace.fresh(2), 60_000)
    for c in range(SHARED_BRANCHES):
        trace.conversation(f"c{c}", system, turns=2, start=30_000 + c, rng=rng)
    inferred = _inferred(trace.write(tmp_path / "t.jsonl"))
    assert len(inferred) == SHARED_BRANCHES + 2
    assert {frozenset({100}), frozenset({101})} <= inferred


def test_a_few_conversations_under_an_unseen_system_prompt_join_the_one_it_opened(tmp_path):
    # the limit the rule states: the trace's first request is [system + partial] and fewer than SHARED_BRANCHES
    # conversations follow, so neither sign shows that the system block is shared
    rng, trace = random.Random(10), _Trace()
    system = trace.fresh(1)
    trace.send("a", system, 0)
    for c in range(3):
        trace.conversation(f"c{c}", system, turns=2, start=1000 + c, rng=rng)
    assert len(_inferred(trace.write(tmp_path / "t.jsonl"))) == 1


def test_lines_out_of_time_order_give_the_same_sessions(tmp_path):
    trace = _service(7, conversations=40)
    path = trace.write(tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    random.Random(0).shuffle(lines)
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join(lines) + "\n")
    assert _inferred(shuffled) == _inferred(path) == _known(trace)


def test_session_ids_in_the_lines_are_the_sessions_whatever_the_chains_say(tmp_path):
    trace = _service(8, conversations=24)
    trace.known = [f"given{i % 5}" for i in range(len(trace.lines))]  # across the chains' conversations
    requests = read_traffic([trace.write(tmp_path / "t.jsonl", sessions=True)])
    by_output = {line["output_length"]: s for line, s in zip(trace.lines, trace.known)}
    assert [r.session for r in requests] == [by_output[r.output_tokens] for r in requests]


def test_a_line_without_hash_ids_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]})
        + "\n"
        + json.dumps({"timestamp": 5, "input_length": 10, "output_length": 1})
        + "\n"
    )
    with pytest.raises(TrafficError, match=r"t.jsonl:2: has no 'hash_ids'"):
        read_traffic([path])
