"""A plan's steps numbered in order.

Plan units each carry a step number, and a composition draws them in any order; an agent's plan counts 1, 2, 3.
Renumbering can change the token count (digits tokenize differently), so the text is counted again.
"""

from __future__ import annotations

import re

from .compose import Composer, Text

__all__ = ["numbered"]

_STEP = re.compile(r"^\d+\. ", re.MULTILINE)


def numbered(composer: Composer, plan: Text) -> Text:
    """`plan` with its numbered lines renumbered 1, 2, 3, ... in order."""
    steps = iter(range(1, plan.text.count("\n") + 2))
    text = _STEP.sub(lambda _: f"{next(steps)}. ", plan.text)
    return plan if text == plan.text else composer.line(text)
