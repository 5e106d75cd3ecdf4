"""A replay in other tools' trace formats: Mooncake hash_ids (AIPerf, vLLM's and SGLang's benchmark clients),
AIPerf's dag_jsonl (sessions as conversations that fork and spawn) and AIPerf's mooncake_trace with whole prompts
(sessions starting as a Poisson process, for its fixed schedule). One config's replay split into shards for several
inference-perf processes is the bakeoff's (bakeoff.shards); the Kubernetes Job of those shards is here (kubernetes)."""

from .arrivals import poisson_starts_ms
from .dag import DagExport, dag_export, session_conversations, write_dag
from .mooncake import DEFAULT_BLOCK_SIZE, mooncake_lines, write_mooncake
from .mooncake_sessions import SessionsExport, arrivals_seed, mooncake_sessions

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DagExport",
    "SessionsExport",
    "arrivals_seed",
    "dag_export",
    "mooncake_lines",
    "mooncake_sessions",
    "poisson_starts_ms",
    "session_conversations",
    "write_dag",
    "write_mooncake",
]
