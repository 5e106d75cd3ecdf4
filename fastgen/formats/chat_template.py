"""A tokenizer's chat template, rendered the way vLLM renders a chat request for it.

vLLM (like SGLang) hands the request's messages to the template through transformers' Jinja environment
(sandboxed, trim_blocks and lstrip_blocks, loopcontrols, a `tojson` that does not escape HTML), with the tokenizer's
special tokens as variables, after one rewrite of its own: an assistant message's tool-call `arguments`, a JSON
string on the wire, is parsed into an object first (templates are written for objects; vLLM's
`_postprocess_messages`). This module is that environment and that rewrite, with jinja2 alone, so counting a
prompt as the server counts it needs neither transformers nor vLLM; tests hold it equal to transformers'
`apply_chat_template`.

vLLM's rewrite also gives every message a string `content` ("" where the wire message has none), the form it passes
to templates that take string content (nearly all text models' templates); templates that read content as a list of
parts are not rendered here.

One deliberate difference: `strftime_now` (which some templates print as "Today Date") returns a fixed date, so
the same seed keeps giving the same bytes; a server renders its own day, which may tokenize to a token more or less
(measured with the Llama-3-style test template: "15 Jun 2026" and "01 Dec 2026" differ by one).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

from ..errors import TokenizerError

__all__ = [
    "ChatTemplate",
    "FrozenJSON",
    "SHIPPED_TEMPLATES",
    "resolve_template_file",
    "read_template_file",
    "server_message",
    "server_messages",
    "template_markers",
    "template_source",
    "template_origin",
]

# The file a tokenizer folder's own template lives in: servers (through transformers) and template_source pick it
# before tokenizer_config.json's chat_template, so a template given with --chat-template is written under this name.
TEMPLATE_FILE = "chat_template.jinja"
# The chat templates fastgen ships, by name (`--chat-template NAME`): the tool-calling formats of the common open model
# families, for a tokenizer that has none, and what the window check renders a tokenizer without one with.
SHIPPED_DIR = Path(__file__).parents[1] / "data" / "chat_templates"
SHIPPED_TEMPLATES = {
    "qwen": "Qwen2.5 and Qwen3 (ChatML, <tool_call> JSON)",
    "llama3": "Llama 3.1 to 3.3 (JSON calls, tools in the first user message, ipython results)",
    "chatml": "ChatML with hermes-style <tool_call> tags (the built-in tokenizer's)",
}
# Literal special-token markers in a template's text (`<|im_start|>`, `<|eot_id|>`, `<tool_call>`): what a server's
# tokenizer reads as one token each.
_MARKER = re.compile(r"<\|[A-Za-z0-9_.-]+\|>|</?tool_call>")

# The day `strftime_now` answers with (see the module docstring).
FIXED_DATE = (2026, 6, 15)
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class FrozenJSON(dict):
    """A dict its owner promises never to change: `tojson` serializes it once per set of options. Tool definitions
    are rendered into every prompt of a session, and their JSON is most of a skeleton rendering's time."""

    def tojson(self, options: tuple) -> str:
        memo = self.__dict__.setdefault("_json", {})
        text = memo.get(options)
        if text is None:
            ensure_ascii, indent, separators, sort_keys = options
            text = memo[options] = json.dumps(
                self, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
            )
        return text


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    if isinstance(x, FrozenJSON):
        return x.tojson((ensure_ascii, indent, tuple(separators) if separators else None, sort_keys))
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    from datetime import datetime

    return datetime(*FIXED_DATE).strftime(fmt)


def _raise_exception(message: str):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


@lru_cache(maxsize=8)
def _compiled(source: str):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(jinja2.ext.Extension):
        # `{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering keeps the body
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def _token_text(value) -> Optional[str]:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def template_source(files: dict[str, bytes], *, with_tools: bool) -> Optional[str]:
    """The template a server picks for a request: chat_template.jinja, else tokenizer_config.json's chat_template
    (a named list: "tool_use" when the request has tools and the list has one, else "default"); None if none."""
    if TEMPLATE_FILE in files:
        return files[TEMPLATE_FILE].decode()
    try:
        config = json.loads(files.get("tokenizer_config.json", b"{}"))
    except ValueError:
        return None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("tool_use") if with_tools and "tool_use" in named else named.get("default")
    return template if isinstance(template, str) and template else None


def template_origin(files: dict[str, bytes]) -> Optional[str]:
    """Where a tokenizer folder's template comes from, in words (None without one): the file template_source reads."""
    if TEMPLATE_FILE in files:
        return TEMPLATE_FILE
    return "tokenizer_config.json" if template_source(files, with_tools=False) else None


