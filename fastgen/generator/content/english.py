"""English word forms for generated prose: plurals, third-person verbs, past participles, and a/an.

Appending "s" or "ed" to a stem gives `retrys`, `indexs`, `resolveed`: text no reviewer believes, which also
tokenizes unlike real prose. These are the rules of English spelling for the stems fastgen's vocabulary has, with
the irregular and doubled forms listed, so every form it prints is one a dictionary has.
"""

from __future__ import annotations

import re

__all__ = ["plural", "third_person", "participle", "article_for", "fix_articles"]

# Verbs whose participle is not stem + "ed", and phrasal verbs written as one word in identifiers.
_PARTICIPLES = {
    "build": "built",
    "rebuild": "rebuilt",
    "freeze": "frozen",
    "read": "read",
    "reset": "reset",
    "split": "split",
    "write": "written",
    "shutdown": "shut down",
    "lookup": "looked up",
    "init": "initialized",
    "cancel": "canceled",
}
_THIRD = {"shutdown": "shuts down", "lookup": "looks up", "init": "initializes"}
# One-syllable (or final-stressed) stems ending consonant-vowel-consonant: the last consonant doubles before -ed.
_DOUBLED = frozenset("commit emit format map scan stop submit tag trim wrap snapshot plan ship drop skip log".split())
_SIBILANT = ("s", "x", "z", "ch", "sh")
_VOWELS = "aeiou"
# "u" words said with a "y" sound take "a": a unique key, a user, a usage report
_YOU_SOUND = ("uni", "use", "usa", "usu", "uti", "eu")
_ARTICLE = re.compile(r"\b([Aa]n?) (`?)([A-Za-z][\w-]*)")


def _with_s(word: str) -> str:
    if word.endswith(_SIBILANT):
        return word + "es"
    if len(word) > 1 and word[-1] == "y" and word[-2] not in _VOWELS:
        return word[:-1] + "ies"
    return word + "s"


def plural(noun: str) -> str:
    """retry -> retries, index -> indexes, status -> statuses, key -> keys."""
    return _with_s(noun)


def third_person(verb: str) -> str:
    """verify -> verifies, patch -> patches, lookup -> looks up."""
    return _THIRD.get(verb) or _with_s(verb)


def participle(verb: str) -> str:
    """resolve -> resolved, retry -> retried, stop -> stopped, build -> built."""
    if verb in _PARTICIPLES:
        return _PARTICIPLES[verb]
    if verb in _DOUBLED:
        return verb + verb[-1] + "ed"
    if verb.endswith("e"):
        return verb + "d"
    if len(verb) > 1 and verb[-1] == "y" and verb[-2] not in _VOWELS:
        return verb[:-1] + "ied"
    return verb + "ed"


def article_for(word: str) -> str:
    lower = word.lower()
    vowel_sound = lower[:1] in _VOWELS and not lower.startswith(_YOU_SOUND)
    return "an" if vowel_sound else "a"


def fix_articles(text: str) -> str:
    """Every "a" or "an" agrees with the word after it: an encrypted key, a unique id."""

    def agree(match: re.Match) -> str:
        article, tick, word = match.groups()
        fixed = article_for(word)
        return f"{fixed.capitalize() if article[0] == 'A' else fixed} {tick}{word}"

    return _ARTICLE.sub(agree, text)
