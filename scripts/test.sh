#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the project with its test extras into .venv,
# fetches and builds the reference bench (RocketMQ jars from Maven Central, the Java, C++, Node and
# Go stock-client drivers) into .cache/interop, lints, type-checks, then runs pytest. Extra
# arguments go to pytest (e.g. `bash scripts/test.sh -m slow` for the long runs).
set -euo pipefail
cd "$(dirname "$0")/.."

# The console's browser tests (tests/console) drive Debian's chromium through chromium-driver.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    sudo_=""
    [ "$(id -u)" -eq 0 ] || sudo_="sudo"
    $sudo_ apt-get update -q && $sudo_ apt-get install -y -q chromium chromium-driver
fi
source scripts/venv.sh test,dev,spark,console
.venv/bin/python -m interop.install
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # sidewinder/, as [tool.mypy] in pyproject.toml says
# Five workers on two cores: most of a scenario is waiting on JVMs, clients and their timers, so
# workers beyond the cores buy time (the CPU was busy 71% of a three-worker run; four took 15:21
# on a quiet machine). Each worker starts one shared cluster of each 4.x target kind; the POP
# scenarios, the gRPC clients' scenarios and the Spark tests each run on one worker
# (tests/conftest.py). SIDEWINDER_TEST_WORKERS=0 runs everything in this process.
exec .venv/bin/python -m pytest -n "${SIDEWINDER_TEST_WORKERS:-5}" --dist loadgroup --durations=25 "$@"
