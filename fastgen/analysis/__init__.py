"""What a prefix cache will hit on each config before any GPU runs: the replay's requests as block hashes, the
replay's order, and engines that schedule as vLLM or SGLang do (one, or replicas behind a router), with an unbounded
KV cache or at a capacity; a point and the band jittered replays span."""

from .analyze import AnalysisOptions, ConfigTarget, TargetResult, analyze, config_targets, kv_bytes_per_token

__all__ = ["AnalysisOptions", "ConfigTarget", "TargetResult", "analyze", "config_targets", "kv_bytes_per_token"]
