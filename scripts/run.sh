#!/usr/bin/env bash
# The README's run command: installs the project into .venv and starts a name server and a broker
# on local defaults (127.0.0.1:9876 and :10911, store in ./store) in one process; Ctrl-C stops
# both. The web console is at the URL it prints. Point any RocketMQ client at -n 127.0.0.1:9876.
# Extra arguments go to sidewinder-dev (e.g. --store /tmp/store --namesrv-port 19876
# --broker-port 20911 -c conf/broker.conf).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh console
exec .venv/bin/sidewinder-dev "$@"
