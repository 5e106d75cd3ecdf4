"""Word forms: the rules against forms written out by hand, and a generated dataset against the naive forms."""

from __future__ import annotations

import re

import pytest

from fastgen.generator.content.english import fix_articles, participle, plural, third_person
from fastgen.generator.content.vocab import ADJECTIVES, NOUNS, VERBS
from conftest import trace_files

# Written out by hand (a dictionary's forms), not derived from the rules under test.
PLURALS = {
    "retry": "retries",
    "index": "indexes",
    "process": "processes",
    "status": "statuses",
    "key": "keys",
    "policy": "policies",
    "registry": "registries",
    "mutex": "mutexes",
    "patch": "patches",
    "cache": "caches",
    "address": "addresses",
    "inventory": "inventories",
    "directory": "directories",
    "identity": "identities",
    "entry": "entries",
    "replica": "replicas",
    "alias": "aliases",
    "hash": "hashes",
    "gateway": "gateways",
}
THIRD = {
    "verify": "verifies",
    "retry": "retries",
    "apply": "applies",
    "patch": "patches",
    "flush": "flushes",
    "fetch": "fetches",
    "replay": "replays",
    "queue": "queues",
    "index": "indexes",
    "process": "processes",
    "lookup": "looks up",
    "shutdown": "shuts down",
    "sync": "syncs",
    "match": "matches",
}
PARTICIPLES = {
    "resolve": "resolved",
    "capture": "captured",
    "retry": "retried",
    "verify": "verified",
    "stop": "stopped",
    "commit": "committed",
    "emit": "emitted",
    "map": "mapped",
    "tag": "tagged",
    "format": "formatted",
    "build": "built",
    "rebuild": "rebuilt",
    "write": "written",
    "read": "read",
    "freeze": "frozen",
    "split": "split",
    "reset": "reset",
    "queue": "queued",
    "replay": "replayed",
    "open": "opened",
    "cancel": "canceled",
    "index": "indexed",
    "upsert": "upserted",
    "copy": "copied",
}


def test_the_rules_give_the_forms_a_dictionary_has():
    assert {w: plural(w) for w in PLURALS} == PLURALS
    assert {w: third_person(w) for w in THIRD} == THIRD
    assert {w: participle(w) for w in PARTICIPLES} == PARTICIPLES


@pytest.mark.parametrize(
    "text,fixed",
    [
        ("a encrypted key and a index", "an encrypted key and an index"),
        ("A optional field, an stale value", "An optional field, a stale value"),
        ("a unique id, a user, an upload, a upstream", "a unique id, a user, an upload, an upstream"),
        ("enqueue a `AsyncWorker` job", "enqueue an `AsyncWorker` job"),
        ("data a.b = 1; pass", "data a.b = 1; pass"),  # not an article
    ],
)
def test_articles_agree_with_the_next_word(text, fixed):
    assert fix_articles(text) == fixed


def _naive_mistakes() -> set[str]:
    """Forms a template appending "s" or "ed" to a stem would print, where that is not the English form."""
    wrong = set()
    for noun in NOUNS:
        if plural(noun) != noun + "s":
            wrong.add(noun + "s")
    for verb in VERBS:
        if third_person(verb) != verb + "s":
            wrong.add(verb + "s")
        for naive in (verb + "ed", verb + "d"):
            if participle(verb) != naive:
                wrong.add(naive)
    return wrong - {w for w in wrong if w in NOUNS or w in VERBS or w in ADJECTIVES}


def test_a_generated_dataset_has_no_naive_word_forms_and_no_disagreeing_articles(small_dataset):
    wrong = _naive_mistakes()
    assert {"retrys", "indexs", "processs", "resolveed", "verifys", "captureed"} <= wrong  # what the test looks for
    found: dict[str, int] = {}
    articles: list[str] = []
    checked = 0
    for path in trace_files(small_dataset / "traces"):
        text = path.read_text().replace("\\n", " ")
        for word in re.findall(r"[A-Za-z]+", text):
            checked += 1
            if word.lower() in wrong:
                found[word] = found.get(word, 0) + 1
        articles += re.findall(r"\b[Aa] [aeioAEIO][a-z]+|\b[Aa]n [b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z][a-z]+", text)
    assert checked > 100_000
    assert not found, sorted(found.items(), key=lambda kv: -kv[1])[:10]
    assert not articles, articles[:10]
