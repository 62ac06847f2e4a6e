# The Sidewinder test environment: everything `bash scripts/test.sh` needs (Python 3.11, JDK 17
# and Maven for the real RocketMQ, Node and Go for the stock-client drivers). The broker's own
# runtime stage and entrypoint arrive with the broker; until then the image runs the test suite.
#   docker build -t sidewinder-test . && docker run --rm sidewinder-test
FROM golang:1.23-bookworm AS go

FROM python:3.11-slim-bookworm
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Debian's bookworm packages are the versions this project's machines run; pinning exact
# revisions would break on every Debian point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jdk-headless maven nodejs npm git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=go /usr/local/go /usr/local/go
ENV PATH="/usr/local/go/bin:${PATH}" \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --shell /bin/bash sidewinder
USER 10001
WORKDIR /home/sidewinder/sidewinder
COPY --chown=sidewinder:sidewinder . .

# Fetch and build the reference bench at build time, so `docker run` needs no network.
RUN python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir -e '.[test,dev]' \
    && .venv/bin/python -m interop.install

CMD ["bash", "scripts/test.sh"]
