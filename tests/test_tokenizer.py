from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fastgen.content.compose import Composer
from fastgen.errors import TokenizerError
from fastgen.tokenizer import BUILTIN_DIR, load_tokenizer


def test_load_tokenizer_builtin_is_a_32k_byte_level_bpe(builtin):
    assert builtin.identity.vocab_size >= 32000
    assert builtin.identity.source == "builtin"
    data = json.loads((BUILTIN_DIR / "tokenizer.json").read_text())
    assert data["model"]["type"] == "BPE"
    assert data["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split"
    assert builtin.decode(builtin.encode("def f(x):\n    return x  # é ✓\n")) == "def f(x):\n    return x  # é ✓\n"


def test_builtin_chars_per_token_on_real_code_is_in_the_llm_range(builtin):
    source = (Path(np.__file__).parent / "_core" / "numeric.py").read_text()  # real code, not in the corpus
    ratio = len(source) / builtin.count(source)
    assert 3.0 <= ratio <= 5.0, ratio


def test_builtin_probe_finds_joins_additive(builtin):
    assert builtin.additive


def test_load_tokenizer_file_and_folder_give_the_same_identity(tmp_path):
    (tmp_path / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    by_file = load_tokenizer(str(tmp_path / "tokenizer.json"))
    by_folder = load_tokenizer(str(tmp_path))
    assert by_file.identity.sha256 == by_folder.identity.sha256 == load_tokenizer("builtin").identity.sha256


def test_load_tokenizer_hub_id_resolves_through_the_local_cache(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--coder-7b" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_tokenizer("acme/coder-7b").identity.source == "acme/coder-7b"


def test_load_tokenizer_unknown_hub_id_raises_and_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(TokenizerError, match="--tokenizer builtin") as info:
        load_tokenizer("meta-llama/Llama-3.3-70B-Instruct")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("content, match", [(b"{not json", "not valid JSON"),
                                            (b'{"model": {"type": "BPE", "vocab": {}}}', "no vocabulary"),
                                            (b"[1, 2]", "no vocabulary")])
def test_load_tokenizer_broken_file_raises_one_line(tmp_path, content, match):
    (tmp_path / "tokenizer.json").write_bytes(content)
    with pytest.raises(TokenizerError, match=match) as info:
        load_tokenizer(str(tmp_path / "tokenizer.json"))
    assert "\n" not in str(info.value)


def test_load_tokenizer_folder_without_tokenizer_json_raises(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(str(tmp_path))


def _gpt2_style_tokenizer(path: Path) -> Path:
    """A small byte-level BPE with GPT-2's pre-tokenizer, whose splits around blank lines are not additive."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    corpus = ["def f(x):\n    return x\n\n", "class A:\n    pass\n\n", "x = 1\n"] * 50
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(path))
    return path


def test_non_additive_tokenizer_is_detected_and_counts_stay_exact(tmp_path):
    tok = load_tokenizer(str(_gpt2_style_tokenizer(tmp_path / "tokenizer.json")))
    assert not tok.additive
    composer = Composer(tok, seed=3)
    rng = np.random.default_rng(0)
    for n in (5, 60, 700):
        text = composer.fill("code", n, rng)
        assert text.tokens == tok.count(text.text)


def test_export_loads_in_transformers_with_a_chat_template(builtin, tmp_path):
    transformers = pytest.importorskip("transformers")
    builtin.export(tmp_path / "tok")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "print(1)"}]
    rendered = auto.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "read_file" in rendered and "print(1)" in rendered and rendered.endswith("<|im_start|>assistant\n")
    assert auto.encode("def f(x): pass", add_special_tokens=False) == builtin.encode("def f(x): pass")
