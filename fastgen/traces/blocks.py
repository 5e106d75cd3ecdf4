"""A request's prompt as token ids, and as the chain of block hashes a prefix cache keys it by.

Two readings of "the prompt":
- `template`: the tokenizer's chat template over the wire messages and tools with the generation prompt, as vLLM
  and SGLang render it (transformers' apply_chat_template, the tokenizer folder the dataset ships);
- `content`: the tools' JSON, then each message's text (tool calls: name and arguments), no role markers; for a
  tokenizer without a template. Each distinct message is tokenized once.

Block hashes follow vLLM's automatic prefix caching: only full blocks, each hash chained over the one before, so
equal hashes mean equal whole prefixes. xxh3_64 keeps them deterministic (no Python hash()).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np
import xxhash

from .requests import ReplayRequest

__all__ = ["ContentReading", "PromptReading", "TemplateReading", "block_hashes", "load_reading"]

_MESSAGE_CACHE = 8192  # distinct messages kept tokenized (a session's, and the blocks shared across sessions)


class PromptReading(Protocol):
    name: str

    def ids(self, request: ReplayRequest) -> np.ndarray: ...


def block_hashes(ids: np.ndarray, block_size: int) -> np.ndarray:
    """The chained hashes of ids' full blocks (a trailing partial block has none), as uint64."""
    full = len(ids) // block_size
    out = np.empty(full, dtype=np.uint64)
    data = np.ascontiguousarray(ids[: full * block_size], dtype=np.uint32).view(np.uint8)
    step = block_size * 4
    previous = 0
    for k in range(full):
        previous = xxhash.xxh3_64_intdigest(data[k * step:(k + 1) * step].tobytes(), seed=previous)
        out[k] = previous
    return out


def _message_text(message: dict) -> str:
    parts = [message.get("content") if isinstance(message.get("content"), str) else ""]
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        parts += [str(fn.get("name", "")), str(fn.get("arguments", ""))]
    return "".join(parts)


class ContentReading:
    name = "content"

    def __init__(self, tokenizer) -> None:  # a fastgen Tokenizer
        self._tokenizer = tokenizer
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()

    def _encode(self, key: bytes, text: str) -> np.ndarray:
        hit = self._cache.get(key)
        if hit is None:
            hit = np.asarray(self._tokenizer.encode(text), dtype=np.uint32)
            self._cache[key] = hit
            if len(self._cache) > _MESSAGE_CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return hit

    def ids(self, request: ReplayRequest) -> np.ndarray:
        parts = []
        if request.tools:
            text = json.dumps(list(request.tools), separators=(",", ":"))
            parts.append(self._encode(xxhash.xxh3_128_digest(text), text))
        for message in request.messages:
            key = xxhash.xxh3_128_digest(json.dumps(message, sort_keys=True))
            parts.append(self._encode(key, _message_text(message)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


class TemplateReading:
    name = "template"

    def __init__(self, folder: Path) -> None:
        import os

        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from transformers import AutoTokenizer

        self._hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)

    def ids(self, request: ReplayRequest) -> np.ndarray:
        ids = self._hf.apply_chat_template(list(request.messages), tools=list(request.tools) if request.tools else None,
                                           add_generation_prompt=True, tokenize=True, return_dict=False)
        return np.asarray(ids, dtype=np.uint32)


def load_reading(folder: Path, reading: str = "auto") -> PromptReading:
    """The prompt reading for a tokenizer folder: `template` when its tokenizer_config.json has a chat template
    (auto), else `content`."""
    from ..tokenizer import load_tokenizer

    folder = Path(folder)
    tokenizer = load_tokenizer(str(folder))
    if reading == "auto":
        reading = "template" if tokenizer.has_chat_template else "content"
    if reading == "template":
        return TemplateReading(folder if folder.is_dir() else folder.parent)
    if reading == "content":
        return ContentReading(tokenizer)
    raise ValueError(f"unknown prompt reading {reading!r}; use template or content")
