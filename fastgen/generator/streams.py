"""Every random stream of a dataset, keyed here and nowhere else.

Each stream is `numpy.random.default_rng([seed, DOMAIN, *key])`: a domain per kind of stream (content pools, the
agent's name, a scenario's shared blocks, a session), then a key of fixed length within its domain. Two streams can
only coincide if their whole keys do, for any index and scale. (numpy's SeedSequence pads a key with zeros, so
[s, a] and [s, a, 0] are the same stream: that is why every key of a domain has the same length.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["pool_rng", "agent_rng", "catalog_rng", "session_rng", "DOMAINS"]

DOMAINS = {"pool": 1, "agent": 2, "catalog": 3, "session": 4}


def _rng(seed: int, domain: str, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed, DOMAINS[domain], *key])


def pool_rng(seed: int, kind_index: int) -> np.random.Generator:
    """A content pool's units (one pool per kind of text)."""
    return _rng(seed, "pool", kind_index)


def agent_rng(seed: int) -> np.random.Generator:
    """The one draw that names the agent of every scenario's system prompt."""
    return _rng(seed, "agent")


def catalog_rng(seed: int, scenario_id: int) -> np.random.Generator:
    """A scenario's shared blocks: repository name, tool catalog, then the rest of its blocks."""
    return _rng(seed, "catalog", scenario_id)


def session_rng(seed: int, scenario_id: int, index: int, layout: int | None = None) -> np.random.Generator:
    """One session index's content (layout None), or one layout's own draws (its position in the scenario's layouts)."""
    return _rng(seed, "session", scenario_id, index, 0 if layout is None else 1 + layout)
