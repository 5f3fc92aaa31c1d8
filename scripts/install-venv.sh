#!/usr/bin/env bash
# install-venv.sh VENV: cronlog with every development extra in VENV, and beside it the
# development tools (dev/: the local servers, `make run`'s launcher, the bench), which
# `pip install cronlog` leaves out. Called under install-once.sh's lock.
set -euo pipefail
venv=${1:?usage: install-venv.sh VENV [PYTHON]}
python=${2:-python3}
test -x "$venv/bin/python" || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -e '.[dev]' -e ./dev
