"""A replay as a Mooncake trace: one JSON line per request, in replay order, with the prompt as block hash ids.

    {"timestamp": 0, "input_length": 1840, "output_length": 20, "hash_ids": [0, 1, 2, 3], "session_id": "..."}

`hash_ids` cover the request's whole prompt (not a delta over the session's previous turn): dense ids in first-seen
order, one per block of `block_size` tokens, a trailing partial block counted as one id of its own. Equal ids mean
equal whole prefixes (chained hashes), so a reader that knows nothing of sessions sees the reuse. `timestamp` is the
request's start in the simulated replay (analysis.schedule), in milliseconds.

Readers: AIPerf's `analyze-trace` and `mooncake_trace` loader (block size 512: `--isl-block-size`), vLLM's
`bench serve --dataset-name timed_trace` (`--timed-trace-chunk-hash-size 512 --timed-trace-sec-multiplier 0.001`,
its timestamps being seconds by default), SGLang's `bench_serving --dataset-name mooncake` (milliseconds).
"""

from __future__ import annotations

from pathlib import Path

from .jsonl import write_jsonl
from ..analysis.aiperf import dense_hash_ids
from ..analysis.analyze import ConfigTarget, Corpus, replay_requests
from ..analysis.schedule import ServiceModel

__all__ = ["DEFAULT_BLOCK_SIZE", "mooncake_lines", "write_mooncake"]

DEFAULT_BLOCK_SIZE = 512  # Mooncake's and AIPerf's


def mooncake_lines(target: ConfigTarget, corpus: Corpus, service: ServiceModel = ServiceModel()) -> list[dict]:
    replay = replay_requests(target, corpus, service)
    lines = []
    for (outcome, request), hash_ids in zip(replay, dense_hash_ids(r for _, r in replay)):
        session = corpus.session_id(outcome.file_index)
        lines.append(
            {
                "timestamp": int(round(outcome.start_s * 1000)),
                "input_length": request.prompt_tokens,
                "output_length": request.output_tokens,
                "hash_ids": hash_ids,
                "session_id": session,
            }
        )
    return lines


def write_mooncake(lines: list[dict], out: Path) -> None:
    """The lines into `out` (through a temporary file beside it, so a failed write leaves no partial file)."""
    write_jsonl(lines, out)
