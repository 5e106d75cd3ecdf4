"""Words of pooled prose that change with every use, so that a pool of a few thousand paragraphs does not make
sessions repeat each other's sentences.

A pool's units are drawn again and again across a dataset: every answer of every session draws prose from the same
2,400 paragraphs, and on their own they recur sentence for sentence (31% of the prose sentences of the default set's
distinct messages were repeats of another). Real dialogue does not repeat itself so, and engines that speculate from
n-grams of the prompt would be flattered by it. So each use of a unit swaps its nouns and adjectives for others of
the same word class that the tokenizer encodes in as many tokens, with the same article ("a" or "an") before them:
the count of the unit is unchanged, and no text is encoded again. That holds where the tokenizer counts a text as
the sum of its pre-tokens (pre_token_count: Llama 3's, Qwen's, the built-in one): a word after a space is one
pre-token of its own, and replacing it by another of the same count leaves the others as they were. Where a tokenizer
does not count so, units are used as they are.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from .english import article_for
from .vocab import ADJECTIVES, NOUNS, VERBS

__all__ = ["Variation"]

# A lowercase word with a space before it and a space or punctuation after it: a pre-token of its own
_WORD = re.compile(r"(?<= )([a-z]+)(?=[ .,;:!?\n])")
_ARTICLE = re.compile(r"(?:^|[\s(])[Aa]n? $")
# Words of one class only: a noun that is also a verb or an adjective ("lock", "cache", "default") may stand as either
_CLASSES = {
    "noun": sorted(set(NOUNS) - set(VERBS) - set(ADJECTIVES)),
    "adjective": sorted(set(ADJECTIVES) - set(NOUNS) - set(VERBS)),
}


class Variation:
    """The swappable words of a pool's units, and each use of a unit with them swapped."""

    def __init__(self, units: Sequence[str], count: Callable[[list[str]], list[int]]):
        words = [w for kind in _CLASSES.values() for w in kind]
        tokens = dict(zip(words, count([f" {w}" for w in words])))
        buckets: dict[tuple, list[str]] = {}
        for kind, members in _CLASSES.items():
            for w in members:
                for after_article in (False, True):
                    key = (kind, tokens[w], article_for(w) if after_article else "")
                    buckets.setdefault(key, []).append(w)
        self._buckets = {key: tuple(ws) for key, ws in buckets.items() if len(ws) > 1}
        self._class = {w: kind for kind, members in _CLASSES.items() for w in members}
        self._tokens = tokens
        self.units = [self._slots(unit) for unit in units]

    def _slots(self, unit: str) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """(the text between swappable words, each one's choices): len(texts) == len(choices) + 1."""
        texts, choices, at = [], [], 0
        for match in _WORD.finditer(unit):
            word = match.group(1)
            kind = self._class.get(word)
            if kind is None:
                continue
            after_article = bool(_ARTICLE.search(unit[max(0, match.start() - 4) : match.start()]))
            bucket = self._buckets.get((kind, self._tokens[word], article_for(word) if after_article else ""))
            if bucket is None:
                continue
            texts.append(unit[at : match.start()])
            choices.append(bucket)
            at = match.end()
        texts.append(unit[at:])
        return tuple(texts), tuple(choices)

    def use(self, index: int, draws: list[float], at: int = 0) -> str:
        """Unit `index` with each swappable word drawn afresh from `draws[at:]` (uniforms in [0, 1), one per word)."""
        texts, choices = self.units[index]
        if not choices:
            return texts[0]
        out = [texts[0]]
        for k, (text, bucket) in enumerate(zip(texts[1:], choices), start=at):
            out.append(bucket[int(draws[k] * len(bucket))])
            out.append(text)
        return "".join(out)

    def words(self, index: int) -> int:
        return len(self.units[index][1])
