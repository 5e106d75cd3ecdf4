"""Does a generated dataset read as what it says it is? Checks a reviewer would make, over every trace file.

    python -m e2e.realism traces/          # or: make realism (the default set)

- every Python file a prompt shows compiles, and so does every file an apply_patch call leaves behind;
- every apply_patch diff applies (`git apply --check`) to the file as the context showed it, the second to the file
  the first one made, and the tool's answer reports the diff's own hunks and line counts; every scenario-2
  candidate's diff applies to the module its root prompt shows;
- every pytest log agrees with itself: its summary counts what its progress lines mark, `collected` is their total,
  the percentages rise to 100 once, each failure's assert, `E` and `where` lines carry the same values, the short
  summary names the failures the log shows; in scenario 1, the failing tests are tests of the shown test file and the
  passing run lists all of them;
- numbered lists count 1, 2, 3; no assistant text says the same line twice in a row; a/an agree with the next word;
- the share of distinct sentences in the assistant's prose (reported, and held to a floor by the test).

Prints what it checked and every problem (the first 20), and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import xxhash

_SECTION = re.compile(r"^### (\S+\.py)\n", re.MULTILINE)
# what ends a file's section: the next file, or the header of a message's next part
_SECTION_END = re.compile(r"^(### |Your open files:$|Workspace )", re.MULTILINE)
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


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    sentences: Counter = field(default_factory=Counter)

    def check(self, ok: bool, what: str, where: str) -> None:
        self.counts[what] += 1
        if not ok:
            self.problems.append(f"{where}: {what}")

    @property
    def distinct_sentences(self) -> float:
        total = sum(self.sentences.values())
        return len(self.sentences) / total if total else 1.0


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(part.get("content", "") or part.get("text", "") for part in content)
    return content or ""


def file_sections(text: str) -> list[tuple[str, str]]:
    """(path, code) of each `### path.py` section of a prompt; a section ends at the next one or the next header."""
    out = []
    for match in _SECTION.finditer(text):
        rest = text[match.end() :]
        end = _SECTION_END.search(rest)
        out.append((match.group(1), rest[: end.start()] if end else rest))
    return out


def _compiles(code: str) -> bool:
    try:
        compile(code, "<shown>", "exec")
    except SyntaxError:
        return False
    return True


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


def check_text(text: str, report: Report, where: str, *, assistant: bool) -> None:
    for _path, code in file_sections(text):
        report.check(_compiles(code), "a shown Python file compiles", where)
    if text.startswith("$ read_file "):
        report.check(_compiles(text.split("\n", 1)[1]), "a read_file result compiles", where)
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
                check_text(text, report, where, assistant=message["role"] == "assistant")
    if path.parent.name.startswith("scenario2"):
        outputs = [
            _text(m.get("parts")) for s in spans for m in orjson.loads(s["attributes"]["gen_ai.output.messages"])
        ]
        check_branch_diffs(orjson.loads(spans[0]["attributes"]["gen_ai.input.messages"]), outputs, report, where)
    if path.parent.name == "scenario1":
        last = orjson.loads(spans[-1]["attributes"]["gen_ai.input.messages"])
        check_patches(last, report, where)
        check_session_tests(last, report, where)


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
    for problem in report.problems[:20]:
        print("PROBLEM", problem)
    print(f"{len(report.problems)} problems")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
