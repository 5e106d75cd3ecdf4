"""A replay in other tools' trace formats: Mooncake hash_ids (AIPerf, vLLM's and SGLang's benchmark clients)."""

from .mooncake import DEFAULT_BLOCK_SIZE, mooncake_lines, write_mooncake

__all__ = ["DEFAULT_BLOCK_SIZE", "mooncake_lines", "write_mooncake"]
