"""Plans count 1, 2, 3, whatever order their steps were drawn in, and keep an exact count."""

from __future__ import annotations

import re

import numpy as np

from fastgen.generator.content.compose import Composer
from fastgen.generator.content.agent_plan import numbered


def test_a_composed_plan_is_numbered_in_order_and_counted_again(builtin):
    composer = Composer(builtin, seed=2)
    plan = composer.fill("plan", 800, np.random.default_rng(3))
    steps = [int(n) for n in re.findall(r"^(\d+)\. ", plan.text, re.M)]
    assert steps != list(range(1, len(steps) + 1))  # as drawn: out of order
    fixed = numbered(composer, plan)
    assert [int(n) for n in re.findall(r"^(\d+)\. ", fixed.text, re.M)] == list(range(1, len(steps) + 1))
    assert fixed.tokens == builtin.encoded_count(fixed.text)
    assert re.sub(r"^\d+\. ", "", fixed.text, flags=re.M) == re.sub(r"^\d+\. ", "", plan.text, flags=re.M)


def test_a_plans_steps_name_the_sessions_own_module_functions_test_file_and_tests(builtin):
    """An inspection plan about the bug's own files: every path, function and test its steps name is one of the
    session's (pooled plan steps named random modules and test files, the same in every session)."""
    from fastgen.generator.content.agent_plan import PlanFacts, plan_steps
    from fastgen.generator.content.pytest_log import module_tests
    from fastgen.generator.content.vocab import Vocab

    composer = Composer(builtin, seed=2)
    v = Vocab(np.random.default_rng(4))
    _, cases = module_tests(v, "tests/shop/test_cart.py", "shop.cart", ["load_cart", "save_cart", "price"], 6)
    facts = PlanFacts(
        "src/shop/cart.py", ["load_cart", "save_cart", "price"], "tests/shop/test_cart.py", cases, ["src/shop/tax.py"]
    )
    for budget in (5, 60, 500, 800):
        steps = plan_steps(composer, v, np.random.default_rng(budget), budget, facts)
        assert steps.tokens == builtin.encoded_count(steps.text) == budget
        plan = numbered(composer, steps)
        assert plan.tokens == builtin.encoded_count(plan.text)
        paths = set(re.findall(r"\b[\w/]+\.py\b", plan.text))
        assert paths <= {"src/shop/cart.py", "tests/shop/test_cart.py", "src/shop/tax.py"}, paths
        named = set(re.findall(r"`(\w+)`", plan.text))
        assert named <= {"load_cart", "save_cart", "price"} | {c.name for c in cases}, named
        if budget >= 500:
            assert {"src/shop/cart.py", "tests/shop/test_cart.py"} <= paths and len(plan.text.splitlines()) >= 10
