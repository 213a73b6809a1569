# syntax=docker/dockerfile:1
#
# Two images from one build:
#
#   docker build -t ct-auditor .                            # production: ct-ingest, auditor-server
#   docker build --target testlog -t ct-auditor-testlog .   # the local test log (ct-testlog), for demos
#   docker run --rm ct-auditor auditor-server --help
#
# The production image (the last stage, built by default) holds no test
# code: ct-testlog is built only for the `testlog` target.
# docker-compose.yml runs the auditor's services from the first and the
# demo profile's `testlog` service from the second.
#
# The binaries are portable x86-64 (pir-core picks its AVX-512/AVX2/scalar
# kernels at run time), built --release --locked from Cargo.lock.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---- sources ----
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS source
WORKDIR /src
# Release builds keep only line tables for backtraces (the workspace profile
# has debug = 1, which would triple the binaries).
ENV CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
    CARGO_TERM_COLOR=never
COPY . .

# ---- builder: the production binaries ----
FROM source AS builder
# Cache mounts keep the registry and target directory between builds; the
# binaries are copied out of the cache before the step ends.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ct-ingest -p auditor-server --bins --features auditor-server/s3 \
 && mkdir -p /out \
 && cp target/release/ct-ingest target/release/auditor-server /out/

# ---- testlog-builder: the test log ----
FROM source AS testlog-builder
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ct-testlog --bins \
 && mkdir -p /out \
 && cp target/release/ct-testlog /out/

# ---- runtime base ----
FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# curl: the auditor's healthcheck. The binaries need nothing else (rustls with
# built-in web PKI roots, SQLite bundled); ca-certificates is for operators'
# own debugging with curl.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
# One unprivileged user; the data directories are created here so that named
# volumes mounted on them start out owned by it.
RUN groupadd --system --gid 10001 ctaudit \
 && useradd --system --uid 10001 --gid ctaudit --home-dir /var/lib/auditor --shell /usr/sbin/nologin ctaudit \
 && mkdir -p /var/lib/auditor/epochs /var/lib/ct-ingest /etc/ct-auditor \
 && chown -R ctaudit:ctaudit /var/lib/auditor /var/lib/ct-ingest
ENV RUST_LOG=info

# ---- testlog: `docker build --target testlog` ----
FROM runtime AS testlog
RUN mkdir -p /var/lib/ct-testlog && chown ctaudit:ctaudit /var/lib/ct-testlog
COPY --from=testlog-builder /out/ct-testlog /usr/local/bin/
COPY deploy/testlog.sh /usr/local/share/ct-testlog/testlog.sh
USER ctaudit
WORKDIR /var/lib/ct-testlog
EXPOSE 8962
# deploy/testlog.sh: ct-testlog on the container's own address, port 8962
# (the log list names that address, so other containers can reach it),
# writing log_list.json, issuer.pem and corpus.jsonl to /var/lib/ct-testlog.
# docker-compose.yml runs the same script from its deploy/ mount.
CMD ["sh", "/usr/local/share/ct-testlog/testlog.sh"]

# ---- production (default target) ----
FROM runtime AS production
COPY --from=builder /out/ct-ingest /out/auditor-server /usr/local/bin/
USER ctaudit
WORKDIR /var/lib/auditor
EXPOSE 8080
# Without compose: an embedded SQLite store and epochs under /var/lib/auditor
# (mount a volume there). docker-compose.yml replaces this command.
CMD ["auditor-server", "serve", "--bind", "0.0.0.0:8080", "--epoch-dir", "/var/lib/auditor/epochs"]
