#!/usr/bin/env bash
# What `make test` runs after lint: every suite, in two stages, so that it stays within 25
# minutes on a 2-core machine (docs/development.md, "How long make test takes"). Each pytest
# session runs on test servers of its own (ports moved by CRONLOG_TEST_PORT_OFFSET + 0, 100,
# 200, 300, 400, 500; installs are safe to run concurrently).
#
# Stage 1, alone: the modules that assert the p99 of another tenant's api calls under an
#   attack (the noisy neighbours, the api budget): any other load on the machine shows in
#   their p99s, even SCHED_IDLE processes' (the unit suite beside them took one window's
#   p99 to 622 ms of its 500, and the cluster failover's start lag over its bound); and
#   the Kafka cluster's failover (its controller's election took a start lag p99 to 7.8 s
#   of its 5 beside the other suites).
# Stage 2, at once:
#   - at normal priority, the other modules marked `measured` (they assert start lags, an
#     answer just before a deadline, a page within its limit, or a race's outcome that
#     starvation changes). Their brokers, like stage 1's, compile as deployed ones do (C2
#     too: CRONLOG_TEST_KAFKA_JIT=optimising).
#   - at nice 10 ("nice"), the chaos modules that assert no timing (the failover audit, the
#     ClickHouse restart, the auditor's own test): as SCHED_IDLE processes their windows
#     did not finish within their bounds. Then, as that session ends long before the
#     others, the longest modules that assert no timing: the integration modules that start
#     Kafka nodes of their own and an e2e module of about a minute.
#   - as SCHED_IDLE processes (they get the CPU only when nothing else wants it: the
#     measured modules mostly wait on fire times), every suite that asserts no timing: the
#     unit suite, beside it the unit suite on the other supported Pythons (PYTHONS) once
#     their venvs are installed; the integration suite; the other e2e modules, in two
#     sessions (e2e-a, e2e-b).
# Stage 2 keeps both cores busy until its last few minutes: what shortens it is less CPU,
# or moving a long module from the stream that ends last to one that ends early (the
# time of every test of each session: .cronlog/test-output/<name>.xml).
#
# Each session's output goes to .cronlog/test-output/<name>.log and is printed once its
# stage has ended; the script fails if any session failed, after every one has ended. The
# end prints how long each stream and each suite took.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PYTHONS=${PYTHONS:-python3.13}
out=.cronlog/test-output
mkdir -p "$out"
rm -f "$out"/suite-times-*.txt  # an earlier run's, so the summary below is this run's
base=${CRONLOG_TEST_PORT_OFFSET:-0}
start=$SECONDS
tight=(tests/e2e/test_noisy_neighbour_costs.py tests/e2e/test_api_budget.py
       tests/e2e/test_noisy_neighbour.py tests/chaos/test_cluster_failover.py)
chaos_beside=(tests/chaos/test_log_audit.py tests/chaos/test_history_restart.py
              tests/chaos/test_failover.py)
# After chaos_beside, in the same session at nice 10. The Postgres loss asserts no timing
# and needs the session's 3-broker cluster, which the local cluster's module starts: last,
# as it stops the session's Postgres server for 30 s.
nice_after=(tests/e2e/test_partition_layout.py tests/integration/test_concurrent_installs.py
            tests/integration/test_local_kafka_cluster.py
            tests/integration/test_secured_connections.py tests/chaos/test_postgres_loss.py)
not_integration=()
for module in "${nice_after[@]}"; do not_integration+=(--ignore="$module"); done
# SCHED_IDLE: util-linux's chrt; without it (or where the kernel refuses), nice 19.
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
# Starved, a SCHED_IDLE session's waits take longer: they bound failures, measure nothing
# (tests/support/polling.py), and may take this many times what they say.
patience=3

elapsed() { echo "$(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"; }
show() { for name in "$@"; do echo "== $name ($out/$name.log):"; cat "$out/$name.log"; done; }

