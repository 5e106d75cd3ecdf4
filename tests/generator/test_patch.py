"""Patches that apply: against the file as composed, checked by git itself, and reported as the diff says."""

from __future__ import annotations

import numpy as np
import pytest

from e2e.checks.realism import git_apply
from fastgen.generator.content.compose import Composer
from fastgen.generator.content.patch import make_patch, patch_summary
from fastgen.generator.content.vocab import Vocab


def _git_apply(path: str, before: str, diff: str) -> str:
    after = git_apply({path: before}, path, diff)  # git apply --check, then git apply, in a scratch folder
    assert after is not None, diff
    return after


@pytest.mark.parametrize("seed", range(6))
def test_a_patch_and_the_next_one_apply_with_git_and_keep_the_file_compiling(builtin, seed):
    composer = Composer(builtin, seed=3)
    rng = np.random.default_rng(seed)
    v = Vocab(rng)
    code = composer.fill("code", 6000, rng).text  # over 200 lines: where difflib's matcher would give up
    assert code.count("\n") > 500
    first = make_patch(v, "src/app/store.py", code, 1200)
    assert first.diff.startswith("--- a/src/app/store.py\n+++ b/src/app/store.py\n@@ -")
    after = _git_apply(first.path, code, first.diff)
    assert after == first.after != code
    compile(after, "after", "exec")
    second = make_patch(v, first.path, first.after, 1200)
    assert _git_apply(second.path, first.after, second.diff) == second.after
    compile(second.after, "after", "exec")
    for patch in (first, second):
        body = patch.diff.splitlines()[2:]
        assert patch.hunks == sum(line.startswith("@@") for line in body) >= 1
        assert patch.added == sum(line.startswith("+") for line in body)
        assert patch.removed == sum(line.startswith("-") for line in body)
        assert len(patch.diff) <= 1200 or patch.removed == 1  # one edit always, room or not


def test_more_room_makes_more_edits_and_the_answer_states_the_diff(builtin):
    code = Composer(builtin, seed=3).fill("code", 3000, np.random.default_rng(4)).text
    small = make_patch(Vocab(np.random.default_rng(1)), "a.py", code, 200)
    large = make_patch(Vocab(np.random.default_rng(1)), "a.py", code, 2400)
    assert large.removed > small.removed >= 1
    assert patch_summary(large) == (
        f"Patch applied to a.py: {large.hunks} {'hunk' if large.hunks == 1 else 'hunks'}, "
        f"+{large.added} -{large.removed} lines.\n"
    )


def test_a_file_without_functions_gets_a_module_level_line():
    code = "import os\nVALUE = 1\n"
    patch = make_patch(Vocab(np.random.default_rng(2)), "m.py", code, 10_000)
    assert (patch.hunks, patch.added, patch.removed) == (1, 1, 0)
    assert _git_apply("m.py", code, patch.diff) == patch.after
    compile(patch.after, "m.py", "exec")


def _patch_by_rewriting_the_diff(v: Vocab, path: str, text: str, max_chars: int, focus: str | None = None):
    """make_patch as it was before it bounded the diff's length: the whole diff written again for every edit tried."""
    from fastgen.generator.content import patch as p

    before = text.splitlines(keepends=True)
    body = p._body(before, focus) if focus else range(0)
    edits: dict = {}
    for i in p.itertools.chain(p._drawn(v, before, body), p._drawn(v, before, range(len(before)))):
        if i in edits:
            continue
        indent = before[i][: len(before[i]) - len(before[i].lstrip(" "))]
        edit = (1, [indent + line + "\n" for _ in range(1 + v.index(3)) for line in p.statement(v)])
        if edits and len(p._diff(path, before, {**edits, i: edit})) > max_chars:
            break
        edits[i] = edit
    return p._diff(path, before, edits)


@pytest.mark.parametrize("seed", range(4))
def test_the_length_bound_takes_the_same_edits_as_writing_every_diff(builtin, seed):
    """make_patch writes the diff again only when an upper bound on its length says it may not fit; where the bound
    were not one, it would keep an edit that does not fit. Many room sizes, long and short paths, files of 9 to 1,300
    lines (line numbers of 1 to 4 digits): the same diffs as writing the diff for every edit."""
    composer = Composer(builtin, seed=4)
    rng = np.random.default_rng(100 + seed)
    for size in (120, 900, 16000):
        code = composer.fill("code", size, rng).text
        for path in ("a.py", "src/" + "deeply/" * 12 + "nested_module.py"):
            for room in (1, 150, 400, 900, 2500, 6000):

                def same_draws(size: int = size, room: int = room) -> Vocab:  # bound now (B023); called at once
                    return Vocab(np.random.default_rng([seed, size, room]))

                assert make_patch(same_draws(), path, code, room).diff == _patch_by_rewriting_the_diff(
                    same_draws(), path, code, room
                )
