#!/usr/bin/env bash
# Runs the unit tests on each Python interpreter given (default: python3.12 python3.13), each
# in its own venv under .cronlog/venvs/; `make test` itself runs on the .venv's Python (3.11
# on Debian 12). An interpreter that is not there is reported and skipped, not failed: Debian
# 12 ships only 3.11 (pyenv, uv or deadsnakes bring the others). An interpreter that is not
# on PATH is also looked for among pyenv's installed versions, whose shims only answer for
# the selected version.
set -euo pipefail
cd "$(dirname "$0")/.."
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
failed=()
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
  "$venv/bin/pytest" -q -p no:cacheprovider tests/unit || failed+=("$version")
done
[ ${#failed[@]} -eq 0 ] || { echo "unit tests failed on Python ${failed[*]}" >&2; exit 1; }
