"""Code that is code: every Python unit and filler compiles (every file a generated dataset shows: test_realism)."""

from __future__ import annotations

import numpy as np

from fastgen.content.compose import Composer


def _compiles(source: str, name: str) -> None:
    compile(source, name, "exec")  # stricter than ast.parse: also await outside a coroutine, repeated parameters


def test_every_code_unit_and_filler_compiles_alone_and_joined(builtin):
    pool = Composer(builtin, seed=9).pool("code")
    for i, unit in enumerate(pool.units):
        _compiles(unit, f"unit {i}")
    fillers = [f for options in pool.fillers.values() for f in options]
    for i, filler in enumerate(fillers):
        _compiles(filler, f"filler {i}")
    # a composed file: units in any order, then the short fillers that make its count exact
    rng = np.random.default_rng(1)
    composer = Composer(builtin, seed=9)
    for n in (1, 2, 3, 7, 40, 300, 2000):
        _compiles(composer.fill("code", n, rng).text, f"fill {n}")
