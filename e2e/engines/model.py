"""The fake model: how a request is tokenized and what it answers. No HTTP here (server.py), no state but the cache.

Prompts are tokenized the way vLLM does it: the tokenizer's own chat template over messages and tools
(transformers' apply_chat_template, add_generation_prompt=True), so `prompt_tokens` and the prefix cache see the
real rendered prompt, role markers and tool preamble included. Answers are deterministic and small: text made of
single-token words (so `completion_tokens` is exactly min(max_tokens, cap)), or one tool call when tool_choice
asks for it.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Optional

from .prefix_cache import PrefixCache
from ..checks.traces import request_key

__all__ = ["Answer", "FakeModel", "OUTPUT_CAP", "load_tokenizer"]

# Keep answers short: the e2e checks the replay's plumbing, not long generations.
OUTPUT_CAP = 64
_WORD = re.compile(r" [a-z]{4,8}")
_POOL_SIZE = 256


def load_tokenizer(folder: str):
    """The dataset's `traces/tokenizer` folder (or any local model folder), offline."""
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _arguments_as_objects(messages: list[dict]) -> list[dict]:
    """The messages as vLLM hands them to a template (renderers/chat_utils.py: the conversation form, then
    _postprocess_messages): content always a string ("" when absent), tool-call arguments parsed from JSON strings
    into objects (not JSON, or empty: {})."""
    out = []
    for message in messages:
        seen = {"role": message["role"], "content": message.get("content") or ""}
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                fn = dict(call.get("function") or {})
                try:
                    fn["arguments"] = json.loads(fn["arguments"]) if fn.get("arguments") else {}
                except (TypeError, ValueError):
                    fn["arguments"] = fn.get("arguments") if isinstance(fn.get("arguments"), dict) else {}
                calls.append({**call, "function": fn})
            seen["tool_calls"] = calls
        if message["role"] == "tool" and "tool_call_id" in message:
            seen["tool_call_id"] = message["tool_call_id"]
        out.append(seen)
    return out


@dataclass
class Answer:
    """One response: the assistant message (as a non-streaming response carries it) and its usage."""

    message: dict
    finish_reason: str
    usage: dict
    pieces: list[str] = field(default_factory=list)  # the text, one token per piece, for streaming
    hold: Any = None  # the request's hold on its cache blocks, released when the response has been sent


