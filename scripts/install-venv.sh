#!/usr/bin/env bash
# install-venv.sh VENV [PYTHON]: cronlog with every development extra in VENV, and beside it
# the development tools (dev/: the local servers, `make run`'s launcher, the bench), which
# `pip install cronlog` leaves out. Called under install-once.sh's lock.
#
# The packages go in with uv (from the package index, pinned, into the venv itself): pip took
# about a minute of one core for each venv, uv a few seconds, and `make test` installs three
# (the .venv and the other Pythons' for the unit suite) while its suites wait or run.
set -euo pipefail
venv=${1:?usage: install-venv.sh VENV [PYTHON]}
python=${2:-python3}
UV_VERSION=0.13.8
test -x "$venv/bin/python" || "$python" -m venv "$venv"
if ! "$venv/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION"; then
  "$venv/bin/pip" install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
"$venv/bin/uv" pip install --quiet --python "$venv/bin/python" -e '.[dev]' -e ./dev
