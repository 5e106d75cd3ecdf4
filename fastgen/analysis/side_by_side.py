"""Several replays of one trace directory run side by side over one read of its files.

Each config of a directory replays its sessions in its own slot order against its own engines (schedule.replay). The
replays advance together, the one that has started the fewest sessions first; a session is taken from the read
(lazily, in the order the replays will ask for them) when a replay first needs it, and let go once every replay
that runs it has started it. The directory is never held whole: what is held is the sessions the replays run at once, and the few read for one
replay that another, further behind, has yet to start. Once every replay has ended a session, the blocks only it had
are forgotten by every engine's cache (`release`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional

import numpy as np

from .routing import Fleet
from .schedule import Jitter, Load, PlannedRequest, RequestOutcome, replay

__all__ = ["Replay", "read_order", "run_side_by_side"]

Sessions = Iterable[tuple[int, list[PlannedRequest]]]


@dataclass
class Replay:
    slots: list[int]  # file index of each slot, in slot order
    load: Load
    fleet: Fleet
    on_start: Callable[[RequestOutcome, PlannedRequest], None]
    on_session: Optional[Callable[[list[PlannedRequest]], None]] = None  # each session as this replay starts it
    on_forget: Optional[Callable[[np.ndarray], None]] = None  # block ids let go (the fleet forgets them itself)
    on_finish: Optional[Callable[[RequestOutcome, PlannedRequest], None]] = None  # each request as it ends
    jitter: Optional[Jitter] = None


def read_order(slot_lists: list[list[int]]) -> list[int]:
    """Every file the replays run, once, in the order replays advancing together ask for them: the first slot of
    each, then the second of each, ..."""
    lists = list(dict.fromkeys(tuple(s) for s in slot_lists))
    seen: set[int] = set()
    order = []
    for position in range(max(map(len, lists), default=0)):
        for slots in lists:
            if position < len(slots) and slots[position] not in seen:
                seen.add(slots[position])
                order.append(slots[position])
    return order


def _steps(r: Replay, sessions: Callable[[int], list[PlannedRequest]], ended: Callable[[int], None]) -> Iterator[int]:
    """`r`'s replay, a step at a time, over the shared `sessions`."""
    return replay(
        sessions, r.slots, r.load, r.fleet, on_start=r.on_start, on_end=ended, on_finish=r.on_finish, jitter=r.jitter
    )


def run_side_by_side(replays: list[Replay], read: Callable[[list[int]], Sessions]) -> None:
    """Run every replay to its end. `read(file indexes)` gives (index, session) in the order given, lazily; where
    what it gives has a `release(index)` (corpus.Stream), that is called once every replay has ended the session,
    and the block ids it returns, the ones only that session had, are forgotten by every replay's cache (their ids
    will name other blocks)."""
    uses = Counter(index for r in replays for index in set(r.slots))
    running_it = Counter(uses)
    sessions = read(read_order([r.slots for r in replays]))
    release = getattr(sessions, "release", None)
    source = iter(sessions)
    waiting: dict[int, list[PlannedRequest]] = {}

    def ended(index: int) -> None:
        running_it[index] -= 1
        if running_it[index] or release is None:
            return
        forgotten = release(index)
        for r in replays:
            r.fleet.forget(forgotten)
            if r.on_forget:
                r.on_forget(forgotten)

    def session_for(r: Replay) -> Callable[[int], list[PlannedRequest]]:
        def session(index: int) -> list[PlannedRequest]:
            while index not in waiting:
                read_index, planned = next(source)
                waiting[read_index] = planned
            planned = waiting[index]
            uses[index] -= 1
            if not uses[index]:
                del waiting[index]
            if r.on_session:
                r.on_session(planned)
            return planned

        return session

    running = [(0, n, _steps(r, session_for(r), ended)) for n, r in enumerate(replays)]
    heapq.heapify(running)
    try:
        while running:
            _, n, steps = heapq.heappop(running)
            started = next(steps, None)
            if started is not None:
                heapq.heappush(running, (started, n, steps))
    finally:
        close = getattr(source, "close", None)
        if close:
            close()