failed=()
echo "== stage 1: the api-p99 modules and the Kafka cluster's failover, alone"
(
  CRONLOG_TEST_STREAM=measured-alone CRONLOG_TEST_PORT_OFFSET=$base \
    CRONLOG_TEST_KAFKA_JIT=optimising \
    "$BIN/pytest" -q -ra -s --durations=15 --junit-xml="$out/measured-alone.xml" "${tight[@]}"
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/measured-alone.log" 2>&1 || failed+=(measured-alone)
show measured-alone
stage1=$(elapsed)

names=(measured nice unit integration e2e-a e2e-b)
echo "== stage 2 (at $stage1): ${names[*]} at once (nice at nice 10, the last four as"
echo "   SCHED_IDLE: ${idle[*]})"
ignored=()
for module in "${tight[@]}" "${chaos_beside[@]}" "${nice_after[@]}"; do ignored+=(--ignore="$module"); done
(
  CRONLOG_TEST_STREAM=measured CRONLOG_TEST_PORT_OFFSET=$base \
    CRONLOG_TEST_KAFKA_JIT=optimising \
    "$BIN/pytest" -q -ra -s --durations=25 --junit-xml="$out/measured.xml" \
    -m "measured or chaos" "${ignored[@]}" \
    tests/integration tests/e2e tests/chaos
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/measured.log" 2>&1 &
pids=($!)
(
  # At nice 10, not SCHED_IDLE: starved, the failover audit's window did not finish within
  # its bound (285 s); nice 10 shares the CPU with the measured modules.
  CRONLOG_TEST_STREAM=nice CRONLOG_TEST_PORT_OFFSET=$((base + 500)) \
    nice -n 10 "$BIN/pytest" -q -ra -s --durations=15 --junit-xml="$out/nice.xml" \
    "${chaos_beside[@]}" "${nice_after[@]}"
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/nice.log" 2>&1 &
pids+=($!)
(
  # The other Pythons' venvs install, then their suites run, beside the main unit suite:
  # one after the other, the stream was the last to end.
  (
    # shellcheck disable=SC2086
    "${idle[@]}" scripts/unit-on-pythons.sh --install-only $PYTHONS &&
      CRONLOG_TEST_PATIENCE=$patience "${idle[@]}" scripts/unit-on-pythons.sh $PYTHONS
  ) > "$out/unit-pythons.log" 2>&1 &
  pythons=$!
  CRONLOG_TEST_STREAM=unit CRONLOG_TEST_PORT_OFFSET=$((base + 200)) \
    CRONLOG_TEST_PATIENCE=$patience "${idle[@]}" \
    "$BIN/pytest" -q -ra -s --durations=10 --junit-xml="$out/unit.xml" tests/unit
  status=$?
  wait "$pythons" || status=1
  cat "$out/unit-pythons.log"
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/unit.log" 2>&1 &
pids+=($!)
(
  CRONLOG_TEST_STREAM=integration CRONLOG_TEST_PORT_OFFSET=$((base + 300)) \
    CRONLOG_TEST_PATIENCE=$patience "${idle[@]}" \
    "$BIN/pytest" -q -ra -s --durations=15 --junit-xml="$out/integration.xml" \
    -m "not measured" "${not_integration[@]}" tests/integration
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/integration.log" 2>&1 &
pids+=($!)
# The e2e modules that assert no timing, in two sessions: one alone left the machine idle
# most of its last ten minutes (it waits on its service), long after the others had ended.
# e2e-a runs the modules named here (about half the time); e2e-b every other one.
e2e_a=(tests/e2e/test_console.py tests/e2e/test_cli.py tests/e2e/test_make_run.py
       tests/e2e/test_tenancy.py tests/e2e/test_user_handlers.py tests/e2e/test_job_filters.py
       tests/e2e/test_replay.py tests/e2e/test_python_client.py
       # The work group's modules, on one service (tests/e2e/service_groups.py).
       tests/e2e/test_report_bursts.py tests/e2e/test_heartbeats.py
       tests/e2e/test_tenant_limits.py tests/e2e/test_start_timeout_option.py
       tests/e2e/test_cancel_overlap_backfill.py tests/e2e/test_command_jobs.py
       tests/e2e/test_test_channel.py tests/e2e/test_declared_queues.py)
not_b=()
for module in "${nice_after[@]}" "${e2e_a[@]}"; do not_b+=(--ignore="$module"); done
(
  CRONLOG_TEST_STREAM=e2e-a CRONLOG_TEST_PORT_OFFSET=$((base + 100)) \
    CRONLOG_TEST_PATIENCE=$patience "${idle[@]}" \
    "$BIN/pytest" -q -ra -s --durations=15 --junit-xml="$out/e2e-a.xml" -m "not measured" \
    "${e2e_a[@]}"
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/e2e-a.log" 2>&1 &
pids+=($!)
(
  CRONLOG_TEST_STREAM=e2e-b CRONLOG_TEST_PORT_OFFSET=$((base + 400)) \
    CRONLOG_TEST_PATIENCE=$patience "${idle[@]}" \
    "$BIN/pytest" -q -ra -s --durations=15 --junit-xml="$out/e2e-b.xml" -m "not measured" \
    "${not_b[@]}" tests/e2e
  status=$?
  echo "== ended at $(elapsed)"
  exit $status
) > "$out/e2e-b.log" 2>&1 &
pids+=($!)
for i in "${!names[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
show "${names[@]}"
echo "== time by stream:"
echo "stage 1, measured-alone: $stage1"
for name in "${names[@]}"; do
  echo "$name: $(grep -h '^== ended at' "$out/$name.log" | tail -1 | cut -c13-)"
done
echo "== time by suite, each session's (.cronlog/test-output/suite-times-<session>.txt):"
for session in measured-alone measured nice unit unit-3.12 unit-3.13 integration \
               e2e-a e2e-b; do
  [ -f "$out/suite-times-$session.txt" ] || continue
  sed "s/^/$session: /" "$out/suite-times-$session.txt"
done
echo "== all suites: $(elapsed)"
# Each failed session's own summary last, where a reader of a cut log still finds it: a
# session can fail on an error in a fixture, which pytest counts apart from failed tests.
for name in "${failed[@]}"; do
  echo "== what failed in $name ($out/$name.log):"
  grep -E '^(FAILED|ERROR) |^=+ .*(failed|error).* in [0-9.]+s' "$out/$name.log" \
    || tail -n 20 "$out/$name.log"
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
