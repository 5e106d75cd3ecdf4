"""How a span's `gen_ai.usage.input_tokens` is counted: the prompt's content, or the prompt the server tokenizes.

`content`: the tool catalog's JSON plus every message's content (tool calls: name and arguments), each counted
alone. `template`: the tokens of the request's chat-template rendering (role markers, the tools preamble, tool-call
markup, the generation prompt), the `prompt_tokens` vLLM and SGLang report for the request.

Rendering and re-encoding every span's prompt (up to 100K tokens each) would take most of an hour on the default
set, so `TemplateCount` renders a skeleton instead: each message's content is replaced by its first pre-token, a
marker and its last pre-token. The template sees the same message shapes, roles and tools, so the skeleton holds
every wrapper it adds, wherever it puts them; the text between markers is tokenized once per distinct piece; each
marker stands for the content minus those two pre-tokens, whose count is known from the content's own count. That
is exact whenever the tokenizer splits a content at its first and last pre-token boundaries wherever it stands,
which byte-level BPE tokenizers do (their pre-tokenizer is a regex). `prove` checks the decomposition against whole
renderings; a tokenizer or template for which it fails is counted by whole renderings (`whole`), slowly but exactly.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Optional, Protocol, Sequence

import xxhash

from ..formats.chat_template import ChatTemplate, FrozenJSON, server_message
from .messages import Message, SessionPlan, Turn
from .spec import TemplateMargin
from ..formats.tokenizer import Tokenizer
from .tools import ToolCatalog

__all__ = ["PromptCount", "ContentCount", "TemplateCount", "prompt_count", "measured_margin", "COUNTS"]

COUNTS = ("template", "content")
_MARK = re.compile("\ue000(\\d+)\ue001")  # private-use characters: never in generated text
# characters read at each end of a content to find its first and last pre-token: a few dozen almost always do
_WIDTHS = (48, 512, 8192)
_REMEMBERED = 16384  # distinct skeleton pieces kept per process
_EDGES = "_template_edges"  # where a message keeps its edge pre-tokens
_SEEN = "_template_seen"  # and its form in the template (_seen)
_SHORT_PIECE = 256  # characters: a longer piece (the tools preamble) is remembered by its hash
# Added to a measured template margin's base: sessions not sampled render other tool-call arguments (JSON re-rendered
# by the template with spaces) and other edges. Measured on the default set: no span needs any of it (the largest
# excess over the unslacked margin, over all 5,368 spans, is 0).
_MARGIN_SLACK = 32


class PromptCount(Protocol):
    @property
    def name(self) -> str: ...  # read-only: TemplateCount's is a property

    def input_tokens(self, plan: SessionPlan, turn: Turn) -> int: ...


class ContentCount:
    name = "content"

    def input_tokens(self, plan: SessionPlan, turn: Turn) -> int:
        return plan.input_tokens(turn)


def wire_tools(catalog: ToolCatalog) -> list[dict]:
    """The tools as inference-perf's request body carries them: nested under "function" (its parameter cleaning
    changes nothing in fastgen's schemas; a test holds the two equal)."""
    return [
        FrozenJSON(
            {
                "type": t.get("type", "function"),
                "function": {"name": t["name"], "description": t.get("description"), "parameters": t.get("parameters")},
            }
        )
        for t in catalog.tools
    ]


class _Remembered(OrderedDict):
    def remember(self, key, value):
        self[key] = value
        if len(self) > _REMEMBERED:
            self.popitem(last=False)
        return value


