"""Helpers every scenario plan shares: RNG streams, synthetic timing, tool calls, file sections."""

from __future__ import annotations

import numpy as np
import orjson

from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..spec import Timing
from .types import ToolCall

__all__ = ["session_rng", "duration_ms", "make_call", "file_sections", "split_budget"]


def session_rng(seed: int, scenario_id: int, index: int, *stream: int) -> np.random.Generator:
    """The RNG of one session: bytes never depend on worker count, order or timing."""
    return np.random.default_rng([seed, scenario_id, index, *stream])


def duration_ms(timing: Timing, input_tokens: int, output_tokens: int) -> int:
    """A plausible server time for a request: prefill plus decode."""
    return timing.prefill_ms_per_1k_tokens * input_tokens // 1000 + timing.decode_ms_per_token * output_tokens


def make_call(composer: Composer, rng: np.random.Generator, name: str, arguments: dict) -> ToolCall:
    call_id = "call_" + Vocab(rng).hex(24)
    args_json = orjson.dumps(arguments).decode()
    tokens = composer.count(name) + composer.count(args_json)
    return ToolCall(call_id, name, arguments, args_json, tokens)


def split_budget(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """`total` split into `parts` positive shares of random size."""
    if parts <= 1 or total < parts:
        return [total]
    weights = rng.uniform(0.5, 1.5, size=parts)
    shares = np.floor(weights / weights.sum() * total).astype(int)
    shares[-1] += total - int(shares.sum())
    return [int(s) for s in shares]


def file_sections(composer: Composer, rng: np.random.Generator, *, header: str, budget: int, files: int,
                  kind: str = "code") -> Text:
    """A header line, then `files` files (a path line and their code), exactly `budget` tokens in all."""
    v = Vocab(rng)
    head = composer.line(header)
    paths = [composer.line(f"### {v.module_path()}\n") for _ in range(files)]
    body = budget - head.tokens - sum(p.tokens for p in paths)
    parts = [head]
    for path, share in zip(paths, split_budget(max(body, files), files, rng)):
        parts += [path, composer.fill(kind, share, rng)]
    return composer.join(parts)
