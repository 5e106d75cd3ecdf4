"""The opening of an agent's answer, about the session's own files, functions, tests and patches.

Pooled prose is drawn from the same units in every session, so on its own an analysis never names the function the
bug report names. Each answer therefore opens with a paragraph written from the session's facts (one of a few ways
of saying it), and pooled prose follows to make its exact length.
"""

from __future__ import annotations

from .english import fix_articles
from .vocab import Vocab

__all__ = ["opening"]

_OPENINGS = {
    "analysis": [
        "{ticket} comes from `{culprit}` in `{target}`: it reads the {noun} before the concurrent update has written "
        "it back, so the value it returns can be stale. `{failing}` in `{test_path}` exercises that path.",
        "I read `{target}` and the tests in `{test_path}`. `{culprit}` is the likely cause of {ticket}: nothing "
        "orders its read of the {noun} against the writer, and no lock is held across both.",
        "The stale {noun} in {ticket} points at `{culprit}` ({target}). Of the {tests} tests in `{test_path}`, "
        "`{failing}` is the one that covers the concurrent case.",
    ],
    "plan": [
        "1. Run `pytest {test_path}` and note which of its {tests} tests fail today.\n"
        "2. Read `{culprit}` in `{target}` and find where the {noun} is read and where it is written.",
        "1. Read `{culprit}` in `{target}` together with `{failing}`.\n"
        "2. Run `pytest {test_path}` to confirm the failure before changing anything.",
    ],
    "explanation": [
        "The patch changes `{target}` in {hunks} {hunk_word} (+{added} -{removed} lines): `{culprit}` now takes "
        "the {noun} as it was written last instead of the copy it held.",
        "With the patch, `{culprit}` no longer returns its cached {noun}; the change touches {hunks} {hunk_word}, "
        "+{added} -{removed} lines, all in `{target}`.",
    ],
    "summary": [
        "{ticket} is fixed: both patches to `{target}` are applied ({hunks} {hunk_word} changed, "
        "+{added} -{removed} lines in all), and `pytest -rP {test_path}` passes all {tests} tests, `{failing}` included.",
        "Done. `{culprit}` in `{target}` reads the current {noun} now; the {tests} tests of `{test_path}` pass, "
        "among them `{failing}`, which failed before the second patch.",
    ],
    "final": [
        "Finished {ticket} in `{target}`. I ran {tools} and looked at what each returned before changing anything.",
        "{ticket} is done: the change stays inside `{target}`, and I checked it with {tools}.",
    ],
}


def opening(v: Vocab, kind: str, **facts) -> str:
    """The first paragraph of an answer of `kind` (analysis, plan, explanation, summary, final), from `facts`."""
    choices = _OPENINGS[kind]
    text = choices[v.index(len(choices))].format(noun=v.noun(), **facts)
    return fix_articles(text) + ("\n" if kind == "plan" else "\n\n")  # a plan's own steps go on the list
