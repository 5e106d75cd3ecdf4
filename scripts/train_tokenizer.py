"""Train fastgen's built-in tokenizer: a 32K byte-level BPE with a Llama-3/Qwen-style pre-tokenizer.

The corpus has two parts: fastgen's own content templates (every kind, seeds that no run uses by default), so
the vocabulary fits the text fastgen writes without memorising any one run; and the Python standard library's
sources of the interpreter that runs this script (real code with real English docstrings), so merges and
characters per token look like those of a tokenizer trained on real text. Tokens are capped at 16 characters.
The committed files were trained under CPython 3.12.1; another stdlib gives a slightly different vocabulary. Reproduce with

    .venv/bin/python scripts/train_tokenizer.py            # writes fastgen/data/builtin-tokenizer/

Training is deterministic for a given corpus and tokenizers version; the committed files are the reference.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from fastgen.generator.content.kinds import FILLER_MAKERS, KINDS, UNIT_MAKERS
from fastgen.generator.content.vocab import Vocab

VOCAB_SIZE = 32768
# The Llama-3 split pattern (Qwen2 uses the same shape with single digits).
SPLIT_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS_SEEDS = range(9000, 9002)
UNITS_PER_SEED = 300  # per kind and seed: enough to learn the words, too few to memorise whole template lines

CHAT_TEMPLATE = (Path(__file__).parents[1] / "fastgen" / "data" / "chat_templates" / "chatml.jinja").read_text()


def stdlib_sources():
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if rel[0] in ("site-packages", "test", "idlelib") or "tests" in rel:
            continue
        yield path.read_text(encoding="utf-8", errors="replace")


def corpus():
    yield from stdlib_sources()
    for seed in CORPUS_SEEDS:
        for kind_id, kind in enumerate(KINDS):
            vocab = Vocab(np.random.default_rng([seed, kind_id]))
            for _ in range(UNITS_PER_SEED):
                yield UNIT_MAKERS[kind](vocab)
            for _ in range(UNITS_PER_SEED // 4):
                yield FILLER_MAKERS[kind](vocab)


def build() -> Tokenizer:
    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=16,
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def tokenizer_config() -> dict:
    added = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parents[1] / "fastgen" / "data" / "builtin-tokenizer"
    )
    args = parser.parse_args()
    tok = build()
    args.out.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out / "tokenizer.json"), pretty=False)
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    print(f"vocab {tok.get_vocab_size()} -> {args.out}")


if __name__ == "__main__":
    main()
