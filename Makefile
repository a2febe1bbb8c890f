# Two entry points, each doing its own set-up: `make demo` and `make test`.

PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d" " -f1)

.PHONY: demo test lint bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/eventlog demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest

# The peers are measured from their own venv, never installed into the dev venv.
BENCH_VENV ?= .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-$(shell cksum pyproject.toml | cut -d" " -f1)

$(BENCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,benchmarks]"
	rm -f $(BENCH_VENV)/.installed-*
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/eventlog bench --quick
