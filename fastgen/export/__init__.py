"""A replay in other tools' trace formats: Mooncake hash_ids (AIPerf, vLLM's and SGLang's benchmark clients),
AIPerf's dag_jsonl (sessions as conversations that fork and spawn) and AIPerf's mooncake_trace with whole prompts
(sessions starting as a Poisson process, for its fixed schedule); and one config's replay split into disjoint shards
for several inference-perf processes."""

from .arrivals import poisson_starts_ms
from .dag import DagExport, dag_export, session_conversations, write_dag
from .mooncake import DEFAULT_BLOCK_SIZE, mooncake_lines, write_mooncake
from .mooncake_sessions import SessionsExport, arrivals_seed, mooncake_sessions
from .shards import Shard, plan_shards, write_shards

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DagExport",
    "SessionsExport",
    "Shard",
    "arrivals_seed",
    "dag_export",
    "mooncake_lines",
    "mooncake_sessions",
    "plan_shards",
    "poisson_starts_ms",
    "session_conversations",
    "write_dag",
    "write_mooncake",
    "write_shards",
]
