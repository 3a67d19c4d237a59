# `make demo` and `make test` work from a fresh clone: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck unit bench clean

# pip leaves byte-compiling to the first import (--no-compile: the dev install takes 43 s
# instead of 95 s), and Python caches what it compiles even where the environment sets
# PYTHONDONTWRITEBYTECODE (otherwise every test process compiles numpy, scipy and flwr anew).
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Stamps are keyed on pyproject.toml so that a changed dependency list reinstalls.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --no-compile -e ".[examples]"
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --no-compile -e ".[dev]"
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(BIN)/fedroc demo

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# Two pytest processes, a test file each at a time (module fixtures start a deployment or a
# server once per file): the Flower and service files mostly wait on their subprocesses, so
# the rest of the suite runs beside them. tests/conftest.py hands out the longest files first;
# --no-loadscope-reorder keeps that order (xdist otherwise starts the files with the most
# tests first, and the 50 s stock-Flower file ran last, alone, for the final 46 s).
# One OpenMP and BLAS thread per process: two workers already fill the two cores, and
# scikit-learn's gradient boosting with a thread per core in each took 31 s instead of 4 s
# for the flchain scores of test_histogram.py.
unit: $(VENV)/.dev-installed
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile --no-loadscope-reorder

# The checks run side by side: the test suite mostly waits on its servers and subprocesses,
# so ruff and mypy fit beside it and the whole target stays under 10 minutes.
test: $(VENV)/.dev-installed
	$(MAKE) --no-print-directory -j3 lint typecheck unit

bench: $(VENV)/.dev-installed
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
