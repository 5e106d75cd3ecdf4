"""pytest logs that agree with themselves and with the test file they ran, in exactly the tokens asked."""

from __future__ import annotations

import numpy as np
import pytest

from e2e.checks.realism import Report, check_pytest_log
from fastgen.generator.content.compose import Composer
from fastgen.generator.content.pytest_log import (
    module_functions,
    module_tests,
    pytest_env,
    pytest_log,
    synthetic_cases,
)
from fastgen.generator.content.vocab import Vocab


@pytest.fixture(scope="module")
def composer(builtin):
    return Composer(builtin, seed=5)


ENV = pytest_env(Vocab(np.random.default_rng(0)), "shop")


def _cases(seed: int):
    v = Vocab(np.random.default_rng(seed))
    text, cases = module_tests(v, "tests/app/test_store.py", "app.store", ["load_cart", "save_cart"], 6)
    return text, cases


def test_a_test_file_compiles_and_each_case_points_at_its_assert():
    text, cases = _cases(1)
    compile(text, "test_store.py", "exec")
    lines = text.splitlines()
    assert text.startswith("from app.store import ")
    for case in cases:
        assert lines[case.line - 1] == f"    assert {case.target}({case.fixture}) == {case.expected}"
        assert f"def {case.name}({case.fixture}) -> None:" in lines
    assert len({c.name for c in cases}) == len(cases) >= 3


def test_module_functions_are_the_top_level_synchronous_ones():
    code = (
        "def a():\n    pass\nasync def b():\n    pass\nclass C:\n    def d(self):\n        pass\ndef a():\n    pass\n"
    )
    assert module_functions(code) == ["a"]


@pytest.mark.parametrize("budget", [30, 120, 400, 1500, 3000])
@pytest.mark.parametrize("failing", [0, 1, 3])
def test_a_log_is_exactly_its_budget_and_consistent(composer, builtin, budget, failing):
    _, cases = _cases(budget + failing)
    failed = {c.name: c.expected + 7 for c in cases[:failing]}
    log = pytest_log(
        composer,
        np.random.default_rng(budget),
        command="pytest",
        cases=cases,
        failed=failed,
        budget=budget,
        env=ENV,
        other_files=3 if failing else 0,
        report_passes=not failing,
    )
    assert log.tokens == builtin.encoded_count(log.text) == budget
    report = Report()
    said_failed, said_passed = check_pytest_log(log.text, report, "log")
    assert not report.problems, (report.problems, log.text)
    assert f"{failing} failed" in log.text if failing else " failed" not in log.text
    if budget >= 1500:  # room for everything: the header, every failure, the short summary
        assert "test session starts" in log.text and log.text.count("AssertionError") == failing
        assert said_failed == {c.node_id for c in cases[:failing]}
        if not failing:
            assert said_passed == {c.node_id for c in cases}


def test_the_checker_finds_a_log_that_contradicts_itself(composer):
    _, cases = _cases(3)
    log = pytest_log(
        composer,
        np.random.default_rng(0),
        command="",
        cases=cases,
        failed={cases[0].name: 99},
        budget=1500,
        env=ENV,
    ).text
    for broken in (
        log.replace("1 failed", "2 failed"),
        log.replace("[100%]", "[ 90%]"),
        log.replace(f"E       assert 99 == {cases[0].expected}", "E       assert 98 == 3"),
    ):
        report = Report()
        check_pytest_log(broken, report, "log")
        assert report.problems, broken


def test_tests_of_a_file_the_context_does_not_show_carry_the_keyword(composer):
    cases = synthetic_cases(Vocab(np.random.default_rng(2)), "billing/tests/test_cart.py", "load_cart", 8)
    assert cases and all(c.name.startswith("test_load_cart_") and c.target == "load_cart" for c in cases)


def test_the_logs_of_one_environment_all_say_the_same_python_pytest_plugins_and_rootdir(composer):
    """One session, one machine: its logs' headers are one environment, drawn once (pytest_env); each log used to
    draw its own Python and pytest versions (3.12.7, 3.12.1 and 3.12.8 in one session)."""
    _, cases = _cases(4)
    headers = set()
    for seed in range(6):
        log = pytest_log(
            composer, np.random.default_rng(seed), command="pytest", cases=cases, failed={}, budget=800, env=ENV
        ).text
        headers.add(log[log.index("platform ") : log.index("collected ")])
    assert headers == {ENV.header()}
    assert "platform linux -- Python 3.12." in ENV.header() and "rootdir: /workspace/shop\n" in ENV.header()
    envs = {pytest_env(Vocab(np.random.default_rng(seed)), "shop") for seed in range(20)}
    assert len({e.python for e in envs}) > 1 and len({e.plugins for e in envs}) > 1  # sessions differ
