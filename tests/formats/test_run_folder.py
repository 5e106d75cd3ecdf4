"""formats/run_folder.py: the run folder's layout, and the only module that spells its names or walks the tree."""

from __future__ import annotations

import ast
from pathlib import Path

import fastgen
from fastgen.formats import run_folder
from fastgen.formats.run_folder import (
    PER_REQUEST_FILE,
    RUN_FILE,
    is_shard_folder,
    partial_folder,
    repeat_folder,
    repeat_of,
    replaced_folder,
    run_folders,
    runs_at,
    shard_folder,
)

PACKAGE = Path(fastgen.__file__).parent
E2E = PACKAGE.parent / "e2e"
OWNER = Path(run_folder.__file__)
NAMES = {
    run_folder.RUN_FILE,
    run_folder.METRICS_FILE,
    run_folder.LOG_FILE,
    run_folder.RUN_CONFIG_FILE,
    run_folder.PER_REQUEST_FILE,
    run_folder.PER_SESSION_FILE,
    run_folder.INFERENCE_PERF_CONFIG,
    ".partial",
    ".old-",
}


def _touch(path: Path, text: str = "{}") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_names_compose_as_the_bakeoff_lays_runs_out(tmp_path):
    final = repeat_folder(tmp_path / "scenario1" / "c10", 3)
    assert final == tmp_path / "scenario1" / "c10" / "repeat-3"
    assert repeat_of(final) == 3 and repeat_of(tmp_path / "c10") is None and repeat_of(tmp_path / "repeat-x") is None
    assert partial_folder(final).name == "repeat-3.partial"
    assert replaced_folder(final, 42).name == "repeat-3.old-42"
    assert shard_folder(7) == "shard-07"
    assert is_shard_folder(final / "shards" / shard_folder(0)) and not is_shard_folder(final / shard_folder(0))


def test_run_folders_skips_unfinished_and_replaced_runs_and_reads_shards_with_their_run(tmp_path):
    done = repeat_folder(tmp_path / "s1" / "c1", 1)
    _touch(done / RUN_FILE)
    _touch(partial_folder(repeat_folder(tmp_path / "s1" / "c1", 2)) / RUN_FILE)
    _touch(replaced_folder(done, 9) / RUN_FILE)
    sharded = repeat_folder(tmp_path / "s1" / "c2", 1)
    _touch(sharded / "shards" / shard_folder(0) / PER_REQUEST_FILE, "[]")
    by_hand = tmp_path / "s2" / "c1"
    _touch(by_hand / PER_REQUEST_FILE, "[]")
    assert run_folders(tmp_path) == [done]
    assert run_folders(tmp_path, with_reports=True) == [done, sharded, by_hand]
    assert runs_at(done) == [done] and runs_at(tmp_path) == [done]


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _spellings(path: Path) -> list[str]:
    """Where `path` spells a name of the run folder's layout in code, or walks a tree for a named file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value in NAMES or node.value.startswith("repeat-"):
                found.append(f"{path}:{node.lineno}: {node.value!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rglob":
            pattern = node.args[0] if node.args else None
            if not (isinstance(pattern, ast.Constant) and str(pattern.value).startswith("*")):
                found.append(f"{path}:{node.lineno}: rglob({ast.unparse(pattern) if pattern else ''})")
    return found


def test_no_module_but_the_layouts_own_spells_its_names_or_walks_for_runs():
    modules = sorted(PACKAGE.rglob("*.py")) + sorted(E2E.rglob("*.py"))
    assert len(modules) > 100 and OWNER in modules
    found = [line for path in modules if path != OWNER for line in _spellings(path)]
    assert found == []


def test_the_scan_sees_a_spelling_and_a_walk(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('"""run.json in a docstring is prose."""\nNAME = "run.json"\nfound = root.rglob(NAME)\n')
    assert _spellings(module) == [f"{module}:2: 'run.json'", f"{module}:3: rglob(NAME)"]
