#!/usr/bin/env bash
# Sourced by test.sh and run.sh: make .venv (with $PYTHON, default python3) and install the
# project into it in editable mode with the extras named in $1 (e.g. "test,dev").
set -euo pipefail
PYTHON=${PYTHON:-python3}
# The install builds the Rust extension (native/) with cargo: say so plainly rather than let pip
# fail deep in setuptools-rust.
if ! command -v cargo >/dev/null; then
    echo "scripts/venv.sh: cargo not found: install a Rust toolchain (https://rustup.rs), then rerun" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
    # pip is quiet (-q) and the first install takes minutes: say what the wait is.
    echo "scripts/venv.sh: made .venv; installing the project into it (dependencies from PyPI," \
        "the Rust extension built with cargo): a few minutes the first time" >&2
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
