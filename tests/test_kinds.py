"""Code that is code: every Python unit and filler compiles, and so does every file a generated dataset shows."""

from __future__ import annotations

import json
import re

import numpy as np

from fastgen.content.compose import Composer
from conftest import trace_files

_FILE = re.compile(r"^### (\S+\.py)\n", re.M)
# lines that end a file's block inside a message: the next file, or the header of the next section
_SECTION = re.compile(r"^(### |Your open files:$|Workspace )", re.M)


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


def _file_blocks(text: str):
    if text.startswith("$ read_file "):  # a tool result: the command line, then the file
        yield text[:text.index("\n")], text[text.index("\n") + 1:]
    for match in _FILE.finditer(text):
        rest = text[match.end():]
        end = _SECTION.search(rest)
        yield match.group(1), rest[:end.start()] if end else rest


def test_every_python_file_a_generated_dataset_shows_compiles(small_dataset):
    checked, read = 0, 0
    for path in trace_files(small_dataset / "traces"):
        seen = set()
        for span in json.loads(path.read_bytes())["spans"]:
            for message in json.loads(span["attributes"]["gen_ai.input.messages"]):
                content = message.get("content")
                if not isinstance(content, str) or content in seen:
                    continue
                seen.add(content)
                for name, block in _file_blocks(content):
                    _compiles(block, f"{path.name}: {name}")
                    checked += 1
                    read += name.startswith("$ read_file")
    assert checked > 50 and read > 5
