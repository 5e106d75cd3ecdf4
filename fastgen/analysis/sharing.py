"""Which blocks of a trace directory occur in one session only, found in one pass over its sessions.

Most of a corpus's distinct blocks are one session's own (its workspace, its answers, its noise): once every replay
has run that session to its end, no request will ask for them again, and the analysis can let them go. That keeps
its memory to the blocks sessions share and those of the sessions running, not every block of the corpus.

Two Bloom filters: hashes seen in a session, and hashes seen in a second one. A hash the second filter has not got
occurs in one session, for certain (a filter never misses what was added). A hash it has may still occur in one
session only (a false positive, 1-2 % of them at 12 bits a hash): it is kept, which costs a little memory and
never changes a figure.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SharedBlocks"]

_BITS_PER_HASH = 12
_PROBES = 6  # bits a hash sets in its word: about 1-2 % false positives at 12 bits a hash
_FIRST_CAPACITY = 1 << 20


class SharedBlocks:
    def __init__(self) -> None:
        self._seen, self._again = _Bloom(), _Bloom()

    def add_session(self, distinct: np.ndarray) -> None:
        """Every block hash of one session, each once; each session once."""
        distinct = np.asarray(distinct, dtype=np.uint64)
        known = self._seen.contains(distinct)
        self._again.add(distinct[known])
        self._seen.add(distinct[~known])

    def single(self, hashes: np.ndarray) -> np.ndarray:
        """A mask of the hashes that occur in one session only, for certain."""
        return ~self._again.contains(np.asarray(hashes, dtype=np.uint64))


class _Bloom:
    """A scalable, blocked Bloom filter: each hash sets _PROBES bits of one 64-bit word (one memory access a hash,
    at a slightly higher false-positive rate than free bits); when a layer has taken the hashes it was sized for,
    one twice its size takes the next; a hash is in when any layer has it."""

    def __init__(self) -> None:
        self._layers: list[list] = []  # [words as uint64, capacity, count]

    def add(self, hashes: np.ndarray) -> None:
        if not len(hashes):
            return
        if not self._layers or self._layers[-1][2] + len(hashes) > self._layers[-1][1]:
            capacity = max(_FIRST_CAPACITY, 2 * self._layers[-1][1] if self._layers else 0, len(hashes))
            words = 1 << int(np.ceil(np.log2(capacity * _BITS_PER_HASH / 64)))
            self._layers.append([np.zeros(words, dtype=np.uint64), capacity, 0])
        layer = self._layers[-1]
        word, bits = _word_and_bits(hashes, len(layer[0]))
        np.bitwise_or.at(layer[0], word, bits)
        layer[2] += len(hashes)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        found = np.zeros(len(hashes), dtype=bool)
        for words, _, _ in self._layers:
            word, bits = _word_and_bits(hashes, len(words))
            found |= (words[word] & bits) == bits
        return found


def _word_and_bits(hashes: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
    """Each hash's word (its low bits) and its _PROBES bits in that word (6 high bits each; the block hashes are
    mixed already)."""
    shifts = (
        hashes.reshape(-1, 1) >> (np.uint64(64 - 6) - np.arange(_PROBES, dtype=np.uint64) * np.uint64(6))
    ) & np.uint64(63)
    bits = np.bitwise_or.reduce(np.left_shift(np.uint64(1), shifts), axis=1)
    return (hashes & np.uint64(words - 1)).astype(np.int64), bits
