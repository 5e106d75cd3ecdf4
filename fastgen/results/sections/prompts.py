"""Same prompts: were both engines given the same prompt tokens, request by request? And what did each answer?

With recorded outputs (inference-perf replays the recorded answers) every request's prompt is the recorded one, so
the two sides' prompt_tokens, matched by config, session and turn, must be equal, or off by one constant: an engine
that renders the same messages with a few tokens more on every request (SGLang 0.5.23 writes `"strict": null,
"defer_loading": null` into each tool definition vLLM leaves as it is: 48 tokens over six tools) prefills the same
prompts plus a fixed amount. Such an offset is explained, the config compared, and its effect on the hit ratio
measured: the offset's tokens sit in the cached prefix of every later request, so they lift that side's hit ratio a
little (`hit lift`: its hit % as measured minus with the offset's tokens taken out of every request), and every B/A
of hit ratios of such a config is tested with them taken out (`offset-free`). Anything else
(requests off by different amounts: a different dialogue) leaves the config out of the summary. With live outputs
each engine's answers are in its later prompts, so the sides are compared by total tokens, within LIVE_TOLERANCE after
taking out the offset their first requests (which hold no answer yet) show.

Turn kinds: each request's kind as recorded (its span: text, tool_call, root, branch) and as the engine answered it
(tool calls, text, or nothing streamed, from inference-perf's output_message): with `--tool-choice as_recorded` no
tool_choice is sent, and an engine may answer a recorded tool-call turn with text; that turn is then no tool call (it
has a TTFT, and the tool's recorded result follows an answer that did not call it)."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from ..prompts import RECORDED_TOLERANCE, PromptCheck, outputs_mode
from ..report import Pair, Section, Table
from ..runs import ConfigRun

SCENARIO = None  # every scenario

ANSWERS = ("tool_call", "text", "nothing")

__all__ = ["ANSWERS", "answered_counts", "build", "prompt_check"]


def prompt_check(pair: Pair, name: str) -> PromptCheck:
    """Both sides' prompt tokens of one config, matched request by request, and the verdict (computed once)."""
    return pair.prompt_check(name)


def answered_counts(run: ConfigRun, kind: str) -> Counter:
    """How the engine answered the successful requests of one recorded kind (tool_call, text, nothing, or
    `unknown` where inference-perf recorded no output_message)."""
    return Counter(r.answered or "unknown" for r in run.requests if r.kind == kind and not r.failed)


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs))
    if not names:
        return None
    table, kinds = _sent_table(), _kinds_table()
    section = Section(
        "prompts", "Same prompts", intro=__doc__.split("\n\n")[0].replace("\n", " "), tables=[table, kinds]
    )
    for name in names:
        _, problem = outputs_mode((pair.a.runs[name], pair.b.runs[name]), (pair.a.label, pair.b.label))
        if problem:
            section.problems.append(problem)
        check = prompt_check(pair, name)
        table.rows.append(
            [
                name,
                check.mode,
                *check.sent,
                check.share,
                check.matched,
                check.offset if check.verdict == "offset" else 0 if check.verdict == "same" else None,
                check.lift,
                check.shown,
            ]
        )
        if check.verdict == "offset":
            section.findings.append(
                f"{name}: {pair.b.label if check.offset > 0 else pair.a.label} was sent every request's prompt "
                f"plus {abs(check.offset):,} tokens ({check.matched} requests matched by session and turn): the "
                f"same prompts, rendered a little longer; compared. Those tokens lift its hit % by "
                f"{check.lift or 0:.2f} points."
            )
        elif check.verdict == "different":
            shown = "unknown" if check.share is None else f"{check.share:.3f}"
            section.problems.append(
                f"{name}: {pair.b.label} sent {shown} x the prompt tokens of {pair.a.label} ({check.mode} outputs), "
                f"not one constant amount more or less on every request: the engines were not given the same prompts"
            )
        for kind in sorted({r.kind for run in (pair.a.runs[name], pair.b.runs[name]) for r in run.requests}):
            row: list = [name, kind]
            for side in pair.sides:
                counts = answered_counts(side.runs[name], kind)
                row += [sum(counts.values()), *(counts.get(k, 0) for k in ANSWERS)]
            kinds.rows.append(row)
    return section


def _sent_table() -> Table:
    return Table(
        "Prompt tokens sent, per config",
        [
            "config",
            "outputs",
            "prompt tokens A",
            "prompt tokens B",
            "prompt tokens B/A",
            "requests matched",
            "offset B-A (tokens a request)",
            "hit lift of the offset (points)",
            "same prompts",
        ],
        note="Prompt tokens: the server's prompt_tokens summed over a run's successful requests, mean over runs. "
        "Requests matched: by session and turn, with usage on both sides. Offset: B's prompt tokens minus A's, "
        "the same on every matched request (recorded outputs), or on every first request (live outputs, whose "
        "totals must then agree within 5 % after it). Hit lift: the points that offset adds to the hit % of the "
        "side that has it, since its tokens are cached in every later request (on that side, in the tables). "
        f"`NO`: the engines were sent different prompts (recorded outputs: requests off by different amounts, "
        f"totals more than {RECORDED_TOLERANCE:.1%} apart); that config is left out of the summary.",
    )


def _kinds_table() -> Table:
    return Table(
        "Turn kinds, as recorded and as answered",
        [
            "config",
            "recorded kind",
            "requests A",
            *(f"{k} A" for k in ANSWERS),
            "requests B",
            *(f"{k} B" for k in ANSWERS),
        ],
        note="Each successful request by its recorded kind, and how each engine answered it: with tool calls, "
        "with text, or with nothing streamed (inference-perf's output_message). A recorded tool call "
        "answered with text is no tool call: it has a TTFT and counts among the text answers.",
    )
