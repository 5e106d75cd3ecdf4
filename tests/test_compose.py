from __future__ import annotations

import numpy as np
import pytest

from fastgen.generator.content.compose import Composer, check_unit
from fastgen.generator.content.kinds import KINDS


@pytest.fixture(scope="module")
def composer(builtin):
    return Composer(builtin, seed=11)


@pytest.mark.parametrize("kind", KINDS)
def test_fill_every_kind_gives_exactly_the_budget_on_reencoding(composer, builtin, kind):
    rng = np.random.default_rng([1, KINDS.index(kind)])
    for n in (3, 17, 49, 50, 400, 5000):
        text = composer.fill(kind, n, rng)
        assert text.tokens == n
        assert builtin.count(text.text) == n


@pytest.mark.parametrize("kind", KINDS)
def test_pool_units_obey_the_boundary_rule(composer, kind):
    pool = composer.pool(kind)
    for unit in pool.units[:200]:
        check_unit(unit)


def test_join_of_units_counts_as_the_sum_of_parts(composer, builtin):
    rng = np.random.default_rng(5)
    parts = [
        composer.line("### src/app/models.py\n"),
        composer.fill("code", 300, rng),
        composer.line("```text\n"),
        composer.fill("tree", 120, rng),
        composer.fill("prose", 77, rng),
    ]
    joined = composer.join(parts)
    assert joined.tokens == sum(p.tokens for p in parts) == builtin.count(joined.text)


def test_check_unit_rejects_leading_newline_and_missing_trailing_newline():
    for bad in ("\nx\n", " x\n", "x"):
        with pytest.raises(ValueError):
            check_unit(bad)


def test_fill_is_a_pure_function_of_seed_and_rng(builtin):
    a = Composer(builtin, seed=7).fill("code", 900, np.random.default_rng(3))
    b = Composer(builtin, seed=7).fill("code", 900, np.random.default_rng(3))
    c = Composer(builtin, seed=8).fill("code", 900, np.random.default_rng(3))
    assert a == b
    assert a.text != c.text


def test_composed_text_is_not_word_salad(composer):
    """A 20K-token block has thousands of distinct words and reads as its kind."""
    rng = np.random.default_rng(9)
    code = composer.fill("code", 20000, rng).text
    assert len(set(code.split())) > 2000
    assert code.count("def ") > 50 and code.count("return ") > 20
    log = composer.fill("logline", 2000, rng).text
    assert "latency_ms=" in log and "PASSED" not in log
    tree = composer.fill("tree", 2000, rng).text
    assert "├── " in tree and "└── " in tree


def test_an_opened_block_is_exactly_its_budget_and_drops_an_opening_too_long_for_it(composer, builtin):
    from fastgen.generator.content.budget import opened_block

    opening = "The stale cursor comes from `load_cart` in `src/shop/cart.py`, which reads before the writer.\n\n"
    rng = np.random.default_rng(5)
    for budget in (5, 30, 400):
        block = opened_block(composer, opening, "prose", budget, rng)
        assert block.tokens == builtin.encoded_count(block.text) == budget
        assert block.text.startswith(opening) == (builtin.encoded_count(opening) <= budget)


def test_no_unit_twice_in_a_row_and_no_filler_twice_in_a_tail(composer):
    rng = np.random.default_rng(8)
    pool = composer.pool("prose")
    for n in (60, 500, 5000):
        text = composer.fill("prose", n, rng).text
        paragraphs = [p for p in text.split("\n\n") if p]
        assert all(a != b for a, b in zip(paragraphs, paragraphs[1:]))
        tail = [line for line in text.splitlines() if line and line + "\n" not in pool.units]
        fillers = {f for options in pool.fillers.values() for f in options}
        tail = [line for line in tail if line + "\n" in fillers]
        assert len(tail) == len(set(tail)), tail
