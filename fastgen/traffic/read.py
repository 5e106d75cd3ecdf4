"""Requests read from trace files, reduced to what statistics need: counts, times, the shape of the answer, which
agent of the session sent it, and how many of its prompt tokens an earlier request already sent (within the session,
and in another session). Prompt text is hashed, never kept.

The sources:
- OpenTelemetry GenAI spans, as fastgen writes them and inference-perf reads them: a JSON file `{"spans": [...]}`
  (or a list of spans), each with `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.usage.input_tokens`
  and `output_tokens`, `gen_ai.tool.definitions`, and start and end times (ISO 8601, or `start_time_unix_nano`);
  a file is a session unless its spans carry `gen_ai.conversation.id`, `session.id` or distinct trace ids. Also
  read: OTLP JSON (`resourceSpans` > `scopeSpans` > `spans`, attributes as key/value lists), and a `.jsonl` file of
  one span a line, as the OpenTelemetry SDK's ConsoleSpanExporter writes with a one-line formatter
  (`formatter=lambda span: span.to_json(indent=None) + "\n"`). Only `chat` spans are requests (an agent's own
  span, or a tool's, groups them: its trace id is the session). Where an instrumentation puts the messages in a log
  event instead (`gen_ai.client.inference.operation.details`, as opentelemetry-instrumentation-openai-v2 does with
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only), the SDK's log records, one a line
  (ConsoleLogRecordExporter, the same formatter), may lie in the same `.jsonl` files as the spans or in others
  read with them: an event's messages join the span of its span id. So do the older per-message events (openai-v2
  2.3b0 and earlier: `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message` in order, then `gen_ai.choice`). A chat span with no messages either way (or with message
  events captured without their content) is refused: without them no prefix or step can be followed.
- Mooncake-style JSON lines: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` and, where present,
  `session_id`; without it, sessions are inferred from the hash-id chains (mooncake.py).
- The coding agents' own logs, told by their lines: Claude Code's session files (claude_code.py) and Codex CLI's
  rollout files (codex.py); their calls' prefix sharing is the service's own cache reads, as they record them.

Prefix sharing: a span's prompt is its tool catalog and messages, each message hashed (role, text, calls) into a
chain; the tokens of a shared prefix are the request's input tokens times the share of the prompt's characters the
prefix holds (the estimate inference-perf makes for its segments). A Mooncake line's are its shared hash ids times
the block size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import orjson
import xxhash

from ..errors import FastgenError
from ..formats.rows import DATASET_SUFFIX, dataset_file
from .mooncake import MooncakeError, is_mooncake, mooncake_requests
from .agent_logs import agent_log_form, agent_log_requests
from .logged import Request, TokenCounter, iso_ms

__all__ = ["Request", "TrafficError", "read_traffic"]

_SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "fastgen.session")
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# what a details event adds to its span: the content a span carries too when the instrumentation puts it there
_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions")
_MESSAGE_EVENTS = {  # the older instrumentations' event per prompt message, and the message's role
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE_EVENT = "gen_ai.choice"


class TrafficError(FastgenError):
    """Trace files that cannot be read as traffic: one line naming the file and what is missing."""


@dataclass
class _Raw:
    session: str
    start_ms: float
    end_ms: Optional[float]
    input_tokens: int
    output_tokens: int
    tool_calls: Optional[int]
    subagent: Optional[bool]
    chain: list[int]  # hash of each prefix: tools, then message by message
    sizes: list[int]  # characters of each prefix
    after: Optional[int]  # the chain hash of prompt + answer: what a continuing request's prefix is
    model: str
    block: int = 0  # Mooncake: tokens a chain element stands for


@dataclass
class _Span:
    """A chat span as read, before the log events of other files can be joined to it."""

    path: Path
    span: dict
    attributes: dict
    file_session: str


def read_traffic(
    paths: Iterable[Path],
    *,
    block_size: int = 512,
    count_tokens: Optional[TokenCounter] = None,
    notes: Optional[list[str]] = None,
) -> list[Request]:
    """Every request of the trace files (a folder: its *.json, *.jsonl files, recursively), in start order.
    `count_tokens` counts an agent log's answers where its own counts are placeholders; `notes` gets one line for
    each thing a form read cannot see."""
    files = _files(paths)
    if not files:
        raise TrafficError("no trace files found (give *.json span files or *.jsonl Mooncake lines)")
    raws: list[_Raw] = []
    spans: list[_Span] = []
    content: dict[str, dict] = {}  # span id -> the messages its log events carry
    logs = [p for p in files if agent_log_form(p)]
    logged = agent_log_requests(logs, count_tokens=count_tokens, notes=notes)
    for path in files:
        if path in logs:
            continue
        if is_mooncake(path):
            raws += _mooncake(path, block_size)
        else:
            file_spans, file_content = _spans(path)
            spans += file_spans
            content.update(file_content)
    raws += [_span_request(s.path, s.span, _joined(s, content), s.file_session) for s in spans]
    if logged and raws:
        raise TrafficError("the files mix agents' logs with spans or Mooncake lines; read one form at a time")
    models = sorted({r.model for r in raws if r.model} | {r.model for r in logged if r.model})
    if len(models) > 1:
        raise TrafficError(
            f"the traces mix models ({', '.join(models[:4])}); measure one model's traffic at a time (split the files)"
        )
    raws.sort(key=lambda r: (r.start_ms, r.session))
    return logged if logged else _resolved(raws)


def _files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(
                p
                for p in path.rglob("*")
                if p.suffix in (".json", ".jsonl")
                and p.name not in ("manifest.json", "sessions-index.json")  # sessions-index: Claude Code's
                and not _beside_its_traces(p)
            )
        elif path.exists():
            out.append(path)
        else:
            raise TrafficError(f"{path} does not exist")
    return [p for p in out if "tokenizer" not in p.parts]


def _beside_its_traces(path: Path) -> bool:
    """fastgen's dataset file of a trace directory (rows.py), beside it: the same sessions again (not a Claude Code
    session's file, beside the folder of its sub-agents)."""
    stem = path.name.removesuffix(DATASET_SUFFIX)
    beside = path.name.endswith(DATASET_SUFFIX) and dataset_file(stem) == path.name and (path.parent / stem).is_dir()
    return beside and not (path.parent / stem / "subagents").is_dir()


