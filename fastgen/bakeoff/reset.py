"""An empty prefix cache before each run, and proof of it where the server allows.

A reset endpoint's answer proves nothing (vLLM answers an empty 200 whether it emptied its cache or not), so the
reset is verified with a probe: a fixed prompt of a few hundred tokens, one output token, sent twice (the second
must report cached tokens, or the server cannot show a reset: verified null), then the reset, then once more: no
cached tokens means the reset emptied the cache (verified true); cached tokens mean it did not, and the bakeoff stops
(a run after it would start warm). A last reset then removes the probe's own prefix, so each run starts from an
empty cache.
"""

from __future__ import annotations

import time

from ..errors import ServerError
from .sampler import parse_metrics
from .server import LiveServer

__all__ = ["IDLE_WAIT_S", "PROBE_MARKER", "PROBE_PROMPT", "no_reset", "verified_reset", "wait_idle"]

IDLE_WAIT_S = 120.0
_POLL_S = 0.5
# every request of the bakeoff's own starts with it (these probes, preflight.py's): the e2e checks tell them from the
# replay's requests by it
PROBE_MARKER = "fastgen probe"
# a few hundred tokens on any tokenizer (numbers are one to three tokens each), shared with nothing in a dataset
PROBE_PROMPT = f"{PROBE_MARKER} (prefix cache): " + " ".join(str(n) for n in range(1000, 1150))


def no_reset() -> dict:
    """The run record's reset for --no-reset."""
    return {"done": "none (--no-reset)", "verified": None, "how": "not reset: --no-reset"}


def wait_idle(server: LiveServer, *, timeout_s: float = IDLE_WAIT_S, poll_s: float = _POLL_S) -> None:
    """Wait until no request runs or waits (vLLM resets nothing while blocks are held). A /metrics that cannot be
    read is an error: the server's idleness cannot be told, so neither can the reset's effect."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sample = parse_metrics(server.metrics_text(), f"{server.engine.name}:")
        except (OSError, ServerError, ValueError) as exc:
            raise ServerError(
                f"cannot read {server.url}/metrics to wait until the server is idle "
                f"({_one_line(exc)}); start it with metrics on (SGLang: --enable-metrics), or pass "
                f"--no-reset"
            ) from None
        busy = sum(server.engine.metric(sample, q) or 0 for q in ("running", "waiting"))
        if busy == 0:
            return
        if time.monotonic() > deadline:
            raise ServerError(
                f"{server.url} still has {busy:g} requests running or waiting after {timeout_s:g} s; "
                f"stop the other load on it, or pass --no-reset"
            )
        time.sleep(poll_s)


def verified_reset(server: LiveServer, model: str) -> dict:
    """Empty the server's prefix cache and verify it with the probe; the run record's reset field. Raises
    ServerError when the reset left the probe's prefix cached."""
    try:
        server.chat_usage(model, PROBE_PROMPT)
        warm = server.chat_usage(model, PROBE_PROMPT)
    except ServerError as exc:
        verified, how = None, f"not verified: the probe before the reset failed ({_one_line(exc)})"
    else:
        if not warm.cached_tokens:
            verified, how = (
                None,
                (
                    f"not verified: the probe sent twice got no cached tokens the second time (the "
                    f"server reports none; {server.engine.cache_report_flag} turns them on)"
                ),
            )
        else:
            server.reset_prefix_cache()
            verified, how = _after_reset(server, model, warm.cached_tokens, warm.prompt_tokens)
    # the reset the run starts from: after a verification it also drops the probe's own prefix
    return {"done": server.reset_prefix_cache(), "verified": verified, "how": how}


def _after_reset(server: LiveServer, model: str, warm_cached: int, prompt_tokens) -> tuple:
    try:
        after = server.chat_usage(model, PROBE_PROMPT)
    except ServerError as exc:
        return None, f"not verified: the probe after the reset failed ({_one_line(exc)})"
    what = f"POST {server.engine.reset_path}"
    if after.cached_tokens:
        raise ServerError(
            f"{what} at {server.url} answered but did not empty the prefix cache: a probe prompt of "
            f"{prompt_tokens} tokens still had {after.cached_tokens} cached after it; "
            f"{server.engine.reset_unverified_hint}"
        )
    return True, (
        f"a probe prompt of {prompt_tokens} tokens had {warm_cached} cached before the reset and none after it"
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
