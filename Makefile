# ragsweep developer tasks. `make help` lists them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SQUAD ?= ../shared/data/squad-v2-dev-cs224n-half/dev-v2.0.json
UI_PORT ?= 5000
SWEEP ?= chunking
RUN ?=
SLACK ?= 0.05

.DEFAULT_GOAL := help
.PHONY: help setup run sweep test test-fast test-wheel lint format ui import-squad run-squad bench clean
.PHONY: promote compare gate ratchet nightly release-demo

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/ragsweep: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

setup: $(BIN)/ragsweep ## Create .venv and install ragsweep (editable) with dev tools

run: setup ## Evaluate the default config on the bundled demo data (logs to outputs/mlflow.db)
	$(BIN)/ragsweep

sweep: setup ## One-axis demo sweep sweeps/$(SWEEP).yaml on the demo data; prints the table
	$(BIN)/ragsweep -m sweep=$(SWEEP)

promote: setup ## Evaluate a tuning run's config on the holdout split (RUN=<id>; default: sweep's best)
	$(BIN)/ragsweep-promote $(if $(RUN),$(RUN),--best)

compare: setup ## Compare two runs case by case (BASELINE=<run id> CANDIDATE=<run id>)
	$(BIN)/ragsweep-compare $(BASELINE) $(CANDIDATE)

gate: setup ## Quality gate: promoted config re-evaluated on the holdout vs conf/gate/thresholds.yaml
	$(BIN)/pytest -m quality tests/quality

ratchet: setup ## Raise the gate's floors to a holdout run's values minus SLACK (RUN=<id>)
	$(BIN)/ragsweep-gate ratchet $(RUN) --slack $(SLACK)

nightly: setup ## Gate + append the figures to eval_logs/YYYY-MM-DD.json (cron: docs/promotion.md)
	$(BIN)/ragsweep-nightly

release-demo: setup ## Demo flow: default run, sweep, promote both, compare them, gate
	$(BIN)/ragsweep tracking.run_name=baseline-default
	base=$$($(BIN)/ragsweep-promote --latest) && \
	$(BIN)/ragsweep -m sweep=$(SWEEP) && \
	cand=$$($(BIN)/ragsweep-promote --best) && \
	$(BIN)/ragsweep-compare $$base $$cand
	$(BIN)/pytest -m quality tests/quality

test: setup ## Run the test suite (what CI runs), the wheel test included
	$(BIN)/pytest -q

test-fast: setup ## The test suite without the wheel test (pytest -m 'not quality and not wheel')
	$(BIN)/pytest -q -m 'not quality and not wheel'

test-wheel: setup ## Build the wheel, install it in a fresh venv, run it from empty dirs (docs/install.md)
	$(BIN)/pytest -q -m wheel tests/cli/test_wheel.py

lint: setup ## ruff (lint + format check), mypy, and the package layers (lint-imports; docs/architecture.md)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

format: setup ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix src tests bench
	$(BIN)/ruff format src tests bench

ui: setup ## MLflow UI on http://127.0.0.1:$(UI_PORT) over the project's store; prints the experiment's URL
	$(BIN)/ragsweep ui --host 127.0.0.1 --port $(UI_PORT)

import-squad: setup ## Import the shared SQuAD 2.0 dev half into outputs/squad
	$(BIN)/ragsweep-import squad $(SQUAD) outputs/squad

run-squad: import-squad ## Evaluate the default config on the imported SQuAD data
	$(BIN)/ragsweep corpus=squad golden=squad

bench: import-squad ## Benchmarks (wall time, peak memory, embed throughput); see bench/README.md
	$(BIN)/python bench/bench_run.py all

clean: ## Remove outputs (runs, MLflow store, caches), keep the venv
	find outputs -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