def _resolved(raws: list[_Raw]) -> list[Request]:
    first_session: dict[int, str] = {}  # prefix hash -> the session that sent it first
    answered: dict[int, int] = {}  # prompt+answer hash -> the request it ends
    first_prompt: dict[str, int] = {}  # session -> its first request's first message hash
    sent: dict[str, set[int]] = {}  # session -> the prefix hashes it sent
    out: list[Request] = []
    for i, r in enumerate(raws):
        reused_at = shared_at = -1
        for k, h in enumerate(r.chain):
            owner = first_session.get(h)
            if owner is None:
                break
            reused_at = k
            if owner != r.session:
                shared_at = k
        own = sent.setdefault(r.session, set())
        own_at = next((k - 1 for k, h in enumerate(r.chain) if h not in own), len(r.chain) - 1)
        follows = None
        for k in range(len(r.chain) - 1, -1, -1):
            j = answered.get(r.chain[k])
            if j is not None and raws[j].session == r.session:
                follows = j
                break
        subagent = r.subagent
        if subagent is None:  # another system prompt than the session's first request's: a sub-agent's
            head = r.chain[1] if len(r.chain) > 1 else 0
            subagent = first_prompt.setdefault(r.session, head) != head
        out.append(
            Request(
                session=r.session,
                start_ms=r.start_ms,
                end_ms=r.end_ms,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                tool_calls=r.tool_calls,
                subagent=subagent,
                reused=_tokens(r, reused_at),
                shared=_tokens(r, shared_at),
                follows=follows,
                model=r.model,
                own=_tokens(r, own_at),
            )
        )
        own.update(r.chain)
        for h in r.chain:
            first_session.setdefault(h, r.session)
        if r.after is not None:
            answered[r.after] = i
    return out


def _tokens(r: _Raw, k: int) -> int:
    """The tokens of r's prefix through chain element k (-1: none)."""
    if k < 0:
        return 0
    if r.block:
        return min(r.input_tokens, (k + 1) * r.block)
    return int(round(r.input_tokens * r.sizes[k] / max(r.sizes[-1], 1)))


# --- OpenTelemetry spans ---------------------------------------------------------------------------------------------


