"""An agent's plan: steps about the session's own files, numbered in order.

Plan units each carry a step number, and a composition draws them in any order; an agent's plan counts 1, 2, 3.
Renumbering can change the token count (digits tokenize differently), so the text is counted again.

A plan drawn from the pooled steps, which every session shares, would name random modules and test files: a plan
about the bug's own files is drawn instead from steps written from the session's facts (its module, that module's
functions, its test file and tests, the neighbouring files it was shown), with the plan kind's fillers for the tail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .compose import Composer, Text
from .english import fix_articles, third_person
from .pytest_log import UnitTest
from .vocab import Vocab

__all__ = ["numbered", "PlanFacts", "plan_steps"]

_STEP = re.compile(r"^\d+\. ", re.MULTILINE)
_STEP_TOKENS = 40  # about what one step takes: sizes the session's pool of steps
_READING = ("Read", "Trace", "Inspect", "Review", "Step through")  # what an inspection plan does with a function
_STEPS_PER_PLAN = 4  # steps written per step a plan is likely to hold: few are said twice in one plan


def numbered(composer: Composer, plan: Text) -> Text:
    """`plan` with its numbered lines renumbered 1, 2, 3, ... in order."""
    steps = iter(range(1, plan.text.count("\n") + 2))
    text = _STEP.sub(lambda _: f"{next(steps)}. ", plan.text)
    return plan if text == plan.text else composer.line(text)


@dataclass(frozen=True)
class PlanFacts:
    """What a plan's steps may name: the module under suspicion, its functions, its test file and that file's tests,
    and the other files the session was shown."""

    target: str
    functions: Sequence[str]
    test_path: str
    cases: Sequence[UnitTest]
    neighbours: Sequence[str] = ()


def _step(v: Vocab, facts: PlanFacts) -> str:
    """One step about the session's own files (its number is renumbered later: numbered)."""
    fn = facts.functions[v.index(len(facts.functions))]
    words = dict(
        n=str(v.number(1, 9)),
        Read=v.pick(list(_READING)),
        verbs=third_person(v.verb()),
        fn=fn,
        target=facts.target,
        test_path=facts.test_path,
        adj=v.adjective(),
        noun=v.noun(),
        noun2=v.noun(),
    )
    steps = [
        "{n}. {Read} `{fn}` in `{target}` and check how it handles a {adj} {noun}; then run "
        "`pytest {test_path} -k {fn}`.",
        "{n}. Check where `{target}` writes the {noun} outside `{fn}`: a {adj} {noun2} written there would explain "
        "the stale value.",
    ]
    if facts.cases:
        case = facts.cases[v.index(len(facts.cases))]
        words.update(test=case.name, called=case.target)
        steps += [
            "{n}. Run `pytest {test_path}::{test}` and note what `{called}` returns for a {adj} {noun}.",
            "{n}. Read `{test}` in `{test_path}` and check whether it covers a {adj} {noun}; if not, note the case "
            "it misses.",
        ]
    others = [f for f in facts.functions if f != fn]
    if others:
        words["fn2"] = others[v.index(len(others))]
        steps.append(
            "{n}. Compare how `{fn}` and `{fn2}` in `{target}` read the {noun}: both should see the same {adj} {noun2}."
        )
    if facts.neighbours:
        words["neighbour"] = facts.neighbours[v.index(len(facts.neighbours))]
        steps.append(
            "{n}. Look for callers of `{fn}` in `{neighbour}` and check whether each one {verbs} the {noun} first."
        )
    return fix_articles(steps[v.index(len(steps))].format(**words)) + "\n"


def plan_steps(composer: Composer, v: Vocab, rng: np.random.Generator, budget: int, facts: PlanFacts) -> Text:
    """Steps of a plan about `facts`' files, exactly `budget` tokens (as composer.fill makes a count): drawn from a
    pool of steps written for this session, with the plan kind's fillers."""
    steps = [_step(v, facts) for _ in range(max(8, _STEPS_PER_PLAN * budget // _STEP_TOKENS))]
    pool = composer.pool("plan").with_units(steps, composer.tokenizer.count_many(steps))
    return composer.fill_from(pool, budget, rng)
