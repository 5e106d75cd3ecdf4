"""Code that is code: every Python unit and filler compiles (every file a generated dataset shows: test_realism)."""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path

import numpy as np

from fastgen.generator.content.compose import Composer


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


def _python_sources(root: Path, limit: int = 40) -> str:
    files = sorted(p for p in root.rglob("*.py") if "tests" not in p.parts)[:limit]
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in files)


def test_generated_code_has_the_characters_per_token_of_real_python(builtin):
    """Code tokenizes like code: generated code's characters per token lie within what real Python gives under the
    same tokenizer (the standard library, which trained it, and installed packages it never saw). Before the
    tokenizer was trained on fewer template units and the code used short names and subscripts: 5.0, above both."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    real = {name: _python_sources(stdlib / name) for name in ("json", "email", "logging", "asyncio")}
    for package in ("numpy", "jinja2", "yaml", "tqdm", "pydantic"):
        real[package] = _python_sources(Path(importlib.util.find_spec(package).origin).parent)
    ratio = {name: len(text) / builtin.encoded_count(text) for name, text in real.items()}
    pool = Composer(builtin, seed=9).pool("code")
    generated = "".join(pool.units)
    ours = len(generated) / builtin.encoded_count(generated)
    assert min(ratio.values()) <= ours <= max(ratio.values()), (ours, ratio)


def test_a_return_ends_its_block_in_every_code_unit_and_every_patch(builtin):
    """Nothing follows a return at its indentation: code after it would never run, which no reviewer believes. Units
    used to draw a return as any statement of a body, and patches to put one among the lines they add."""
    from e2e.checks.realism import nothing_after_return
    from fastgen.generator.content.patch import make_patch
    from fastgen.generator.content.vocab import Vocab

    assert not nothing_after_return("def f():\n    return 1\n    x = 2\n")
    assert not nothing_after_return("def f():\n    for a in b:\n        raise E\n        a()\n")
    assert nothing_after_return("def f():\n    if a:\n        return 1\n    return 2\n")
    pool = Composer(builtin, seed=9).pool("code")
    bad = [unit for unit in pool.units if not nothing_after_return(unit)]
    assert not bad, bad[0]
    assert sum("    return " in unit for unit in pool.units) > len(pool.units) // 4  # returns are still drawn
    v = Vocab(np.random.default_rng(4))
    for unit in pool.units[:200]:
        patch = make_patch(v, "src/app/store.py", unit, 1500)
        assert nothing_after_return(patch.after), patch.diff
