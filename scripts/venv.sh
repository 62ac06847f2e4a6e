#!/usr/bin/env bash
# Sourced by test.sh and run.sh: make .venv (with $PYTHON, default python3) and install the
# project into it in editable mode with the extras named in $1 (e.g. "test,dev").
set -euo pipefail
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
target=.
if [ -n "${1:-}" ]; then
    target=".[$1]"
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$target"
