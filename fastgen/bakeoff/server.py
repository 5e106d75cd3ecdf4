"""The live server, over plain HTTP: does it answer, which engine and model does it serve, empty its prefix cache,
read its `/metrics` and its info endpoint, send it one short chat request, or one that forces a tool. The standard
library's urllib is enough for these few short calls.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional

from ..engine_endpoints import ENGINES, Engine, engine_named
from ..errors import ServerError

__all__ = ["ChatUsage", "LiveServer", "RESET_WAIT_S", "START_WAIT_S", "ToolAnswer", "fetch", "probe_server"]

TIMEOUT_S = 10.0
RESET_WAIT_S = 30.0  # the longest an engine that waits for idle itself is asked to wait per reset
START_WAIT_S = 600.0  # SGLang's own default limit on its startup warmup request (SGLANG_WARMUP_TIMEOUT)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


@dataclass(frozen=True)
class ChatUsage:
    """What a chat response's usage says: its prompt tokens and, where the server reports them, the cached ones."""

    prompt_tokens: Optional[int]
    cached_tokens: Optional[int]  # None: no prompt_tokens_details (nothing cached, or cached tokens not reported)


def fetch(url: str, *, method: str = "GET", timeout_s: float = TIMEOUT_S, json_body: Optional[dict] = None) -> Response:
    """One HTTP request; an HTTP error status is a Response, a connection failure is an OSError."""
    data = json.dumps(json_body).encode() if json_body is not None else (b"" if method == "POST" else None)
    headers = {"Content-Type": "application/json"} if json_body is not None else {}
    request = urllib.request.Request(url, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return Response(answer.status, answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return Response(exc.code, exc.read())


@dataclass(frozen=True)
class LiveServer:
    url: str  # base URL, no trailing slash
    engine: Engine
    models: tuple[str, ...]

    def answers(self) -> bool:
        """Whether the server still answers /v1/models (after a config: did it die meanwhile?)."""
        try:
            return fetch(self.url + "/v1/models", timeout_s=5).status == 200
        except OSError:
            return False

    def starting(self) -> bool:
        """Whether the engine says it is still starting (its ready_path answers 503). Any other answer, or none,
        is not told here: the checks and runs after it meet a server that does not serve."""
        if self.engine.ready_path is None:
            return False
        try:
            return fetch(self.url + self.engine.ready_path, timeout_s=TIMEOUT_S).status == 503
        except OSError:
            return False

    def wait_started(self, *, timeout_s: float = START_WAIT_S, poll_s: float = 1.0) -> None:
        """Wait until the engine has finished starting, so that no request of its own (SGLang's warmup) runs into
        the first run's counters. Raises ServerError when it still says starting after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while self.starting():
            if time.monotonic() > deadline:
                raise ServerError(
                    f"GET {self.url}{self.engine.ready_path} still answers 503 (starting) after {timeout_s:g} s; "
                    f"see the {self.engine.name} log for why its startup has not finished, then run again"
                )
            time.sleep(poll_s)

    def info(self) -> dict:
        """The JSON of the engine's info endpoint (vLLM's GET /version, SGLang's GET /get_server_info); {} when it
        does not answer one (an older server, a router in front)."""
        try:
            answer = fetch(self.url + self.engine.info_path, timeout_s=5)
            document = json.loads(answer.body) if answer.status == 200 else {}
        except (OSError, ValueError):
            return {}
        return document if isinstance(document, dict) else {}

    def chat_usage(self, model: str, prompt: str, timeout_s: float = 60.0) -> ChatUsage:
        """Send one non-streaming chat request (`prompt` as the user's message, one output token) and read its
        usage. Raises ServerError when it gets no answer or an HTTP error."""
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1, "stream": False}
        try:
            answer = fetch(self.url + "/v1/chat/completions", method="POST", json_body=body, timeout_s=timeout_s)
        except OSError as exc:
            raise ServerError(f"POST {self.url}/v1/chat/completions failed: {_reason(exc)}") from None
        if answer.status != 200:
            raise ServerError(f"POST {self.url}/v1/chat/completions answered HTTP {answer.status}")
        try:
            usage = json.loads(answer.body).get("usage") or {}
        except (ValueError, AttributeError):
            raise ServerError(f"POST {self.url}/v1/chat/completions did not answer a chat completion") from None
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return ChatUsage(usage.get("prompt_tokens"), None if cached is None else int(cached))

    def metrics_text(self, timeout_s: float = TIMEOUT_S) -> str:
        answer = fetch(self.url + "/metrics", timeout_s=timeout_s)
        if answer.status != 200:
            raise ServerError(f"GET {self.url}/metrics answered HTTP {answer.status}")
        return answer.body.decode("utf-8", "replace")

    def reset_prefix_cache(self, *, wait_s: float = 120.0, poll_s: float = 0.5) -> str:
        """Ask the server to empty its prefix cache; returns what was done (for the run record). An engine that can
        wait for idle itself is asked to (SGLang: POST /flush_cache?timeout=S, at most RESET_WAIT_S a request). A
        server still busy with requests (SGLang answers 400, vLLM {"success": false}) is asked again until it is
        idle or wait_s has passed. A 2xx answer does not prove the cache is empty (vLLM answers an empty 200
        whatever it did): the bakeoff verifies with a probe (reset.py)."""
        what = f"POST {self.engine.reset_path}"
        deadline = time.monotonic() + wait_s
        while True:
            url, timeout_s = self.url + self.engine.reset_path, TIMEOUT_S
            if self.engine.reset_wait_query:
                engine_wait = round(min(RESET_WAIT_S, max(0.0, deadline - time.monotonic())), 1)
                url, timeout_s = f"{url}?{self.engine.reset_wait_query}={engine_wait:g}", engine_wait + TIMEOUT_S
            try:
                answer = fetch(url, method="POST", timeout_s=timeout_s)
            except OSError as exc:
                raise ServerError(f"{what} at {self.url} failed: {_reason(exc)}") from None
            if 200 <= answer.status < 300 and not _refused(answer.body):
                return what
            if answer.status in (404, 405):
                raise ServerError(f"{self.url} has no {what} (HTTP {answer.status}): {self.engine.reset_hint}")
            busy = answer.status == self.engine.busy_status or 200 <= answer.status < 300
            if busy and time.monotonic() < deadline:
                time.sleep(poll_s)
                continue
            detail = answer.body.decode("utf-8", "replace").strip().splitlines()[:1]
            raise ServerError(
                f"{what} at {self.url} answered HTTP {answer.status}"
                + (f" ({detail[0][:200]})" if detail else "")
                + "; is a request still running? pass --no-reset to go on without it"
            )

    def forced_tool_call(
        self, model: str, prompt: str, tools: list[dict], forced: str, *, max_tokens: int = 64, timeout_s: float = 120.0
    ) -> ToolAnswer:
        """Send one streamed chat request that forces tool `forced` (a named tool_choice) and read the name of the
        tool it calls, stopping at the first one. Streamed, because the name comes first: SGLang drops a call that
        did not close within max_tokens from a whole answer (a random model never closes one). Raises ServerError
        when it gets no answer."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": forced}},
            "max_tokens": max_tokens,
            "stream": True,
        }
        where = f"POST {self.url}/v1/chat/completions"
        request = urllib.request.Request(
            self.url + "/v1/chat/completions",
            method="POST",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                if "text/event-stream" not in (answer.headers.get("Content-Type") or ""):
                    return ToolAnswer(answer.status, *_called(json.loads(answer.read())))
                text = ""
                for line in answer:  # SSE: "data: {chunk}" lines, "data: [DONE]" at the end
                    line = line.decode("utf-8", "replace").strip()
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    name, said = _called(json.loads(line[5:]))
                    if name:
                        return ToolAnswer(answer.status, name, "")
                    text += said
                return ToolAnswer(answer.status, None, text)
        except urllib.error.HTTPError as exc:
            with exc:
                detail = exc.read().decode("utf-8", "replace")
            return ToolAnswer(exc.code, None, _error_message(detail))
        except OSError as exc:
            raise ServerError(f"{where} failed: {_reason(exc)}") from None
        except (ValueError, AttributeError, TypeError):
            raise ServerError(f"{where} did not answer a chat completion") from None


@dataclass(frozen=True)
class ToolAnswer:
    """What a request that forced a tool got: its HTTP status, the name of the tool called (None: no call), and
    the text answered instead or the error's message."""

    status: int
    name: Optional[str]
    text: str


def _called(document: dict) -> tuple[Optional[str], str]:
    """(the first tool name, the text) of a chat completion or one streamed chunk of it."""
    name, text = None, ""
    for choice in document.get("choices") or []:
        message = choice.get("message") or choice.get("delta") or {}
        text += message.get("content") or ""
        for call in message.get("tool_calls") or []:
            name = name or (call.get("function") or {}).get("name") or None
    return name, text


def _error_message(body: str) -> str:
    """The message of an OpenAI-style error body ({"message": ...} or {"error": {"message": ...}}), else the body."""
    try:
        document = json.loads(body)
        message = document.get("message") or (document.get("error") or {}).get("message")
    except (ValueError, AttributeError):
        message = None
    return " ".join(str(message or body).split())[:200]


def _refused(body: bytes) -> bool:
    """vLLM answers 200 with {"success": false} when running requests still hold blocks, and resets nothing."""
    try:
        return json.loads(body).get("success") is False
    except (ValueError, AttributeError):
        return False


def _reason(exc: OSError) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(getattr(reason, "strerror", None) or reason)


def probe_server(url: str, model: str, engine: Optional[str] = None) -> LiveServer:
    """Check that `url` answers and serves `model`, and tell which engine it is (unless `engine` names it)."""
    url = url.rstrip("/")
    try:
        answer = fetch(url + "/v1/models")
    except OSError as exc:
        raise ServerError(f"cannot reach {url}: {_reason(exc)}; start the server, or fix --url") from None
    if answer.status != 200:
        raise ServerError(
            f"GET {url}/v1/models answered HTTP {answer.status}; is --url the server's base URL (without /v1)?"
        )
    try:
        entries = json.loads(answer.body)["data"]
        models = tuple(str(e["id"]) for e in entries)
        owners = {str(e.get("owned_by", "")) for e in entries}
    except (ValueError, KeyError, TypeError):
        raise ServerError(
            f"GET {url}/v1/models did not answer an OpenAI model list; is --url an OpenAI-compatible server?"
        ) from None
    if model not in models:
        served = ", ".join(models) or "no model"
        raise ServerError(
            f"{url} serves {served}, the configs ask for {model}; start the server with "
            f"--served-model-name {model}, or regenerate the configs with --model {models[0] if models else 'NAME'}"
        )
    if engine is not None:
        return LiveServer(url, engine_named(engine), models)
    return LiveServer(url, _detect(url, owners), models)


def _detect(url: str, owners: set[str]) -> Engine:
    for candidate in ENGINES.values():
        if candidate.model_owner in owners:
            return candidate
    try:  # an owner we do not know: the metric names tell
        text = fetch(url + "/metrics").body.decode("utf-8", "replace")
    except OSError:
        text = ""
    for candidate in ENGINES.values():
        if f"\n{candidate.name}:" in "\n" + text:
            return candidate
    raise ServerError(
        f"cannot tell which engine serves {url} (owned_by {', '.join(sorted(owners)) or 'empty'}, no "
        f"known /metrics names); pass --engine {' or --engine '.join(ENGINES)}"
    )
