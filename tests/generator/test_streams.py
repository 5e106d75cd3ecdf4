"""RNG streams: one owner, disjoint keys for every index and scale."""

from __future__ import annotations

import itertools

import numpy as np

from fastgen.generator.content.kinds import KINDS
from fastgen.generator.scenarios import BUILTIN
from fastgen.generator.streams import agent_rng, catalog_rng, pool_rng, session_rng


def _first_draws(rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(x) for x in rng.integers(0, 2**63, size=4))


def test_the_session_index_that_equalled_the_catalog_key_now_draws_its_own_numbers():
    # before: scenario 3's catalog stream was [seed, 3, 0xB10C], i.e. session 45,324's (reachable at --scale 91)
    assert 0xB10C == 45324
    assert _first_draws(session_rng(42, 3, 45324)) != _first_draws(catalog_rng(42, 3))


def test_every_stream_of_a_run_is_distinct_across_domains_indices_and_layouts():
    seed = 42
    streams = {("agent",): agent_rng(seed)}
    streams |= {("pool", k): pool_rng(seed, k) for k in range(len(KINDS))}
    for scenario in BUILTIN:
        streams[("catalog", scenario.id)] = catalog_rng(seed, scenario.id)
        # indices around every constant the old keys used, and layouts next to the content stream
        for index in (0, 1, 2, 3, 999, 1000, 1009, 0xA6E, 0xB10C, 0xB10C + 1, 10**6):
            streams[("session", scenario.id, index)] = session_rng(seed, scenario.id, index)
            for layout in range(len(scenario.layouts)):
                streams[("session", scenario.id, index, layout)] = session_rng(seed, scenario.id, index, layout)
    draws = {key: _first_draws(rng) for key, rng in streams.items()}
    for (a, da), (b, db) in itertools.combinations(draws.items(), 2):
        assert da != db, (a, b)


def test_streams_depend_on_the_seed():
    assert _first_draws(session_rng(1, 1, 0)) != _first_draws(session_rng(2, 1, 0))
