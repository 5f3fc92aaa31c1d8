#!/usr/bin/env bash
# Runs the unit tests on each Python interpreter given (default: python3.12 python3.13), each
# in its own venv under .cronlog/venvs/; `make test` itself runs on the .venv's Python (3.11
# on Debian 12). An interpreter that is not there is reported and skipped, not failed: Debian
# 12 ships only 3.11 (pyenv, uv or deadsnakes bring the others). An interpreter that is not
# on PATH is also looked for among pyenv's installed versions, whose shims only answer for
# the selected version.
#
# --install-only: only the venvs (scripts/test-suites.sh installs them beside other suites,
# then runs this again, which finds them installed).
set -euo pipefail
cd "$(dirname "$0")/.."
install_only=false
if [ "${1:-}" = --install-only ]; then install_only=true; shift; fi
[ $# -gt 0 ] || set -- python3.12 python3.13
find_python() {
  if command -v "$1" >/dev/null 2>&1 && "$1" -c '' >/dev/null 2>&1; then
    echo "$1"
    return
  fi
  local root candidate
  root=${PYENV_ROOT:-$HOME/.pyenv}
  for candidate in "$root"/versions/*/bin/"$1"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "$1"
}
# The venvs are installed one after the other, then the suites run side by side (the machine
# has 2 cores; each suite is CPU-bound for about a minute): `make test` stays shorter.
versions=()
for python in "$@"; do
  python=$(find_python "$python")
  if ! version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    echo "== $python: not found, skipped"
    continue
  fi
  venv=.cronlog/venvs/$version
  echo "== $python (Python $version) in $venv"
  scripts/install-once.sh "venv-$version" "$venv/.installed" pyproject.toml dev/pyproject.toml \
    -- scripts/install-venv.sh "$venv" "$python"
  versions+=("$version")
done
$install_only && exit 0
pids=()
for version in "${versions[@]}"; do
  mkdir -p ".cronlog/venvs/$version"
  # Every unit test, the property tests with a quarter of their (derandomized) examples:
  # tests/support/examples.py says why.
  CRONLOG_TEST_STREAM="unit-$version" CRONLOG_PROPERTY_EXAMPLES_SCALE=0.25 \
    ".cronlog/venvs/$version/bin/pytest" -q -p no:cacheprovider tests/unit \
    > ".cronlog/venvs/$version/unit.log" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!versions[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  log=".cronlog/venvs/${versions[$i]}/unit.log"
  echo "== unit tests on Python ${versions[$i]} ($log):"
  if [ "$status" -eq 0 ]; then tail -n 1 "$log"; else cat "$log"; failed+=("${versions[$i]}"); fi
done
[ ${#failed[@]} -eq 0 ] || { echo "unit tests failed on Python ${failed[*]}" >&2; exit 1; }
