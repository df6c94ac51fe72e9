# The two commands a newcomer needs: `make demo` and `make test`.
# Everything else here is what those two stand on.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup system-deps lint typecheck unit bench clean sample-traces

demo: setup ## Set up, regenerate sample traces, print findings, then toolspan serve live: the agents export to it over OTLP and the dashboard fills up
	$(BIN)/python -m sample_traces

# The tests marked `serial` (browsers, rate measurements) run after the others,
# alone: on 2 cores the parallel part's load makes them miss their timeouts.
# Only their files are collected the second time (collecting all costs 20 s).
SERIAL_FILES = $(shell grep -rl --include='test_*.py' 'mark.serial' tests)

test: setup system-deps lint typecheck ## Set up and run the whole suite (on every core)
	$(BIN)/pytest -n auto --dist worksteal -m "not serial"
	$(BIN)/pytest -m serial $(SERIAL_FILES)

setup: $(STAMP)

# --no-compile: byte-compiling every installed module took 50 s of the setup;
# the tests compile the few they import.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP)

# Debian packages the tests start for real: a Redis server, a Chromium for
# the dashboard's browser test, Node.js for the JS servers and exporters; then
# the npm packages of every tests/**/package-lock.json. Installed only when missing.
system-deps:
	@bash scripts/install-system-deps.sh
	@bash scripts/install-node-deps.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every module of the package once, under its installed name (see the script:
# `mypy -p toolspan` alone only sees common/ (mapped as toolspan), the parts are mapped folders).
typecheck: setup
	$(BIN)/python scripts/typecheck.py

unit: setup ## Fast tests only (no collector, Redis or browser)
	$(BIN)/pytest -m "not slow"

bench: setup ## Benchmarks (not part of the test suite)
	$(BIN)/python bench/tracer_overhead.py
	$(BIN)/python bench/analyzer_bench.py
	$(BIN)/python bench/dashboard_bench.py

sample-traces: setup ## Regenerate the checked-in sample traces (and print the findings)
	$(BIN)/python -m sample_traces --no-dashboard

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist *.egg-info
