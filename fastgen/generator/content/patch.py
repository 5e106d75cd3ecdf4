"""Patches that apply: an edit of a shown Python file, and the unified diff that makes it.

An agent's apply_patch call is only believable if its diff applies to the file the context showed, and the tool's
answer reports that diff's hunks and line counts. So the edit is made on the file's lines (a statement inside a
function replaced by one or more statements at the same indentation, which keeps the file compiling), and the diff
is written from those edits, so its hunks, line numbers and counts are the edit's own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .english import plural
from .kinds import statement
from .vocab import Vocab

__all__ = ["Patch", "make_patch", "patch_summary"]

_CONTEXT = 3  # lines of context around each change, as diff -u and git diff give
# characters allowed for a hunk's header line, more than "@@ -a,b +c,d @@\n" takes: 12 fixed and four numbers, each
# under 10 digits in any file fastgen writes
_HEADER = 64


@dataclass(frozen=True)
class Patch:
    path: str
    diff: str  # a unified diff with ---/+++ headers
    after: str  # the file once the diff is applied
    hunks: int
    added: int
    removed: int


def _editable(line: str) -> bool:
    """Whether replacing the line keeps the file compiling: a one-line statement inside a function body (indented,
    not opening a block, not a docstring or a comment)."""
    body = line.lstrip(" ")
    return (
        len(body) < len(line)
        and bool(body.strip())
        and not body.rstrip().endswith(":")
        and not body.startswith(('"""', "#", "@"))
    )


def _drawn(v: Vocab, lines: list[str], among: range):
    """Editable lines of `among`, drawn at random, each once (a bounded number of draws: a file is never scanned)."""
    seen: set[int] = set()
    for _ in range(2 * len(among)):
        i = among[v.index(len(among))]
        if i not in seen:
            seen.add(i)
            if _editable(lines[i]):
                yield i


def _hunks(edits: dict[int, tuple[int, list[str]]]) -> list[list[int]]:
    """The edits' line indexes, grouped into hunks: one hunk while at most twice the context lies between changes."""
    groups: list[list[int]] = []
    for i in sorted(edits):
        if groups and i - (groups[-1][-1] + edits[groups[-1][-1]][0]) <= 2 * _CONTEXT:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _diff(path: str, before: list[str], edits: dict[int, tuple[int, list[str]]]) -> str:
    """The unified diff of `edits` (line index -> (lines it removes there: 0 or 1, lines it puts there)), with three
    lines of context, and hunks merged where their context would touch, as diff -u writes them.

    Written from the edits rather than found by difflib, whose matcher treats lines as common as blank ones as junk
    in files of over 200 lines and then reports most of the file as changed."""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    shift = 0
    for group in _hunks(edits):
        start = max(group[0] - _CONTEXT, 0)
        stop = min(group[-1] + edits[group[-1]][0] + _CONTEXT, len(before))
        body, k = [], start
        for i in group:
            body += [" " + line for line in before[k:i]]
            removed, added = edits[i]
            body += ["-" + line for line in before[i : i + removed]] + ["+" + line for line in added]
            k = i + removed
        body += [" " + line for line in before[k:stop]]
        old = stop - start
        new = old + sum(len(edits[i][1]) - edits[i][0] for i in group)
        out.append(f"@@ -{start + 1 if old else start},{old} +{start + shift + 1 if new else start + shift},{new} @@\n")
        out += body
        shift += new - old
    return "".join(out)


def _hunk_bound(before: list[str], i: int, edit: tuple[int, list[str]]) -> int:
    """The most characters one more edit adds to its diff's own hunks: its hunk, context and header (whose line
    numbers take at most _HEADER characters); merged with a neighbour's, it adds less."""
    removed, added = edit
    start, stop = max(i - _CONTEXT, 0), min(i + removed + _CONTEXT, len(before))
    return _HEADER + sum(len(line) + 1 for line in before[start:stop]) + sum(len(line) + 1 for line in added)


def _body(lines: list[str], function: str) -> range:
    """The lines of top-level function `function`'s body (empty if the file has no such function)."""
    head = f"def {function}("
    start = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
    if start is None:
        return range(0)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i][0].isspace()), len(lines))
    return range(start + 1, end)


def make_patch(v: Vocab, path: str, text: str, max_chars: int, focus: str | None = None) -> Patch:
    """A patch of `text` (the file at `path`) with as many edits as a diff of `max_chars` holds, at least one.

    Each edit replaces one statement of a function with one to three new ones at its indentation, in top-level
    function `focus` first where it has any; a file with no such statement gets a module-level assignment appended.
    """
    before = text.splitlines(keepends=True)
    body = _body(before, focus) if focus else range(0)
    edits: dict[int, tuple[int, list[str]]] = {}
    # at least the diff's length so far: the diff is written again only when this says it may not fit
    bound = len(_diff(path, before, {}))
    for i in itertools.chain(_drawn(v, before, body), _drawn(v, before, range(len(before)))):
        if i in edits:
            continue
        indent = before[i][: len(before[i]) - len(before[i].lstrip(" "))]
        edit = (1, [indent + line + "\n" for _ in range(1 + v.index(3)) for line in statement(v)])
        # its own hunk, and a digit more in each later hunk's header line numbers (a hunk per edit at most; one
        # edit adds a few lines, far from the 91 that could add two digits)
        bound += _hunk_bound(before, i, edit) + len(edits)
        if edits and bound > max_chars:
            bound = len(_diff(path, before, {**edits, i: edit}))
            if bound > max_chars:
                break
        edits[i] = edit
    if not edits:  # nothing inside a function: append a statement at module level
        edits[len(before)] = (0, [f"{v.var_name()} = {v.number(0, 999)}\n"])
    after = [new for k, line in enumerate(before) for new in (edits[k][1] if k in edits else [line])]
    after += edits[len(before)][1] if len(before) in edits else []
    return Patch(
        path,
        _diff(path, before, edits),
        "".join(after),
        hunks=len(_hunks(edits)),
        added=sum(len(added) for _, added in edits.values()),
        removed=sum(removed for removed, _ in edits.values()),
    )


def patch_summary(patch: Patch) -> str:
    """What the apply_patch tool answers: the diff's own hunks and line counts."""
    hunks = "hunk" if patch.hunks == 1 else plural("hunk")
    return f"Patch applied to {patch.path}: {patch.hunks} {hunks}, +{patch.added} -{patch.removed} lines.\n"
