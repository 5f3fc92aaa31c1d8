#!/usr/bin/env bash
# What `make test` runs after lint: every suite, in two phases, so that it stays under 30
# minutes on a 2-core machine (docs/development.md, "How long make test takes").
#
# Phase 1, side by side, each pytest session on test servers of its own (ports moved by
#   CRONLOG_TEST_PORT_OFFSET + 100 and + 200; installs are safe to run concurrently):
#   - the unit suite, then the unit suite on the other Pythons (PYTHONS);
#   - the integration suite, with two e2e modules of about a minute that assert no timing
#     (the partition-layout takeover, two schedulers started alike), to even the streams;
#   - the other e2e modules that assert no timing (start lags, p99s of api calls): most of
#     them wait on fire times and share the CPU well.
# Phase 2, alone: the e2e modules marked `measured` and the chaos suite, whose latency
#   assertions must not meet another suite's load.
#
# Each phase-1 session's output goes to .cronlog/test-output/<name>.log and is printed once
# all have ended; the script fails if any session failed, after every one has ended.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PYTHONS=${PYTHONS:-python3.12 python3.13}
out=.cronlog/test-output
mkdir -p "$out"
base=${CRONLOG_TEST_PORT_OFFSET:-0}
start=$SECONDS
beside=(tests/e2e/test_partition_layout.py tests/e2e/test_scheduler_identity.py)

elapsed() { echo "$(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"; }

names=(unit integration e2e-unmeasured)
echo "== phase 1: ${names[*]}, side by side"
(
  CRONLOG_TEST_STREAM=unit CRONLOG_TEST_PORT_OFFSET=$((base + 200)) \
    "$BIN/pytest" -q -ra -s --durations=10 tests/unit
  status=$?
  # shellcheck disable=SC2086
  scripts/unit-on-pythons.sh $PYTHONS || status=1
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/unit.log" 2>&1 &
pids=($!)
(
  CRONLOG_TEST_STREAM=integration CRONLOG_TEST_PORT_OFFSET=$base \
    "$BIN/pytest" -q -ra -s --durations=15 tests/integration "${beside[@]}"
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/integration.log" 2>&1 &
pids+=($!)
ignored=()
for module in "${beside[@]}"; do ignored+=(--ignore="$module"); done
(
  CRONLOG_TEST_STREAM=e2e-unmeasured CRONLOG_TEST_PORT_OFFSET=$((base + 100)) \
    "$BIN/pytest" -q -ra -s --durations=15 -m "not measured" "${ignored[@]}" tests/e2e
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/e2e-unmeasured.log" 2>&1 &
pids+=($!)
failed=()
for i in "${!names[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
for name in "${names[@]}"; do
  echo "== $name ($out/$name.log):"
  cat "$out/$name.log"
done

echo "== phase 2 (at $(elapsed)): the measured e2e modules and the chaos suite, alone"
CRONLOG_TEST_STREAM=measured CRONLOG_TEST_PORT_OFFSET=$base \
  "$BIN/pytest" -q -ra -s --durations=25 -m measured tests/e2e tests/chaos \
  || failed+=("measured e2e + chaos")
echo "== all suites: $(elapsed)"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
