"""Does a generated dataset read as what it says it is? Checks a reviewer would make, over every trace file.

    python -m e2e.checks.realism traces/          # or: make realism (the default set)

- every file a prompt shows stands in its own fenced block (a line with its path, ```python, the file, ```), closed
  before whatever follows; every Python file a prompt shows compiles, and so does every file an apply_patch call
  leaves behind; no statement follows a return (or a raise) in its block;
- every read_file result numbers its lines 1, 2, 3 (a number and a tab before each), and the code without its numbers
  compiles;
- every apply_patch diff applies (`git apply --check`) to the file as the context showed it, the second to the file
  the first one made, and the tool's answer reports the diff's own hunks and line counts; every scenario-2
  candidate's diff applies to the module its root prompt shows;
- every pytest log agrees with itself: its summary counts what its progress lines mark, `collected` is their total,
  the percentages rise to 100 once, each failure's assert, `E` and `where` lines carry the same values, the short
  summary names the failures the log shows; in scenario 1, the failing tests are tests of the shown test file and the
  passing run lists all of them; every log of a session says the same Python, pytest, plugins and rootdir;
- scenario 1's inspection plan names only the session's own files (those its context shows);
- numbered lists count 1, 2, 3; no assistant text says the same line twice in a row; a/an agree with the next word;
- the share of distinct sentences in the assistant's prose, and the share of prose sentences (outside code fences, in
  lines that are not code, logs or listings) that are said once over the distinct user and assistant messages
  (reported, and held to floors by the tests: at least 0.9 for the second).

Prints what it checked and every problem (the first 20), and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import xxhash

# a shown file: its path on a line, then its text in a fence; the fence's close ends it (files hold no ``` line)
_FILE = re.compile(r"^(\S+\.py)\n```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_FENCE_OPEN = re.compile(r"^```python$", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"(\d+)\t(.*)")
_PLATFORM = re.compile(r"^platform linux -- .*\nrootdir: .*\nconfigfile: .*\n(?:plugins: .*\n)?", re.MULTILINE)
_PATH = re.compile(r"(?<![\w/.])((?:src|tests)/[\w/]+\.py)(?!\w)")  # a module or test file named in prose
_PROGRESS = re.compile(r"^(\S+\.py) ([.Fs]+) +\[ *(\d+)%\]$", re.MULTILINE)
_SUMMARY = re.compile(r"^=+ ((?:\d+ \w+, )*\d+ \w+) in [\d.]+s =+$", re.MULTILINE)
_COLLECTED = re.compile(r"^collected (\d+) items$", re.MULTILINE)
_FAILURE = re.compile(
    r"^_+ (test_\w+) _+\n\n    def \1\((\w+)\) -> None:\n.*\n>       assert (\w+)\(\2\) == (\d+)\n"
    r"E       assert (\d+) == (\d+)\nE        \+  where (\d+) = (\w+)\(<.*>\)\n\n(\S+):(\d+): "
    r"AssertionError$",
    re.MULTILINE,
)
_FAILED = re.compile(r"^FAILED (\S+)::(test_\w+) - assert (\d+) == (\d+)$", re.MULTILINE)
_PASSED = re.compile(r"^PASSED (\S+)::(test_\w+)$", re.MULTILINE)
_STEP = re.compile(r"^(\d+)\. ", re.MULTILINE)
_PATCH_RESULT = re.compile(r"^Patch applied to (\S+): (\d+) hunks?, \+(\d+) -(\d+) lines\.$", re.MULTILINE)
_TEST_DEF = re.compile(r"^def (test_\w+)\(", re.MULTILINE)
_FENCED_DIFF = re.compile(r"^```diff\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# "a" before a vowel other than u (a unique, a user), "an" before a consonant: the forms fastgen never means
_DISAGREEING_ARTICLE = re.compile(r"\b[Aa] [aeioAEIO][a-z]+|\b[Aa]n [b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z][a-z]+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")
# A line that is not prose: code (indented, a comment, a docstring, an assignment or a def), a numbered file line, a
# log line, a shell command, a tree listing, a diff line, pytest's output
_NOT_PROSE = re.compile(
    r"^(\s|#|\"\"\"|\d+\t|\d{4}-\d\d-\d\dT|\$ |[├└│]|[-+@]|E |> |[A-Z]+ |platform |rootdir|plugins|collected|FAILED|"
    r"PASSED|=|_)|( = |\bdef |\breturn |\bimport |\"\"\"|\(self)"
)


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    sentences: Counter = field(default_factory=Counter)
    prose: Counter = field(default_factory=Counter)  # prose sentences of distinct user and assistant messages

    def check(self, ok: bool, what: str, where: str) -> None:
        self.counts[what] += 1
        if not ok:
            self.problems.append(f"{where}: {what}")

    @property
    def distinct_sentences(self) -> float:
        total = sum(self.sentences.values())
        return len(self.sentences) / total if total else 1.0

    @property
    def distinct_prose(self) -> float:
        """The share of prose sentences said once, over the distinct user and assistant messages."""
        total = sum(self.prose.values())
        return len(self.prose) / total if total else 1.0


def prose_sentences(text: str) -> list[str]:
    """The sentences of a text's prose: outside code fences and lines of code, four words or more, capitalized."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or _NOT_PROSE.search(line):
            continue
        out += [s.strip() for s in _SENTENCE.findall(line) if len(s.split()) >= 4 and s.strip()[:1].isupper()]
    return out


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(part.get("content", "") or part.get("text", "") for part in content)
    return content or ""


