#!/usr/bin/env bash
# install-once.sh NAME STAMP [SOURCE...] -- COMMAND...
# Runs COMMAND under the exclusive lock .cronlog/locks/NAME.lock unless STAMP is newer than
# every SOURCE, then touches STAMP. Several `make` runs at once (two test sessions, `make
# run` beside `make test`) install once: the others wait and find the stamp. The stamp is
# removed before and touched only after COMMAND succeeded, so a half-finished install is
# never taken for a finished one.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: install-once.sh NAME STAMP [SOURCE...] -- COMMAND...}
stamp=${2:?usage: install-once.sh NAME STAMP [SOURCE...] -- COMMAND...}
shift 2
sources=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sources+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "install-once.sh: no -- before the command" >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "install-once.sh: no command" >&2; exit 2; }
fresh() {
  [ -f "$stamp" ] || return 1
  local source
  for source in "${sources[@]}"; do [ "$stamp" -nt "$source" ] || return 1; done
}
fresh && exit 0
mkdir -p .cronlog/locks
exec 9>".cronlog/locks/$name.lock"
# 30 minutes: a first install of everything is minutes; longer is a hung one.
flock -w 1800 9 || { echo "install-once.sh: waited 30 minutes for .cronlog/locks/$name.lock" >&2; exit 1; }
fresh && exit 0  # another run installed it while this one waited
rm -f "$stamp"
"$@" 9>&-  # the lock is this script's, not something the command may keep
mkdir -p "$(dirname "$stamp")"
touch "$stamp"
