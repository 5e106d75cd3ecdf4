"""The step form of the declared scenarios (chain.py, fan.py): what one request adds, and how the model answers it.

A step, as a workload file writes it:

    add:                                   # user messages the request adds to the history before it is sent
      - {kind: code, tokens: {lo: 800, hi: 1200}, header: "The module the bug is in:"}
    calls:                                 # the answer: parallel tool calls of the core tools, each with its result
      - {tool: read_file, result: {kind: numbered_code, tokens: {lo: 300, hi: 900}}}
      - {tool: apply_patch, diff: {lo: 150, hi: 400}, result: {kind: logline, tokens: {lo: 40, hi: 120}}}
    repeat: 3                              # the step, three requests in a row (a loop); 1 by default

or, answered with text, `text: {kind: prose, tokens: {lo: 300, hi: 800}}` in place of `calls`. The results of calls
go into the next request as `role: tool` messages answering them by id, after the assistant message that made them,
as agent_loop does; a text answer goes in as the assistant's message. Every message is exactly its drawn number of
tokens (one exception: where the header of a message a step adds leaves fewer than 24 tokens of its budget,
the text after it is 24 tokens).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, get_args

import numpy as np

from ...errors import SpecError
from ..content.budget import headed_block, numbered_code
from ..content.compose import Composer, Text
from ..content.kinds import KINDS
from ..content.patch import make_patch, patch_summary
from ..content.vocab import Vocab
from ..messages import Message, Output, ToolCall, user
from ..spec import STRICT_KEYS, TOOL_CALL_MIN_MAX_TOKENS, Count, Range
from ..tools import CORE_TOOLS
from .common import CALL_TOKENS_BOUND, make_call

__all__ = [
    "Block",
    "Call",
    "Step",
    "Kind",
    "Tool",
    "added",
    "answer",
    "block_bound",
    "answer_bound",
    "added_bound",
    "history_bound",
    "max_tokens",
    "scaled_steps",
    "Steps",
]

# The composer's pools, and code as read_file returns it (each line after its number)
NUMBERED = "numbered_code"
Kind = Literal["code", "numbered_code", "prose", "plan", "tree", "api_doc", "guideline", "search", "logline"]
Tool = Literal["apply_patch", "read_file", "run_tests", "search_code", "list_dir", "run_command"]
assert set(get_args(Kind)) == {*KINDS, NUMBERED} and get_args(Tool) == CORE_TOOLS  # one list each, kept in step

_LEAST_BODY = 24  # tokens of text after a block's header, at least (fewer repeat: a pool has few short units)


def _refuse(what: str, rule: str) -> None:
    raise SpecError(f"{what} {rule}")


@dataclass(frozen=True)
class Block:
    """A text of one kind, `tokens` tokens in all: a message a step adds, a text answer or a tool's result.
    `header`: a first line of the text, in its own words (counted within `tokens`)."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    kind: Kind
    tokens: Range
    header: str = ""

    def __post_init__(self) -> None:
        if self.tokens.lo < 1:
            _refuse("tokens", f"must be at least 1 token, got {{lo: {self.tokens.lo}, hi: {self.tokens.hi}}}")
        # a header is one unit of the composer's (compose.py): one line, starting with no whitespace
        if "\n" in self.header or self.header != self.header.lstrip():
            _refuse("header", f"must be one line that does not start with a space, got {self.header!r}")

    def scaled(self, factor: float) -> "Block":
        return dataclasses.replace(self, tokens=self.tokens.scaled(factor))


@dataclass(frozen=True)
class Call:
    """One tool call of an answer and the result the harness sends back. `diff`: about how many tokens the patch of
    an apply_patch call takes (the diff is cut at whole edits, so its size is near, not exactly, a draw); the other
    tools take a path, a query or a command and no diff."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    tool: Tool
    result: Block
    diff: Range = Range(0, 0)

    def __post_init__(self) -> None:
        if self.tool == "apply_patch" and self.diff.lo < 1:
            _refuse("diff", "must be at least 1 token for apply_patch: the patch it sends, e.g. {lo: 150, hi: 400}")
        if self.tool != "apply_patch" and self.diff.hi > 0:
            _refuse("diff", f"is for apply_patch only; {self.tool} sends no patch (leave diff out)")

    def scaled(self, factor: float) -> "Call":
        return dataclasses.replace(self, result=self.result.scaled(factor), diff=self.diff.scaled(factor))


@dataclass(frozen=True)
class Step:
    """What one request adds (`add`, user messages) and its answer: `text`, or `calls` made side by side;
    `repeat` times in a row."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    add: tuple[Block, ...] = ()
    text: Optional[Block] = None
    calls: tuple[Call, ...] = ()
    repeat: Count = 1

    def __post_init__(self) -> None:
        if (self.text is None) == (not self.calls):
            both = "both" if self.text is not None else "neither"
            _refuse("a step", f"answers with `text` or with `calls` (a list of tool calls), got {both}")
        if self.repeat > 1 and self.text is not None and not self.add:
            # the repeated request would end on the model's own answer: no chat request does
            _refuse("repeat", "of a step answered with text needs `add`: each request must bring a new message")

    @property
    def answers_with_calls(self) -> bool:
        return bool(self.calls)

    def scaled(self, factor: float) -> "Step":
        return dataclasses.replace(
            self,
            add=tuple(b.scaled(factor) for b in self.add),
            text=self.text.scaled(factor) if self.text is not None else None,
            calls=tuple(c.scaled(factor) for c in self.calls),
        )


