"""`fastgen bakeoff` against a real SGLang server on this machine's CPU (e2e/real/sglang.py: SGLang 0.5.23 with its two
stand-ins, the tiny random model the real vLLM serves), checked against SGLang's own numbers.

    python -m e2e.suites.bakeoff_sglang [--venv DIR] [--workdir .e2e-sglang]

One config per scenario of the e2e dataset (CONFIGS, as e2e.suites.bakeoff_vllm), run once each with the recorded
outputs (`--outputs recorded --tool-call-max-tokens recorded`: the random model never closes a forced tool call, so its
tool-call turns stop at the recorded length), against a small KV pool (POOL_TOKENS, `--max-total-tokens`: 64 MiB) that
holds scenario 3's twenty sessions at once. SGLang runs with tool_call_parser qwen3_coder: with hermes it does not hold
a named tool_choice (e2e/real/sglang.py, SglangServer). The checks, per run (check_sglang_runs):

- it completed, after a `POST /flush_cache` that the bakeoff verified with its probe (run.json reset.verified true);
- the first request SGLang served is cold: of the first wave (the requests that started before the first one
  ended) one found 0 tokens cached. The radix cache hits per token, so without the flush even the chat template's
  opening tokens, left over from the probe or the config before, would count. Not the first request to start: where
  sessions start together (scenario1/c10's four, scenario2's roots) it is not always the first prefilled, and then
  it finds the shared system prompt cached (measured: 882 and 877 tokens);
- the per-request cached tokens pooled over the prompt tokens (what the report's hit % is made of) equal the growth
  of SGLang's own `sglang:cached_tokens_total` over `sglang:prompt_tokens_total` in the run's metrics.jsonl, token
  for token (COUNTER_TOLERANCE_TOKENS);
- the metrics samples cover the run: one at or before the first session's start, one at or after the last's end;
- forced tool-call turns: inference-perf's per-request record keeps the streamed answer
  (`info.output_message.tool_calls`); every one that names a tool names the forced one, the rest used their whole
  (recorded) budget before qwen3_coder's XML got to the name (_check_tool_names), and the bakeoff's own probe
  before the first config found the named tool_choice held (run.json identity.server.tool_choice_held);
- prompts, as SGLang renders them: inference-perf sends unforced turns `tool_choice: "none"`, and SGLang then renders
  no tools into the prompt; forced turns get the forced tool alone (serving_chat.py). vLLM renders every tool either
  way, and so does fastgen's count (the span's recorded input_tokens). So every unforced turn of a session falls
  short of the recorded prompt by one amount (its tool list: 781 to 784 tokens here) and each forced turn by less.
  The same requests are sent to both engines, but SGLang prefills shorter prompts (see e2e.suites.bakeoff_pair), and its
  cache suffers: the tools come first in the template, so a turn shares only the system prompt with the turn
  before unless both force the same tool (scenario3/c100_noisy, 56 of 76 turns forced: 22.6 % hit, vLLM 79.3 %).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

from fastgen.formats.run_folder import METRICS_FILE, PER_REQUEST_FILE as PER_REQUEST
from fastgen.results import read_runs

from .bakeoff_vllm import CONFIGS, MAX_MODEL_LEN, MODES, _hit_percent, _recorded_inputs
from ..real.engine_process import tiny_model
from .run import Dataset, generate
from ..real.sglang import NAME_ENFORCING_TOOL_CALL_PARSER, SglangServer, install
from .runner import add_venv, bakeoff, run_suite, suite_parser

__all__ = ["main", "run_sglang_bakeoff", "run_bakeoff", "check_sglang_runs", "sglang_counters", "start_sglang"]

LABEL = "sglang"
REPEATS = 1
# --max-total-tokens: 64 MiB of KV at 512 bytes per token; the largest e2e request is ~3.5 K tokens. 32,768 (16 MiB)
# also holds it, but not scenario3/c100_noisy's 20 sessions at once: measured 11.0 % hit against 22.6 % here (the
# rest of the gap to vLLM's 79.3 % is the prompts SGLang renders, see the docstring), the run slower for the prefills
POOL_TOKENS = 131072
COUNTER_TOLERANCE_TOKENS = 0  # measured: the counters grow by exactly the usage SGLang reports
RESET = "POST /flush_cache"
BAKEOFF_TIMEOUT_S = 900  # per config; a run here takes under a minute on a quiet machine


def sglang_counters(metrics: Path) -> Optional[tuple[int, int]]:
    """(growth of sglang:cached_tokens_total, growth of sglang:prompt_tokens_total) from the run's first sample to
    its last (each summed over its label sets: cache_source, is_streaming); None without two samples."""
    samples = [json.loads(line).get("metrics") or {} for line in metrics.read_text().splitlines() if line.strip()]
    samples = [s for s in samples if "sglang:prompt_tokens_total" in s]
    if len(samples) < 2:
        return None
    grown = [
        round(samples[-1].get(name, 0.0) - samples[0].get(name, 0.0))
        for name in ("sglang:cached_tokens_total", "sglang:prompt_tokens_total")
    ]
    return grown[0], grown[1]


def sglang_hit_percent(metrics: Path) -> Optional[float]:
    counters = sglang_counters(metrics)
    return 100.0 * counters[0] / counters[1] if counters and counters[1] else None


def recorded_tool_calls(traces: Path) -> dict[tuple[str, int], tuple[str, int]]:
    """(session id, turn) -> (the name of the tool the span's recorded answer calls, its recorded output tokens:
    the turn's max_tokens with recorded tool-call budgets), for every tool-call span."""
    found = {}
    for path in sorted(traces.glob("scenario*/session_*.json")):
        for span in json.loads(path.read_bytes())["spans"]:
            a = span["attributes"]
            if a.get("fastgen.turn_kind") != "tool_call":
                continue
            parts = [
                p
                for m in json.loads(a["gen_ai.output.messages"])
                for p in m.get("parts") or []
                if p.get("type") == "tool_call"
            ]
            found[(a["gen_ai.conversation.id"], int(a["fastgen.turn"]))] = (
                parts[0]["name"],
                a["gen_ai.usage.output_tokens"],
            )
    return found


def largest_request(traces: Path) -> int:
    """The most tokens one recorded request holds: its prompt plus its recorded output (max_tokens with recorded
    tool-call budgets)."""
    return max(
        span["attributes"]["gen_ai.usage.input_tokens"] + span["attributes"]["gen_ai.usage.output_tokens"]
        for path in traces.glob("scenario*/session_*.json")
        for span in json.loads(path.read_bytes())["spans"]
    )


def _answered_calls(folder: Path) -> dict[tuple[str, int], tuple[list[Optional[str]], Optional[int]]]:
    """(session id, turn) -> (the tool names of each tool-call turn's streamed answer, its completion tokens), from
    inference-perf's per-request record (info.output_message, which it assembles from the tool_calls deltas)."""
    found: dict[tuple[str, int], tuple[list[Optional[str]], Optional[int]]] = {}  # a name may be missing
    for entry in json.loads((folder / PER_REQUEST).read_text()):
        info: dict[str, Any] = entry.get("info") or {}
        labels: Any = info.get("labels") or {}  # JSON: the values are what inference-perf wrote
        if labels.get("turn_kind") != "tool_call":
            continue
        calls: list[Any] = (info.get("output_message") or {}).get("tool_calls") or []
        usage = (info.get("response_metrics") or {}).get("server_usage") or {}
        found[(labels.get("session"), int(labels.get("turn")))] = (
            [(c.get("function") or {}).get("name") for c in calls],
            usage.get("completion_tokens"),
        )
    return found


def _check_tool_names(answered: dict, recorded: dict) -> tuple[int, int, list[str]]:
    """(forced turns that answered the forced name, those cut off before any name, problems). qwen3_coder's calls
    are XML (`<tool_call>` `<function=NAME>` ...) and its parser streams the name only once `<function=NAME>` is
    complete, which takes more tokens than a short recorded JSON call: a turn whose recorded budget ends first
    streams nothing (measured: budgets of 13-20 tokens named nothing, 24 and up named the tool). Such a turn must
    have used its whole budget; no turn may name another tool."""
    named = cut = 0
    problems = []
    for key, (names, completion) in sorted(answered.items()):
        if key not in recorded:
            problems.append(f"{key[0]} turn {key[1]}: a tool-call turn the traces do not record")
            continue
        forced, budget = recorded[key]
        if names[:1] == [forced]:
            named += 1
        elif not names and completion == budget:
            cut += 1
        else:
            problems.append(
                f"{key[0]} turn {key[1]}: forced {forced}, answered {names} in {completion} of {budget} tokens"
            )
    return named, cut, problems


def start_sglang(python: Path, model: Path, workdir: Path, label: str, *, max_total_tokens: int) -> SglangServer:
    """The suite's SGLang: loopback, the name-enforcing tool-call parser, MAX_MODEL_LEN context (unstarted)."""
    return SglangServer(
        python,
        model,
        max_total_tokens=max_total_tokens,
        context_length=MAX_MODEL_LEN,
        tool_call_parser=NAME_ENFORCING_TOOL_CALL_PARSER,
        log=workdir / "logs" / f"{label}.log",
    )


def run_bakeoff(
    url: str,
    label: str,
    workdir: Path,
    repeats: int,
    *,
    modes: tuple[str, ...] = MODES,
    configs: tuple[str, ...] = CONFIGS,
) -> list[str]:
    """`fastgen bakeoff` of `configs` against `url` into workdir/reports/label, recorded outputs (and `modes`); its
    failure, if any."""
    begun = time.monotonic()
    options = ("--scrape-interval", "1", "--timeout", str(BAKEOFF_TIMEOUT_S), "--rerun", "--repeat", str(repeats))
    result = bakeoff(url, label, workdir, *options, *modes, "--configs", *configs, timeout_s=3600)
    print(
        f"{label}: fastgen bakeoff --repeat {repeats} {' '.join(modes)}: exit {result.returncode}, "
        f"{time.monotonic() - begun:.0f} s",
        flush=True,
    )
    for line in result.stderr.splitlines():
        if " is still starting " in line:  # the bakeoff waited for the engine's own warmup request to be answered
            print(f"{label}: {line}", flush=True)
    if result.returncode != 0:
        return [f"{label}: fastgen bakeoff exited {result.returncode}: {result.stdout[-600:]} {result.stderr[-600:]}"]
    return []


def check_sglang_runs(workdir: Path, label: str, configs=CONFIGS, *, forced: bool = True) -> list[str]:
    """The module docstring's checks on every run of workdir/reports/label; one summary line per run. Without
    `forced` (runs with --tool-choice as_recorded) every prompt is the recorded one instead of the forced-mode
    shortfalls, and there are no forced tool calls to check."""
    runs, problems = read_runs(workdir / "reports" / label)
    failures = [f"{label}: {p}" for p in problems]
    recorded = _recorded_inputs(workdir / "traces")
    tool_calls = recorded_tool_calls(workdir / "traces")
    for name in configs:
        if name not in runs:
            failures.append(f"{label} {name}: no run")
            continue
        for repeat in runs[name].repeats:
            where = f"{label} {name} repeat {repeat.index}"
            failures += _check_repeat(where, repeat, recorded, tool_calls if forced else None)
    return failures


def _check_repeat(where: str, repeat, recorded: dict, tool_calls: Optional[dict]) -> list[str]:
    failures = []
    if repeat.status != "completed":
        failures.append(f"{where}: {repeat.status} ({repeat.reason})")
    reset = repeat.reset or {}
    if (reset.get("done"), reset.get("verified")) != (RESET, True):
        failures.append(f"{where}: reset {reset!r}, not a verified {RESET}")
    requests = [r for r in repeat.requests if r.prompt_tokens is not None]
    if not requests:
        return failures + [f"{where}: no request reported usage"]
    # the first request SGLang served is cold: sessions that start together (scenario1/c10's four, scenario2's roots)
    # race through its tokenizer, and the one that started first is not always prefilled first; any request of the
    # first wave (started before the first one ended) served after another finds that one's system prompt cached
    wave = [r for r in repeat.requests if r.start < min(q.end for q in repeat.requests)]
    coldest = min(r.cached_tokens or 0 for r in wave)
    if coldest != 0:
        failures.append(
            f"{where}: every request of its first wave ({len(wave)}) found tokens cached after the "
            f"flush, {coldest} at the least"
        )
    pooled = (sum(r.cached_tokens or 0 for r in requests), sum(r.prompt_tokens for r in requests))
    counters = sglang_counters(repeat.folder / METRICS_FILE)
    if counters is None:
        failures.append(f"{where}: fewer than two sglang:* samples in metrics.jsonl")
    elif any(abs(a - b) > COUNTER_TOLERANCE_TOKENS for a, b in zip(pooled, counters)):
        failures.append(
            f"{where}: the requests report {pooled[0]} cached of {pooled[1]} prompt tokens, SGLang's "
            f"counters grew by {counters[0]} and {counters[1]}"
        )
    times = [t for t, _ in repeat.samples]
    sessions = repeat.sessions
    covered = (
        bool(times and sessions)
        and min(times) <= min(s.start for s in sessions)
        and max(times) >= max(s.end for s in sessions)
    )
    if not covered:
        failures.append(f"{where}: the metrics samples ({len(times)}) do not cover the sessions' span")
    if tool_calls is None:
        # No tool_choice sent: SGLang renders every tool, each dumped with its unset fields as null ("strict",
        # "defer_loading": serving_chat.py's item.model_dump()), so every prompt is the recorded one plus one amount,
        # the same for every request of a dataset whose requests carry the same tools
        extra = sorted({r.prompt_tokens - recorded.get((r.session, r.turn), 0) for r in requests})
        if len(extra) != 1 or extra[0] < 0:
            failures.append(
                f"{where}: SGLang's prompts exceed the recorded ones by {extra[:8]} tokens, not by one "
                f"amount (its serialization of the tool list)"
            )
        print(
            f"{where}: {repeat.status}, {len(requests)} requests, {repeat.seconds} s; hit "
            f"{_hit_percent([(r.prompt_tokens, r.cached_tokens or 0) for r in requests]):.2f} % "
            f"({pooled[0]}/{pooled[1]}), SGLang's counters {counters}; first wave {len(wave)}, the coldest "
            f"{coldest} cached; reset verified {reset.get('verified')}; {len(times)} samples; every prompt the "
            f"recorded one plus {extra} tokens",
            flush=True,
        )
        return failures
    named, cut, tool_problems = _check_tool_names(_answered_calls(repeat.folder), tool_calls)
    failures += [f"{where}: {p}" for p in tool_problems[:5]]
    if cut and not named:
        failures.append(f"{where}: no forced tool-call turn streamed a name ({cut} ran out of budget first)")
    held = repeat.server.get("tool_choice_held", True)  # the bakeoff's own probe before the first config
    if held is False:
        failures.append(f"{where}: the bakeoff's probe found the named tool_choice not held")
    text, forced_short, prompt_problems = _prompt_deficits(requests, recorded)
    failures += [f"{where}: {p}" for p in prompt_problems[:5]]
    counters_text = "none" if counters is None else f"{counters[0]}/{counters[1]}"
    print(
        f"{where}: {repeat.status}, {len(requests)} requests, {repeat.seconds} s; hit "
        f"{_hit_percent([(r.prompt_tokens, r.cached_tokens or 0) for r in requests]):.2f} % "
        f"({pooled[0]}/{pooled[1]}), SGLang's counters {counters_text}; first wave {len(wave)} requests, the "
        f"coldest {coldest} cached (the first started: {min(repeat.requests, key=lambda r: r.start).cached_tokens}"
        f"); reset verified {reset.get('verified')}; {len(times)} samples {'cover' if covered else 'do NOT cover'} "
        f"the run; forced tool-call turns: {named} named the forced tool, {cut} were cut off before a name, none "
        f"named another; prompts shorter than recorded: "
        f"{len(requests) - len(forced_short)} unforced turns by {sorted(text)} (the tool list), {len(forced_short)} "
        f"forced turns by {min(forced_short, default=0)}-{max(forced_short, default=0)}",
        flush=True,
    )
    return failures


def _prompt_deficits(requests: list, recorded: dict) -> tuple[set, list, list]:
    """(the distinct amounts by which SGLang's prompt_tokens of unforced turns fall short of the span's recorded
    input_tokens, those of forced turns, problems). inference-perf sends unforced turns tool_choice "none", and SGLang
    then renders no tools into the prompt (vLLM renders them all, as fastgen counts them): each unforced turn is
    shorter by its session's whole tool list, one amount per session. A forced turn renders the forced tool alone: it
    is shorter by less than that (the other tools' lines), and by something."""
    by_session: dict[str, set] = {}
    problems, forced = [], []
    for r in requests:
        want = recorded.get((r.session, r.turn))
        if want is None:
            problems.append(f"{r.session} turn {r.turn}: no recorded span")
        elif r.kind != "tool_call":
            by_session.setdefault(r.session, set()).add(want - r.prompt_tokens)
    for session, amounts in sorted(by_session.items()):
        if len(amounts) != 1 or min(amounts) <= 0:
            problems.append(
                f"{session}: its unforced turns fall short of the recorded prompts by {sorted(amounts)} "
                f"tokens, not by one positive amount (its tool list)"
            )
    for r in requests:
        want = recorded.get((r.session, r.turn))
        if r.kind != "tool_call" or want is None:
            continue
        forced.append(want - r.prompt_tokens)
        whole = by_session.get(r.session, {None})
        if not 0 < forced[-1] < (min(whole) if None not in whole else want):
            problems.append(
                f"{r.session} turn {r.turn} (forced): {r.prompt_tokens} prompt tokens against "
                f"{want} recorded; its session's tool list is {sorted(whole, key=str)} tokens"
            )
    return {a for amounts in by_session.values() for a in amounts}, forced, problems


def run_sglang_bakeoff(workdir: Path, venv: Path) -> list[str]:
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    python = install(venv, quiet=True)
    model = tiny_model(python, venv, MAX_MODEL_LEN)
    print(f"SGLang installed and model built: {time.monotonic() - started:.0f} s", flush=True)
    generate(workdir, "http://127.0.0.1:9", Dataset())
    largest = largest_request(workdir / "traces")
    if largest > POOL_TOKENS:
        return [f"the largest request holds {largest} tokens, more than the pool of {POOL_TOKENS}"]
    with start_sglang(python, model, workdir, LABEL, max_total_tokens=POOL_TOKENS) as server:
        print(
            f"{LABEL}: serving after {server.started_s:.0f} s (--max-total-tokens {POOL_TOKENS}, the largest "
            f"request {largest} tokens)",
            flush=True,
        )
        failures = run_bakeoff(server.base_url, LABEL, workdir, REPEATS)
    return failures + check_sglang_runs(workdir, LABEL)


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("bakeoff_sglang", __doc__, ".e2e-sglang")
    add_venv(p, "sglang")
    args = p.parse_args(argv)
    where = args.workdir / "reports" / LABEL
    return run_suite("SGLang bakeoff e2e", where, run_sglang_bakeoff, args.workdir, args.venv.resolve())


if __name__ == "__main__":
    raise SystemExit(main())
