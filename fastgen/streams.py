"""Every random stream of a dataset, keyed here and nowhere else.

Each stream is `numpy.random.default_rng([seed, *key])`. The keys of today's streams come from before this module
and can coincide (a session index equal to the catalog's constant); they stay as they are until the one deliberate
change of bytes that makes them disjoint.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pool_rng", "agent_rng", "catalog_rng", "session_rng"]

_CATALOG = 0xB10C
_AGENT = 0xA6E
_POOL_BASE = 1000


def pool_rng(seed: int, kind_index: int) -> np.random.Generator:
    """A content pool's units (one pool per kind of text)."""
    return np.random.default_rng([seed, _POOL_BASE + kind_index])


def agent_rng(seed: int) -> np.random.Generator:
    """The one draw that names the agent of every scenario's system prompt."""
    return np.random.default_rng([seed, _AGENT])


def catalog_rng(seed: int, scenario_id: int) -> np.random.Generator:
    """A scenario's shared blocks: repository name, tool catalog, then the rest of its blocks."""
    return np.random.default_rng([seed, scenario_id, _CATALOG])


def session_rng(seed: int, scenario_id: int, index: int, *layout: int) -> np.random.Generator:
    """One session index's content (no layout) or one layout's timing (its position in the scenario's layouts)."""
    return np.random.default_rng([seed, scenario_id, index, *layout])