# at least one step (checked by the spec: a length bound here would also be reported for any error inside a step)
Steps = tuple[Step, ...]


def scaled_steps(steps: tuple[Step, ...], factor: float) -> tuple[Step, ...]:
    """Every token budget of the steps multiplied (--budget-scale); counts (repeat) stay."""
    return tuple(step.scaled(factor) for step in steps)


def _compose(composer: Composer, block: Block, rng: np.random.Generator, *, header: str = "", least: int = 0) -> Text:
    """A text of the block's kind, exactly a drawn number of tokens, headed by the block's header (else `header`),
    with at least `least` tokens after the header."""
    budget = block.tokens.draw(rng)
    line = block.header or header

    def body(tokens: int) -> Text:
        return (
            numbered_code(composer, tokens, rng) if block.kind == NUMBERED else composer.fill(block.kind, tokens, rng)
        )

    if not line:
        return body(budget)
    if least:
        budget = max(budget, composer.count(line + "\n") + least)
    return headed_block(composer, line + "\n", budget, body)


def added(composer: Composer, rng: np.random.Generator, step: Step) -> tuple[Message, ...]:
    """The user messages the step's request adds. Each keeps some text after its header: two sessions' tasks or two
    branches' instructions must differ even where --budget-scale leaves a budget below its header's size, or no one
    could tell their requests apart."""
    return tuple(user(_compose(composer, block, rng, least=_LEAST_BODY)) for block in step.add)


def answer(
    composer: Composer, rng: np.random.Generator, v: Vocab, step: Step, *, read: set[str]
) -> tuple[Output, list[Text]]:
    """The step's answer and the results its calls get back (none for a text). `read`: the files the session has
    read so far, so no read_file asks for one twice."""
    if step.text is not None:
        return Output(_compose(composer, step.text, rng)), []
    calls: list[ToolCall] = []
    results: list[Text] = []
    for call in step.calls:
        made, header = _call(composer, rng, v, call, read=read)
        calls.append(made)
        results.append(_compose(composer, call.result, rng, header=header))
    return Output(calls=tuple(calls)), results


def _call(
    composer: Composer, rng: np.random.Generator, v: Vocab, call: Call, *, read: set[str]
) -> tuple[ToolCall, str]:
    """The call with arguments of its tool, and the line its result starts with where the block names none (what
    the tool prints first: the command it ran, the patch's summary; nothing for a file read)."""
    if call.tool == "read_file":
        path = v.module_path()
        while path in read:
            path = v.module_path()
        read.add(path)
        return make_call(composer, rng, "read_file", {"path": path}), ""
    if call.tool == "search_code":
        query = f"def {v.func_name()}|{v.class_name()}\\("
        return make_call(composer, rng, "search_code", {"query": query, "max_results": 50}), f"rg -n '{query}'"
    if call.tool == "run_tests":
        target = f"tests/{v.noun()}/test_{v.noun()}.py"
        return make_call(composer, rng, "run_tests", {"target": target}), f"$ pytest {target}"
    if call.tool == "list_dir":
        folder = v.module_path().rsplit("/", 1)[0]
        return make_call(composer, rng, "list_dir", {"path": folder, "depth": 2}), f"$ tree -L 2 {folder}"
    if call.tool == "run_command":
        command = f"pytest -q tests/{v.noun()}/test_{v.noun()}.py"
        return make_call(composer, rng, "run_command", {"command": command}), f"$ {command}"
    # apply_patch: an edit of a module of its own, written as a diff that applies to it
    size = call.diff.draw(rng)
    path = v.module_path()
    code = composer.fill("code", 4 * size, rng).text  # room for the edits a diff of `size` tokens holds
    patch = make_patch(v, path, code, composer.chars_for(size, "code"))
    made = make_call(composer, rng, "apply_patch", {"path": patch.path, "patch": patch.diff})
    return made, patch_summary(patch).removesuffix("\n")


# Bounds for the up-front window check: a header is at most one token a byte (and the newline), and a tool's own
# header line (a command, a path) is within a call's bound
def block_bound(block: Block) -> int:
    return block.tokens.hi + len(block.header.encode()) + 1


def added_bound(step: Step) -> int:
    return sum(block_bound(b) + (_LEAST_BODY if b.header else 0) for b in step.add)  # added() keeps a body


def answer_bound(step: Step) -> int:
    """The most tokens the step's answer can record: its text, or its calls (a diff is cut near its draw, so twice
    that bounds it)."""
    if step.text is not None:
        return block_bound(step.text)
    return sum(CALL_TOKENS_BOUND + 2 * c.diff.hi for c in step.calls)


def history_bound(step: Step) -> int:
    """The most tokens the step's answer adds to the next request: the answer and its calls' results."""
    return answer_bound(step) + sum(block_bound(c.result) + CALL_TOKENS_BOUND for c in step.calls)


def max_tokens(step: Step) -> int:
    """What inference-perf sends as max_tokens for the step's request: the recorded answer, or for tool calls
    max(4 x recorded, TOOL_CALL_MIN_MAX_TOKENS) (spec.py)."""
    if step.text is not None:
        return block_bound(step.text)
    return max(TOOL_CALL_MIN_MAX_TOKENS, 4 * answer_bound(step))
