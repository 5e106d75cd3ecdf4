"""Modules small enough to read in one sitting, functions small enough to hold in mind: a module over MODULE_LINES
or a function over FUNCTION_LINES fails, unless tests/size_baseline.txt lists it, and a listed one may not grow.
The baseline is today's exceptions, visible and shrinking: an entry that is back under the limit (or gone) must be
removed from the file, so the list only ever gets shorter.

    python tests/test_sizes.py            # prints what is over the limits now (to review, not to paste blindly)
    python tests/test_sizes.py --shrink   # after a split: lowers or removes baseline entries, never adds one
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("fastgen", "e2e", "native_bench")
MODULE_LINES = 500
FUNCTION_LINES = 60
BASELINE = Path(__file__).with_name("size_baseline.txt")


def _functions(tree: ast.AST) -> dict[str, int]:
    """Every function and method by its qualified name, with its lines (decorators and docstring included)."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    sizes[name] = max(sizes.get(name, 0), (child.end_lineno or child.lineno) - start + 1)
                visit(child, f"{name}.")

    visit(tree, "")
    return sizes


def measure(root: Path = ROOT) -> dict[str, int]:
    """Everything over its limit: 'path' for a module, 'path::qualname' for a function, with its lines."""
    over: dict[str, int] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            name = path.relative_to(root).as_posix()
            lines = len(text.splitlines())
            if lines > MODULE_LINES:
                over[name] = lines
            for function, size in _functions(ast.parse(text)).items():
                if size > FUNCTION_LINES:
                    over[f"{name}::{function}"] = size
    return over


def read_baseline(path: Path = BASELINE) -> dict[str, int]:
    entries = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, lines = line.rsplit(" ", 1)
            entries[name.strip()] = int(lines)
    return entries


def problems(over: dict[str, int], baseline: dict[str, int]) -> list[str]:
    found = []
    for name, lines in sorted(over.items()):
        limit = FUNCTION_LINES if "::" in name else MODULE_LINES
        if name not in baseline:
            found.append(f"{name} has {lines} lines (limit {limit}): split it")
        elif lines > baseline[name]:
            found.append(f"{name} grew from {baseline[name]} to {lines} lines: split it, do not grow it")
    for name, lines in sorted(baseline.items()):
        if name not in over:
            found.append(f"{name} is under the limit now (or gone): remove its line from {BASELINE.name}")
        elif over[name] < lines:
            found.append(f"{name} shrank from {lines} to {over[name]} lines: lower its line in {BASELINE.name}")
    return found


def test_modules_and_functions_stay_within_their_size_or_the_baseline():
    assert problems(measure(), read_baseline()) == []


def test_the_rule_catches_growth_new_excess_and_stale_entries():
    over = {"fastgen/a.py": 600, "fastgen/b.py::f": 70, "fastgen/c.py::g": 90}
    baseline = {"fastgen/a.py": 550, "fastgen/c.py::g": 90, "fastgen/gone.py": 700}
    found = problems(over, baseline)
    assert any("a.py grew from 550 to 600" in p for p in found)
    assert any("b.py::f has 70 lines (limit 60)" in p for p in found)
    assert any("gone.py is under the limit now" in p for p in found)
    assert not any("c.py" in p for p in found)


def test_functions_are_measured_by_qualified_name(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    (tmp_path / "fastgen").mkdir()
    (tmp_path / "fastgen" / "m.py").write_text(
        f"class K:\n    @staticmethod\n    def big():\n{body.replace('    ', '        ')}\n"
    )
    assert measure(tmp_path) == {"fastgen/m.py::K.big": FUNCTION_LINES + 2}


def shrink(over: dict[str, int], baseline: dict[str, int]) -> dict[str, int]:
    """The baseline with every entry that shrank lowered and every one back under the limit removed; nothing added."""
    return {name: min(lines, over[name]) for name, lines in baseline.items() if name in over}


def test_shrink_lowers_and_removes_but_never_adds():
    assert shrink({"a.py": 600, "b.py::f": 70, "new.py": 900}, {"a.py": 650, "b.py::f": 65, "gone.py": 700}) == {
        "a.py": 600,
        "b.py::f": 65,
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["--shrink"]:  # after a split: lower the baseline, keep its comment lines
        kept = shrink(measure(), read_baseline())
        header = [line for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
        BASELINE.write_text("\n".join([*header, *(f"{n} {lines}" for n, lines in sorted(kept.items()))]) + "\n")
    else:
        for name, lines in sorted(measure().items()):
            sys.stdout.write(f"{name} {lines}\n")
