"""Patches that apply: against the file as composed, checked by git itself, and reported as the diff says."""

from __future__ import annotations

import numpy as np
import pytest

from e2e.realism import git_apply
from fastgen.content.compose import Composer
from fastgen.content.patch import make_patch, patch_summary
from fastgen.content.vocab import Vocab


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
    assert patch_summary(large) == (f"Patch applied to a.py: {large.hunks} {'hunk' if large.hunks == 1 else 'hunks'}, "
                                    f"+{large.added} -{large.removed} lines.\n")


def test_a_file_without_functions_gets_a_module_level_line():
    code = "import os\nVALUE = 1\n"
    patch = make_patch(Vocab(np.random.default_rng(2)), "m.py", code, 10_000)
    assert (patch.hunks, patch.added, patch.removed) == (1, 1, 0)
    assert _git_apply("m.py", code, patch.diff) == patch.after
    compile(patch.after, "m.py", "exec")
