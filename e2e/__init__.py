"""End-to-end replay of the generated configs with the real inference-perf against a local fake server.

`python -m e2e.server` serves an OpenAI-compatible chat-completions API with a real prefix cache;
`python -m e2e.run` (`make e2e`) generates a small dataset, replays all 17 configs and checks what the server saw.
"""
