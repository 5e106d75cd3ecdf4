# Everything a new machine needs: `make traces` (offline) and `make test`.
PYTHON ?= python3.12
VENV ?= .venv
BIN := $(VENV)/bin
WORKERS ?= $(shell nproc 2>/dev/null || echo 1)
FASTGEN_ARGS ?=

.PHONY: traces test validate env env-all clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

env: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

env-all: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[validate,dev]'

traces: env
	$(BIN)/fastgen --tokenizer builtin --workers $(WORKERS) --output-dir traces --config-dir configs $(FASTGEN_ARGS)

test: env-all
	$(BIN)/python -m pytest -q

validate: env-all
	$(BIN)/fastgen validate traces --workers $(WORKERS)

clean:
	rm -rf traces build *.egg-info
