# Two images from one file.
#
# The broker (stage `broker`): mqnamesrv, mqbroker and mqadmin on a slim Python, nothing else; the
#   Rust extension (native/) comes as a wheel built in stage `native`, so the image has no compiler.
#   docker build --target broker -t sidewinder .
#   docker network create mq
#   docker run -d --name namesrv --network mq sidewinder mqnamesrv
#   docker run -d --name broker --network mq -v sw-store:/home/sidewinder/store \
#       sidewinder mqbroker -n namesrv:9876 -c /etc/sidewinder/broker.conf
# (set brokerIP1 in broker.conf to the address clients reach the broker at).
#
# The test environment (the default, last stage): everything `bash scripts/test.sh` needs
# (Python 3.11, JDK 17 and Maven for the real RocketMQ, Node and Go for the stock clients, Rust and
# a C linker for the extension the editable install builds).
#   docker build -t sidewinder-test . && docker run --rm sidewinder-test
FROM golang:1.23-bookworm AS go

# The wheel, Rust extension included (abi3, so any CPython >= 3.11 of this glibc takes it):
# Debian bookworm's python3 is 3.11, the broker image's Python.
FROM rust:1-slim-bookworm AS native
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md MANIFEST.in pyspark_rocketmq.py pyspark_rocketmq_commitlog.py ./
COPY native ./native
COPY sidewinder ./sidewinder
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm AS broker
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 --shell /bin/bash sidewinder
WORKDIR /opt/sidewinder
COPY --from=native /wheels /opt/sidewinder/wheels
COPY conf/broker.conf /etc/sidewinder/broker.conf
RUN pip install --no-cache-dir /opt/sidewinder/wheels/*.whl \
    && rm -rf /opt/sidewinder/wheels \
    && mkdir -p /home/sidewinder/store \
    && chown sidewinder:sidewinder /home/sidewinder/store
USER 10001
WORKDIR /home/sidewinder
VOLUME ["/home/sidewinder/store"]
# 5557: /metrics when the conf sets metricsExporterType = PROM (docker-compose.yml does).
EXPOSE 5557 9876 10909 10911
CMD ["mqbroker", "-c", "/etc/sidewinder/broker.conf"]

FROM python:3.11-slim-bookworm AS test
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Debian's bookworm packages are the versions this project's machines run; pinning exact
# revisions would break on every Debian point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jdk-headless maven nodejs npm git ca-certificates gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY --from=go /usr/local/go /usr/local/go
# The toolchain read-only from the builder; crates download into the user's own CARGO_HOME.
COPY --from=native /usr/local/rustup /usr/local/rustup
COPY --from=native /usr/local/cargo/bin /usr/local/cargo/bin
ENV PATH="/usr/local/go/bin:/usr/local/cargo/bin:${PATH}" \
    RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/home/sidewinder/.cargo \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --shell /bin/bash sidewinder
USER 10001
WORKDIR /home/sidewinder/sidewinder
COPY --chown=sidewinder:sidewinder . .

# Fetch and build the reference bench at build time, so `docker run` needs no network.
RUN python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir -e '.[test,dev,spark]' --config-settings editable_mode=compat \
    && .venv/bin/python -m interop.install

CMD ["bash", "scripts/test.sh"]
