"""The dataset as pure functions: which files exist, and the bytes of each.

A `DatasetBuilder` holds what one process needs to make any session: the tokenizer, the content pools, and each
scenario's shared blocks (built lazily, once). `files_for(task)` returns the files of one session index (two for
scenarios 2 and 3, whose layouts share content), so a worker builds the content once and writes both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .blocks import CatalogStage, ScenarioBlocks, build_blocks, catalog_stage
from .content.compose import Composer
from .content.kinds import KINDS
from .errors import SpecError
from .plans import scenario1, scenario2, scenario3
from .spans import session_chunks
from .spec import TOOL_CALL_MIN_MAX_TOKENS, Spec
from .tokenizer import Tokenizer

__all__ = ["Task", "DIRECTORIES", "FILES_PER_TASK", "tasks", "DatasetBuilder", "check_fits", "file_name", "Piece",
           "PIECES"]

DIRECTORIES = (scenario1.DIRECTORY, *scenario2.LAYOUTS, *scenario3.LAYOUTS)
# Trace files one task writes: scenarios 2 and 3 write one per layout from the same content.
FILES_PER_TASK = {1: 1, 2: len(scenario2.LAYOUTS), 3: len(scenario3.LAYOUTS)}
# The independent pieces of DatasetBuilder.prepare(): one content pool per kind, one catalog stage per scenario.
# Listed roughly slowest first (measured with the built-in tokenizer), so a pool of workers that takes them in order
# ends on short ones; the order changes no byte of the output.
Piece = tuple[str, object]
_SLOWEST_POOLS_FIRST = ("code", "diff", "prose", "api_doc", "tree")
PIECES: tuple[Piece, ...] = (*(("pool", kind) for kind in _SLOWEST_POOLS_FIRST),
                             *(("catalog", sid) for sid in (1, 2, 3)),
                             *(("pool", kind) for kind in KINDS if kind not in _SLOWEST_POOLS_FIRST))
# A tool call's name and arguments are a few dozen tokens; this bound is only for the up-front fit check.
_CALL_TOKENS_BOUND = 120


@dataclass(frozen=True, order=True)
class Task:
    scenario_id: int
    index: int


def tasks(spec: Spec) -> list[Task]:
    """Every session index of every scenario, the largest files first (so a pool's last tasks are short)."""
    out = [Task(3, i) for i in range(spec.scenario3.sessions)]
    out += [Task(2, i) for i in range(spec.scenario2.sets)]
    out += [Task(1, i) for i in range(spec.scenario1.sessions)]
    return out


def file_name(index: int) -> str:
    return f"session_{index:04d}.json"


def check_fits(spec: Spec) -> None:
    """Refuse, before writing anything, a spec whose largest request cannot fit --max-model-len."""
    s1, s2, s3 = spec.scenario1, spec.scenario2, spec.scenario3
    call = _CALL_TOKENS_BOUND
    t5 = (s1.tools + s1.system + s1.repo_map + s1.file_context + s1.bug_report.hi + s1.analysis.hi
          + s1.inspect_request.hi + s1.inspection_plan.hi + s1.test_logs.hi + s1.patch.hi + call + s1.patch_result.hi
          + s1.explanation.hi + s1.failing_tests.hi)
    t6 = t5 + s1.patch.hi + call + s1.patch_result.hi + s1.passing_tests.hi
    branch = s2.root_prompt.hi + s2.root_output.hi + call
    s3_base = (s3.tools + s3.system + s3.guidelines + s3.repo_map + s3.api_docs + s3.workspace.hi + s3.task.hi
               + (s3.turns.hi - 1) * (call + s3.tool_output.lo))
    checks = [
        ("scenario 1 turn 5", spec.tokens_over_window(t5, TOOL_CALL_MIN_MAX_TOKENS, 12)),
        ("scenario 1 turn 6", spec.tokens_over_window(t6, s1.summary.hi, 14)),
        ("scenario 2 branch", spec.tokens_over_window(branch, s2.branch_output.hi, 6)),
        ("scenario 3 last turn", spec.tokens_over_window(s3_base, s3.final_output.hi, 6 + 2 * (s3.turns.hi - 1))),
    ]
    for name, over in checks:
        if over > 0:
            raise SpecError(f"{name} can need {over} tokens more than --max-model-len {spec.max_model_len}; "
                            f"raise --max-model-len or lower the budgets (--budget-scale)")


class DatasetBuilder:
    def __init__(self, tokenizer: Tokenizer, spec: Spec, *, seed: int, model: str):
        self.spec = spec
        self.seed = seed
        self.model = model
        self.composer = Composer(tokenizer, seed)
        self._blocks: dict[int, ScenarioBlocks] = {}
        self._stages: dict[int, CatalogStage] = {}  # built by prepare(), consumed by blocks()

    def prepare(self, build_pieces: Callable[[list[Piece]], list] | None = None) -> "DatasetBuilder":
        """Build every pool and shared block now (and escape them), so forked workers inherit them ready.

        Most of this time goes to PIECES, independent of each other: `build_pieces` may build them in other processes
        (workers.build_pieces), in any order, and return the results in the order given.
        """
        results = (build_pieces or self._build_here)(list(PIECES))
        for (what, key), result in zip(PIECES, results, strict=True):
            if what == "pool":
                self.composer.adopt_pool(key, result)
            else:
                self._stages[key] = result
        for scenario_id in (1, 2, 3):
            blocks = self.blocks(scenario_id)
            _ = blocks.catalog.escaped  # cached properties: computed here, once, before any fork
            for message in (blocks.system, blocks.repo_map, blocks.guidelines, blocks.api_docs):
                if message is not None:
                    _ = message.escaped
        return self

    def build_piece(self, piece: Piece):
        """One piece of prepare(): a content pool, or a scenario's catalog stage. A pure function of the builder."""
        what, key = piece
        if what == "pool":
            return self.composer.make_pool(key)
        return catalog_stage(self.composer.tokenizer, self._scenario_spec(key), scenario_id=key, seed=self.seed)

    def _build_here(self, pieces: list[Piece]) -> list:
        return [self.build_piece(piece) for piece in pieces]

    def _scenario_spec(self, scenario_id: int):
        return (self.spec.scenario1, self.spec.scenario2, self.spec.scenario3)[scenario_id - 1]

    def blocks(self, scenario_id: int) -> ScenarioBlocks:
        if scenario_id not in self._blocks:
            self._blocks[scenario_id] = build_blocks(self.composer, self._scenario_spec(scenario_id),
                                                     scenario_id=scenario_id, seed=self.seed,
                                                     stage=self._stages.pop(scenario_id, None))
        return self._blocks[scenario_id]

    def plans_for(self, task: Task):
        blocks = self.blocks(task.scenario_id)
        kw = dict(seed=self.seed, index=task.index)
        if task.scenario_id == 1:
            return [scenario1.plan_session(self.composer, blocks, self.spec, **kw)]
        module = scenario2 if task.scenario_id == 2 else scenario3
        return module.plan_sessions(self.composer, blocks, self.spec, **kw)

    def chunks_for(self, task: Task) -> list[tuple[str, list[bytes]]]:
        """(relative path, chunks whose concatenation is the file) of each trace file of one session index."""
        return [(f"{plan.scenario}/{file_name(task.index)}", session_chunks(plan, model=self.model))
                for plan in self.plans_for(task)]

    def files_for(self, task: Task) -> list[tuple[str, bytes]]:
        """(relative path, bytes) of each trace file of one session index."""
        return [(rel, b"".join(chunks)) for rel, chunks in self.chunks_for(task)]