def template_markers(source: str) -> list[str]:
    """The special-token markers a template writes as literal text, in order of first use."""
    return list(dict.fromkeys(_MARKER.findall(source)))


def resolve_template_file(name: str) -> Path:
    """--chat-template's argument as a file: a path, or the name of a shipped template (qwen, llama3, chatml) where
    no file has that name."""
    path = Path(name)
    if not path.exists() and name in SHIPPED_TEMPLATES:
        return SHIPPED_DIR / f"{name}.jinja"
    return path


def read_template_file(path: Path) -> str:
    """A Jinja chat template file's text (as vLLM's and SGLang's --chat-template take), checked to compile; a
    TokenizerError naming the file and the fix otherwise."""
    fix = (
        "pass --chat-template a Jinja chat template file (e.g. the model's chat_template.jinja) or a shipped one: "
        + ", ".join(SHIPPED_TEMPLATES)
    )
    try:
        source = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise TokenizerError(f"chat template {path} does not exist; {fix}") from None
    except IsADirectoryError:
        raise TokenizerError(f"chat template {path} is a folder; {fix}") from None
    except OSError as exc:
        raise TokenizerError(f"chat template {path} cannot be read ({exc.strerror or exc}); {fix}") from None
    except UnicodeDecodeError:
        raise TokenizerError(f"chat template {path} is not UTF-8 text; {fix}") from None
    if not source.strip():
        raise TokenizerError(f"chat template {path} is empty; {fix}")
    import jinja2

    try:
        _compiled(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TokenizerError(
            f"chat template {path} is not valid Jinja (line {exc.lineno}: {exc.message}); fix the template, or {fix}"
        ) from None
    return source


def _special_tokens(files: dict[str, bytes]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the config wins, as in transformers
        try:
            doc = json.loads(files.get(name, b"{}"))
        except ValueError:
            continue
        if isinstance(doc, dict):
            for key in _SPECIAL_KEYS:
                text = _token_text(doc.get(key))
                if text is not None:
                    found[key] = text
    return found


def _arguments_object(args):
    if isinstance(args, str):
        try:
            return json.loads(args) if args else {}
        except ValueError:
            return {}
    return args if args else {}


def server_messages(messages: Sequence[dict]) -> list[dict]:
    """The messages as the template sees them on the server (vLLM's conversation form, for a template that takes
    string content): role; content, a string ("" when absent; text parts joined by newlines); an assistant
    message's tool_calls with their arguments parsed from JSON (not JSON, or empty: {}); a tool message's
    tool_call_id; name when given."""
    return [server_message(message) for message in messages]


def server_message(message: dict) -> dict:
    """One message of server_messages."""
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    seen = {"role": message.get("role"), "content": content if isinstance(content, str) else ""}
    calls = message.get("tool_calls")
    if seen["role"] == "assistant" and isinstance(calls, list) and calls:
        seen["tool_calls"] = [
            {
                **call,
                "function": {
                    **(call.get("function") or {}),
                    "arguments": _arguments_object((call.get("function") or {}).get("arguments")),
                },
            }
            for call in calls
        ]
    if seen["role"] == "tool" and "tool_call_id" in message:
        seen["tool_call_id"] = message["tool_call_id"]
    if isinstance(message.get("name"), str):
        seen["name"] = message["name"]
    return seen


class ChatTemplate:
    """A tokenizer folder's chat template(s) and special tokens; `render` gives the prompt text a server builds."""

    def __init__(self, files: dict[str, bytes]):
        self._special = _special_tokens(files)
        # read once: render runs for every span, and the config can be large (a 150K vocabulary's added tokens)
        self._sources = {tools: template_source(files, with_tools=tools) for tools in (False, True)}
        if not any(self._sources.values()):
            raise ValueError("the tokenizer has no chat template")

    @classmethod
    def of(cls, files: dict[str, bytes]) -> Optional["ChatTemplate"]:
        """The template of a tokenizer's files, or None when it has none."""
        try:
            return cls(files)
        except ValueError:
            return None

    def render(
        self, messages: Sequence[dict], tools: Optional[Sequence[dict]] = None, *, add_generation_prompt: bool = True
    ) -> str:
        """The prompt text for wire-form messages and tools (as the request body carries them)."""
        return self.render_seen(server_messages(messages), tools, add_generation_prompt=add_generation_prompt)

    def render_seen(
        self, messages: list[dict], tools: Optional[Sequence[dict]] = None, *, add_generation_prompt: bool = True
    ) -> str:
        """render, for messages already in the form the template sees (server_messages): a caller that renders
        the same messages many times converts each once."""
        source = self._sources[bool(tools)]
        if source is None:
            raise ValueError("the tokenizer has no chat template for this request")
        return _compiled(source).render(
            messages=messages,
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            **self._special,
        )
