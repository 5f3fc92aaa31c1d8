# cronlog — `make run` starts the service locally, `make test` runs every test.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python keeps compiled modules next to their sources unless PYTHONDONTWRITEBYTECODE says
# not to, as some machines' environments do: then every process compiles every module it
# imports from source, again (each role process of the tests, each CLI call, each pytest
# session: about a fifth of a role's start). The caches go to the project's own .venv and
# src/ (__pycache__, ignored by git); writing them is safe with processes starting at once
# (importlib writes each file whole, then renames it).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: deps run test lint typecheck docs proto lint-proto rules unit integration e2e unit-pythons bench chaos stop clean

deps: $(STAMP) tools/buf/node_modules/.installed
	@scripts/install-system-deps.sh

# Every install runs under a lock of its own (scripts/install-once.sh), so several `make`
# runs at once install once and none takes a half-finished install for a finished one.
# cronlog with every development extra, and beside it the development tools
# (scripts/install-venv.sh).
$(STAMP): pyproject.toml dev/pyproject.toml
	@scripts/install-system-deps.sh
	@scripts/install-once.sh venv $@ $^ -- scripts/install-venv.sh $(VENV)

tools/buf/node_modules/.installed: tools/buf/package.json tools/buf/package-lock.json
	@scripts/install-once.sh buf $@ $^ -- \
	  npm ci --prefix tools/buf --no-audit --no-fund --loglevel=error

# grpcurl, for trying the API by hand; from the Go module proxy, pinned (the version the
# machine's Go can build: scripts/install-grpcurl.sh).
GRPCURL := tools/bin/.grpcurl.installed
$(GRPCURL): scripts/install-grpcurl.sh
	@scripts/install-once.sh grpcurl $@ $^ -- scripts/install-grpcurl.sh tools/bin

run: deps $(GRPCURL)
	$(BIN)/cronlog-dev run

stop:
	$(BIN)/cronlog-dev stack down

lint: deps
	$(BIN)/ruff check src dev tests examples
	$(BIN)/mypy

lint-proto: deps
	tools/buf/node_modules/.bin/buf lint

# The alert rules, checked and unit-tested with series (promtool: Debian's prometheus,
# installed by scripts/install-system-deps.sh).
rules: deps
	promtool check rules deploy/prometheus/cronlog-rules.yml
	promtool test rules deploy/prometheus/tests/*.yml

proto: deps
	scripts/gen_proto.sh

# docs/configuration.md, from the settings' definitions (src/cronlog/infra/setting_catalogue.py);
# a unit test fails while the committed page is not what this writes.
docs: deps
	$(BIN)/cronlog-dev docs configuration

unit: deps
	$(BIN)/pytest -q tests/unit

# One suite against the real servers (started once per run, as in make test).
integration: deps
	$(BIN)/pytest -q -ra -s tests/integration

e2e: deps
	$(BIN)/pytest -q -ra -s tests/e2e

# The unit tests on other Pythons than the .venv's, e.g. make unit-pythons
# PYTHONS='python3.12 python3.13' (the default); each gets a venv under .cronlog/venvs/.
PYTHONS ?= python3.12 python3.13
unit-pythons: deps
	scripts/unit-on-pythons.sh $(PYTHONS)

# Everything on the .venv's Python (3.11, the oldest supported), then the unit tests on
# the newest supported Python when this machine has it (scripts/unit-on-pythons.sh skips
# it otherwise): the two ends of the range; `make unit-pythons` adds the ones between.
TEST_PYTHONS ?= python3.13
# Every suite, in two stages (scripts/test-suites.sh): the modules that assert another
# tenant's api p99 alone, then the other measured modules with every other suite beside
# them as SCHED_IDLE processes.
test: deps lint lint-proto rules
	BIN=$(BIN) PYTHONS='$(TEST_PYTHONS)' scripts/test-suites.sh

# Options go through BENCH_ARGS, e.g. make bench BENCH_ARGS='--burst-jobs 2000 --steady-rate 200'.
bench: deps
	$(BIN)/cronlog-dev bench $(BENCH_ARGS)

# The failure suite for longer: CHAOS_SECONDS (default 600) of firing under faults.
CHAOS_SECONDS ?= 600
chaos: deps
	CRONLOG_CHAOS_SECONDS=$(CHAOS_SECONDS) $(BIN)/pytest -q -ra -s tests/chaos \
		tests/e2e/test_partition_layout.py

clean:
	rm -rf .cronlog