class TemplateCount:
    """Template counts by skeleton rendering (see the module docstring); `whole` counts by whole renderings."""

    def __init__(self, tokenizer: Tokenizer, template: ChatTemplate, *, whole: bool = False):
        self.tokenizer = tokenizer
        self.template = template
        self.whole = whole
        self._pieces: _Remembered = _Remembered()
        self._tools: dict[int, tuple[ToolCatalog, list[dict]]] = {}
        self._proven: dict = {}  # counts of the stretches between special tokens of proof renderings

    @property
    def name(self) -> str:
        return "template (whole renderings)" if self.whole else "template"

    def __getstate__(self) -> dict:  # workers start with empty memos
        return {"tokenizer": self.tokenizer, "template": self.template, "whole": self.whole}

    def __setstate__(self, state: dict) -> None:
        TemplateCount.__init__(self, state["tokenizer"], state["template"], whole=state["whole"])

    def input_tokens(self, plan: SessionPlan, turn: Turn) -> int:
        if self.whole:
            return self.rendered_tokens(plan.catalog, turn.messages)
        return self.skeleton_tokens(plan.catalog, turn.messages)

    def _wire_tools(self, catalog: ToolCatalog) -> list[dict]:
        held = self._tools.get(id(catalog))
        if held is None or held[0] is not catalog:
            held = self._tools[id(catalog)] = (catalog, wire_tools(catalog))
        return held[1]

    def rendered_tokens(self, catalog: ToolCatalog, messages: Sequence[Message]) -> int:
        """The whole rendering, tokenized: what the server counts."""
        text = self.template.render([m.sent for m in messages], self._wire_tools(catalog) or None)
        return self.tokenizer.count(text)

    def skeleton_tokens(
        self, catalog: ToolCatalog, messages: Sequence[Message], *, content_tokens: Optional[Sequence[int]] = None
    ) -> int:
        """The same count from a skeleton rendering; `content_tokens` overrides the messages' own counts."""
        forms, inner, edges_at = [], [], []
        for i, m in enumerate(messages):
            tokens = m.tokens if content_tokens is None else content_tokens[i]
            edges = self._edges_of(m) if isinstance(m.content, str) and m.content else None
            edges_at.append(edges)
            seen = _seen(m)
            if edges is None:
                forms.append(seen)
                inner.append(0)
                continue
            head, head_tokens, tail, tail_tokens, _ = edges
            forms.append({**seen, "content": f"{head}\ue000{i}\ue001{tail}"})
            inner.append(tokens - head_tokens - tail_tokens)
        parts = _MARK.split(self.template.render_seen(forms, self._wire_tools(catalog) or None))
        marks = [int(i) for i in parts[1::2]]
        total = sum(inner[i] for i in marks)
        for k, piece in enumerate(parts[0::2]):
            if not piece:
                continue
            first, last = marks[k - 1] + 1 if k else 0, marks[k] if k < len(marks) else len(messages)
            # the messages rendered whole in this piece, whose contents are one known part each
            whole = [
                (m.content, m.tokens if content_tokens is None else content_tokens[i])
                for i, m in enumerate(messages[first:last], start=first)
                if m.ends is not None and m.content
            ]
            total += self._glued(
                piece, edges_at[marks[k - 1]] if k else None, edges_at[marks[k]] if k < len(marks) else None, whole
            )
        return total

    def _glued(self, piece: str, before: Optional[tuple], after: Optional[tuple], whole: list[tuple[str, int]]) -> int:
        """Tokens of the template text between two contents' markers: the previous content's tail, template text,
        contents rendered whole, template text, the next content's head. Where a tail, head or whole content is
        known (a unit and its count) and meets the template's text at a boundary that additive counts keep (a
        newline, then no whitespace), its count is added to the counts of the template text around it, which
        recurs: no tokenizer call."""
        start, end, known = 0, len(piece), 0
        if before is not None and before[4]:
            tail = before[2]
            if piece.startswith(tail) and (len(piece) == len(tail) or not piece[len(tail)].isspace()):
                start, known = len(tail), before[3]
        if after is not None and after[4]:
            head = after[0]
            cut = end - len(head)
            if cut >= start and piece.endswith(head) and (cut == start or piece[cut - 1] == "\n"):
                end, known = cut, known + after[1]
        at = start
        for content, tokens in whole:
            found = piece.find(content, at, end)
            stop = found + len(content)
            if (
                found < 0
                or (found and piece[found - 1] != "\n")
                or (found == 0 and before is not None)
                or (stop < len(piece) and piece[stop].isspace())
            ):
                continue
            known += tokens + (self._piece(piece[at:found]) if found > at else 0)
            at = stop
        return known + (self._piece(piece[at:end]) if end > at else 0)

    def _piece(self, text: str) -> int:
        key = _key(text)
        count = self._pieces.get(key)
        if count is None:
            count = self._pieces.remember(key, self.tokenizer.count(text))
        return count

    def _edges_of(self, message: Message) -> Optional[tuple[str, int, str, int, bool]]:
        """(head, its tokens, tail, its tokens, whether they are whole units) of a content, or None to keep it whole
        in the skeleton. A composed content's first and last parts where it has two or more (Message.ends: no
        tokenizer call); else its first and last pre-tokens, found by tokenizing around them."""
        content = message.content
        assert content is not None  # the callers pass messages with a content
        if message.ends is not None:
            head, head_tokens, tail, tail_tokens = message.ends
            return None if len(head) + len(tail) > len(content) else (*message.ends, True)
        # kept on the message (its counts are this tokenizer's already): a memo here would keep every message alive
        held = message.__dict__.get(_EDGES)
        if held is None:
            held = message.__dict__[_EDGES] = (_edges(self.tokenizer, content),)
        return held[0]

    def prove(self, catalog: ToolCatalog, messages: Sequence[Message]) -> bool:
        """Whether the skeleton count equals the whole rendering's, for these message shapes with their contents cut
        to what the skeleton keeps of them (cheap to render whole): their first part twice and their last, or their
        first and last lines (the same first and last pre-tokens)."""
        cut, counts = [], []
        for m in messages:
            edges = self._edges_of(m) if isinstance(m.content, str) and m.content else None
            if edges is not None and edges[4]:
                # the head stands in for the middle too: a template that does not render contents as they are
                # (escapes them, changes their case) changes its tokens there
                head, head_tokens, tail, tail_tokens, _ = edges
                text = head + head + tail
                cut.append(Message(m.role, 0, {**m.wire, "content": text}, text, m.calls, m.ends))
                counts.append(2 * head_tokens + tail_tokens)
            elif isinstance(m.content, str) and m.content:
                text = _first_and_last_lines(m.content)
                cut.append(Message(m.role, 0, {**m.wire, "content": text}, text, m.calls))
                counts.append(self.tokenizer.encoded_count(text))
            else:
                cut.append(m)
                counts.append(m.tokens)
        whole = self.template.render([m.sent for m in cut], self._wire_tools(catalog) or None)
        return self.skeleton_tokens(catalog, cut, content_tokens=counts) == self.tokenizer.encoded_count_cut(
            whole, self._proven
        )


