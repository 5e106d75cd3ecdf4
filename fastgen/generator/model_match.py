"""Whether a tokenizer can stand for the served model's, said before anything is generated: the model family --model
names against the tokenizer's vocabulary, and the special tokens its chat template and the server's tool-call parser
read as one token each. Deterministic and offline: a small table of families read from the model id, and the
tokenizer's own files. Each check answers one warning line, or None.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Optional

from ..formats.chat_template import template_markers, template_source
from ..engine_endpoints import Engine
from ..formats.tokenizer import BUILTIN_DIR, BUILTIN_NAME, Tokenizer

__all__ = ["FAMILIES", "Family", "family_of", "is_builtin", "missing_tokens", "model_mismatch"]


@dataclass(frozen=True)
class Family:
    name: str
    model: re.Pattern  # matches the start of the family's hub ids
    base_vocab: int  # tokenizer.json's model.vocab entries (added tokens excluded), the same in every member
    markers: tuple[str, ...]  # special tokens the family's chat template renders
    uses_tool_call_markers: bool  # its tool calls are written between <tool_call> tags (what hermes-style parsers read)
    template: str  # the shipped chat template of its tool-calling format (chat_template.SHIPPED_TEMPLATES)


FAMILIES = (
    # Qwen1.5, Qwen2, Qwen2.5, Qwen3, QwQ: one BPE of 151,643 tokens (Qwen3's checked: tests/formats/test_tokenizer.py)
    Family(
        "Qwen",
        re.compile(r"qwen/(qwen1\.5|qwen2|qwen3|qwq)", re.I),
        151643,
        ("<|im_start|>", "<|im_end|>"),
        True,
        "qwen",
    ),
    # Llama 3, 3.1, 3.2, 3.3: 128,000 tokens and 256 reserved special ones
    Family(
        "Llama 3",
        re.compile(r"meta-llama/(meta-)?llama-3", re.I),
        128000,
        ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
        False,
        "llama3",
    ),
)


def family_of(model: str) -> Optional[Family]:
    return next((f for f in FAMILIES if f.model.match(model)), None)


def is_builtin(tokenizer: Tokenizer) -> bool:
    """The built-in tokenizer, by name or by content (a copy of its folder)."""
    if tokenizer.identity.source == BUILTIN_NAME:
        return True
    return tokenizer.identity.sha256 == hashlib.sha256((BUILTIN_DIR / "tokenizer.json").read_bytes()).hexdigest()


def model_mismatch(model: str, tokenizer: Tokenizer) -> Optional[str]:
    """The warning when `model` names a known family and the tokenizer is plainly not one of its own: the built-in
    one, or a vocabulary of another size."""
    family = family_of(model)
    if family is None:
        return None
    source = tokenizer.identity.source
    if is_builtin(tokenizer):
        why = f"--tokenizer {source} is fastgen's built-in tokenizer"
    elif tokenizer.base_vocab_size != family.base_vocab:
        why = (
            f"tokenizer {source} has {tokenizer.base_vocab_size:,} tokens before its added ones, {family.name} "
            f"models {family.base_vocab:,}"
        )
    else:
        return None
    return f"counts will not match {model}'s server ({why}): pass --tokenizer <folder of {model}>"


def _needed(tokenizer: Tokenizer, *, model: str, engine: Engine) -> list[tuple[str, tuple[str, ...]]]:
    """(reason, tokens) the served prompts and answers need as single tokens."""
    sources = {s for s in (template_source(tokenizer.folder_files, with_tools=t) for t in (False, True)) if s}
    family = family_of(model)
    parser = (family is not None and family.uses_tool_call_markers) or any(
        t in s for s in sources for t in (*engine.tool_parser_tokens, "<|im_start|>")
    )
    needed = []
    if sources:
        markers = [
            m for s in sorted(sources) for m in template_markers(s) if not (parser and m in engine.tool_parser_tokens)
        ]
        needed.append(("its chat template renders them", tuple(dict.fromkeys(markers))))
    elif family is not None:
        needed.append((f"{family.name}'s chat template renders them", family.markers))
    if parser:
        needed.append(
            (
                f"{engine.name}'s tool-call parser {engine.tool_parser} finds tool calls by them",
                engine.tool_parser_tokens,
            )
        )
    return needed


def missing_tokens(tokenizer: Tokenizer, *, model: str, engine: Engine) -> Optional[str]:
    """The warning when the tokenizer lacks special tokens its chat template renders (ChatML's <|im_start|>, ...),
    or that the server's usual tool-call parser reads (hermes and qwen3_coder: <tool_call>, </tool_call>; checked for
    ChatML templates, templates that write them, and the Qwen family). Not for the built-in tokenizer, which stands in
    for no served model (model_mismatch says so)."""
    if is_builtin(tokenizer):
        return None
    seen: set[str] = set()
    parts, parser = [], False
    for reason, tokens in _needed(tokenizer, model=model, engine=engine):
        lacking = [t for t in tokens if t not in seen and len(tokenizer.encode(t)) != 1]
        seen.update(tokens)
        if lacking:
            parts.append(f"{', '.join(lacking)} ({reason})")
            parser = parser or tokens == engine.tool_parser_tokens
    if not parts:
        return None
    tools = ", and the tool-call parser needs them to find the model's tool calls" if parser else ""
    return (
        f"tokenizer {tokenizer.identity.source} lacks the special tokens {'; '.join(parts)}: here each is "
        f"counted as several plain-text tokens where the served model's tokenizer has one{tools}; pass "
        f"--tokenizer the served model's own folder"
    )
