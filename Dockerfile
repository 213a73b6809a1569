# syntax=docker/dockerfile:1
#
# ct-ingest, ct-testlog and auditor-server in one slim image
# (docker-compose.yml runs each service from it).
#
#   docker build -t ct-auditor .
#   docker run --rm ct-auditor auditor-server --help
#
# The binaries are portable x86-64 (pir-core picks its AVX-512/AVX2/scalar
# kernels at run time), built --release --locked from Cargo.lock.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---- builder ----
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
WORKDIR /src
# Release builds keep only line tables for backtraces (the workspace profile
# has debug = 1, which would triple the binaries).
ENV CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
    CARGO_TERM_COLOR=never
COPY . .
# Cache mounts keep the registry and target directory between builds; the
# binaries are copied out of the cache before the step ends.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ct-ingest -p auditor-server --bins \
 && mkdir -p /out \
 && cp target/release/ct-ingest target/release/ct-testlog target/release/auditor-server /out/

# ---- runtime ----
FROM debian:${DEBIAN_RELEASE}-slim
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
 && mkdir -p /var/lib/auditor/epochs /var/lib/ct-ingest /var/lib/ct-testlog /etc/ct-auditor \
 && chown -R ctaudit:ctaudit /var/lib/auditor /var/lib/ct-ingest /var/lib/ct-testlog
COPY --from=builder /out/ct-ingest /out/ct-testlog /out/auditor-server /usr/local/bin/
USER ctaudit
WORKDIR /var/lib/auditor
ENV RUST_LOG=info
EXPOSE 8080
# Without compose: an embedded SQLite store and epochs under /var/lib/auditor
# (mount a volume there). docker-compose.yml replaces this command.
CMD ["auditor-server", "serve", "--bind", "0.0.0.0:8080", "--epoch-dir", "/var/lib/auditor/epochs"]
