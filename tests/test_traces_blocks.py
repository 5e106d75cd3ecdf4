"""traces/blocks.py: block hashes over token ids."""

from __future__ import annotations

import numpy as np
from _support.analysis import BS

from fastgen.traces.blocks import block_hashes


def test_block_hashes_chain_over_the_whole_prefix():
    a = block_hashes(np.arange(40, dtype=np.uint32), BS)
    b = block_hashes(np.concatenate([np.arange(16), np.arange(100, 124)]).astype(np.uint32), BS)
    c = block_hashes(np.concatenate([np.arange(100, 116), np.arange(16, 32)]).astype(np.uint32), BS)
    assert len(a) == 2 and a[0] == b[0] and a[1] != b[1]
    assert c[1] != a[1]  # the same tokens after a different prefix are a different block
