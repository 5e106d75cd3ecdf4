"""Pooled prose changes its nouns and adjectives with every use (fastgen/generator/content/variation.py): sentences
stop recurring across sessions, while every count stays exact (checked by encoding each text whole) and every a/an
still agrees with the word after it."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from fastgen.generator.content.compose import Composer
from fastgen.generator.content.variation import Variation
from fastgen.formats.tokenizer import load_tokenizer
from native_bench.vocab import qwen3_tokenizer

_DISAGREEING = re.compile(r"\b[Aa] [aeioAEIO][a-z]+|\b[Aa]n [b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z][a-z]+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")
QWEN = qwen3_tokenizer()


def _tokenizers(builtin):
    yield builtin
    if QWEN is not None:
        yield load_tokenizer(str(QWEN))


@pytest.mark.parametrize("kind", ["prose", "plan"])
def test_varied_texts_are_exactly_their_budget_encoded_whole_and_articles_agree(builtin, kind):
    for tokenizer in _tokenizers(builtin):
        composer = Composer(tokenizer, seed=5)
        assert composer.variation(kind) is not None
        rng = np.random.default_rng(3)
        for n in (7, 60, 400, 2500):
            text = composer.fill(kind, n, rng)
            assert text.tokens == n == tokenizer.encoded_count(text.text)
            assert not _DISAGREEING.search(text.text), text.text[:300]
            if text.ends is not None:  # the ends are parts of the text as used, with their counts
                first, first_tokens, last, last_tokens = text.ends
                assert text.text.startswith(first) and text.text.endswith(last)
                assert tokenizer.encoded_count(first) == first_tokens and tokenizer.encoded_count(last) == last_tokens


def test_a_unit_used_again_reads_differently_with_the_same_count(builtin):
    composer = Composer(builtin, seed=5)
    variation = composer.variation("prose")
    assert variation is not None
    pool = composer.pool("prose")
    rng = np.random.default_rng(9)
    swapped = 0
    for i in range(50):
        uses = {variation.use(i, rng.random(variation.words(i)).tolist()) for _ in range(4)}
        swapped += len(uses) > 1
        assert {builtin.encoded_count(u) for u in uses} == {pool.count_list[i]}
    assert swapped >= 45  # nearly every paragraph has a noun or an adjective to swap


def test_sentences_of_many_draws_recur_rarely(builtin):
    """2,000 draws of a 300-token answer from a 2,400-paragraph pool: most paragraphs come up several times, yet
    almost every sentence is said once."""
    composer = Composer(builtin, seed=5)
    rng = np.random.default_rng(1)
    said = Counter(s for _ in range(2000) for s in _SENTENCE.findall(composer.fill("prose", 300, rng).text))
    long = {s: c for s, c in said.items() if len(s.split()) >= 8}
    assert sum(long.values()) > 10_000
    assert len(long) / sum(long.values()) > 0.97


def test_only_words_of_one_class_with_a_bucket_are_swapped():
    units = ["The cache is stale, so a parser rejects an owner.\n", "Done.\n"]
    variation = Variation(units, lambda texts: [1] * len(texts))
    texts, choices = variation.units[0]
    # "cache" is a noun and a verb (never swapped); "stale" an adjective; "parser" and "owner" nouns, each keeping
    # its article: "a parser" draws among words that take "a", "an owner" among those that take "an"
    assert texts[0] == "The cache is "
    assert len(choices) == 3 and "stale" in choices[0] and "parser" in choices[1] and "owner" in choices[2]
    assert all(w[0] not in "aeio" for w in choices[1]) and all(w[0] in "aeiou" for w in choices[2])
    assert variation.units[1] == (("Done.\n",), ())
