"""A request's prompt as token ids, and as the chain of block hashes a prefix cache keys it by.

Two readings of "the prompt":
- `template`: the tokenizer's chat template over the wire messages and tools with the generation prompt, as vLLM
  and SGLang render it (fastgen.formats.chat_template, from the tokenizer folder the dataset ships), tokenized as a
  server does, piece by piece between special tokens so that each distinct piece is tokenized once;
- `content`: the tools' JSON, then each message's text (tool calls: name and arguments), no role markers; for a
  tokenizer without a template. Each distinct message is tokenized once.

Block hashes follow vLLM's automatic prefix caching: only full blocks, each hash chained over the one before, so
equal hashes mean equal whole prefixes. xxh3_64 keeps them deterministic (no Python hash()).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np
import xxhash

from .requests import ReplayRequest

__all__ = ["ContentReading", "PromptReading", "TemplateReading", "block_hashes", "load_reading", "tail_hash"]

_TEXT_CACHE = 64  # whole texts kept tokenized: a session's messages, re-rendered every turn
_LINE_CACHE = 1 << 18  # distinct lines kept tokenized: what bounds a reading worker's memory
_LINE_START = re.compile(r"(?<=\n)(?=\S)")


class PromptReading(Protocol):
    name: str

    def ids(self, request: ReplayRequest) -> np.ndarray: ...


_M = np.uint64(0x9E3779B97F4A7C15)  # odd: invertible modulo 2**64
_M_INV = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))
_LANES = np.asarray([(0x2545F4914F6CDD1D * (2 * i + 1)) % 2**64 for i in range(4096)], dtype=np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _contents(blocks: np.ndarray) -> np.ndarray:
    """One mixed 64-bit value per row of token ids: a position-weighted sum, then splitmix64's finalizer."""
    with np.errstate(over="ignore"):
        return _mix(((blocks + np.uint64(1)) * _LANES[: blocks.shape[-1]]).sum(axis=-1, dtype=np.uint64))


def block_hashes(ids: np.ndarray, block_size: int) -> np.ndarray:
    """The chained keys of ids' full blocks (a trailing partial block has none), as uint64: equal keys mean equal
    whole prefixes, up to 64-bit collisions. Vectorized: H_k = M * H_(k-1) + c_k (mod 2**64), i.e.
    H_k = M^k * sum_(j<=k) c_j M^-j, then mixed again so the keys do not keep that linear structure."""
    full = len(ids) // block_size
    if not full:
        return np.zeros(0, dtype=np.uint64)
    contents = _contents(np.asarray(ids[: full * block_size], dtype=np.uint64).reshape(full, block_size))
    with np.errstate(over="ignore"):
        up = np.cumprod(np.full(full, _M, dtype=np.uint64), dtype=np.uint64)
        down = np.cumprod(np.full(full, _M_INV, dtype=np.uint64), dtype=np.uint64)
        chained = up * np.cumsum(contents * down, dtype=np.uint64)
    return _mix(chained)


def tail_hash(ids: np.ndarray, block_size: int, previous: int) -> int | None:
    """The key of ids' trailing partial block, chained after the full blocks (previous: the last full block's key,
    or 0), told apart from any full block by its length; None when there is no partial block."""
    full = len(ids) // block_size * block_size
    if full == len(ids):
        return None
    content = _contents(np.asarray(ids[full:], dtype=np.uint64)[None, :])[0]
    with np.errstate(over="ignore"):
        mixed = np.uint64(previous) * _M + content + np.uint64((len(ids) - full) << 48)
    return int(_mix(np.asarray([mixed], dtype=np.uint64))[0])


def _message_text(message: dict) -> str:
    content = message.get("content")
    parts = [content if isinstance(content, str) else ""]
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        parts += [str(fn.get("name", "")), str(fn.get("arguments", ""))]
    return "".join(parts)


