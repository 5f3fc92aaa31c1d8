#!/usr/bin/env bash
# What `make test` runs after lint: every suite, in four pytest sessions at once, each on
# test servers of its own (ports moved by CRONLOG_TEST_PORT_OFFSET + 0, 100, 200, 300;
# installs are safe to run concurrently), so that it stays under 25 minutes on a 2-core
# machine (docs/development.md, "How long make test takes"):
#
# - measured, at normal priority: the e2e and chaos modules marked `measured`, whose
#   latency assertions (start lags, p99s of api calls) must not lose the CPU to another
#   suite, and the Postgres-loss chaos module, which needs the 3-broker cluster the cluster
#   failover starts. They mostly wait on fire times: the machine is about a quarter busy.
# - beside it, at nice 10, the suites that assert no timing, using the rest of the CPU
#   (whenever the measured session needs it, the kernel's scheduler gives it nearly all):
#   - the unit suite, then the chaos modules that assert no timing (the failover audit,
#     the ClickHouse restart, the auditor's own test), then the unit suite on the other
#     Pythons (PYTHONS), whose venvs install meanwhile;
#   - the integration suite, with two e2e modules of about a minute that assert no timing
#     (the partition-layout takeover, two schedulers started alike), to even the streams;
#   - the other e2e modules (not marked `measured`).
#
# Each session's output goes to .cronlog/test-output/<name>.log and is printed once all
# have ended; the script fails if any session failed, after every one has ended. The end
# prints how long each stream and each suite took.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PYTHONS=${PYTHONS:-python3.12 python3.13}
BESIDE_NICE=${BESIDE_NICE:-10}
out=.cronlog/test-output
mkdir -p "$out"
rm -f "$out"/suite-times-*.txt  # an earlier run's, so the summary below is this run's
base=${CRONLOG_TEST_PORT_OFFSET:-0}
start=$SECONDS
beside=(tests/e2e/test_partition_layout.py tests/e2e/test_scheduler_identity.py)
chaos_beside=(tests/chaos/test_log_audit.py tests/chaos/test_history_restart.py
              tests/chaos/test_failover.py)

elapsed() { echo "$(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"; }

names=(measured unit integration e2e-unmeasured)
echo "== four sessions at once: ${names[*]} (all but measured at nice $BESIDE_NICE)"
chaos_ignored=()
for module in "${chaos_beside[@]}"; do chaos_ignored+=(--ignore="$module"); done
(
  CRONLOG_TEST_STREAM=measured CRONLOG_TEST_PORT_OFFSET=$base \
    "$BIN/pytest" -q -ra -s --durations=25 -m "measured or chaos" "${chaos_ignored[@]}" \
    tests/e2e tests/chaos
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/measured.log" 2>&1 &
pids=($!)
(
  # The other Pythons' venvs install while the first unit run and the chaos modules run.
  # shellcheck disable=SC2086
  nice -n "$BESIDE_NICE" scripts/unit-on-pythons.sh --install-only $PYTHONS \
    > "$out/unit-venvs.log" 2>&1 &
  venvs=$!
  CRONLOG_TEST_STREAM=unit CRONLOG_TEST_PORT_OFFSET=$((base + 200)) \
    nice -n "$BESIDE_NICE" "$BIN/pytest" -q -ra -s --durations=10 tests/unit
  status=$?
  CRONLOG_TEST_STREAM=chaos-unmeasured CRONLOG_TEST_PORT_OFFSET=$((base + 200)) \
    nice -n "$BESIDE_NICE" "$BIN/pytest" -q -ra -s --durations=10 "${chaos_beside[@]}" \
    || status=1
  wait "$venvs" || status=1
  cat "$out/unit-venvs.log"
  # shellcheck disable=SC2086
  nice -n "$BESIDE_NICE" scripts/unit-on-pythons.sh $PYTHONS || status=1
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/unit.log" 2>&1 &
pids+=($!)
(
  CRONLOG_TEST_STREAM=integration CRONLOG_TEST_PORT_OFFSET=$((base + 300)) \
    nice -n "$BESIDE_NICE" "$BIN/pytest" -q -ra -s --durations=15 tests/integration \
    "${beside[@]}"
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/integration.log" 2>&1 &
pids+=($!)
ignored=()
for module in "${beside[@]}"; do ignored+=(--ignore="$module"); done
(
  CRONLOG_TEST_STREAM=e2e-unmeasured CRONLOG_TEST_PORT_OFFSET=$((base + 100)) \
    nice -n "$BESIDE_NICE" "$BIN/pytest" -q -ra -s --durations=15 -m "not measured" \
    "${ignored[@]}" tests/e2e
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
echo "== time by stream:"
for name in "${names[@]}"; do
  echo "$name: $(grep -h '^== ended at' "$out/$name.log" | tail -1 | cut -c13-)"
done
echo "== time by suite, each session's (.cronlog/test-output/suite-times-<session>.txt):"
for session in measured unit chaos-unmeasured unit-3.12 unit-3.13 integration e2e-unmeasured; do
  [ -f "$out/suite-times-$session.txt" ] || continue
  sed "s/^/$session: /" "$out/suite-times-$session.txt"
done
echo "== all suites: $(elapsed)"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