def file_sections(text: str) -> list[tuple[str, str]]:
    """(path, code) of each file a prompt shows: a line with its path, then ```python, the file, and ```."""
    return [(m.group(1), m.group(2)) for m in _FILE.finditer(text)]


def _compiles(code: str) -> bool:
    try:
        compile(code, "<shown>", "exec")
    except SyntaxError:
        return False
    return True


def nothing_after_return(code: str) -> bool:
    """Whether no statement follows a return or a raise in its block (code that compiles; else True: the compile
    check reports it)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return True
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and any(isinstance(s, (ast.Return, ast.Raise)) for s in block[:-1]):
                return False
        for handler in getattr(node, "handlers", ()):
            if any(isinstance(s, (ast.Return, ast.Raise)) for s in handler.body[:-1]):
                return False
    return True


def read_file_code(result: str) -> str | None:
    """The code of a read_file result (its first line the call, then each line numbered 1, 2, 3: a number and a tab),
    or None where a line is not numbered so."""
    lines = result.split("\n", 1)[1].splitlines() if "\n" in result else []
    matches = [_NUMBERED_LINE.fullmatch(line) for line in lines]
    if not all(matches) or [int(m.group(1)) for m in matches if m] != list(range(1, len(lines) + 1)):
        return None
    return "".join(m.group(2) + "\n" for m in matches if m)


def check_pytest_log(log: str, report: Report, where: str) -> tuple[set[str], set[str]]:
    """Check one log; return the node ids it says failed and those it lists as passed."""
    summary = _SUMMARY.findall(log)
    report.check(len(summary) == 1, "pytest log has one summary line", where)
    said = {kind: int(n) for n, kind in (part.split(" ") for part in summary[-1].split(", "))} if summary else {}
    progress = _PROGRESS.findall(log)
    if progress:
        marks = "".join(m for _, m, _ in progress)
        counted = {"failed": marks.count("F"), "passed": marks.count("."), "skipped": marks.count("s")}
        report.check({k: v for k, v in counted.items() if v} == said, "summary counts the progress marks", where)
        collected = _COLLECTED.findall(log)
        report.check(collected == [str(len(marks))], "collected is the number of tests run", where)
        pcts = [int(p) for _, _, p in progress]
        report.check(
            pcts == sorted(pcts) and pcts[-1] == 100 and pcts.count(100) == 1, "progress rises to 100% once", where
        )
    failures = _FAILURE.findall(log)
    for _name, _fixture, call, expected, got, expected_e, got_where, call_where, _file, _line in failures:
        report.check(
            expected == expected_e and got == got_where and call == call_where and got != expected,
            "failure's assert, E and where lines agree",
            where,
        )
    failed = {(f, n) for f, n, _, _ in _FAILED.findall(log)}
    if "short test summary info" in log:
        report.check(len(failed) == said.get("failed", 0), "short summary names every failure", where)
    report.check(
        {n for _, n in failed} >= {f[0] for f in failures}, "every failure shown is in the short summary", where
    )
    for _f, n, got, expected in _FAILED.findall(log):
        shown = [x for x in failures if x[0] == n]
        report.check(all(x[4] == got and x[3] == expected for x in shown), "short summary repeats the values", where)
    passed = _PASSED.findall(log)
    if passed:
        report.check(
            len(set(passed)) == len(passed) == said.get("passed", 0), "PASSED lines are the passed tests", where
        )
    return {f"{f}::{n}" for f, n in failed}, {f"{f}::{n}" for f, n in passed}


def git_apply(files: dict[str, str], path: str, diff: str) -> str | None:
    """The file after `diff`, if `git apply --check` accepts it against `files[path]`; else None."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[path])
        (root / "change.diff").write_text(diff)
        for args in (["--check"], []):
            done = subprocess.run(["git", "apply", *args, "change.diff"], cwd=root, capture_output=True)
            if done.returncode:
                return None
        return target.read_text()