class FakeModel:
    def __init__(
        self,
        tokenizer,
        *,
        output_cap: int = OUTPUT_CAP,
        cache: Optional[PrefixCache] = None,
        recorded: Optional[dict[tuple, dict]] = None,
        output_scale: float = 1.0,
        ignore_tool_choice: bool = False,
        fresh_call_ids: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        # request key (traces.request_key) -> the span's recorded output: answered as is, so the replay sends the
        # recorded prompts byte for byte (what `fastgen analyze` predicts from)
        self.recorded = recorded or {}
        # a recorded answer's tool calls under ids of the server's own, as a real server mints them: the replay must
        # then carry these ids into the next request's tool results (inference-perf rewrites them), or the results
        # answer calls nobody made (checks.py)
        self.fresh_call_ids = fresh_call_ids
        self.output_cap = output_cap
        self.output_scale = output_scale  # text answers of this fraction of min(max_tokens, cap), at least 1 token
        self.ignore_tool_choice = ignore_tool_choice  # a named tool_choice answered with another tool
        self.cache = cache if cache is not None else PrefixCache()
        self.words = _single_token_words(tokenizer)
        # Each word is one token; joined, they stay one token each under a Llama-3/Qwen-style pre-tokenizer. Where
        # not (another tokenizer), completion_tokens counts the joined text instead.
        self.additive = self.count("".join(self.words)) == len(self.words)

    def prompt_ids(self, messages: list[dict], tools: Optional[list[dict]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            _arguments_as_objects(messages),
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return list(ids)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def answer(self, body: dict) -> Answer:
        """The response to a chat-completions body; raises ValueError on a body vLLM would refuse."""
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        tool = _forced_tool(body.get("tool_choice"), tools)  # first: a refused request must not fill the cache
        if self.ignore_tool_choice and tool is not None and isinstance(body.get("tool_choice"), dict):
            tool = next((t for t in tools or () if t is not tool), tool)  # another tool's name, where there is another
        ids = self.prompt_ids(messages, tools)
        recorded = self.recorded.get(request_key(body))
        if recorded is not None:
            message = _with_fresh_ids(recorded) if self.fresh_call_ids else recorded
            if message.get("tool_calls"):
                reason, pieces = "tool_calls", []
                completion = sum(
                    self.count(c["function"]["name"]) + self.count(c["function"]["arguments"])
                    for c in message["tool_calls"]
                )
            else:
                text = message["content"]
                pieces = [text[i : i + 16] for i in range(0, len(text), 16)]
                completion, reason = self.count(text), "stop"
        elif tool is not None:
            message, reason, pieces = self._tool_call(tool), "tool_calls", []
            call = message["tool_calls"][0]["function"]
            completion = self.count(call["name"]) + self.count(call["arguments"])
        else:
            pieces = self._text(messages, _max_tokens(body))
            text = "".join(pieces)
            message = {"role": "assistant", "content": text}
            completion = len(pieces) if self.additive else self.count(text)
            reason = "length" if completion == _max_tokens(body) else "stop"
        # the answer's tokens take room in the cache while it is generated, as analyze models (cache.py)
        cached, hold = self.cache.lookup_and_insert(ids, completion)
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": completion,
            "total_tokens": len(ids) + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return Answer(message=message, finish_reason=reason, usage=usage, pieces=pieces, hold=hold)

    def _text(self, messages: list[dict], max_tokens: int) -> list[str]:
        # Seeded by the prompt's tail, so different requests answer differently: a live output substituted into
        # the wrong session's next turn would then show in the checks.
        seed = hashlib.blake2b(json.dumps(messages[-1], sort_keys=True).encode(), digest_size=8).digest()
        start = int.from_bytes(seed, "big")
        count = min(max_tokens, max(1, round(self.output_scale * min(max_tokens, self.output_cap))))
        return [self.words[(start + 7 * i) % len(self.words)] for i in range(count)]

    def _tool_call(self, tool: dict) -> dict:
        spec = tool.get("function", tool)  # the nested OpenAI format inference-perf sends, or the flat one
        arguments = json.dumps(_arguments(spec.get("parameters") or {}), separators=(",", ":"))
        call = {
            "id": _call_id(),
            "type": "function",
            "function": {"name": spec["name"], "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def _call_id() -> str:
    """A tool-call id of the server's own, in the form vLLM mints."""
    return f"call_{secrets.token_hex(12)}"


def _with_fresh_ids(message: dict) -> dict:
    calls = message.get("tool_calls")
    if not calls:
        return message
    return {**message, "tool_calls": [{**c, "id": _call_id()} for c in calls]}


def _max_tokens(body: dict) -> int:
    value = body.get("max_tokens") or body.get("max_completion_tokens") or 16
    return max(1, int(value))


def _forced_tool(choice: Any, tools: Optional[list[dict]]) -> Optional[dict]:
    """The tool a request forces: a named tool_choice, or the first tool for "required"; None means text."""
    if not tools:
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        for tool in tools:
            if tool.get("function", tool).get("name") == name:
                return tool
        raise ValueError(f"tool_choice names {name!r}, which is not in 'tools'")
    return tools[0] if choice == "required" else None


def _arguments(parameters: dict) -> dict:
    # Small, valid arguments for the required parameters: enough for the replay to carry a real tool call forward.
    kinds: dict[str | None, object] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    props = parameters.get("properties") or {}
    return {name: kinds.get((props.get(name) or {}).get("type"), "e2e") for name in parameters.get("required") or []}


def _single_token_words(tokenizer) -> list[str]:
    """Up to 256 ' word' strings that are one token each, in vocabulary order (deterministic)."""
    words = []
    for token_id in range(len(tokenizer)):
        piece = tokenizer.decode([token_id])
        if _WORD.fullmatch(piece) and len(tokenizer.encode(piece, add_special_tokens=False)) == 1:
            words.append(piece)
            if len(words) == _POOL_SIZE:
                break
    if len(words) < 16:
        raise ValueError("the tokenizer has too few single-token words for the fake model's answers")
    return words
