"""The shell commands a page shows, read as the shell reads them: tests/house/test_docs.py runs the fastgen ones and
tests/e2e/test_e2e_router.py the router's."""

from __future__ import annotations

import re
from pathlib import Path


def _fenced_commands(doc: Path) -> list[str]:
    """The shell commands in a page's fenced code blocks, continuation lines joined."""
    commands, fence, pending = [], False, ""
    for line in doc.read_text().splitlines():
        if line.strip().startswith("```"):
            fence, pending = not fence, ""
            continue
        if not fence:
            continue
        pending += " " + line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        commands.append(pending.strip())
        pending = ""
    return commands


def _words(command: str) -> list[str]:
    """A command's words as the shell splits them, up to a redirection, pipe or next command; env assignments off."""
    import shlex

    words = []
    for word in shlex.split(command, comments=True):
        if word in (">", ">>", "|", "&&", ";", "&"):
            break
        words.append(word)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words.pop(0)
    return words
