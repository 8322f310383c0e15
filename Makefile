# The project's commands. Each one creates .venv and installs the project when needed, so a fresh
# clone with Python 3.11 needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
BSTAMP := $(VENV)/.installed-bench

.PHONY: demo test ci lint types bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "freehours needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(BSTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

demo: $(STAMP)
	$(BIN)/freehours demo --out out/demo

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check freehours tests benchmarks
	$(BIN)/ruff format --check freehours tests benchmarks

types: $(STAMP)
	$(BIN)/mypy

# CI: the same suite, but PostgreSQL and Redis are required: a test that needs one fails
# instead of skipping when it is not reachable.
ci: lint types
	FREEHOURS_REQUIRE_SERVICES=1 $(BIN)/pytest

bench: $(BSTAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) out bench-out .mypy_cache .ruff_cache .pytest_cache .hypothesis
