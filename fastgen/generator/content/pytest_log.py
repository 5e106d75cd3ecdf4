"""Test files and the pytest logs of running them, consistent with each other, in an exact number of tokens.

A log a reviewer believes names tests that exist, fails an assertion with the values the `where` line shows, counts
in its summary the tests its progress lines mark, and reaches 100% once. So a log is built from the run's outcome
(which tests, which failed, the values they got), not drawn from a pool of log lines; the only free text is the
application's captured log output, composed to make the exact token budget. Parts a small budget cannot hold (the
tracebacks, the session header, the short summary) are left out in that order; the final summary line always stays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .compose import Composer, Text
from .english import fix_articles, third_person
from .vocab import Vocab

__all__ = [
    "UnitTest",
    "PytestEnv",
    "pytest_env",
    "module_tests",
    "pytest_log",
    "module_functions",
    "synthetic_cases",
    "wrong_values",
]

_WIDTH = 80
_TOP_LEVEL_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)


@dataclass(frozen=True)
class UnitTest:
    """One test: where it is, the function it calls, the value it expects and the line of its assert."""

    file: str
    name: str
    target: str
    fixture: str
    doc: str
    expected: int
    line: int

    @property
    def node_id(self) -> str:
        return f"{self.file}::{self.name}"


@dataclass(frozen=True)
class PytestEnv:
    """Where a session's tests run, as a pytest header says it: one machine, so the same in every log of a session."""

    python: str
    pytest: str
    pluggy: str
    plugins: tuple[str, ...]
    rootdir: str

    def header(self) -> str:
        """The header's lines after the `test session starts` rule, up to `collected`."""
        plugins = f"plugins: {', '.join(self.plugins)}\n" if self.plugins else ""
        return (
            f"platform linux -- Python {self.python}, pytest-{self.pytest}, pluggy-{self.pluggy}\n"
            f"rootdir: {self.rootdir}\nconfigfile: pyproject.toml\n{plugins}"
        )


# Plugins a project's dev dependencies bring, at versions of pytest 8.3's time; none that adds header lines of its own
# (pytest-asyncio prints its mode, hypothesis its profile).
_PLUGINS = ("anyio-4.6.2", "cov-5.0.0", "mock-3.14.0", "timeout-2.3.1", "xdist-3.6.1")


def pytest_env(v: Vocab, repo: str) -> PytestEnv:
    """The environment of one session's test runs, drawn once and given to every log of the session."""
    return PytestEnv(
        python=f"3.12.{v.number(1, 9)}",
        pytest=f"8.3.{v.number(2, 6)}",
        pluggy="1.5.0",
        plugins=tuple(p for p in _PLUGINS if v.random() < 0.5),
        rootdir=f"/workspace/{repo}",
    )


def module_functions(code: str) -> list[str]:
    """The top-level (synchronous) functions a test can call directly, in file order, once each."""
    return list(dict.fromkeys(_TOP_LEVEL_DEF.findall(code)))


def module_tests(v: Vocab, path: str, module: str, functions: list[str], count: int) -> tuple[str, list[UnitTest]]:
    """The text of a test file with `count` tests of `functions` (of `module`), and the tests it holds."""
    functions = functions or [v.func_name()]
    used = sorted({functions[v.index(len(functions))] for _ in range(count)} | {functions[0]})
    lines = [f"from {module} import {', '.join(used)}", "", ""]
    cases: list[UnitTest] = []
    names: set[str] = set()
    for _ in range(count):
        target = used[v.index(len(used))]
        verb = v.pick(["returns", "keeps", "rejects", "handles", "skips", "retries"])
        name = f"test_{target}_{verb}_{v.adjective()}_{v.noun()}"
        if name in names:
            continue
        names.add(name)
        fixture = v.name()
        doc = f"{target} {third_person(v.verb())} the {v.adjective()} {fixture} once."
        expected = v.number(0, 100)
        lines += [
            f"def {name}({fixture}) -> None:",
            f'    """{doc}"""',
            f"    assert {target}({fixture}) == {expected}",
            "",
            "",
        ]
        cases.append(UnitTest(path, name, target, fixture, doc, expected, len(lines) - 2))
    return "\n".join(lines[:-2]) + "\n", cases


def synthetic_cases(v: Vocab, path: str, keyword: str, count: int) -> list[UnitTest]:
    """Tests of a file the context does not show, named after the -k keyword that selected them."""
    names = dict.fromkeys(f"test_{keyword}_{v.adjective()}_{v.noun()}" for _ in range(count))
    cases = []
    for i, name in enumerate(names):
        fixture = v.name()
        doc = fix_articles(f"{keyword} handles a {v.adjective()} {fixture}.")
        cases.append(UnitTest(path, name, keyword, fixture, doc, v.number(0, 100), 8 + 5 * i))
    return cases


def wrong_values(v: Vocab, failing) -> dict[str, int]:
    """What each failing test's call returned instead of its expected value (test name -> value)."""
    return {c.name: c.expected + v.number(1, 60) for c in failing}


