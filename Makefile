# make help lists the targets. Every target sets up what it needs first, and set-up is skipped
# when nothing changed (the virtual environment is rebuilt only when pyproject.toml changes).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= .demo
DEMO_PORT ?= 33061
# The demo server's password for the 'loader' account; loader.example.toml reads it from here.
export LOADER_SOURCE_PASSWORD ?= loader
PYTEST_ARGS ?=
# As in an activated environment: spark-submit, airflow and loader resolve to the project's.
export PATH := $(abspath $(BIN)):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + ")")'
	@command -v java >/dev/null || { echo "Java 17 or newer is needed for Spark: apt-get install -y default-jre-headless" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

.PHONY: setup
setup: $(STAMP) ## create the virtual environment and install missing Debian packages
	@infra/install-deps.sh

.PHONY: demo
demo: setup ## run the pipeline on the embedded default: private MariaDB, local staging and Spark
	infra/mariadb/mariadb.sh start $(DEMO_DIR)/mariadb $(DEMO_PORT)
	$(BIN)/loader demo --config loader.example.toml --extract
	$(BIN)/loader materialize --config loader.example.toml

.PHONY: demo-stop
demo-stop: ## stop the demo's private MariaDB
	infra/mariadb/mariadb.sh stop $(DEMO_DIR)/mariadb

.PHONY: lint
lint: setup ## ruff (lint and format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

.PHONY: format
format: setup ## reformat the code with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: test
test: lint ## set up, lint, then run the whole test suite (integration tests included)
	@$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

.PHONY: unit
unit: setup ## only the tests that need no server (fast)
	$(BIN)/pytest -m "not integration" $(PYTEST_ARGS)

.PHONY: bench
bench: setup ## run the benchmarks (each compares with another tool on the same data)
	$(BIN)/python bench/binlog_decode.py

.PHONY: clean
clean: demo-stop ## stop the demo server and remove its data
	rm -rf $(DEMO_DIR)
