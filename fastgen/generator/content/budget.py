"""Texts of an exact token budget built from the composer's parts: a headed block, files in sections, code with its
lines numbered, split budgets."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .compose import Composer, Pool, Text
from .vocab import Vocab

__all__ = [
    "headed_block",
    "compose_block",
    "opened_block",
    "opened",
    "file_frame",
    "file_sections",
    "numbered_code",
    "split_budget",
]

# Of a numbered text's budget, the share drawn as code: numbering adds about a fifth (1.17-1.29 times, measured on
# the code pool under the built-in tokenizer), so units drawn at this share mostly fit once numbered.
_NUMBERED_SHARE = 0.8
# Tokens a numbered text keeps back after its units for the numbered fillers that make its count exact: enough for
# any count (the smallest numbered filler line is about 3 tokens; 1 or 2 left over could not be made).
_TAIL_ROOM = 8


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
    return opened(composer, opening, budget, lambda tokens: composer.fill(kind, tokens, rng))


def opened(composer: Composer, opening: str, budget: int, body: Callable[[int], Text]) -> Text:
    """An opening paragraph followed by `body(the tokens left)`, exactly `budget` tokens where the body makes what it
    is given; a budget too small for the opening gets the body alone (opened_block)."""
    head = composer.line(opening)
    if head.tokens > budget:
        return body(budget)
    return composer.join([head, body(budget - head.tokens)])


def numbered_code(composer: Composer, budget: int, rng: np.random.Generator) -> Text:
    """Code as a read_file tool returns it, `cat -n` style: each line after its number and a tab, exactly `budget`
    tokens. The numbers are not padded as cat pads them: a line that starts with spaces is not a unit whose count
    adds up (compose.py), one that starts with a digit is. Whole code units while one fits, then numbered one-line
    fillers to the exact count, so the code without its numbers compiles. Counted line by line (each numbered line
    is a unit); a budget too small for any numbered line (1 or 2 tokens) gets the code unnumbered."""
    pool = composer.pool("code")
    lines: list[Text] = []
    ends: list[int] = []  # the number of lines after each unit: where the text may be cut back to
    left = budget
    while left > _TAIL_ROOM:
        took = False
        chosen, _ = pool.draw_units(int(left * _NUMBERED_SHARE), rng)
        for i in chosen:
            unit = _numbered_lines(composer, pool.units[i], len(lines) + 1)
            cost = sum(line.tokens for line in unit)
            if cost == left or cost <= left - _TAIL_ROOM:
                lines += unit
                left -= cost
                ends.append(len(lines))
                took = True
        if not took:
            break
    while (tail := _numbered_tail(composer, pool, len(lines) + 1, left, rng)) is None:
        if not ends:
            return composer.fill("code", budget, rng)
        ends.pop()
        cut = ends[-1] if ends else 0
        left += sum(line.tokens for line in lines[cut:])
        del lines[cut:]
    return composer.join(lines + tail)


def _numbered_lines(composer: Composer, text: str, first: int) -> list[Text]:
    """The lines of `text` (which ends with a newline), numbered from `first`, each counted."""
    if not composer.tokenizer.numbers_split_at_tab:
        lines = [f"{n}\t{line}\n" for n, line in enumerate(text[:-1].split("\n"), start=first)]
        return [Text(line, c, (line, c, line, c)) for line, c in zip(lines, composer.tokenizer.count_many(lines))]
    # A unit's lines are counted once, after their tab; each number apart (a number before a tab is its own
    # pre-tokens: Tokenizer.numbers_split_at_tab). Counting every numbered line whole was a fifth of a session's work.
    bodies, counts = composer.remembered(("tabbed lines", text), lambda: _tabbed_lines(composer, text))
    out = []
    for n, (body, c) in enumerate(zip(bodies, counts), start=first):
        line, tokens = f"{n}{body}", composer.count(str(n)) + c
        out.append(Text(line, tokens, (line, tokens, line, tokens)))
    return out


def _tabbed_lines(composer: Composer, text: str) -> tuple[list[str], list[int]]:
    bodies = [f"\t{line}\n" for line in text[:-1].split("\n")]
    return bodies, composer.tokenizer.count_many(bodies)


def _numbered_tail(
    composer: Composer, pool: Pool, first: int, tokens: int, rng: np.random.Generator
) -> list[Text] | None:
    """Numbered filler lines from number `first` on, exactly `tokens` tokens in all, or None where the fillers cannot
    make that count. Each line is the longest filler that still leaves a count some fillers make, each filler once
    while its size has others (a line said twice reads as a glitch)."""
    out: list[Text] = []
    used: set[str] = set()
    while tokens > 0:
        options = []
        for texts in pool.fillers.values():
            fresh = [t for t in texts if t not in used] or texts
            options.append(fresh[int(rng.integers(len(fresh)))])
        lines = [f"{first + len(out)}\t{t}" for t in dict.fromkeys(options)]
        costs = _numbered_counts(composer, first + len(out), lines)
        made = _made(set(costs), tokens)  # as if every later line cost what this one does (true below 1000 lines)
        fit = [k for k, c in enumerate(costs) if c <= tokens and made[tokens - c]]
        if not fit:
            return None
        k = max(fit, key=costs.__getitem__)
        out.append(Text(lines[k], costs[k], (lines[k], costs[k], lines[k], costs[k])))
        used.add(lines[k].split("\t", 1)[1])
        tokens -= costs[k]
    return out


def _numbered_counts(composer: Composer, n: int, lines: list[str]) -> list[int]:
    """The counts of `lines`, each numbered `n` (f"{n}\t..."): the number's and the rest's where they add up."""
    if not composer.tokenizer.numbers_split_at_tab:
        return composer.tokenizer.count_many(lines)
    number = str(n)
    return [composer.count(number) + composer.count(line[len(number) :]) for line in lines]


def _made(costs: set[int], limit: int) -> list[bool]:
    """Which counts up to `limit` some lines of these costs add up to exactly."""
    made = [True] + [False] * limit
    for n in range(1, limit + 1):
        made[n] = any(c <= n and made[n - c] for c in costs)
    return made


def split_budget(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """`total` split into `parts` positive shares of random size."""
    if parts <= 1 or total < parts:
        return [total]
    weights = rng.uniform(0.5, 1.5, size=parts)
    shares = np.floor(weights / weights.sum() * total).astype(int)
    shares[-1] += total - int(shares.sum())
    return [int(s) for s in shares]


def file_frame(composer: Composer, path: str) -> tuple[Text, Text]:
    """What a shown file stands between, as harnesses show files: a line with its path and a code fence opening,
    then (after the file's text) the fence's close. One convention for every file a prompt shows."""
    language = "python" if path.endswith(".py") else ""
    return composer.line(f"{path}\n```{language}\n"), composer.line("```\n")


def file_sections(
    composer: Composer, rng: np.random.Generator, *, header: str, budget: int, files: int, kind: str = "code"
) -> Text:
    """A header line, then `files` files (each fenced under its path, file_frame), exactly `budget` tokens in all."""
    v = Vocab(rng)
    head = composer.line(header)
    frames = [file_frame(composer, v.module_path()) for _ in range(files)]
    body = budget - head.tokens - sum(opening.tokens + closing.tokens for opening, closing in frames)
    parts = [head]
    for (opening, closing), share in zip(frames, split_budget(max(body, files), files, rng)):
        parts += [opening, composer.fill(kind, share, rng), closing]
    return composer.join(parts)
