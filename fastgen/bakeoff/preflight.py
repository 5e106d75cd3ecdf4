"""What the bakeoff checks of the server once, before the first config, so that what would spoil every run is said
up front and not found in the report:

- a named tool_choice held: one short streamed request with two small tools that forces the second; the tool called
  must be it. The replay forces a tool on every tool-call turn (inference-perf sends the trace's tool as a named
  tool_choice), and an engine that answers another tool's name replays another conversation than its rival. A wrong
  name, a text answer or an HTTP 400 stops the bakeoff with the engine's fix (Engine.tool_choice_fix); --no-tool-check
  skips it (a server or dataset without tool calls).
- cached tokens reported: the reset probe's prompt sent twice; none cached the second time is a warning naming
  Engine.cache_report_flag (every hit ratio would read 0).
- /metrics served: a 404 (SGLang without --enable-metrics) is a warning, and the runs go on without KV usage, the
  engine's counters, the restart check by process start, or a wait until idle before each reset (the reset then
  relies on the engine's own wait). Any other failure is left to the runs: a /metrics that answered here and fails
  while waiting for idle stays an error (reset.wait_idle).

The results go into each run's identity.server (Preflight.record: null where not checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import ServerError
from .reset import PROBE_MARKER, PROBE_PROMPT
from .server import LiveServer, fetch

__all__ = ["FORCED_TOOL", "Preflight", "TOOL_PROBE_PROMPT", "TOOL_PROBE_TOOLS", "check_server", "check_tool_choice"]

TOOL_PROBE_PROMPT = f"{PROBE_MARKER} (tool choice): run the tests of the parser module."
TOOL_PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the tests of one module.",
            "parameters": {"type": "object", "properties": {"module": {"type": "string"}}, "required": ["module"]},
        },
    },
]
FORCED_TOOL = "run_tests"  # the second tool: a server that ignores the choice most likely calls the first
TOOL_PROBE_MAX_TOKENS = 64


@dataclass(frozen=True)
class Preflight:
    metrics_served: bool  # False: GET /metrics answered 404
    cached_tokens_reported: Optional[bool]  # None: the probe got no answer
    tool_choice_held: Optional[bool]  # None: not checked (--no-tool-check); never False (the bakeoff stops)
    warnings: tuple[str, ...] = ()  # one line each, said once before the first config

    def record(self) -> dict:
        """The fields it adds to a run's identity.server."""
        return {
            "metrics_served": self.metrics_served,
            "cached_tokens_reported": self.cached_tokens_reported,
            "tool_choice_held": self.tool_choice_held,
        }


def check_server(server: LiveServer, model: str, *, tool_check: bool = True) -> Preflight:
    """Check the server before the first config. Raises ServerError when it does not hold a named tool_choice."""
    warnings = []
    metrics = _metrics_served(server)
    if not metrics:
        fix = (
            f"restart it with {server.engine.metrics_flag} to have them"
            if server.engine.metrics_flag
            else "is --url the engine itself, not a proxy in front of it?"
        )
        warnings.append(
            f"{server.url} serves no /metrics (HTTP 404): the runs go on without KV usage, the engine's "
            f"counters, a restart check or a wait until idle before each reset (resets rely on the "
            f"engine's own wait); {fix}"
        )
    held = check_tool_choice(server, model) if tool_check else None
    reported = _cached_tokens_reported(server, model)
    if reported is False:
        warnings.append(
            f"a probe prompt sent twice got no cached tokens the second time: {server.url} does not "
            f"report them (restart it with {server.engine.cache_report_flag}) or caches no prefixes; "
            f"every hit ratio of these runs would read 0"
        )
    return Preflight(metrics, reported, held, tuple(warnings))


def _metrics_served(server: LiveServer) -> bool:
    try:
        return fetch(server.url + "/metrics").status != 404
    except OSError:
        return True  # not told here: the runs meet it


def _cached_tokens_reported(server: LiveServer, model: str) -> Optional[bool]:
    try:
        server.chat_usage(model, PROBE_PROMPT)
        return bool(server.chat_usage(model, PROBE_PROMPT).cached_tokens)
    except ServerError:
        return None


def check_tool_choice(server: LiveServer, model: str) -> bool:
    answer = server.forced_tool_call(
        model, TOOL_PROBE_PROMPT, TOOL_PROBE_TOOLS, FORCED_TOOL, max_tokens=TOOL_PROBE_MAX_TOKENS
    )
    if answer.status == 200 and answer.name == FORCED_TOOL:
        return True
    fix = f"{server.engine.tool_choice_fix}; or pass --no-tool-check if the dataset has no tool calls"
    if answer.status == 200:
        got = f"a call of {answer.name!r}" if answer.name else "text, no tool call"
        raise ServerError(
            f"{server.url} did not hold a named tool_choice: a request forcing {FORCED_TOOL!r} of two "
            f"tools was answered with {got}; {fix}"
        )
    if answer.status == 400:
        raise ServerError(f"{server.url} refused a named tool_choice (HTTP 400: {answer.text}); {fix}")
    raise ServerError(
        f"POST {server.url}/v1/chat/completions forcing a tool answered HTTP {answer.status} "
        f"({answer.text}); pass --no-tool-check to go on without the tool-choice check"
    )
