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
