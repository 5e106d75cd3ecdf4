"""Same prompts: were both engines given the same prompt tokens, request by request? And what did each answer?

With recorded outputs (inference-perf replays the recorded answers) every request's prompt is the recorded one, so
the two sides' prompt_tokens, matched by config, session and turn, must be equal, or off by one constant: an engine
that renders the same messages with a few tokens more on every request (SGLang 0.5.23 writes `"strict": null,
"defer_loading": null` into each tool definition vLLM leaves as it is: 48 tokens over six tools) prefills the same
prompts plus a fixed amount. Such an offset is explained, the config compared, and its effect on the hit ratio
measured: the offset's tokens sit in the cached prefix of every later request, so they lift that side's hit ratio a
little (`hit lift`: its hit % as measured minus with the offset's tokens taken out of every request). Anything else
(requests off by different amounts: a different dialogue) leaves the config out of the summary. With live outputs
each engine's answers are in its later prompts, so the sides are compared by total tokens, within LIVE_TOLERANCE after
taking out the offset their first requests (which hold no answer yet) show.

Turn kinds: each request's kind as recorded (its span: text, tool_call, root, branch) and as the engine answered it
(tool calls, text, or nothing streamed, from inference-perf's output_message): with `--tool-choice as_recorded` no
tool_choice is sent, and an engine may answer a recorded tool-call turn with text; that turn is then no tool call (it
has a TTFT, and the tool's recorded result follows an answer that did not call it)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Optional

from ..inference import run_figure
from ..report import Pair, Section, Table
from ..runs import ConfigRun, RequestRecord
from ..stats import Figure, prompt_tokens_sent, ratio

SCENARIO = None  # every scenario

RECORDED_TOLERANCE = 0.005  # |B/A - 1| of the totals where requests are off by varying amounts: servers' counting
LIVE_TOLERANCE = 0.05  # with live outputs each engine's answers are in its later prompts
TOLERANCE = {"recorded": RECORDED_TOLERANCE, "live": LIVE_TOLERANCE}
ANSWERS = ("tool_call", "text", "nothing")


@dataclass(frozen=True)
class PromptCheck:
    """What one config's two sides were sent."""

    mode: str  # outputs: recorded or live
    sent: tuple[Figure, Figure]  # prompt tokens per run, each side
    share: Optional[float]  # B/A of the totals
    verdict: str  # "same", "offset" (the same prompts but for `offset` tokens on every request) or "different"
    offset: int  # B's tokens minus A's, on every request matched (0: none)
    matched: int  # requests matched by session and turn, with usage on both sides
    lift: Optional[float]  # hit-% points the offset's tokens add to the side that has them (None: no offset)
    lifted: Optional[str]  # which side: "A" or "B"

    @property
    def compared(self) -> bool:
        return self.verdict != "different"

    @property
    def shown(self) -> str:
        if self.verdict == "offset":
            return f"yes, {self.offset:+,} tokens a request"
        return "yes" if self.verdict == "same" else "NO"


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


def _prompts(run: ConfigRun) -> dict[tuple[str, int], list[int]]:
    """(session, turn) -> the prompt tokens each run's request was sent (successful requests with usage)."""
    found: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in run.requests:
        if not r.failed and r.prompt_tokens is not None:
            found[(r.session, r.turn)].append(r.prompt_tokens)
    return found


def _first_turns(run: ConfigRun) -> set[tuple[str, int]]:
    first: dict[str, int] = {}
    for r in run.requests:
        first[r.session] = min(first.get(r.session, r.turn), r.turn)
    return set(first.items())


def _constant(offsets: list[int]) -> Optional[int]:
    return offsets[0] if offsets and all(o == offsets[0] for o in offsets) else None


def _offset(a: dict, b: dict, keys: list, every: bool) -> Optional[int]:
    """The one amount B's requests are off from A's on these keys (every run's request the same on each side when
    `every`), or None when they are off by different amounts."""
    offsets = []
    for key in keys:
        if every and (len(set(a[key])) > 1 or len(set(b[key])) > 1):
            return None
        offsets.append(round(median(b[key]) - median(a[key])))
    return _constant(offsets)


def _hit_lift(requests: list[RequestRecord], offset: int) -> Optional[float]:
    """Hit-% points that `offset` tokens shared by every request add: the pooled hit ratio as measured minus the
    same with the offset's tokens taken out of each request's prompt and (where it had that many cached) its cached
    tokens."""
    used = [r for r in requests if not r.failed and r.prompt_tokens is not None and r.prompt_tokens > offset]
    prompt = sum(r.prompt_tokens or 0 for r in used)
    cached = sum(r.cached_tokens or 0 for r in used)
    if not prompt or prompt <= offset * len(used):
        return None
    without = sum((r.cached_tokens or 0) - min(r.cached_tokens or 0, offset) for r in used)
    return 100.0 * cached / prompt - 100.0 * without / (prompt - offset * len(used))


def prompt_check(pair: Pair, name: str) -> PromptCheck:
    """Both sides' prompt tokens of one config, matched request by request, and the verdict (computed once)."""
    return pair.tests.memo(("prompts", name), lambda: _prompt_check(pair, name))


def _prompt_check(pair: Pair, name: str) -> PromptCheck:
    mode, _ = _mode(pair, name)
    runs = [side.runs[name] for side in pair.sides]
    sums = [prompt_tokens_sent(run.repeats) for run in runs]
    sent_a, sent_b = (run_figure(s, sum(len(r.requests) for r in run.repeats)) for s, run in zip(sums, runs))
    sent = (sent_a, sent_b)
    share = ratio(sent[0].value, sent[1].value)
    a, b = (_prompts(run) for run in runs)
    keys = sorted(set(a) & set(b))
    firsts = _first_turns(runs[0]) & _first_turns(runs[1])
    first = [k for k in keys if k in firsts]
    offset = _offset(a, b, keys, every=True) if mode == "recorded" else None
    if offset is None:  # requests off by different amounts: the totals, less what the first requests show
        offset = _offset(a, b, first, every=False) or 0
        requests = median([len([r for r in run.requests if not r.failed]) for run in runs[1].repeats] or [0])
        corrected = ratio(sent[0].value, None if sent[1].value is None else sent[1].value - offset * requests)
        within = corrected is not None and bool(keys) and abs(corrected - 1) <= TOLERANCE[mode]
        verdict = ("offset" if offset else "same") if within else "different"
    else:
        verdict = "offset" if offset else "same"
    lift, lifted = None, None
    if verdict == "offset":
        lifted = "B" if offset > 0 else "A"
        lift = _hit_lift(runs[1 if offset > 0 else 0].requests, abs(offset))
    return PromptCheck(mode, sent, share, verdict, offset, len(keys), lift, lifted)


def answered_counts(run: ConfigRun, kind: str) -> Counter:
    """How the engine answered the successful requests of one recorded kind (tool_call, text, nothing, or
    `unknown` where inference-perf recorded no output_message)."""
    return Counter(r.answered or "unknown" for r in run.requests if r.kind == kind and not r.failed)


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs))
    if not names:
        return None
    table = Table(
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
    kinds = Table(
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
    section = Section(
        "prompts", "Same prompts", intro=__doc__.split("\n\n")[0].replace("\n", " "), tables=[table, kinds]
    )
    for name in names:
        _, problem = _mode(pair, name)
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