def check_patches(messages: list[dict], report: Report, where: str) -> None:
    """Scenario 1's apply_patch calls against the files its context shows, in order, and the tool's answers."""
    files = {p: code for m in messages if m["role"] == "user" for p, code in file_sections(_text(m.get("content")))}
    answers = [_PATCH_RESULT.search(_text(m.get("content"))) for m in messages if m["role"] == "tool"]
    calls = [c for m in messages for c in m.get("tool_calls") or () if c["function"]["name"] == "apply_patch"]
    for call, answer in zip(calls, answers):
        args = orjson.loads(call["function"]["arguments"])
        path, diff = args["path"], args["patch"]
        report.check(path in files, "patch targets a file the context showed", where)
        if path not in files:
            continue
        after = git_apply(files, path, diff)
        report.check(after is not None, "git apply --check accepts the patch", where)
        if after is None:
            continue
        report.check(_compiles(after), "the patched file compiles", where)
        report.check(nothing_after_return(after), "nothing follows a return in its block", where)
        files[path] = after
        lines = diff.splitlines()[2:]
        stats = (
            path,
            sum(line.startswith("@@") for line in lines),
            sum(line.startswith("+") for line in lines),
            sum(line.startswith("-") for line in lines),
        )
        report.check(
            answer is not None and (answer.group(1), *map(int, answer.groups()[1:])) == stats,
            "the tool's answer reports the diff's hunks and lines",
            where,
        )


def check_branch_diffs(messages: list[dict], outputs: list[str], report: Report, where: str) -> None:
    """Scenario 2: each candidate's diff applies to the module the root prompt shows."""
    files = {p: code for m in messages if m["role"] == "user" for p, code in file_sections(_text(m.get("content")))}
    for output in outputs:
        for diff in _FENCED_DIFF.findall(output):
            path = diff.split("\n", 1)[0].removeprefix("--- a/")
            report.check(
                path in files and git_apply(files, path, diff) is not None,
                "a candidate's diff applies to the module shown",
                where,
            )


def check_session_tests(messages: list[dict], report: Report, where: str) -> None:
    """Scenario 1: failing tests exist in the shown test file; the passing run lists every one of them."""
    shown = {
        f"{p}::{name}"
        for m in messages
        if m["role"] == "user"
        for p, code in file_sections(_text(m.get("content")))
        if p.startswith("tests/")
        for name in _TEST_DEF.findall(code)
    }
    report.check(bool(shown), "the context shows a test file", where)
    texts = [_text(m.get("content")) for m in messages]
    failing = [t for t in texts if t.startswith("I ran the full suite")]
    passing = [t for t in texts if t.startswith("Patch applied") and "PASSED" in t]
    for text in failing:
        failed, _ = check_pytest_log(text, Report(), where)
        report.check(bool(failed) and failed <= shown, "failing tests are tests of the shown test file", where)
    for text in passing:
        _, passed = check_pytest_log(text, Report(), where)
        report.check(passed == shown, "the passing run lists every test of the shown file", where)


def check_session_env(texts: list[str], report: Report, where: str) -> None:
    """Every pytest header of a session says the same Python, pytest, plugins and rootdir."""
    headers = {h for text in texts for h in _PLATFORM.findall(text)}
    if headers:
        report.check(len(headers) == 1, "a session's pytest logs share one environment", where)


