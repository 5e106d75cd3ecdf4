"""Plans count 1, 2, 3, whatever order their steps were drawn in, and keep an exact count."""

from __future__ import annotations

import re

import numpy as np

from fastgen.generator.content.compose import Composer
from fastgen.generator.content.plan import numbered


def test_a_composed_plan_is_numbered_in_order_and_counted_again(builtin):
    composer = Composer(builtin, seed=2)
    plan = composer.fill("plan", 800, np.random.default_rng(3))
    steps = [int(n) for n in re.findall(r"^(\d+)\. ", plan.text, re.M)]
    assert steps != list(range(1, len(steps) + 1))  # as drawn: out of order
    fixed = numbered(composer, plan)
    assert [int(n) for n in re.findall(r"^(\d+)\. ", fixed.text, re.M)] == list(range(1, len(steps) + 1))
    assert fixed.tokens == builtin.encoded_count(fixed.text)
    assert re.sub(r"^\d+\. ", "", fixed.text, flags=re.M) == re.sub(r"^\d+\. ", "", plan.text, flags=re.M)
