"""Modules small enough to read in one sitting, functions small enough to hold in mind: a module over MODULE_LINES
or a function over FUNCTION_LINES fails, unless tests/house/size_baseline.txt lists it, and a listed one may not grow.
The baseline is today's exceptions, visible and shrinking: an entry that is back under the limit (or gone) must be
removed from the file, so the list only ever gets shorter.

Calls that read without counting: a function taking more than POSITIONAL positional parameters (self and cls not
counted) fails unless tests/house/positional_baseline.txt lists it, under the same rules; past four, make the rest
keyword-only (`*,`).

    python tests/house/test_sizes.py            # prints what is over the limits now (to review, not to paste blindly)
    python tests/house/test_sizes.py --shrink   # after a split: lowers or removes baseline entries, never adds one
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# the repository: counted here, not imported from tests/_support, so that the file also runs as a script
ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("fastgen", "e2e", "native_bench")
MODULE_LINES = 500
FUNCTION_LINES = 60
BASELINE = Path(__file__).with_name("size_baseline.txt")
POSITIONAL = 4
POSITIONAL_BASELINE = Path(__file__).with_name("positional_baseline.txt")


def _definitions(tree: ast.AST) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method by its qualified name (a name defined twice, as a property's setter, has both)."""
    found: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.setdefault(name, []).append(child)
                visit(child, f"{name}.")

    visit(tree, "")
    return found


def _functions(tree: ast.AST) -> dict[str, int]:
    """Every function and method by its qualified name, with its lines (decorators and docstring included)."""
    sizes: dict[str, int] = {}
    for name, nodes in _definitions(tree).items():
        for node in nodes:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            sizes[name] = max(sizes.get(name, 0), (node.end_lineno or node.lineno) - start + 1)
    return sizes


def _positional(tree: ast.AST) -> dict[str, int]:
    """Every function and method by its qualified name, with how many parameters it takes by position (a first
    `self` or `cls` not counted)."""
    counts: dict[str, int] = {}
    for name, nodes in _definitions(tree).items():
        for node in nodes:
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            counts[name] = max(counts.get(name, 0), len(names))
    return counts


def _sources(root: Path):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")


def measure(root: Path = ROOT) -> dict[str, int]:
    """Everything over its limit: 'path' for a module, 'path::qualname' for a function, with its lines."""
    over: dict[str, int] = {}
    for name, text in _sources(root):
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            over[name] = lines
        for function, size in _functions(ast.parse(text)).items():
            if size > FUNCTION_LINES:
                over[f"{name}::{function}"] = size
    return over


def measure_positional(root: Path = ROOT) -> dict[str, int]:
    """Every function over POSITIONAL positional parameters, as 'path::qualname', with how many it takes."""
    over: dict[str, int] = {}
    for name, text in _sources(root):
        for function, count in _positional(ast.parse(text)).items():
            if count > POSITIONAL:
                over[f"{name}::{function}"] = count
    return over


def read_baseline(path: Path = BASELINE) -> dict[str, int]:
    entries = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, lines = line.rsplit(" ", 1)
            entries[name.strip()] = int(lines)
    return entries


def problems(over: dict[str, int], baseline: dict[str, int], baseline_path: Path = BASELINE) -> list[str]:
    found = []
    positional = baseline_path == POSITIONAL_BASELINE
    for name, lines in sorted(over.items()):
        limit = POSITIONAL if positional else FUNCTION_LINES if "::" in name else MODULE_LINES
        what = "positional parameters" if positional else "lines"
        fix = "make the ones past the fourth keyword-only" if positional else "split it"
        if name not in baseline:
            found.append(f"{name} has {lines} {what} (limit {limit}): {fix}")
        elif lines > baseline[name]:
            found.append(f"{name} grew from {baseline[name]} to {lines} {what}: {fix}, do not grow it")
    for name, lines in sorted(baseline.items()):
        if name not in over:
            found.append(f"{name} is under the limit now (or gone): remove its line from {baseline_path.name}")
        elif over[name] < lines:
            found.append(f"{name} shrank from {lines} to {over[name]}: lower its line in {baseline_path.name}")
    return found


def test_modules_and_functions_stay_within_their_size_or_the_baseline():
    assert problems(measure(), read_baseline()) == []


def test_functions_stay_within_four_positional_parameters_or_the_baseline():
    assert problems(measure_positional(), read_baseline(POSITIONAL_BASELINE), POSITIONAL_BASELINE) == []


def test_positional_parameters_are_counted_without_self_and_keyword_only_ones(tmp_path):
    (tmp_path / "e2e").mkdir()
    (tmp_path / "e2e" / "m.py").write_text(
        "def five(a, b, c, d, e): pass\n"
        "def four_and_keywords(a, b, /, c, d, *rest, e, f): pass\n"
        "class K:\n    def method(self, a, b, c, d, e): pass\n    def four(self, a, b, c, d): pass\n"
    )
    assert measure_positional(tmp_path) == {"e2e/m.py::five": 5, "e2e/m.py::K.method": 5}
    found = problems({"e2e/m.py::five": 5}, {}, POSITIONAL_BASELINE)
    assert found == ["e2e/m.py::five has 5 positional parameters (limit 4): make the ones past the fourth keyword-only"]


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


def _write_shrunk(path: Path, over: dict[str, int]) -> None:
    """The baseline at `path` shrunk to what is `over` now, its comment lines kept."""
    kept = shrink(over, read_baseline(path))
    header = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    path.write_text("\n".join([*header, *(f"{n} {count}" for n, count in sorted(kept.items()))]) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--shrink"]:  # after a split: lower the baselines, keep their comment lines
        _write_shrunk(BASELINE, measure())
        _write_shrunk(POSITIONAL_BASELINE, measure_positional())
    else:
        for name, count in sorted({**measure(), **measure_positional()}.items()):
            sys.stdout.write(f"{name} {count}\n")
