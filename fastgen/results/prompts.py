"""Were both sides of a config sent the same prompts? Their requests matched by session and turn, with the prompt
tokens each server counted (its usage).

With recorded outputs every request's prompt is the recorded one, so the two sides' prompt_tokens must be equal, or
off by one constant: an engine that renders the same messages a few tokens longer on every request (SGLang 0.5.23
writes `"strict": null, "defer_loading": null` into each tool definition vLLM leaves as it is: 48 tokens over six
tools) was sent the same prompts plus a fixed amount (verdict "offset"). Requests off by different amounts are a
different dialogue ("different"). With live outputs each engine's answers are in its later prompts: the totals must
agree within LIVE_TOLERANCE once the offset the first requests (which hold no answer yet) show is taken out.

An offset's tokens sit in the cached prefix of every later request, so they lift that side's hit ratio a little:
`lift` says by how much, and `without_offset` gives the requests as if rendered without it (the report compares hit
ratios so, report.Pair).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from statistics import median
from typing import Optional

from .inference import run_figure
from .runs import ConfigRun, RequestRecord
from .stats import Figure, hit_percent, prompt_tokens_sent, ratio

__all__ = [
    "LIVE_TOLERANCE",
    "RECORDED_TOLERANCE",
    "PromptCheck",
    "check_prompts",
    "outputs_mode",
    "without_offset",
]

RECORDED_TOLERANCE = 0.005  # |B/A - 1| of the totals where requests are off by varying amounts: servers' counting
LIVE_TOLERANCE = 0.05  # with live outputs each engine's answers are in its later prompts
TOLERANCE = {"recorded": RECORDED_TOLERANCE, "live": LIVE_TOLERANCE}


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


def outputs_mode(runs: tuple[ConfigRun, ConfigRun], labels: tuple[str, str]) -> tuple[str, Optional[str]]:
    """(the outputs mode both sides ran, or "live" when not recorded; a problem when the sides differ)."""
    modes = [run.identity_values("outputs") for run in runs]
    if any(len(m) > 1 for m in modes) or (all(modes) and modes[0] != modes[1]):
        shown = ["/".join(m) or "not recorded" for m in modes]
        return "live", (
            f"{runs[0].name}: outputs were {shown[0]} on {labels[0]} and {shown[1]} on {labels[1]}; run "
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


def without_offset(requests: list[RequestRecord], offset: int) -> list[RequestRecord]:
    """The requests as if rendered without `offset` tokens more each: that many fewer prompt tokens, and fewer cached
    ones where it had that many cached (the offset's tokens sit in the cached prefix of every later request)."""
    found = []
    for r in requests:
        if r.failed or r.prompt_tokens is None or r.prompt_tokens <= offset:
            found.append(r)
            continue
        cached = r.cached_tokens or 0
        found.append(replace(r, prompt_tokens=r.prompt_tokens - offset, cached_tokens=cached - min(cached, offset)))
    return found


def _hit_lift(requests: list[RequestRecord], offset: int) -> Optional[float]:
    """Hit-% points that `offset` tokens shared by every request add: the pooled hit ratio as measured minus the
    same without them."""
    measured, without = hit_percent(requests), hit_percent(without_offset(requests, offset))
    return None if measured is None or without is None else measured - without


def check_prompts(runs: tuple[ConfigRun, ConfigRun], labels: tuple[str, str]) -> PromptCheck:
    """Both sides' prompt tokens of one config, matched request by request, and the verdict."""
    mode, _ = outputs_mode(runs, labels)
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
