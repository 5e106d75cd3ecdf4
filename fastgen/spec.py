"""Every number of the benchmark design, in real tokens of the tokenizer in use, in one declarative place.

Nothing else in fastgen hard-codes a budget, a session count, a concurrency level or a timing constant:
plans read them from here, configs read the concurrency levels from here, and the manifest records the spec.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from .errors import SpecError

__all__ = [
    "Range",
    "Timing",
    "Scenario1Spec",
    "Scenario2Spec",
    "Scenario3Spec",
    "Spec",
    "DEFAULT_MAX_MODEL_LEN",
    "TOOL_CALL_MIN_MAX_TOKENS",
    "TEMPLATE_OVERHEAD_BASE",
    "TEMPLATE_OVERHEAD_PER_MESSAGE",
]

DEFAULT_MAX_MODEL_LEN = 131072
# inference-perf sends max(4 x recorded, 4096) as max_tokens on a tool-call turn (override_tool_call_max_tokens):
# the server rejects a request whose prompt plus max_tokens exceeds its window, so the fit check uses it.
TOOL_CALL_MIN_MAX_TOKENS = 4096
# The chat template adds role markers and a tool preamble that the content counts do not include.
TEMPLATE_OVERHEAD_BASE = 512
TEMPLATE_OVERHEAD_PER_MESSAGE = 8


@dataclass(frozen=True)
class Range:
    """An inclusive integer range, drawn uniformly."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not (0 <= self.lo <= self.hi):
            raise SpecError(f"range {self.lo}..{self.hi} is empty or negative; use 0 <= lo <= hi")

    def draw(self, rng) -> int:
        return int(rng.integers(self.lo, self.hi + 1))

    def scaled(self, factor: float) -> "Range":
        return Range(_scale_tokens(self.lo, factor), _scale_tokens(self.hi, factor))


def _scale_tokens(n: int, factor: float) -> int:
    return max(1, int(round(n * factor))) if n > 0 else 0


def _scale_count(n: int, factor: float) -> int:
    return max(1, int(math.ceil(n * factor)))


@dataclass(frozen=True)
class Timing:
    """Synthetic durations, so that recorded spans look like a real server and overlap where the design says."""

    prefill_ms_per_1k_tokens: int = 40
    decode_ms_per_token: int = 25
    think_gap_ms: Range = Range(800, 2500)
    tool_exec_ms: Range = Range(1500, 6000)


@dataclass(frozen=True)
class Scenario1Spec:
    """Multi-turn agent loop: 6 turns, turns 3 and 5 are apply_patch tool calls."""

    sessions: int = 100
    system: int = 2000
    tools: int = 8000
    repo_map: int = 40000
    file_context: int = 15000
    bug_report: Range = Range(900, 1100)
    analysis: Range = Range(800, 1200)
    inspect_request: Range = Range(40, 80)
    inspection_plan: Range = Range(500, 800)
    test_logs: Range = Range(1000, 3000)
    patch: Range = Range(150, 400)
    patch_result: Range = Range(40, 120)
    explanation: Range = Range(500, 1000)
    failing_tests: Range = Range(2000, 3000)
    passing_tests: Range = Range(300, 800)
    summary: Range = Range(500, 1000)
    concurrency: tuple[int, ...] = (1, 10, 25, 50, 100)
    session_spacing_ms: int = 120_000


@dataclass(frozen=True)
class Scenario2Spec:
    """Fan-out: one root, five parallel branches; sync and stagger differ only in timing."""

    sets: int = 50
    system: int = 2000
    tools: int = 8000
    repo_map: int = 40000
    root_prompt: Range = Range(55000, 95000)  # spread evenly across the sets
    bug_report: Range = Range(800, 1200)
    root_output: Range = Range(300, 600)
    branch_output: Range = Range(1000, 2000)
    branches: tuple[str, ...] = (
        "smallest patch",
        "refactor first",
        "add validation",
        "optimize hot path",
        "preserve compat",
    )
    concurrency: tuple[int, ...] = (10, 25, 50)
    sync_window_ms: int = 500
    stagger_ms: Range = Range(1000, 5000)
    set_spacing_ms: int = 60_000


@dataclass(frozen=True)
class Scenario3Spec:
    """Monorepo swarm: a ~90K global prefix, module-shared workspaces, 2-6 tool-loop turns, Poisson arrivals."""

    sessions: int = 500
    system: int = 2000
    tools: int = 8000
    guidelines: int = 5000
    repo_map: int = 55000
    api_docs: int = 20000
    modules: int = 25
    workspace: Range = Range(4000, 20000)
    # the module's shared files are this share (in percent) of a session's workspace tokens
    shared_workspace_percent: Range = Range(20, 40)
    task: Range = Range(500, 2000)
    turns: Range = Range(2, 6)
    tool_output: Range = Range(1000, 5000)
    final_output: Range = Range(300, 800)
    concurrency: tuple[int, ...] = (100, 250, 500)
    arrival_window_s: int = 1200


@dataclass(frozen=True)
class Spec:
    scenario1: Scenario1Spec = field(default_factory=Scenario1Spec)
    scenario2: Scenario2Spec = field(default_factory=Scenario2Spec)
    scenario3: Scenario3Spec = field(default_factory=Scenario3Spec)
    timing: Timing = field(default_factory=Timing)
    max_model_len: int = DEFAULT_MAX_MODEL_LEN

    def scaled(self, *, sessions: float = 1.0, budgets: float = 1.0) -> "Spec":
        """A spec with session counts and token budgets multiplied (used by tests and quick runs).

        Concurrency levels stay as named (the config files are the design's 17); configs cap num_sessions at the
        corpus size instead.
        """
        if not (sessions > 0 and budgets > 0):
            raise SpecError(f"scale factors must be > 0 (got sessions={sessions}, budgets={budgets})")
        return dataclasses.replace(
            self,
            scenario1=_scale_scenario(self.scenario1, "sessions", sessions, budgets),
            scenario2=_scale_scenario(self.scenario2, "sets", sessions, budgets),
            scenario3=_scale_scenario(self.scenario3, "sessions", sessions, budgets),
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def tokens_over_window(self, prompt_tokens: int, max_tokens: int, messages: int) -> int:
        """How far a request (prompt + the max_tokens sent + chat-template margin) exceeds the window; <= 0 fits."""
        overhead = TEMPLATE_OVERHEAD_BASE + TEMPLATE_OVERHEAD_PER_MESSAGE * messages
        return prompt_tokens + max_tokens + overhead - self.max_model_len


_NOT_TOKENS = {
    "sessions",
    "sets",
    "concurrency",
    "branches",
    "modules",
    "turns",
    "shared_workspace_percent",
    "session_spacing_ms",
    "set_spacing_ms",
    "sync_window_ms",
    "stagger_ms",
    "arrival_window_s",
}


def _scale_scenario(sc, count_field: str, sessions: float, budgets: float):
    changes: dict = {}
    count = _scale_count(getattr(sc, count_field), sessions)
    changes[count_field] = count
    if hasattr(sc, "modules"):
        changes["modules"] = max(1, min(sc.modules, count))
    for f in dataclasses.fields(sc):
        if f.name in _NOT_TOKENS:
            continue
        value = getattr(sc, f.name)
        if isinstance(value, Range):
            changes[f.name] = value.scaled(budgets)
        elif isinstance(value, int):
            changes[f.name] = _scale_tokens(value, budgets)
    return dataclasses.replace(sc, **changes)
