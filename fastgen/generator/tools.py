"""The tool catalog: real flat-format JSON-schema tools, sized to a token budget, serialized once.

Flat form `{type, name, description, parameters}` is what lets inference-perf send a named `tool_choice` on a
single-call turn (the nested OpenAI form gets `"required"`). The catalog is the same string on every span of a
scenario, because chat templates render it at the top of the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import orjson

from .content.english import fix_articles, plural
from .content.vocab import Vocab
from ..formats.tokenizer import Tokenizer

__all__ = ["ToolCatalog", "build_catalog", "CORE_TOOLS", "DELEGATE"]

CORE_TOOLS = ("apply_patch", "read_file", "run_tests", "search_code", "list_dir", "run_command")


@dataclass(frozen=True)
class ToolCatalog:
    tools: tuple[dict, ...]
    json: str  # exactly what goes into gen_ai.tool.definitions
    tokens: int  # tokens of `json`

    @cached_property
    def escaped(self) -> bytes:
        """The attribute value as a JSON string, escaped once: spliced into every span as is."""
        return orjson.dumps(self.json)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t["name"] for t in self.tools)


def _prop(kind: str, description: str, **extra) -> dict:
    return {"type": kind, "description": description, **extra}


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


def _core_tools(repo: str) -> list[dict]:
    return [
        _tool(
            "apply_patch",
            f"Apply a unified diff to one file of the {repo} repository. The patch must apply "
            "cleanly against the current file; context lines are matched exactly.",
            {
                "path": _prop("string", f"Path of the file, relative to the root of {repo}."),
                "patch": _prop("string", "The unified diff, with ---/+++ headers and @@ hunks."),
            },
            ["path", "patch"],
        ),
        _tool(
            "read_file",
            f"Read a file of {repo}, optionally a range of lines. Returns the text with line numbers.",
            {
                "path": _prop("string", "Path relative to the repository root."),
                "start_line": _prop("integer", "First line to return (1-based)."),
                "end_line": _prop("integer", "Last line to return (inclusive)."),
            },
            ["path"],
        ),
        _tool(
            "run_tests",
            "Run pytest on a file, folder or node id and return its output.",
            {
                "target": _prop("string", "A test path or node id such as tests/test_x.py::test_y."),
                "keyword": _prop("string", "Only run tests matching this -k expression."),
                "fail_fast": _prop("boolean", "Stop at the first failure (-x)."),
            },
            ["target"],
        ),
        _tool(
            "search_code",
            "Search the repository with a regular expression and return matching lines.",
            {
                "query": _prop("string", "A ripgrep regular expression."),
                "path_glob": _prop("string", "Only search files matching this glob."),
                "max_results": _prop("integer", "Maximum number of matches to return."),
            },
            ["query"],
        ),
        _tool(
            "list_dir",
            "List a directory of the repository, recursively up to a depth.",
            {
                "path": _prop("string", "Directory relative to the repository root."),
                "depth": _prop("integer", "How many levels to descend."),
            },
            ["path"],
        ),
        _tool(
            "run_command",
            "Run a shell command in the repository sandbox and return stdout and stderr.",
            {
                "command": _prop("string", "The command line to run."),
                "cwd": _prop("string", "Working directory relative to the repository root."),
                "timeout_s": _prop("integer", "Seconds before the command is killed."),
            },
            ["command"],
        ),
    ]


DELEGATE = "delegate_task"


def _delegate_tool(repo: str) -> dict:
    """A harness's sub-agent tool (Claude Code's Task, Codex's spawn): the prompt becomes a child's first message."""
    return _tool(
        DELEGATE,
        f"Start a sub-agent with a fresh context and the {repo} tools to do one self-contained task, such as a "
        "search across the code or a root-cause hunt. Several calls in one answer run side by side. Returns the "
        "sub-agent's final report; it cannot see this conversation, so the prompt must say everything it needs.",
        {
            "description": _prop("string", "A short (3-5 word) name for the task."),
            "prompt": _prop("string", "The task for the sub-agent, in full."),
        },
        ["description", "prompt"],
    )


def _service_tool(v: Vocab) -> dict:
    """An internal-service tool, as an MCP server of a company would expose it."""
    noun, other = v.noun(), v.noun()
    name = f"{v.team()}_{v.verb()}_{noun}"
    props = {
        f"{noun}_id": _prop("string", f"Identifier of the {noun}, as shown in the {v.team()} console."),
        other: _prop(
            "string", f"The {v.adjective()} {other} to {v.verb()}.", enum=sorted({v.noun() for _ in range(3)})
        ),
        "limit": _prop("integer", f"Maximum number of {plural(other)} to return (default {v.number(5, 200)})."),
        "include_" + v.adjective(): _prop("boolean", f"Also return {v.adjective()} {plural(noun)}."),
    }
    description = (
        f"{v.verb().capitalize()} the {v.adjective()} {noun} of a {other} through the {v.team()} service. "
        f"Use it before you {v.verb()} a {v.noun()} or when a test mentions `{v.func_name()}`. "
        f"Returns JSON with the {noun}, its {v.noun()} and the {v.noun()} history."
    )
    return _tool(name, fix_articles(description), props, [f"{noun}_id"])


def _dump(tools: list[dict]) -> str:
    return orjson.dumps(tools).decode()


def build_catalog(
    tokenizer: Tokenizer, *, repo: str, budget: int, rng: np.random.Generator, delegate: bool = False
) -> ToolCatalog:
    """The core tools (and the sub-agent tool, with `delegate`) plus seeded service tools, filling `budget` tokens as
    closely as fits (never fewer than the core).

    Tools are added by their own token counts (cheap), then the last tool's description is trimmed by a binary
    search on exact counts of the whole catalog.
    """
    v = Vocab(rng)
    tools = _core_tools(repo) + ([_delegate_tool(repo)] if delegate else [])
    core = len(tools)
    names = {t["name"] for t in tools}
    estimate = sum(tokenizer.count(_dump([t])) for t in tools)
    while estimate < budget:
        tool = _service_tool(v)
        if tool["name"] not in names:
            names.add(tool["name"])
            tools.append(tool)
            estimate += tokenizer.count(_dump([tool]))
    while len(tools) > core and tokenizer.count(_dump(tools[:-1])) > budget:
        tools.pop()
    if len(tools) > core and tokenizer.count(_dump(tools)) > budget:
        last = tools.pop()
        words = last["description"].split(" ")
        lo, hi = 0, len(words)  # the longest prefix of words that keeps the catalog within budget
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if tokenizer.count(_dump(tools + [{**last, "description": " ".join(words[:mid])}])) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            tools.append({**last, "description": " ".join(words[:lo])})
    text = _dump(tools)
    return ToolCatalog(tuple(tools), text, tokenizer.count(text))
