# The project's commands. Each one creates .venv and installs the project when needed, so a fresh
# clone with Python 3.11 needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
BSTAMP := $(VENV)/.installed-bench
FSTAMP := $(VENV)/.installed-fuzz
FUZZ_SECONDS ?= 600

.PHONY: demo test ci lint types verify bench bench-day fuzz openapi clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "freehours needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)

# setup.py builds the NEM12 reader's C part (freehours/meterdata/nem12/_rows.c) in place: a change
# to it installs again, which compiles it.
$(STAMP): pyproject.toml setup.py freehours/meterdata/nem12/_rows.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(BSTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

# SERVE=1: then serve the operations console over the demo's data until interrupted.
demo: $(STAMP)
	$(BIN)/freehours demo --out out/demo $(if $(SERVE),--serve)

# The suite on every core (pytest-xdist): each test has its own database and Redis prefix. The
# slow tests (more than half the suite's time) are collected first (tests/conftest.py) and handed
# out a test at a time as the workers free up (--maxschedchunk 1): in xdist's first chunks, or
# with worksteal, one worker ran every slow test and the run took as long as they did.
test: $(STAMP)
	$(BIN)/pytest -n auto --maxschedchunk 1

lint: $(STAMP)
	$(BIN)/ruff check freehours tests benchmarks verify setup.py
	$(BIN)/ruff format --check freehours tests benchmarks verify setup.py

types: $(STAMP)
	$(BIN)/mypy

# CI: the same suite, but PostgreSQL and Redis are required: a test that needs one fails
# instead of skipping when it is not reachable. The slowest tests are listed at the end, to keep
# the whole under its 20 minutes.
ci: lint types
	FREEHOURS_REQUIRE_SERVICES=1 $(BIN)/pytest -n auto --maxschedchunk 1 --durations=15

# The protocol proved (docs/protocol.md): the Spin model of verify/settlement.pml in its larger
# configuration (states explored and time printed), then the stateful tests of the real code with
# more examples. `make ci` checks the bounded configuration (tests/protocol).
STATEFUL_EXAMPLES ?= 100
verify: $(STAMP)
	$(BIN)/python verify/check.py --config large
	FREEHOURS_STATEFUL_EXAMPLES=$(STATEFUL_EXAMPLES) FREEHOURS_STATEFUL_STEPS=40 \
	  $(BIN)/pytest tests/protocol/test_stateful.py -q --durations=0

bench: $(BSTAMP)
	$(BIN)/python -m benchmarks

# A retailer's day at scale (benchmarks/bench_day.py): each size ingested, settled and billed in a
# database of its own; the cost per customer of the last two sizes compared. CUSTOMERS="10000"
# for a quick look.
CUSTOMERS ?= 10000 100000 1000000
bench-day: $(BSTAMP)
	$(BIN)/python -m benchmarks day --customers $(CUSTOMERS)

# The OpenAPI document written again from the routes (docs/api.md); a test fails while the
# committed one differs from what the API serves.
openapi: $(STAMP)
	$(BIN)/python -m freehours.api.schema --write docs/openapi.json

$(FSTAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,fuzz]'
	touch $@

# Coverage-guided fuzzing (atheris) of each parser for FUZZ_SECONDS, from the kept corpus and the
# hand-made seeds, growing a working corpus in out/fuzz; then that is merged (minimised) into
# tests/fuzz/corpus, replayed by every test run. A crash or a slow input is written to out/fuzz/
# with its traceback, and the run fails.
fuzz: $(FSTAMP)
	mkdir -p out/fuzz
	for target in nem12 readings cdr_plan toml_plan customers; do \
	  mkdir -p out/fuzz/$$target-work tests/fuzz/corpus/$$target && rm -rf out/fuzz/$$target-merged; \
	  (cd out/fuzz && PYTHONPATH=$(CURDIR) ../../$(BIN)/python -m tests.fuzz.run $$target \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	    $$target-work ../../tests/fuzz/corpus/$$target ../../tests/fuzz/seeds/$$target) || exit 1; \
	  mkdir out/fuzz/$$target-merged; \
	  (cd out/fuzz && PYTHONPATH=$(CURDIR) ../../$(BIN)/python -m tests.fuzz.run $$target -merge=1 \
	    $$target-merged ../../tests/fuzz/corpus/$$target $$target-work) || exit 1; \
	  rm -rf tests/fuzz/corpus/$$target && mv out/fuzz/$$target-merged tests/fuzz/corpus/$$target; \
	done

clean:
	rm -rf $(VENV) out bench-out .mypy_cache .ruff_cache .pytest_cache .hypothesis build
	find freehours -name "*.so" -delete
