"""fastgen: token-exact, graph-exact, reproducible KV-cache benchmark traces for inference-perf."""
__version__ = "0.1.0"
