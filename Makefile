# make help lists the targets. Every target sets up what it needs first, and set-up is skipped
# when nothing changed (the virtual environment is rebuilt only when pyproject.toml changes).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= .demo
# The pinned JVM jars (infra/jars), fetched once by make setup.
JARS_CACHE ?= .cache/jars
# MySQL for the tests: Debian sid's server and client unpacked here by infra/mysql/install.sh
# (nothing installed system-wide); infra/mysql/mysql.sh runs it from MYSQL_ROOT.
MYSQL_CACHE ?= .cache/mysql
export MYSQL_ROOT ?= $(abspath $(MYSQL_CACHE))/root
DEMO_PORT ?= 33061
# The demo server's password for the 'loader' account; loader.example.toml reads it from here.
export LOADER_SOURCE_PASSWORD ?= loader
PYTEST_ARGS ?=
# Test processes of make test; each starts its own servers (MariaDB, Spark, ...) when its tests need them.
TEST_WORKERS ?= 2
AIRFLOW_PORT ?= 8080
# The demo's Airflow: SQLite under .demo/airflow, this repository's DAGs, local Spark.
AIRFLOW_ENV := AIRFLOW_HOME=$(abspath $(DEMO_DIR))/airflow AIRFLOW__CORE__DAGS_FOLDER=$(abspath dags) \
	AIRFLOW__CORE__LOAD_EXAMPLES=False LOADER_CONFIG=$(abspath loader.example.toml) \
	AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}' SPARK_LOCAL_IP=127.0.0.1
# As in an activated environment: spark-submit, airflow and loader resolve to the project's.
export PATH := $(abspath $(BIN)):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + ")")'
	@infra/install-deps.sh
	@command -v java >/dev/null || { echo "Java 17 or newer is needed for Spark: apt-get install -y default-jre-headless" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

# The native module (native/, Rust): its pinned crates fetched once, so that later builds need no
# network; rebuilt in place when its sources change. A failed build stops set-up with cargo's error.
NATIVE_STAMP := $(VENV)/.native
$(NATIVE_STAMP): $(STAMP) native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
	@cargo fetch --locked --manifest-path native/Cargo.toml
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	@$(BIN)/python -c 'import loader._native' || { echo "the native module loader._native did not build: see cargo's output above" >&2; exit 1; }
	@touch $@

UI_STAMP := tests/ui/node_modules/.installed
$(UI_STAMP): tests/ui/package-lock.json
	npm ci --prefix tests/ui --no-audit --no-fund --loglevel=error
	@touch $(UI_STAMP)

.PHONY: setup
setup: $(NATIVE_STAMP) ## create the virtual environment, install missing Debian packages, build the native module, fetch the pinned jars
	@infra/install-deps.sh
	@infra/jars/fetch.sh $(JARS_CACHE)
	@$(BIN)/python -m loader.warehouse.local_fs $(JARS_CACHE)/spark
	@infra/mysql/install.sh $(MYSQL_CACHE)
	@$(BIN)/python -m loader.warehouse.class_archive
	@$(MAKE) --no-print-directory $(UI_STAMP)

.PHONY: demo
demo: setup ## the whole pipeline on the embedded default: MariaDB, Airflow DAGs, local staging and Spark
	infra/mariadb/mariadb.sh start $(DEMO_DIR)/mariadb $(DEMO_PORT)
	$(BIN)/loader demo --config loader.example.toml --seed 1
	@mkdir -p $(DEMO_DIR)/airflow && $(AIRFLOW_ENV) $(BIN)/airflow db migrate >$(DEMO_DIR)/airflow/migrate.log 2>&1
	$(AIRFLOW_ENV) infra/run-dag.sh loader_initial_load
	$(BIN)/loader demo --config loader.example.toml --seed 2
	$(AIRFLOW_ENV) infra/run-dag.sh loader_continuous_delta
	$(BIN)/loader compare --config loader.example.toml
	$(BIN)/loader tables --config loader.example.toml
	$(BIN)/loader status --config loader.example.toml

.PHONY: airflow
airflow: setup ## start Airflow's UI and scheduler on 127.0.0.1:$(AIRFLOW_PORT) with the demo's DAGs
	infra/mariadb/mariadb.sh start $(DEMO_DIR)/mariadb $(DEMO_PORT)
	@mkdir -p $(DEMO_DIR)/airflow
	@echo "Airflow: http://127.0.0.1:$(AIRFLOW_PORT), login admin with the password standalone prints"
	$(AIRFLOW_ENV) AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT=$(AIRFLOW_PORT) \
	AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:$(AIRFLOW_PORT)/execution/ \
	AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin \
	AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=$(abspath $(DEMO_DIR))/airflow/passwords.json \
	$(BIN)/airflow standalone

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

# The whole suite in TEST_WORKERS processes (a test file to a process); no test collected fails.
RUN_SUITE = $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

.PHONY: test
test: lint ## set up, lint, then run the whole test suite (integration tests included)
	@$(RUN_SUITE)

.PHONY: test-long
test-long: lint ## as make test, with every random fault series in full instead of a daily sample
	@export LOADER_TEST_LONG=1; $(RUN_SUITE)

.PHONY: unit
unit: setup ## only the tests that need no server (fast)
	$(BIN)/pytest -m "not integration" $(PYTEST_ARGS)

.PHONY: bench
bench: setup ## run the benchmarks (each compares with another tool on the same data)
	$(BIN)/python bench/binlog_decode.py
	$(BIN)/python bench/extract.py
	$(BIN)/python bench/big_transaction.py
	$(BIN)/python bench/materialize.py
	$(BIN)/python bench/initial_load.py
	$(BIN)/python bench/checksum.py  # needs pt-table-checksum (apt-get install percona-toolkit)
	$(BIN)/python bench/cost_follows_change.py
	$(BIN)/python bench/delta_cycle.py
	$(BIN)/python bench/scan_after_maintenance.py
	$(BIN)/python bench/sources.py

.PHONY: clean
clean: demo-stop ## stop the demo server and remove its data
	rm -rf $(DEMO_DIR)
