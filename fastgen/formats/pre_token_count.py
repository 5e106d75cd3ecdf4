"""Token counts of plain ASCII text from its pre-tokens, each encoded once.

A byte-level BPE tokenizer (Llama 3's, Qwen's, GPT-2's, fastgen's built-in one) splits a text into pre-tokens with
a regular expression and encodes each on its own, so a text's count is the sum of its pre-tokens' counts. The
pre-tokens of generated text (words with the space, underscore or slash before them, digit groups, punctuation runs)
recur endlessly: counting a text is one pass of the expression and a lookup per pre-token, and the tokenizer sees
each distinct pre-token once instead of every text.

Only where that is exactly what the tokenizer does: no normalizer (or a Unicode normal form, which leaves ASCII as
it is); a Split by a pattern whose only Unicode classes are \\p{L} and \\p{N}, then ByteLevel without its own
expression, or ByteLevel with its GPT-2 expression; a BPE model without dropout. The pattern is translated for
Python's `re` (on ASCII, \\p{L} is [A-Za-z] and \\p{N} is [0-9]; both engines match leftmost-first with
backtracking) and checked against the tokenizer's own pre-tokenizer on a probe text when it is built. Only texts
of printable ASCII, tabs, newlines and box-drawing characters are counted here, an added token as one token where
it strips no whitespace around it; any other goes to the tokenizer.
FASTGEN_CHECK_COUNTS=1 encodes every text counted here as well and raises on a difference.
"""

from __future__ import annotations

import json
import os
import re
from typing import Callable, Optional

__all__ = ["PreTokenCount", "CHECK_ENV"]

CHECK_ENV = "FASTGEN_CHECK_COUNTS"
_GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")  # identities on ASCII
# Printable ASCII, tabs, newlines, and the box-drawing characters of `tree` listings (symbols: in neither pattern's
# letter, number or whitespace classes, and left alone by every normal form)
_PLAIN = re.compile("[\t\n\r\x20-\x7e\u2500-\u257f]*")
_REMEMBERED = 1 << 20  # distinct pre-tokens kept; past that the memo starts over (arbitrary user text, say)
# Contractions, case, digit runs, punctuation runs with and without newlines, every whitespace run the patterns
# treat differently: where a translated pattern would part from the original, it parts here.
_PROBE = (
    "I'm sure it's what they'd've SAID'S, don't it? x'LL 12345678 3.14159 1,000,000 a1b2 __init__ "
    "foo.bar(baz)->qux  \n\n  \t\tx   y\r\n\r\nz  \n  end...!!! ?? <tag> {'k': [1, 2]} #x @y $z %w ^v &u *t "
    "`code` ~/path/to/file.py:12:3 --- +++ @@ -1,2 +1,3 @@\n    indented()\n\tTabbed\n\n\n\nlast \n "
    "src/\n├── a_b.py  # x\n│   └── c.py\n└──d\n ├─x"
)


