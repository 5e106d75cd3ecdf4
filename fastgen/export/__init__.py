"""A replay in other tools' trace formats: Mooncake hash_ids (AIPerf, vLLM's and SGLang's benchmark clients) and
AIPerf's dag_jsonl (sessions as conversations that fork and spawn)."""

from .dag import DagExport, dag_export, session_conversations, write_dag
from .mooncake import DEFAULT_BLOCK_SIZE, mooncake_lines, write_mooncake

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DagExport",
    "dag_export",
    "mooncake_lines",
    "session_conversations",
    "write_dag",
    "write_mooncake",
]