def _seen(message: Message) -> dict:
    """The message as the template sees it (chat_template.server_message), converted once: a session's messages
    are rendered again in every later turn."""
    held = message.__dict__.get(_SEEN)
    if held is None:
        held = message.__dict__[_SEEN] = server_message(message.sent)
    return held


def _key(text: str):
    return xxhash.xxh3_128_digest(text.encode()) if len(text) > _SHORT_PIECE else text  # not the big text itself


def _first_and_last_lines(text: str) -> str:
    first = text.find("\n", 0, len(text) - 1)
    if first < 0:
        return text
    last = text.rfind("\n", 0, len(text) - 1)
    return text[: first + 1] + text[last + 1 :] if last > first else text


def _edges(tokenizer: Tokenizer, text: str) -> Optional[tuple[str, int, str, int, bool]]:
    """(first pre-token, its tokens, last pre-token, its tokens, False) of a content, or None when it is too short to
    split or a boundary is not one in the tokens (then the content stays whole in the skeleton)."""
    head = _edge(tokenizer, text, first=True)
    tail = _edge(tokenizer, text, first=False)
    if head is None or tail is None or len(head[0]) + len(tail[0]) >= len(text):
        return None
    return head[0], head[1], tail[0], tail[1], False


def _edge(tokenizer: Tokenizer, text: str, *, first: bool) -> Optional[tuple[str, int]]:
    """The first (or last) pre-token of a text and its tokens, if the tokens of the text around it split there."""
    for width in _WIDTHS:
        near = text[:width] if first else text[-width:]
        spans = tokenizer.pre_tokens(near)
        if len(spans) >= 2:
            cut = spans[0][1] if first else spans[-1][0]
            edge, rest = (near[:cut], near[cut:]) if first else (near[cut:], near[:cut])
            edge_tokens = tokenizer.count(edge)
            return (edge, edge_tokens) if tokenizer.count(near) == edge_tokens + tokenizer.count(rest) else None
        if width >= len(text):
            return None
    return None


def measured_margin(sessions: Sequence[Sequence[tuple[int, int]]], floor: TemplateMargin) -> TemplateMargin:
    """The window check's template margin from sampled turns: each session a sequence of (messages, template tokens
    minus content tokens) in turn order. per_message: the most any turn added per message over the turn before;
    base: the most left over by any turn, plus slack. Never below `floor`."""
    per_message = floor.per_message
    for turns in sessions:
        for (m0, e0), (m1, e1) in zip(turns, turns[1:]):
            if m1 > m0:
                per_message = max(per_message, -(-(e1 - e0) // (m1 - m0)))
    left = [e - per_message * m for turns in sessions for m, e in turns]
    base = max(floor.base, max(left, default=0) + _MARGIN_SLACK) if left else floor.base
    return TemplateMargin(base, per_message)


def prompt_count(tokenizer: Tokenizer, count: str = "auto") -> PromptCount:
    """The counting for `count` (auto: template when the tokenizer has a chat template, else content)."""
    if count not in ("auto", *COUNTS):
        raise ValueError(f"unknown count {count!r}; use one of {', '.join(COUNTS)}")
    template = ChatTemplate.of(tokenizer.folder_files) if count != "content" else None
    if count == "template" and template is None:
        raise ValueError("the tokenizer has no chat template to count with; use --count content")
    return TemplateCount(tokenizer, template) if template is not None else ContentCount()
