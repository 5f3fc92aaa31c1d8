#!/usr/bin/env bash
# Installs the servers and toolchains cronlog needs from Debian's packages, only if missing:
# safe to run again, and it asks apt for nothing when everything is there. Safe to run several
# at once too (two checkouts' `make test`): one installs under a machine-wide lock, the others
# wait, then look again and find everything there.
set -euo pipefail
missing() {
  need=()
  command -v python3 >/dev/null || need+=(python3)
  # Debian keeps `python3 -m venv`'s pip bootstrap (ensurepip) in a package of its own.
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
  command -v java >/dev/null || need+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || need+=(maven)
  command -v clickhouse-server >/dev/null || need+=(clickhouse-server clickhouse-client)
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
  command -v npm >/dev/null || need+=(npm)
  # The documented commands (README, docs/) read ids out of JSON answers with jq.
  command -v jq >/dev/null || need+=(jq)
  # Go builds grpcurl for `make run` (scripts/install-grpcurl.sh); a Go of the official
  # tarball in /usr/local/go counts too.
  command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || need+=(golang-go)
  # promtool checks and unit-tests the alert rules in `make test` (deploy/prometheus/); the
  # same package's server is what the monitoring e2e test scrapes with. Without its
  # recommends: the node exporter is a daemon cronlog does not use.
  bare=()
  command -v promtool >/dev/null || bare+=(prometheus)
  # The console's browser tests (tests/e2e/test_console.py) drive Debian's headless Chromium
  # through its WebDriver.
  command -v chromium >/dev/null || bare+=(chromium)
  command -v chromedriver >/dev/null || bare+=(chromium-driver)
  [ ${#need[@]} -gt 0 ] || [ ${#bare[@]} -gt 0 ]
}
if missing; then
  # apt is the machine's, so the lock is too.
  exec 9>"${TMPDIR:-/tmp}/cronlog-system-deps.lock"
  flock -w 1800 9 || { echo "waited 30 minutes for another cronlog's apt-get" >&2; exit 1; }
fi
if missing; then
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "installing: ${need[*]} ${bare[*]}"
  # Other apt users of the machine (unattended upgrades) are waited for too.
  apt=(apt-get -o DPkg::Lock::Timeout=600)
  $SUDO "${apt[@]}" update -q
  if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO "${apt[@]}" install -y -q "${need[@]}"
  fi
  if [ ${#bare[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO "${apt[@]}" install -y -q --no-install-recommends "${bare[@]}"
  fi
fi
# pyproject's requires-python, told before pip says it less plainly.
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "cronlog needs Python 3.11 or newer; python3 is $(python3 --version 2>&1)" >&2
  exit 1
}