def _ascii_pattern(pattern: str) -> Optional[str]:
    r"""`pattern` for Python's `re` on ASCII input: \p{L} and \p{N} as ASCII classes; None if it has another
    Unicode class or does not compile."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and pattern[i + 1 : i + 2] in ("p", "P"):
            name = re.match(r"\\p\{([LN])\}", pattern[i:])
            if name is None:
                return None
            ascii_class = "A-Za-z" if name.group(1) == "L" else "0-9"
            out.append(ascii_class if in_class else f"[{ascii_class}]")
            i += len(name.group(0))
            continue
        step = 2 if c == "\\" else 1
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append(pattern[i : i + step])
        i += step
    try:
        return re.compile("".join(out)).pattern
    except re.error:
        return None


def _split_pattern(pre_tokenizer: dict) -> Optional[str]:
    """The expression a supported byte-level pre-tokenizer splits by, or None."""

    def byte_level(step: dict, own_regex: bool) -> bool:
        return (
            step.get("type") == "ByteLevel"
            and not step.get("add_prefix_space", False)
            and bool(step.get("use_regex", True)) == own_regex
        )

    if byte_level(pre_tokenizer, True):
        return _GPT2_PATTERN
    steps = pre_tokenizer.get("pretokenizers") if pre_tokenizer.get("type") == "Sequence" else None
    if not steps or len(steps) != 2 or not byte_level(steps[1], False):
        return None
    split = steps[0]
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
        return None
    regex = (split.get("pattern") or {}).get("Regex")
    return regex if isinstance(regex, str) else None


class PreTokenCount:
    """count(text) by pre-tokens, for the texts it takes (see the module docstring); `encode_count` counts the
    others and each new pre-token, through the tokenizer."""

    def __init__(self, pattern: "re.Pattern[str]", added: dict[str, bool], encode_count: Callable[[str], int]):
        """`added`: each added token's text, and whether it is one token wherever it stands (no stripping of the
        whitespace around it, no word-boundary rule)."""
        self._pattern = pattern
        # longest first: the tokenizer takes the leftmost, longest added token
        self._added = re.compile("|".join(map(re.escape, sorted(added, key=len, reverse=True)))) if added else None
        self._plain_added = {text for text, plain in added.items() if plain}
        self._encode_count = encode_count
        self._counts: dict[str, int] = {}
        self._check = os.environ.get(CHECK_ENV, "") not in ("", "0")

    @classmethod
    def of(cls, hf, encode_count: Callable[[str], int]) -> Optional["PreTokenCount"]:
        """The counter for a `tokenizers.Tokenizer`, or None where its pipeline is not one this module copies."""
        try:
            pre = json.loads(hf.pre_tokenizer.__getstate__()) if hf.pre_tokenizer is not None else None
            normalizer = json.loads(hf.normalizer.__getstate__()) if hf.normalizer is not None else None
        except (AttributeError, TypeError, ValueError):
            return None
        if pre is None or (normalizer is not None and normalizer.get("type") not in _NORMAL_FORMS):
            return None
        if type(hf.model).__name__ != "BPE" or getattr(hf.model, "dropout", None):
            return None
        source = _split_pattern(pre)
        translated = _ascii_pattern(source) if source is not None else None
        if translated is None:
            return None
        added = {
            token.content: not (token.lstrip or token.rstrip or token.single_word)
            for token in hf.get_added_tokens_decoder().values()
            if token.content
        }
        counter = cls(re.compile(translated), added, encode_count)
        theirs = [span for _, span in hf.pre_tokenizer.pre_tokenize_str(_PROBE)]
        return counter if theirs and counter.spans(_PROBE) == theirs else None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of each pre-token of `text` (Split's Isolated behaviour: matches, and any text between)."""
        spans, at = [], 0
        for match in self._pattern.finditer(text):
            if match.start() > at:
                spans.append((at, match.start()))
            if match.end() > match.start():
                spans.append(match.span())
            at = match.end()
        if at < len(text):
            spans.append((at, len(text)))
        return spans

    def count(self, text: str) -> Optional[int]:
        """The tokens of `text`, or None when it is not a text this counter takes."""
        if _PLAIN.fullmatch(text) is None:
            return None
        if self._added is None or self._added.search(text) is None:
            total = self._count_plain(text)
        else:  # each added token is one token, and the text between them is counted on its own
            total, at = 0, 0
            for match in self._added.finditer(text):
                if match.group() not in self._plain_added:
                    return None
                between = self._count_plain(text[at : match.start()]) if match.start() > at else 0
                if between is None:
                    return None
                total, at = total + between + 1, match.end()
            rest = self._count_plain(text[at:]) if at < len(text) else 0
            total = None if rest is None else total + rest
        if self._check and total is not None and total != self._encode_count(text):
            raise AssertionError(f"{CHECK_ENV}: pre-token count {total} != encoded count for {text[:60]!r}")
        return total

    def _count_plain(self, text: str) -> Optional[int]:
        pieces = self._pattern.findall(text)
        if sum(map(len, pieces)) != len(text):  # text between matches: a pre-token of its own
            pieces = [text[a:b] for a, b in self.spans(text)]
        counts, total = self._counts, 0
        for piece in pieces:
            n = counts.get(piece)
            if n is None:
                n = self._learn(piece)
                if n is None:
                    return None
            total += n
        return total

    def _learn(self, piece: str) -> Optional[int]:
        # alone, a pre-token must be one pre-token again, or its encoding alone is not its encoding in the text
        if self._pattern.fullmatch(piece) is None:
            return None
        if len(self._counts) >= _REMEMBERED:
            self._counts.clear()
        n = self._counts[piece] = self._encode_count(piece)
        return n