def _sep(char: str, title: str = "") -> str:
    if not title:
        return char * _WIDTH
    side = max((_WIDTH - len(title) - 2) // 2, 1)
    line = f"{char * side} {title} {char * side}"
    return line + char * (_WIDTH - len(line)) if len(line) < _WIDTH else line


def _progress(file: str, marks: str, done: int, total: int) -> str:
    pct = f"[{done * 100 // total:3d}%]"
    head = f"{file} {marks}"
    return head + " " * max(1, _WIDTH - len(head) - len(pct)) + pct


def _other_files(v: Vocab, n: int) -> list[tuple[str, str]]:
    """Other test files of a suite run, all passing or skipped: (path, progress marks)."""
    out = []
    for _ in range(n):
        marks = "".join("s" if v.random() < 0.06 else "." for _ in range(v.number(3, 30)))
        out.append((f"tests/{v.noun()}/test_{v.noun()}_{v.noun()}.py", marks))
    return out


def pytest_log(
    composer: Composer,
    rng: np.random.Generator,
    *,
    command: str,
    cases: list[UnitTest],
    failed: dict[str, int],
    budget: int,
    env: PytestEnv,
    other_files: int = 0,
    report_passes: bool = False,
) -> Text:
    """The output of `command`, exactly `budget` tokens where the summary line fits.

    `failed` maps the names of the failing tests to the value their call returned; every other case passes.
    `env` is the session's (pytest_env): its logs all say the same Python, pytest, plugins and rootdir.
    `other_files` adds passing test files of a wider run; `report_passes` (-rP) lists the passed tests and shows the
    captured log of the first one.
    """
    if report_passes and other_files:
        raise ValueError("-rP lists every passed test by name: a run that reports passes names only `cases`")
    v = Vocab(rng)
    by_file: dict[str, list[UnitTest]] = {}
    for case in cases:
        by_file.setdefault(case.file, []).append(case)
    runs = [(f, "".join("F" if c.name in failed else "." for c in cs)) for f, cs in by_file.items()]
    runs += _other_files(v, other_files)
    total = sum(len(marks) for _, marks in runs)
    passed = sum(marks.count(".") for _, marks in runs)
    skipped = sum(marks.count("s") for _, marks in runs)
    counts = [
        f"{len(failed)} failed" if failed else "",
        f"{passed} passed" if passed else "",
        f"{skipped} skipped" if skipped else "",
    ]
    seconds = f"{v.number(0, 40)}.{v.number(0, 100):02d}s"
    summary = _sep("=", f"{', '.join(c for c in counts if c)} in {seconds}") + "\n"

    done, progress = 0, []
    for f, marks in runs:
        done += len(marks)
        progress.append(_progress(f, marks, done, total))
    prompt = f"$ {command}\n" if command else ""
    header = (
        f"{prompt}{_sep('=', 'test session starts')}\n{env.header()}collected {total} items\n\n"
        + "\n".join(progress)
        + "\n\n"
    )
    failures = [c for c in cases if c.name in failed]
    sections = []
    for case in failures:
        got = failed[case.name]
        sections.append(
            f"{_sep('_', case.name)}\n\n    def {case.name}({case.fixture}) -> None:\n"
            f'        """{case.doc}"""\n>       assert {case.target}({case.fixture}) == {case.expected}\n'
            f"E       assert {got} == {case.expected}\n"
            f"E        +  where {got} = {case.target}(<{case.fixture.capitalize()} id=0x7f{v.hex(8)}>)\n\n"
            f"{case.file}:{case.line}: AssertionError\n"
        )
    if failures:
        sections[0] = f"{_sep('=', 'FAILURES')}\n" + sections[0]
        captured = f"{_sep('-', 'Captured log call')}\n"
        short = [f"FAILED {c.node_id} - assert {failed[c.name]} == {c.expected}" for c in failures]
    else:
        first = cases[0].name if cases else "test_session"
        captured = (
            f"{_sep('=', 'PASSES')}\n{_sep('_', first)}\n{_sep('-', 'Captured log call')}\n" if report_passes else ""
        )
        short = [f"PASSED {c.node_id}" for c in cases] if report_passes else []
    info = f"{_sep('=', 'short test summary info')}\n" + "".join(s + "\n" for s in short) if short else ""

    # Kept in this order while they fit (a small budget loses the tracebacks first); without the captured-log header
    # the log lines stand alone, as a run's live log output would. The order in the text is the last line's.
    parts = {"summary": composer.line(summary)}
    room = budget - parts["summary"].tokens
    for key, text in (("captured", captured), ("info", info), ("header", header), ("sections", "".join(sections))):
        if text:
            part = composer.line(text)
            if part.tokens <= room:
                parts[key] = part
                room -= part.tokens
    parts["log"] = composer.fill("logline", room, rng) if room > 0 else Text("", 0)
    return composer.join([parts[k] for k in ("header", "sections", "captured", "log", "info", "summary") if k in parts])
