"""Real engines and tools, each installed into a venv of its own and started as its own process group: vLLM
(vllm.py), SGLang (sglang.py, with stand_ins/), vllm-router (router.py), AIPerf (aiperf.py), and what the engines
share (engine_process.py)."""
