"""End-to-end checks of fastgen with the real inference-perf, by role (e2e/README.md):

- engines/: the fake engine (`python -m e2e.engines.server`), an OpenAI-compatible server with a real prefix cache;
- real/: real vLLM, SGLang, vllm-router and AIPerf, each in a venv of its own;
- checks/: what a run or a dataset is checked against, independent of fastgen's own code;
- suites/: the runnable suites, e.g. `python -m e2e.suites.run` (`make e2e`), which generates a small dataset,
  replays all 17 configs and checks what the server saw.
"""
