"""traces/blocks.py: block hashes over token ids."""

from __future__ import annotations

import numpy as np
from _support.analysis import BS

from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer
from fastgen.traces.blocks import _TokenizedTexts, block_hashes


def test_block_hashes_chain_over_the_whole_prefix():
    a = block_hashes(np.arange(40, dtype=np.uint32), BS)
    b = block_hashes(np.concatenate([np.arange(16), np.arange(100, 124)]).astype(np.uint32), BS)
    c = block_hashes(np.concatenate([np.arange(100, 116), np.arange(16, 32)]).astype(np.uint32), BS)
    assert len(a) == 2 and a[0] == b[0] and a[1] != b[1]
    assert c[1] != a[1]  # the same tokens after a different prefix are a different block


def test_a_text_with_more_lines_than_the_line_cache_holds_reads_whole_and_exact():
    tokenizer = load_tokenizer(str(BUILTIN_DIR))
    texts = _TokenizedTexts(tokenizer, line_cache=3)
    texts.VERIFY = 0  # every text below is checked here, not by the reader's own first checks
    shared = "def f(x):\n    return x\n"
    first = shared + "print(f(1))\nprint(f(2))\n"
    # Each text has more distinct lines than the cache keeps, and each reuses lines the cache holds or dropped: a
    # trim before the text is whole loses the lines it is about to join.
    later = [shared + f"value_{i} = f({i})\n" + "\n".join(f"line {i} {j}" for j in range(5)) for i in range(4)]
    for text in [first, *later, first]:
        assert texts.get(text).tolist() == tokenizer.encode(text)
    assert len(texts._lines) == 3
