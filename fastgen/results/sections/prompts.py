"""Same prompts: did both engines get the same prompt tokens? With recorded outputs (inference-perf replays the
recorded answers) they must, up to the servers' own counting; with live outputs each engine's answers feed its later
prompts, so they differ by what the answers do. A config outside the tolerance is named in the report's problems:
its latencies compare different work."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Section, Table
from ..stats import Figure, Ratio, figure_ratio, prompt_tokens_sent

SCENARIO = None  # every scenario

TOLERANCE = {"recorded": 0.005, "live": 0.05}  # |B/A - 1| allowed, by outputs mode


def _mode(pair: Pair, name: str) -> tuple[str, Optional[str]]:
    """(the outputs mode both sides ran, or "live" when not recorded; a problem when the sides differ)."""
    modes = [side.runs[name].identity_values("outputs") for side in pair.sides]
    if any(len(m) > 1 for m in modes) or (all(modes) and modes[0] != modes[1]):
        shown = ["/".join(m) or "not recorded" for m in modes]
        return "live", (
            f"{name}: outputs were {shown[0]} on {pair.a.label} and {shown[1]} on {pair.b.label}; run "
            f"both sides with the same --outputs"
        )
    return (modes[0] or modes[1] or ["live"])[0], None


def same_prompts(pair: Pair, name: str) -> tuple[str, list[Figure], Ratio, bool]:
    """(outputs mode, both sides' prompt tokens sent, their B/A, whether they are within the mode's tolerance)."""
    mode, _ = _mode(pair, name)
    sent = [prompt_tokens_sent(side.runs[name].repeats) for side in pair.sides]
    share = figure_ratio(sent[0], sent[1])  # the two sides
    return mode, sent, share, share.value is not None and abs(share.value - 1) <= TOLERANCE[mode]


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs))
    if not names:
        return None
    table = Table(
        "Prompt tokens sent, per config",
        ["config", "outputs", "prompt tokens A", "prompt tokens B", "prompt tokens B/A", "tolerance %", "same prompts"],
        note="Prompt tokens: the server's prompt_tokens summed over a run's successful requests, median over "
        "repeats. Tolerance: 0.5 % with recorded outputs (the same prompts, counted by each server), 5 % "
        "with live ones (each engine's answers are in its later prompts); outputs `live` where the runs did "
        "not record the mode. `NO`: the engines did different work; read that config's latencies with care.",
    )
    section = Section("prompts", "Same prompts", intro=__doc__.split("\n\n")[0].replace("\n", " "), tables=[table])
    for name in names:
        _, problem = _mode(pair, name)
        if problem:
            section.problems.append(problem)
        mode, sent, share, same = same_prompts(pair, name)
        table.rows.append([name, mode, *sent, share, 100 * TOLERANCE[mode], "yes" if same else "NO"])
        if not same:
            shown = "unknown" if share.value is None else f"{share.value:.3f}"
            section.problems.append(
                f"{name}: {pair.b.label} sent {shown} x the prompt tokens of {pair.a.label} "
                f"({mode} outputs, tolerance {100 * TOLERANCE[mode]:g} %): the engines were not "
                f"given the same prompts"
            )
    return section
