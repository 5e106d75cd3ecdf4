"""Text a reviewer believes (e2e/checks/realism.py): the checks pass on generated datasets, and they can fail."""

from __future__ import annotations

import orjson
import pytest

from conftest import run_fastgen
from e2e.checks.realism import Report, check_dataset, check_patches, check_session_env, check_text

# Checks a small dataset exercises (its budgets are 5% of the default: its logs are too short for tracebacks).
SMALL_CHECKS = {
    "a shown Python file compiles",
    "every shown file's fence is closed",
    "nothing follows a return in its block",
    "a read_file result compiles",
    "a read_file result numbers its lines",
    "a session's pytest logs share one environment",
    "the plan names only the session's own files",
    "git apply --check accepts the patch",
    "the patched file compiles",
    "the tool's answer reports the diff's hunks and lines",
    "a candidate's diff applies to the module shown",
    "summary counts the progress marks",
    "failing tests are tests of the shown test file",
    "numbered steps count 1, 2, 3",
    "articles agree with the next word",
    "no line said twice in a row",
}
CHECKS = SMALL_CHECKS | {
    "failure's assert, E and where lines agree",
    "PASSED lines are the passed tests",
    "the passing run lists every test of the shown file",
    "short summary repeats the values",
}
# Across the 100 sessions of scenario 1 at the default budgets, more than half of the sentences the agent says are
# said once: 0.59 measured (0.55 while plans drew pooled steps); prose drawn from the old pool alone, with no session
# facts, gave 0.23.
DISTINCT_SENTENCES = 0.5


def test_a_small_dataset_passes_every_realism_check(small_dataset):
    report = check_dataset(small_dataset / "traces")
    assert not report.problems, report.problems[:10]
    assert SMALL_CHECKS <= set(report.counts), SMALL_CHECKS - set(report.counts)


@pytest.fixture(scope="module")
def scenario1_at_full_size(tmp_path_factory):
    root = tmp_path_factory.mktemp("scenario1")
    (root / "workload.yaml").write_text("format: 1\nscenarios:\n  scenario1: {}\n")
    result = run_fastgen(
        "--workload",
        str(root / "workload.yaml"),
        "--tokenizer",
        "builtin",
        "--quiet",
        "--output-dir",
        str(root / "traces"),
        "--config-dir",
        str(root / "configs"),
    )
    assert result.returncode == 0, result.stderr
    return root / "traces"


def test_the_agent_rarely_says_a_sentence_twice_across_100_sessions(scenario1_at_full_size):
    report = check_dataset(scenario1_at_full_size)
    assert not report.problems, report.problems[:10]
    not_in_scenario1 = {
        "a read_file result compiles",
        "a read_file result numbers its lines",
        "a candidate's diff applies to the module shown",
    }
    assert CHECKS - not_in_scenario1 <= set(report.counts)
    assert sum(report.sentences.values()) > 10_000
    assert report.distinct_sentences > DISTINCT_SENTENCES


def test_the_patch_check_fails_a_patch_that_does_not_apply_or_is_misreported(scenario1_at_full_size):
    spans = orjson.loads((scenario1_at_full_size / "scenario1" / "session_0000.json").read_bytes())["spans"]
    messages = orjson.loads(spans[-1]["attributes"]["gen_ai.input.messages"])
    good = Report()
    check_patches(messages, good, "as generated")
    assert not good.problems and good.counts["git apply --check accepts the patch"] == 2

    def broken(change) -> Report:
        edited = orjson.loads(orjson.dumps(messages))
        change(edited)
        report = Report()
        check_patches(edited, report, "edited")
        return report

    def context_line_changed(ms):  # the first patch's context no longer matches the file shown
        call = next(c for m in ms for c in m.get("tool_calls") or ())
        args = orjson.loads(call["function"]["arguments"])
        args["patch"] = args["patch"].replace("\n ", "\n x", 1)
        call["function"]["arguments"] = orjson.dumps(args).decode()

    def answer_miscounts(ms):
        tool = next(m for m in ms if m["role"] == "tool")
        tool["content"] = tool["content"].replace(", +", ", +1", 1)

    assert "edited: git apply --check accepts the patch" in broken(context_line_changed).problems
    assert "edited: the tool's answer reports the diff's hunks and lines" in broken(answer_miscounts).problems


def test_the_layout_checks_fail_prompts_laid_out_as_they_were():
    """Files that run into what follows, an unnumbered read_file result, code after a return, and a session whose
    logs name two Pythons: what fastgen wrote before issue 26, each caught."""

    def problems(text: str) -> list[str]:
        report = Report()
        check_text(text, report, "t", assistant=False)
        return report.problems

    good = "Files:\nsrc/a.py\n```python\ndef f():\n    return 1\n```\ntests/test_a.py\n```python\nx = 1\n```\n"
    assert problems(good) == []
    assert "t: every shown file's fence is closed" in problems(good.replace("    return 1\n```\n", "    return 1\n"))
    assert "t: nothing follows a return in its block" in problems(good.replace("return 1\n", "return 1\n    f()\n"))
    assert problems("$ read_file {}\n1\tdef f():\n2\t    return 1\n") == []
    assert "t: a read_file result numbers its lines" in problems("$ read_file {}\ndef f():\n    return 1\n")
    header = "platform linux -- Python 3.12.{}, pytest-8.3.2, pluggy-1.5.0\nrootdir: /w/r\nconfigfile: pyproject.toml\n"
    report = Report()
    check_session_env([header.format(7), header.format(7)], report, "t")
    assert report.problems == []
    check_session_env([header.format(7), header.format(1)], report, "t")
    assert report.problems == ["t: a session's pytest logs share one environment"]


def test_a_tenth_of_the_default_set_says_nine_in_ten_prose_sentences_once(tmp_path):
    """Over the distinct user and assistant messages of 120 sessions of the default set (every scenario, full
    budgets), the prose sentences said once: 0.97 measured, 0.69 before pooled prose varied its words with each use
    (fastgen/generator/content/variation.py)."""
    result = run_fastgen(
        "--scale", "0.1", "--tokenizer", "builtin", "--quiet",
        "--output-dir", str(tmp_path / "traces"), "--config-dir", str(tmp_path / "configs"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = check_dataset(tmp_path / "traces")
    assert not report.problems, report.problems[:10]
    assert sum(report.prose.values()) > 3000
    assert report.distinct_prose >= 0.9