class _TokenizedTexts:
    """Texts tokenized once each, in lines: a text is cut before every line that starts with a non-space
    character, where byte-level BPE pre-tokenizers (GPT-2's, Llama 3's, Qwen's) always start a new piece, so its ids
    are its lines' ids one after another, and each distinct line is tokenized once, the new ones of a text in one
    batch (the tokenizers library spreads a batch over the cores). Sessions repeat one another's lines far more
    than their messages: a tool result quotes a file another session read, a history is re-rendered every turn.
    The first texts cut into lines are checked against the whole text tokenized at once; a tokenizer for which
    they differ (a SentencePiece one that prefixes each text's first word) is read whole from then on."""

    VERIFY = 8  # texts checked against their whole tokenization

    def __init__(self, tokenizer, line_cache: int = _LINE_CACHE) -> None:  # a fastgen Tokenizer
        self._tokenizer = tokenizer
        self._texts: OrderedDict[bytes, np.ndarray] = OrderedDict()  # whole texts, the most recent few
        self._lines: OrderedDict[bytes, np.ndarray] = OrderedDict()  # least recently used first
        self._line_cache = line_cache
        self._checked = 0
        self.in_lines = True

    def get(self, text: str, key: bytes | None = None) -> np.ndarray:
        key = key if key is not None else xxhash.xxh3_128_digest(text.encode())
        hit = self._texts.get(key)
        if hit is not None:
            self._texts.move_to_end(key)
            return hit
        hit = self._texts[key] = self._read(text)
        if len(self._texts) > _TEXT_CACHE:
            self._texts.popitem(last=False)
        return hit

    def _whole(self, text: str) -> np.ndarray:
        return np.asarray(self._tokenizer.encode(text), dtype=np.uint32)

    def _read(self, text: str) -> np.ndarray:
        lines = _LINE_START.split(text) if self.in_lines else [text]
        if len(lines) == 1:
            return self._whole(text)
        keys = [xxhash.xxh3_128_digest(line.encode()) for line in lines]
        known = self._lines
        missing = {k: line for k, line in zip(keys, lines) if k not in known}
        for k, line_ids in zip(missing, self._tokenizer.encode_batch(list(missing.values())) if missing else ()):
            known[k] = np.asarray(line_ids, dtype=np.uint32)
        ids = np.concatenate([known[k] for k in keys])
        # Trimmed only once the text is whole: a text with more distinct lines than the cache holds would otherwise
        # lose its own first lines before they are read.
        for k in keys:
            known.move_to_end(k)
        while len(known) > self._line_cache:
            known.popitem(last=False)
        if self._checked < self.VERIFY:
            self._checked += 1
            whole = self._whole(text)
            if not np.array_equal(ids, whole):
                self.in_lines = False
                return whole
        return ids


class ContentReading:
    name = "content"
    source: tuple[str, str] | None = None  # (folder, reading): how a worker process makes the same one (load_reading)

    def __init__(self, tokenizer) -> None:  # a fastgen Tokenizer
        self._texts = _TokenizedTexts(tokenizer)

    def ids(self, request: ReplayRequest) -> np.ndarray:
        parts = []
        if request.tools:
            text = json.dumps(list(request.tools), separators=(",", ":"))
            parts.append(self._texts.get(text))
        for message in request.messages:  # keyed by the whole message: its text alone drops the role
            key = xxhash.xxh3_128_digest(json.dumps(message, sort_keys=True).encode())
            parts.append(self._texts.get(_message_text(message), key))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


class TemplateReading:
    """The chat template's rendering as the server renders it (fastgen.formats.chat_template), tokenized piece by piece: a
    tokenizer splits its input at added (special) tokens before anything else, so the text between two of them
    tokenizes the same wherever it stands, and each distinct piece (a message, the tools preamble) is tokenized once.
    The first requests are checked against the whole rendering tokenized at once; a template or tokenizer for which
    the pieces differ (an added token that strips its neighbours, say) is read whole from then on, and the name says
    so."""

    VERIFY = 4  # requests checked against the whole rendering
    source: tuple[str, str] | None = None  # (folder, reading): how a worker process makes the same one (load_reading)

    def __init__(self, tokenizer) -> None:  # a fastgen Tokenizer with a chat template
        import re

        from ..formats.chat_template import ChatTemplate

        self._template = ChatTemplate(tokenizer.folder_files)
        self._encode = tokenizer.encode
        added = {token.content: token_id for token_id, token in tokenizer.added_tokens().items()}
        self._added = added
        self._split = (
            re.compile("(" + "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)) + ")")
            if added
            else None
        )
        self._pieces = _TokenizedTexts(tokenizer)
        self._checked = 0
        self.name = "template"

    def _render(self, request: ReplayRequest) -> str:
        return self._template.render(request.messages, request.tools)

    def _whole(self, text: str) -> np.ndarray:
        return np.asarray(self._encode(text), dtype=np.uint32)

    def ids(self, request: ReplayRequest) -> np.ndarray:
        text = self._render(request)
        if self._split is None or self.name != "template":
            return self._whole(text)
        parts = []
        for piece in self._split.split(text):
            if piece in self._added:
                parts.append(np.asarray([self._added[piece]], dtype=np.uint32))
            elif piece:
                parts.append(self._pieces.get(piece))
        ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)
        if self._checked < self.VERIFY:
            self._checked += 1
            whole = self._whole(text)
            if not np.array_equal(ids, whole):
                self.name = "template (read whole: its pieces between special tokens do not tokenize alone)"
                return whole
        return ids


def load_reading(folder: Path, reading: str = "auto") -> PromptReading:
    """The prompt reading for a tokenizer folder: `template` when its tokenizer_config.json has a chat template
    (auto), else `content`."""
    from ..formats.tokenizer import load_tokenizer

    folder = Path(folder)
    tokenizer = load_tokenizer(str(folder))
    if reading == "auto":
        reading = "template" if tokenizer.has_chat_template else "content"
    kinds: dict[str, type[TemplateReading] | type[ContentReading]] = {
        "template": TemplateReading,
        "content": ContentReading,
    }
    kind = kinds.get(reading)
    if kind is not None:
        made = kind(tokenizer)
        made.source = (str(folder), reading)  # how a worker process makes the same reading
        return made
    raise ValueError(f"unknown prompt reading {reading!r}; use template or content")
