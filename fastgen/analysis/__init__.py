"""What a prefix cache can hit on each config before any GPU runs: the replay's requests as block hashes, the
replay's order, and a cache with vLLM's rules (infinite, or at a capacity)."""

from .analyze import AnalysisOptions, ConfigTarget, TargetResult, analyze, config_targets, kv_bytes_per_token

__all__ = ["AnalysisOptions", "ConfigTarget", "TargetResult", "analyze", "config_targets", "kv_bytes_per_token"]
