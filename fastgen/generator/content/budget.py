"""Texts of an exact token budget built from the composer's parts: a headed block, files in sections, split budgets."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .compose import Composer, Text
from .vocab import Vocab

__all__ = ["headed_block", "compose_block", "opened_block", "file_sections", "split_budget"]


def headed_block(composer: Composer, header: str, budget: int, body: Callable[[int], Text]) -> Text:
    """A header line followed by `body(the tokens left)`, exactly `budget` tokens in all where the header fits and
    the body makes what it is given."""
    head = composer.line(header)
    return composer.join([head, body(max(budget - head.tokens, 0))])


def compose_block(composer: Composer, header: str, kind: str, budget: int, rng: np.random.Generator) -> Text:
    """A header line followed by `kind` text, exactly `budget` tokens in all (when the header fits)."""
    return headed_block(composer, header, budget, lambda tokens: composer.fill(kind, tokens, rng))


def opened_block(composer: Composer, opening: str, kind: str, budget: int, rng: np.random.Generator) -> Text:
    """An opening paragraph followed by `kind` text, exactly `budget` tokens; a budget too small for the opening
    gets `kind` text alone (an answer's opening is worth having, not worth overshooting its size)."""
    head = composer.line(opening)
    if head.tokens > budget:
        return composer.fill(kind, budget, rng)
    return composer.join([head, composer.fill(kind, budget - head.tokens, rng)])


def split_budget(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """`total` split into `parts` positive shares of random size."""
    if parts <= 1 or total < parts:
        return [total]
    weights = rng.uniform(0.5, 1.5, size=parts)
    shares = np.floor(weights / weights.sum() * total).astype(int)
    shares[-1] += total - int(shares.sum())
    return [int(s) for s in shares]


def file_sections(
    composer: Composer, rng: np.random.Generator, *, header: str, budget: int, files: int, kind: str = "code"
) -> Text:
    """A header line, then `files` files (a path line and their code), exactly `budget` tokens in all."""
    v = Vocab(rng)
    head = composer.line(header)
    paths = [composer.line(f"### {v.module_path()}\n") for _ in range(files)]
    body = budget - head.tokens - sum(p.tokens for p in paths)
    parts = [head]
    for path, share in zip(paths, split_budget(max(body, files), files, rng)):
        parts += [path, composer.fill(kind, share, rng)]
    return composer.join(parts)
