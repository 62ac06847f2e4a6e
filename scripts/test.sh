#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the project with its test extras into .venv,
# fetches and builds the reference bench (RocketMQ jars from Maven Central, the Java, C++, Node and
# Go stock-client drivers) into .cache/interop, lints, then runs pytest. Extra arguments go to
# pytest (e.g. `bash scripts/test.sh -m slow` for the long runs).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/venv.sh test,dev
.venv/bin/python -m interop.install
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
