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


def test_files_are_each_fenced_under_their_path_and_closed_before_what_follows(composer, builtin):
    """A reader and a parser see where each shown file ends: a line with its path, ```python, the file, ``` (they used
    to run into the next `### path` line, or into the next header, with nothing between)."""
    from e2e.checks.realism import file_sections as shown_files
    from fastgen.generator.content.budget import file_sections

    rng = np.random.default_rng(6)
    for budget, files in ((40, 1), (700, 3), (5000, 4)):
        text = file_sections(composer, rng, header="Workspace services/x/:\n", budget=budget, files=files)
        assert text.tokens == builtin.encoded_count(text.text) == budget
        shown = shown_files(text.text + "Your open files:\n")
        assert len(shown) == files
        rebuilt = "".join(f"{path}\n```python\n{code}```\n" for path, code in shown)
        assert text.text == "Workspace services/x/:\n" + rebuilt  # nothing outside a fence but the header
        assert all(code.endswith("\n") and "```" not in code for _, code in shown)


@pytest.mark.parametrize("budget", [0, 3, 4, 5, 9, 17, 60, 333, 1000, 4999])
def test_code_with_numbered_lines_is_exactly_its_budget_and_compiles_without_its_numbers(composer, builtin, budget):
    """What read_file returns (the catalog says: the text with line numbers): each line after its number and a tab,
    numbered 1, 2, 3, in exactly the tokens asked."""
    from e2e.checks.realism import read_file_code
    from fastgen.generator.content.budget import numbered_code

    for seed in range(3):
        text = numbered_code(composer, budget, np.random.default_rng([budget, seed]))
        assert text.tokens == builtin.encoded_count(text.text) == budget
        code = read_file_code("$ read_file {}\n" + text.text)
        assert code is not None, text.text[:200]
        compile(code, "numbered", "exec")
        assert len(code.splitlines()) == text.text.count("\n")
    assert read_file_code("$ read_file {}\ndef f():\n    return 1\n") is None  # unnumbered
    assert read_file_code("$ read_file {}\n1\tx = 1\n3\ty = 2\n") is None  # a line missing


def _merging_tokenizer(path):
    """A byte-level BPE with no pre-tokenizer, trained on numbered lines: it merges a number with the tab after it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.decoder = decoders.ByteLevel()
    corpus = [f"{n}\t{c} = 0\n" for n in range(1, 10) for c in "abcdefghijklmnopqrstuvwxyz"] * 20
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=320, initial_alphabet=alphabet))
    tok.save(str(path))
    return path


def test_numbered_lines_count_whole_where_a_number_merges_with_its_tab(builtin, tmp_path):
    """The built-in tokenizer counts a numbered line as its number's tokens plus its line's; one that merges "1\t"
    into a token is probed as such and counts each numbered line whole, so the budget is still exact."""
    from fastgen.generator.content.budget import numbered_code
    from fastgen.formats.tokenizer import load_tokenizer

    assert builtin.numbers_split_at_tab
    merging = load_tokenizer(str(_merging_tokenizer(tmp_path / "tokenizer.json")))
    assert merging.encoded_count("1\tx = 0\n") < merging.encoded_count("1") + merging.encoded_count("\tx = 0\n")
    assert not merging.numbers_split_at_tab
    composer = Composer(merging, seed=4)
    for budget in (40, 400):
        text = numbered_code(composer, budget, np.random.default_rng(budget))
        assert text.text.startswith("1\t")
        assert text.tokens == merging.encoded_count(text.text)
