#!/usr/bin/env bash
# The README's run command. Until the broker and name server exist (issues 12 and 13) it installs
# the project into .venv and runs the store benchmark: Sidewinder's MessageStore writing,
# reading and recovering 1 KiB messages beside raw loops on this machine. Extra arguments go to
# scripts/bench_store.py (e.g. --seconds 5 --recovery-mib 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh ""
if [ $# -eq 0 ]; then
    set -- --seconds 3 --recovery-mib 256
fi
exec .venv/bin/python scripts/bench_store.py "$@"