def check_plan(messages: list[dict], plan: str, report: Report, where: str) -> None:
    """Scenario 1: the files the inspection plan names are files the session's context shows."""
    shown = {p for m in messages if m["role"] == "user" for p, _ in file_sections(_text(m.get("content")))}
    named = set(_PATH.findall(plan))
    report.check(named <= shown, "the plan names only the session's own files", where)


def check_text(text: str, report: Report, where: str, *, assistant: bool, prose: bool = False) -> None:
    sections = file_sections(text)
    report.check(len(_FENCE_OPEN.findall(text)) == len(sections), "every shown file's fence is closed", where)
    for _path, code in sections:
        report.check(_compiles(code), "a shown Python file compiles", where)
        report.check(nothing_after_return(code), "nothing follows a return in its block", where)
    if text.startswith("$ read_file "):
        listed = read_file_code(text)
        report.check(listed is not None, "a read_file result numbers its lines", where)
        report.check(listed is not None and _compiles(listed), "a read_file result compiles", where)
        report.check(listed is None or nothing_after_return(listed), "nothing follows a return in its block", where)
    if "test session starts" in text or _SUMMARY.search(text):
        check_pytest_log(text, report, where)
    report.check(not _DISAGREEING_ARTICLE.search(text), "articles agree with the next word", where)
    steps = [int(n) for n in _STEP.findall(text)]
    if steps:
        report.check(steps == list(range(1, len(steps) + 1)), "numbered steps count 1, 2, 3", where)
    if assistant:
        lines = [line for line in text.splitlines() if line.strip()]
        report.check(all(a != b for a, b in zip(lines, lines[1:])), "no line said twice in a row", where)
        report.sentences.update(s.strip() for s in _SENTENCE.findall(text) if len(s.split()) >= 4)
    if prose:
        report.prose.update(prose_sentences(text))


def check_file(path: Path, report: Report, seen: set[int]) -> None:
    """Every distinct text of one trace file (texts already checked in another file are skipped)."""
    spans = orjson.loads(path.read_bytes())["spans"]
    where = f"{path.parent.name}/{path.name}"
    for span in spans:
        attributes = span["attributes"]
        messages = orjson.loads(attributes["gen_ai.input.messages"])
        outputs = orjson.loads(attributes["gen_ai.output.messages"])
        for message in [*messages, *outputs]:
            text = _text(message.get("content") or message.get("parts"))
            key = xxhash.xxh3_64_intdigest(text.encode())
            if text and key not in seen:
                seen.add(key)
                role = message["role"]
                check_text(text, report, where, assistant=role == "assistant", prose=role in ("user", "assistant"))
    if path.parent.name.startswith("scenario2"):
        outputs = [
            _text(m.get("parts")) for s in spans for m in orjson.loads(s["attributes"]["gen_ai.output.messages"])
        ]
        check_branch_diffs(orjson.loads(spans[0]["attributes"]["gen_ai.input.messages"]), outputs, report, where)
    last = orjson.loads(spans[-1]["attributes"]["gen_ai.input.messages"])
    check_session_env([_text(m.get("content")) for m in last], report, where)
    if path.parent.name == "scenario1":
        check_patches(last, report, where)
        check_session_tests(last, report, where)
        plan = orjson.loads(spans[1]["attributes"]["gen_ai.output.messages"])
        check_plan(last, "".join(_text(m.get("parts")) for m in plan), report, where)


def check_dataset(traces: Path) -> Report:
    report = Report()
    seen: set[int] = set()
    for path in sorted(traces.glob("scenario*/session_*.json")):
        check_file(path, report, seen)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", type=Path)
    args = parser.parse_args(argv)
    report = check_dataset(args.traces)
    for what, n in sorted(report.counts.items()):
        print(f"{n:8d}  {what}")
    print(
        f"distinct sentences in assistant prose: {report.distinct_sentences:.3f} "
        f"({len(report.sentences)} of {sum(report.sentences.values())})"
    )
    print(
        f"prose sentences said once over the distinct user and assistant messages: {report.distinct_prose:.3f} "
        f"({len(report.prose)} of {sum(report.prose.values())})"
    )
    for problem in report.problems[:20]:
        print("PROBLEM", problem)
    print(f"{len(report.problems)} problems")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
