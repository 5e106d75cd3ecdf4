"""The fake engine: an OpenAI-compatible server on loopback (server.py) with a fake model (model.py), a real prefix
cache (prefix_cache.py) and an engine profile that makes it look like vLLM or SGLang (fake_engine.py)."""
