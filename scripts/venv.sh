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
# compat: the editable install is a plain .pth with the project root, so the top-level
# `pyspark_rocketmq*` modules are seen by pkgutil.iter_modules, which is how Spark finds data
# sources without `spark.dataSource.register` (the default import hook hides them from it).
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$target" \
    --config-settings editable_mode=compat
