#!/usr/bin/env bash
# What `make test` runs after lint: every suite, in two phases, so that it stays under 30
# minutes on a 2-core machine (docs/development.md, "How long make test takes").
#
# Phase 1, side by side, each on test servers of its own (the second session's ports moved
#   by CRONLOG_TEST_PORT_OFFSET + 100; installs are safe to run concurrently):
#   - the unit and integration suites and the partition-layout takeover (an e2e module of
#     a minute that asserts no timing, here to even the two out), then the unit suite on
#     the other Pythons;
#   - the other e2e modules that assert no timing (start lags, p99s of api calls): most of
#     them wait on fire times and share the CPU well.
# Phase 2, alone: the e2e modules marked `measured` and the chaos suite, whose latency
#   assertions must not meet another suite's load.
#
# Each phase-1 session's output goes to .cronlog/test-output/<name>.log and is printed when
# it ends; the script fails if any session failed, after both have ended.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PYTHONS=${PYTHONS:-python3.12 python3.13}
out=.cronlog/test-output
mkdir -p "$out"
base=${CRONLOG_TEST_PORT_OFFSET:-0}
start=$SECONDS
layout=tests/e2e/test_partition_layout.py

elapsed() { echo "$(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"; }

echo "== phase 1: unit + integration, then unit on ${PYTHONS}; beside them the e2e modules not measured"
(
  CRONLOG_TEST_STREAM=unit-integration CRONLOG_TEST_PORT_OFFSET=$base \
    "$BIN/pytest" -q -ra -s --durations=15 tests/unit tests/integration "$layout"
  status=$?
  # shellcheck disable=SC2086
  scripts/unit-on-pythons.sh $PYTHONS || status=1
  exit $status
) > "$out/unit-integration.log" 2>&1 &
first=$!
CRONLOG_TEST_STREAM=e2e-unmeasured CRONLOG_TEST_PORT_OFFSET=$((base + 100)) \
  "$BIN/pytest" -q -ra -s --durations=15 -m "not measured" --ignore="$layout" tests/e2e \
  > "$out/e2e-unmeasured.log" 2>&1 &
second=$!
failed=()
wait $first || failed+=("unit + integration (+ other Pythons)")
echo "== unit + integration (and unit on other Pythons), ended at $(elapsed):"
cat "$out/unit-integration.log"
wait $second || failed+=("e2e not measured")
echo "== e2e modules not measured, ended at $(elapsed):"
cat "$out/e2e-unmeasured.log"

echo "== phase 2 (at $(elapsed)): the measured e2e modules and the chaos suite, alone"
CRONLOG_TEST_STREAM=measured CRONLOG_TEST_PORT_OFFSET=$base \
  "$BIN/pytest" -q -ra -s --durations=25 -m measured tests/e2e tests/chaos \
  || failed+=("measured e2e + chaos")
echo "== all suites: $(elapsed)"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