def _spans(path: Path) -> tuple[list[_Span], dict[str, dict]]:
    """The file's chat spans, and the messages its log records carry, by span id."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".jsonl":
            doc = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            doc = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TrafficError(f"{path}: not a JSON file of spans ({exc})") from None
    spans = _span_list(doc)
    if spans is None:
        raise TrafficError(f'{path}: holds no spans (expected {{"spans": [...]}}, a list, or OTLP resourceSpans)')
    file_session = str(doc.get("session_id") or path.stem) if isinstance(doc, dict) else path.stem
    out: list[_Span] = []
    content: dict[str, dict] = {}
    for span in spans:
        attributes = _attributes(span.get("attributes"))
        if _is_log_record(span):
            if span.get("span_id"):
                _add_event(content.setdefault(_span_id(span["span_id"]), {}), span, attributes)
            continue
        if attributes.get("gen_ai.operation.name") not in ("chat", "text_completion"):
            continue  # an agent's or a tool's span, or one that is not GenAI's
        out.append(_Span(path, span, attributes, file_session))
    return out, content


def _is_log_record(line: dict) -> bool:
    """A log record as the SDK's ConsoleLogRecordExporter writes it (ReadableLogRecord.to_json), not a span."""
    return "event_name" in line or ("body" in line and "observed_timestamp" in line)


def _add_event(joined: dict, record: dict, attributes: dict) -> None:
    """Add what a log record says of its span's messages to what the span's earlier records said."""
    name, body = record.get("event_name"), record.get("body")
    body = body if isinstance(body, dict) else {}
    if name == _DETAILS_EVENT:
        joined.update({k: attributes[k] for k in _CONTENT_KEYS if k in attributes})
    elif name == _CHOICE_EVENT:
        joined.setdefault("gen_ai.output.messages", []).append(body.get("message") or {})
    elif name in _MESSAGE_EVENTS:
        messages = joined.setdefault("gen_ai.input.messages", [])
        if messages is None:
            return
        if "content" not in body and name != "gen_ai.assistant.message":
            # captured without content (the instrumentation's default): the prompt cannot be hashed, so the span is
            # left without messages and refused, not read as every prompt being the same
            joined["gen_ai.input.messages"] = None
        else:
            messages.append({"role": _MESSAGE_EVENTS[name], **body})


def _span_id(raw) -> str:
    return str(raw).lower().removeprefix("0x")


def _joined(s: _Span, content: dict[str, dict]) -> dict:
    """The span's attributes, with the messages its log events carry where the span has none."""
    span_id = (s.span.get("context") or {}).get("span_id") or s.span.get("span_id") or s.span.get("spanId")
    event = content.get(_span_id(span_id)) if span_id else None
    if not event:
        return s.attributes
    return {**{k: v for k, v in event.items() if v is not None}, **s.attributes}


def _span_list(doc) -> Optional[list[dict]]:
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("spans"), list):
        return doc["spans"]
    if isinstance(doc.get("resourceSpans"), list):  # OTLP JSON
        return [s for rs in doc["resourceSpans"] for ss in rs.get("scopeSpans", ()) for s in ss.get("spans", ())]
    return None


def _attributes(raw) -> dict:
    """Attributes as a mapping, from OTLP's key/value list too."""
    if isinstance(raw, dict):
        return raw
    out = {}
    for item in raw or ():
        value = item.get("value", {})
        out[item.get("key")] = next(iter(value.values()), None) if isinstance(value, dict) else value
    return out


def _time_ms(span: dict, which: str, *, path: Path, name: str) -> Optional[float]:
    nano = span.get(f"{which}_time_unix_nano", span.get(f"{which}TimeUnixNano"))
    if nano is not None:
        return int(nano) / 1e6
    text = span.get(f"{which}_time")
    if not isinstance(text, str):
        return None
    if (ms := iso_ms(text)) is None:
        raise TrafficError(f"{path}: span {name!r} has {which}_time {text!r}, not an ISO 8601 time; write it as one")
    return ms


