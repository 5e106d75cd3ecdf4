"""A small OpenAI-compatible chat-completions server for the e2e replay, on loopback only.

    python -m e2e.engines.server --port 0 --tokenizer DIR [--record FILE] [--model NAME] [--flavour vllm|sglang]
        [--kv-capacity TOKENS] [--prefill-us-per-token US] [--no-reset-endpoint] [--die-after N]
        [--fail-every N] [--restart-after N] [--reset-keeps-cache] [--output-scale F] [--ignore-tool-choice]
        [--no-metrics] [--warmup S] [--jitter-ms MS] [--seed N]

prints the port it bound on stdout, then serves `GET /v1/models`, `POST /v1/chat/completions` (streaming SSE
with `stream_options.include_usage`, or one JSON response), `GET /metrics`, the flavour's reset endpoint and its
version endpoint (`GET /version` for vLLM, `GET /get_server_info` for SGLang; fake_engine.py) and `GET /health`
until interrupted. In-process, `ServerThread` runs the same app on a background thread: `start()`
returns the port, `records` holds what it saw, `reset()` empties the records and the prefix cache between runs,
`stop()` ends it.

Every chat request is recorded with its receive time (`time.time()`), its body and the answer it got, in memory
and, with --record, as one JSON line each: the checks compare what inference-perf sent with what it was answered.
Resets through the endpoint are recorded too (`{"event": "reset", ...}`), in `events` and in the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

from aiohttp import web

from .fake_engine import FLAVOURS, VERSIONS, EngineProfile, EngineState
from .model import Answer, FakeModel, load_tokenizer
from ..checks.traces import recorded_answers

__all__ = ["DEFAULT_MODEL", "Recorder", "ServerThread", "make_app", "main"]

DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"  # fastgen's default --model
HOST = "127.0.0.1"  # loopback only: this server answers anyone and checks nothing
_ARGUMENT_PIECE = 24  # characters of tool-call arguments per streamed delta
UNLIMITED = 1 << 30  # the scheduler limits it reports: none (it admits every request as it arrives)


class Recorder:
    """Requests seen, in arrival order; also appended to a JSON-lines file when one is given."""

    def __init__(self, path: Optional[Path] = None) -> None:
        self.records: list[dict] = []
        self.events: list[dict] = []  # resets
        self._file = open(path, "a", encoding="utf-8") if path else None

    def add(self, record: dict) -> None:
        (self.events if "event" in record else self.records).append(record)
        if self._file:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()


def make_app(model: FakeModel, *, model_name: str, recorder: Recorder, state: EngineState) -> web.Application:
    profile = state.profile

    async def models(_request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": profile.flavour}],
            }
        )

    async def chat(request: web.Request) -> web.StreamResponse:
        received = time.time()
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not JSON")
        record = {"t": received, "body": body}
        if state.should_fail():
            recorder.add({**record, "status": 500, "error": "fail_every"})
            return _error(500, "Internal server error (the fake engine's --fail-every)")
        try:
            if body.get("model") != model_name:
                raise LookupError(f"The model `{body.get('model')}` does not exist.")  # what vLLM says
            answer = model.answer(body)
        except (LookupError, ValueError) as exc:
            status = 404 if isinstance(exc, LookupError) else 400
            recorder.add({**record, "status": status, "error": str(exc)})
            return _error(status, str(exc))
        prompt, cached = answer.usage["prompt_tokens"], answer.usage["prompt_tokens_details"]["cached_tokens"]
        if (profile.null_zero_details and cached == 0) or not profile.cache_report:
            answer.usage["prompt_tokens_details"] = None
        answered = {
            **record,
            "status": 200,
            "response": {"message": answer.message, "finish_reason": answer.finish_reason, "usage": answer.usage},
        }
        recorder.add(answered)
        try:
            await state.prefill(prompt - cached)
        except BaseException:  # the client went away while it waited
            state.cache.release(answer.hold)
            raise
        try:
            if body.get("stream"):
                return await _stream(request, body, answer, model_name)
            return web.json_response(_completion(answer, model_name))
        finally:
            answered["t_done"] = time.time()  # the answer is out (in memory only: the file has the record already)
            state.cache.release(answer.hold)
            state.finished(prompt, answer.usage["completion_tokens"])
            state.maybe_restart()
            if profile.die_after is not None and state.answered >= profile.die_after:
                asyncio.get_running_loop().call_later(0.05, os._exit, 3)  # as a crashed engine: no goodbye

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=state.metrics_text(), content_type="text/plain", charset="utf-8")

    async def reset(request: web.Request) -> web.Response:
        # As the engines answer while requests run: SGLang refuses with 400, unless asked to wait for idle
        # (?timeout=S: up to S seconds, then 400 "Timed out waiting for idle state."); vLLM says 200
        # {"success": false} and resets nothing. `done` in the record says whether the cache was emptied.
        event = {"event": "reset", "t": time.time(), "path": profile.reset_path}
        if profile.reset_keeps_cache:  # vLLM's answer, whatever it did: an empty 200
            recorder.add({**event, "status": 200, "done": False})
            return web.Response(status=200)
        wait_s = 0.0
        if profile.flavour == "sglang" and "timeout" in request.query:
            try:
                wait_s = float(request.query["timeout"])
            except ValueError:
                return _error(422, "timeout is not a number")
            event["timeout"] = wait_s
            deadline = time.monotonic() + wait_s
            while state.busy and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        if state.busy:
            status = 400 if profile.flavour == "sglang" else 200
            recorder.add({**event, "status": status, "done": False})
            if profile.flavour == "sglang":
                return web.Response(
                    status=400,
                    text="Timed out waiting for idle state."
                    if wait_s
                    else "Cache not flushed because there are pending requests.\n",
                )
            return web.json_response({"success": False})
        state.cache.clear()
        recorder.add({**event, "status": 200, "done": True})
        if profile.flavour == "sglang":
            return web.Response(text="Cache flushed.\nPlease check backend logs for more details.\n")
        return web.json_response({"success": True})

    async def health(_request: web.Request) -> web.Response:  # both engines serve it; SGLang 503 while starting
        return web.Response(status=503 if state.warming_up else 200)

    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"version": VERSIONS["vllm"]})

    async def server_info(_request: web.Request) -> web.Response:  # SGLang's: server args and scheduler state
        return web.json_response(
            {
                "model_path": model_name,
                "page_size": state.cache.block_size,
                "max_total_num_tokens": profile.exported_capacity_tokens,
                "version": VERSIONS["sglang"],
                # its scheduler as SGLang names it: no chunking, no request limit (it admits every request at once)
                "chunked_prefill_size": -1,
                "max_prefill_tokens": UNLIMITED,
                "schedule_policy": "fcfs",
                "max_running_requests": None,
                "internal_states": [{"effective_max_running_requests_per_dp": UNLIMITED}],
            }
        )

    async def vllm_server_info(_request: web.Request) -> web.Response:  # vLLM's, in dev mode (?config_format=json)
        blocks = profile.exported_capacity_tokens // state.cache.block_size
        return web.json_response(
            {
                "vllm_config": {
                    "scheduler_config": {
                        "max_num_batched_tokens": UNLIMITED,
                        "max_num_seqs": UNLIMITED,
                        "enable_chunked_prefill": True,
                        "policy": "fcfs",
                        "long_prefill_token_threshold": 0,
                        "scheduler_reserve_full_isl": False,
                        "watermark": 0.0,
                        "async_scheduling": False,
                    },
                    "cache_config": {
                        "block_size": state.cache.block_size,
                        "num_gpu_blocks": blocks,
                        "enable_prefix_caching": True,
                    },
                },
                "vllm_env": {},
                "system_env": {},
            }
        )

    app = web.Application(client_max_size=256 * 1024 * 1024)  # scenario 3 prompts run to ~0.5 MB unscaled
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    if profile.flavour == "vllm":
        app.router.add_get("/version", version)
        if profile.reset_endpoint:  # VLLM_SERVER_DEV_MODE serves both
            app.router.add_get("/server_info", vllm_server_info)
    else:
        app.router.add_get("/get_server_info", server_info)
    app.router.add_post("/v1/chat/completions", chat)
    if profile.metrics_endpoint:
        app.router.add_get("/metrics", metrics)
    if profile.reset_endpoint:
        app.router.add_post(profile.reset_path, reset)
        if profile.flavour == "sglang":
            app.router.add_get(profile.reset_path, reset)
    return app


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"object": "error", "message": message, "code": status}, status=status)


def _completion(answer: Answer, model_name: str) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "usage": answer.usage,
        "choices": [{"index": 0, "message": answer.message, "finish_reason": answer.finish_reason}],
    }


def _deltas(answer: Answer):
    """The assistant message as OpenAI streams it: role first, then the text one token at a time or the call."""
    yield {"role": "assistant", "content": ""}
    for piece in answer.pieces:
        yield {"content": piece}
    for index, call in enumerate(answer.message.get("tool_calls") or []):
        fn = call["function"]
        yield {
            "tool_calls": [
                {
                    "index": index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": fn["name"], "arguments": ""},
                }
            ]
        }
        args = fn["arguments"]
        for start in range(0, len(args), _ARGUMENT_PIECE):
            yield {"tool_calls": [{"index": index, "function": {"arguments": args[start : start + _ARGUMENT_PIECE]}}]}


async def _stream(request: web.Request, body: dict, answer: Answer, model_name: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model_name,
    }

    async def send(payload) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        await response.write(f"data: {text}\n\n".encode())
        await asyncio.sleep(0)  # one chunk per loop turn, like a server decoding token by token

    for delta in _deltas(answer):
        await send({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    await send({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": answer.finish_reason}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        await send({**head, "choices": [], "usage": answer.usage})
    await send("[DONE]")
    await response.write_eof()
    return response


class ServerThread:
    """The app on a background thread with its own event loop, for tests and the e2e runner."""

    def __init__(
        self,
        tokenizer_dir: str | Path,
        *,
        model_name: str = DEFAULT_MODEL,
        port: int = 0,
        record: Optional[Path] = None,
        profile: EngineProfile = EngineProfile(),
        answers_from: Optional[Path] = None,
        fresh_call_ids: bool = False,
    ) -> None:
        self.state = EngineState(profile, model_name)
        recorded = recorded_answers(answers_from) if answers_from else None
        self.model = FakeModel(
            load_tokenizer(str(tokenizer_dir)),
            cache=self.state.cache,
            recorded=recorded,
            fresh_call_ids=fresh_call_ids,
            output_scale=profile.output_scale,
            ignore_tool_choice=profile.ignore_tool_choice,
        )
        self.recorder = Recorder(record)
        self.model_name, self.port = model_name, port
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def records(self) -> list[dict]:
        return self.recorder.records

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> int:
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                runner = self._loop.run_until_complete(self._listen())
            except BaseException as exc:  # surfaced in start(), not lost on the thread
                failure.append(exc)
                started.set()
                return
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="e2e-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self.port

    async def _listen(self) -> web.AppRunner:
        app = make_app(self.model, model_name=self.model_name, recorder=self.recorder, state=self.state)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, HOST, self.port)
        await site.start()
        self.port = runner.addresses[0][1]
        return runner

    def reset(self) -> None:
        """Forget every prompt and record: call between runs, with no request in flight."""

        async def clear() -> None:  # on the server's loop, so no handler sees half a reset
            self.model.cache.clear()
            self.recorder.records.clear()

        if self._loop:
            asyncio.run_coroutine_threadsafe(clear(), self._loop).result()

    def stop(self) -> None:
        if self._loop and self._thread:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self.recorder.close()

    def __enter__(self) -> "ServerThread":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.engines.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port, printed on stdout)")
    p.add_argument("--tokenizer", required=True, help="tokenizer folder, e.g. the dataset's traces/tokenizer")
    p.add_argument("--model", default=DEFAULT_MODEL, help="the model name to serve (fastgen's --model)")
    p.add_argument("--record", type=Path, help="append every chat request, and its answer, to this JSON-lines file")
    p.add_argument("--flavour", choices=FLAVOURS, default="vllm", help="the engine to imitate: /metrics, reset")
    p.add_argument("--kv-capacity", type=int, help="KV cache size in tokens, LRU past it (unset: never evicts)")
    p.add_argument(
        "--prefill-us-per-token",
        type=float,
        default=0.0,
        help="microseconds of prefill per uncached prompt token, one prefill at a time",
    )
    p.add_argument("--no-reset-endpoint", action="store_true", help="serve no reset endpoint (vLLM without dev mode)")
    p.add_argument("--die-after", type=int, help="exit after answering this many chat requests")
    p.add_argument("--no-cache-report", action="store_true", help="send no cached-token counts at all")
    p.add_argument(
        "--answers-from",
        type=Path,
        metavar="TRACES",
        help="answer each request with its span's recorded output (a dataset folder), so the replay "
        "sends the recorded prompts byte for byte",
    )
    p.add_argument(
        "--null-zero-details",
        action="store_true",
        help="prompt_tokens_details null when nothing was cached, as vLLM and SGLang answer",
    )
    p.add_argument("--fail-every", type=int, metavar="N", help="answer every Nth chat request with HTTP 500")
    p.add_argument(
        "--restart-after",
        type=int,
        metavar="N",
        help="after N answered chat requests, act as a "
        "restarted engine: a new process_start_time_seconds, an empty cache, counters from zero",
    )
    p.add_argument(
        "--reset-keeps-cache", action="store_true", help="the reset endpoint answers an empty 200 and empties nothing"
    )
    p.add_argument(
        "--output-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="text answers of F times the usual length (at least 1 token): engines that differ in output",
    )
    p.add_argument(
        "--ignore-tool-choice",
        action="store_true",
        help="answer a named tool_choice with another of the request's tools (SGLang 0.5.23 with hermes)",
    )
    p.add_argument("--no-metrics", action="store_true", help="serve no /metrics (SGLang without --enable-metrics)")
    p.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        metavar="S",
        help="answer GET /health 503 for S seconds after the start, then count a warmup request (SGLang's startup)",
    )
    p.add_argument(
        "--jitter-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="add to every prefill a random wait, exponential with this mean (two such engines differ by chance)",
    )
    p.add_argument("--seed", type=int, default=0, help="the seed of the jitter's generator")
    args = p.parse_args(argv)
    profile = EngineProfile(
        flavour=args.flavour,
        kv_capacity_tokens=args.kv_capacity,
        prefill_s_per_token=args.prefill_us_per_token / 1e6,
        reset_endpoint=not args.no_reset_endpoint,
        die_after=args.die_after,
        null_zero_details=args.null_zero_details,
        cache_report=not args.no_cache_report,
        fail_every=args.fail_every,
        restart_after=args.restart_after,
        reset_keeps_cache=args.reset_keeps_cache,
        output_scale=args.output_scale,
        ignore_tool_choice=args.ignore_tool_choice,
        metrics_endpoint=not args.no_metrics,
        warmup_s=args.warmup,
        jitter_s=args.jitter_ms / 1000.0,
        seed=args.seed,
    )
    server = ServerThread(
        args.tokenizer,
        model_name=args.model,
        port=args.port,
        record=args.record,
        profile=profile,
        answers_from=args.answers_from,
    )
    print(server.start(), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
