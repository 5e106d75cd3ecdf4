"""A replay in other tools' trace formats: Mooncake hash_ids (AIPerf, vLLM's and SGLang's benchmark clients) and
AIPerf's dag_jsonl (sessions as conversations that fork and spawn); and one config's replay split into disjoint shards
for several inference-perf processes."""

from .dag import DagExport, dag_export, session_conversations, write_dag
from .mooncake import DEFAULT_BLOCK_SIZE, mooncake_lines, write_mooncake
from .shards import Shard, plan_shards, write_shards

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DagExport",
    "Shard",
    "dag_export",
    "mooncake_lines",
    "plan_shards",
    "session_conversations",
    "write_dag",
    "write_mooncake",
    "write_shards",
]