def _json(value):
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _span_request(path: Path, span: dict, a: dict, file_session: str) -> _Raw:
    name = span.get("name") or span.get("span_id") or "a span"
    if a.get("gen_ai.usage.input_tokens") is None or a.get("gen_ai.usage.output_tokens") is None:
        raise TrafficError(
            f"{path}: span {name!r} has no gen_ai.usage.input_tokens/output_tokens; the traces must record token "
            f"counts (the server's usage)"
        )
    start = _time_ms(span, "start", path=path, name=name)
    if start is None:
        raise TrafficError(f"{path}: span {name!r} has no start time (start_time or start_time_unix_nano)")
    if a.get("gen_ai.input.messages") is None:
        raise TrafficError(
            f"{path}: span {name!r} has no gen_ai.input.messages, on it or in a {_DETAILS_EVENT} log event of its "
            f"span id; trace with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (openai-v2 2.4b0; "
            f"=true and its log records beside the spans for 2.3b0 and earlier: docs/fidelity.md)"
        )
    session = next((str(a[k]) for k in _SESSION_KEYS if a.get(k)), None)
    if session is None:
        trace = (span.get("context") or {}).get("trace_id") or span.get("trace_id") or span.get("traceId")
        session = f"{file_session}/{trace}" if trace and file_session != str(trace) else file_session
    messages = _json(a.get("gen_ai.input.messages")) or []
    outputs = _json(a.get("gen_ai.output.messages")) or []
    tools = a.get("gen_ai.tool.definitions")
    calls = _calls(outputs, a)
    kind = a.get("fastgen.turn_kind")
    chain, sizes = _chain(tools if isinstance(tools, str) else orjson.dumps(tools or []).decode(), messages)
    after = None
    if outputs and chain:
        answer = _canonical(outputs[0]) if isinstance(outputs, list) and isinstance(outputs[0], dict) else b""
        after = xxhash.xxh3_64_intdigest(answer, seed=chain[-1])
    return _Raw(
        session=session,
        start_ms=start,
        end_ms=_time_ms(span, "end", path=path, name=name),
        input_tokens=int(a["gen_ai.usage.input_tokens"]),
        output_tokens=int(a["gen_ai.usage.output_tokens"]),
        tool_calls=calls,
        subagent=(kind == "subagent") if kind is not None else None,
        chain=chain,
        sizes=sizes,
        after=after,
        model=str(a.get("gen_ai.request.model") or a.get("gen_ai.response.model") or ""),
    )


def _calls(outputs, a: dict) -> Optional[int]:
    if isinstance(outputs, list) and outputs:
        n = 0
        for message in outputs:
            if not isinstance(message, dict):
                continue
            n += sum(1 for p in message.get("parts") or () if isinstance(p, dict) and p.get("type") == "tool_call")
            n += len(message.get("tool_calls") or ())
        return n
    reasons = str(a.get("gen_ai.response.finish_reasons") or "")
    return None if not reasons else (1 if "tool" in reasons else 0)


def _canonical(message: dict) -> bytes:
    """A message as role, text and calls (name and arguments), the same whether written as an input message (wire
    form) or as an output message (parts)."""
    text, calls = [], []
    content = message.get("content")
    if isinstance(content, str):
        text.append(content)
    for part in (content if isinstance(content, list) else []) + list(message.get("parts") or ()):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "tool_call":
            calls.append((part.get("name"), _args(part.get("arguments"))))
        elif part.get("type") == "tool_call_response":
            text.append(str(part.get("response", "")))
        else:
            text.append(str(part.get("content", part.get("text", ""))))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or call
        calls.append((fn.get("name"), _args(fn.get("arguments"))))
    return orjson.dumps([message.get("role"), "".join(text), calls])


def _args(arguments) -> str:
    value = _json(arguments)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() if not isinstance(value, str) else value


def _chain(tools: str, messages: list) -> tuple[list[int], list[int]]:
    h = xxhash.xxh3_64_intdigest(tools.encode())
    chain, sizes, size = [h], [len(tools)], len(tools)
    for message in messages if isinstance(messages, list) else []:
        data = _canonical(message) if isinstance(message, dict) else orjson.dumps(message)
        h = xxhash.xxh3_64_intdigest(data, seed=h)
        size += len(data)
        chain.append(h)
        sizes.append(size)
    return chain, sizes


# --- Mooncake lines (mooncake.py reads them) -------------------------------------------------------------------------


def _mooncake(path: Path, block: int) -> list[_Raw]:
    try:
        requests = mooncake_requests(path, block)
    except MooncakeError as exc:
        raise TrafficError(str(exc)) from None
    return [
        _Raw(
            session=r.session,
            start_ms=r.start_ms,
            end_ms=None,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            tool_calls=None,
            subagent=False,
            chain=r.chain,
            sizes=list(range(1, len(r.chain) + 1)),
            after=None,
            model="",
            block=block,
        )
        for r in requests
    ]
