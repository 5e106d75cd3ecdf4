"""How long a simulated engine's step takes: what decides which requests overlap, and how long they queue.

A step computes some prompt tokens (prefills, or chunks of them) and decodes one token for some running requests. It
lasts prefill tokens / prefill_tokens_per_s, plus one decode interval when it decodes anything: 1 /
decode_tokens_per_s, plus 1 / decode_batch_tokens_per_s for each request it decodes. By default a decode step's length
does not grow with the batch (on a GPU it is bound by reading the weights: decode_batch_tokens_per_s infinite); a
server whose does (a CPU's) is calibrated so. A prefill's length is its tokens. Before any of that, the server's front end renders and tokenizes each prompt, one at a time
(prompt tokens / ingest_tokens_per_s): requests sent together reach the scheduler one after the other. The defaults are a fast GPU server's; `fastgen analyze --calibrate RUN_DIR` fits both to a
bakeoff run against the server to predict for (calibrate.py), `--prefill-tokens-per-s`/`--decode-tokens-per-s` give
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError

__all__ = ["DEFAULT_DECODE_TOKENS_PER_S", "DEFAULT_INGEST_TOKENS_PER_S", "DEFAULT_PREFILL_TOKENS_PER_S", "ServiceModel"]

DEFAULT_PREFILL_TOKENS_PER_S = 20000.0
DEFAULT_DECODE_TOKENS_PER_S = 50.0
DEFAULT_INGEST_TOKENS_PER_S = 2_000_000.0  # a server CPU's chat template and tokenizer: 35 ms for 70,000 tokens


@dataclass(frozen=True)
class ServiceModel:
    """How fast the simulated engine serves: prompt tokens a second in a step's prefill, and decode steps a second
    (a running request's tokens a second while it decodes)."""

    prefill_tokens_per_s: float = DEFAULT_PREFILL_TOKENS_PER_S
    decode_tokens_per_s: float = DEFAULT_DECODE_TOKENS_PER_S
    ingest_tokens_per_s: float = DEFAULT_INGEST_TOKENS_PER_S
    decode_batch_tokens_per_s: float = math.inf  # what each more decoding request adds to a step: 1 / this

    def __post_init__(self) -> None:
        for name in ("prefill_tokens_per_s", "decode_tokens_per_s", "ingest_tokens_per_s", "decode_batch_tokens_per_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= float("inf")) or value != value:
                raise SpecError(f"a service model's {name} must be a positive number, got {value!r}")

    def ingest_seconds(self, prompt_tokens: int) -> float:
        """How long the server's front end takes to render and tokenize a prompt before its scheduler sees it."""
        return prompt_tokens / self.ingest_tokens_per_s

    def step_seconds(self, prefill_tokens: int, decoding: int) -> float:
        """The length of a step that computes `prefill_tokens` prompt tokens and decodes `decoding` requests."""
        decode = 1.0 / self.decode_tokens_per_s + decoding / self.decode_batch_tokens_per_s if decoding else 0.0
        return prefill_tokens / self.prefill_tokens_per_s + decode
