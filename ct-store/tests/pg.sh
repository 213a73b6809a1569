#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the store tests (ct-store, and the
# ingestion tests of ct-ingest, which use the same TEST_DATABASE_URL).
#
#   bash ct-store/tests/pg.sh start [DIR]   # prints the database URL on stdout
#   bash ct-store/tests/pg.sh stop  [DIR]   # stops the cluster and deletes DIR
#   bash ct-store/tests/pg.sh pause   DIR   # stops the server like a crash, keeps DIR
#   bash ct-store/tests/pg.sh resume  DIR   # starts it again (same port and data)
#   bash ct-store/tests/pg.sh restart DIR [DOWN_SECONDS]   # pause, wait, resume
#
# DIR defaults to ${TMPDIR:-/tmp}/ct-store-pg; clusters running at the same
# time need different DIRs. `start` wipes any previous cluster in DIR, runs
# initdb (no fsync; the superuser `postgres` without a password, every
# other role with its password, scram-sha-256), starts the server on 127.0.0.1 and a free
# port (Unix socket inside DIR), creates database `ct_test` and prints
# e.g. postgres://postgres@127.0.0.1:41234/ct_test.
# Everything else (progress, logs) goes to stderr. The tests create one
# database per test case in this cluster and drop it afterwards.
#
# Uses the installed server binaries ($(pg_config --bindir), else the newest
# /usr/lib/postgresql/*/bin). initdb refuses to run as root, so as root every
# server command runs as the `postgres` system user via `runuser`.
# Install on Debian if missing: apt-get install -y postgresql (15 in bookworm).
#
# How CI calls it (in .ci/run, before `cargo test --workspace`):
#
#   TEST_DATABASE_URL="$(bash ct-store/tests/pg.sh start)"
#   export TEST_DATABASE_URL
#   trap 'bash ct-store/tests/pg.sh stop' EXIT
#   cargo test --workspace        # tests/store.rs runs on SQLite and PostgreSQL
#
# Without TEST_DATABASE_URL the store tests run on SQLite only.
#
# `pause` stops the server of a cluster started by `start` the way a crash
# would (`pg_ctl stop -m immediate`: connections are cut, no shutdown
# checkpoint) and keeps its data; `resume` starts it again with the same
# data, port and settings, so its URL stays valid. `restart` is both, with
# DOWN_SECONDS (default 0, may be fractional) in between. The fault tests of
# ct-ingest use them on a cluster of their own.
#
# Extra server settings can be passed in PGTEST_SERVER_OPTS, e.g.
# PGTEST_SERVER_OPTS="-c fsync=on -c synchronous_commit=on" for a throughput
# measurement with durable commits.
set -euo pipefail

cmd="${1:-}"
dir="${2:-${TMPDIR:-/tmp}/ct-store-pg}"

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

bindir=""
if command -v pg_config >/dev/null 2>&1; then
  bindir="$(pg_config --bindir)"
fi
if [[ -z "$bindir" || ! -x "$bindir/initdb" ]]; then
  bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
fi
[[ -n "$bindir" && -x "$bindir/initdb" ]] \
  || die "no PostgreSQL server binaries found (apt-get install -y postgresql)"

# Run a command as the cluster owner.
if [[ "$(id -u)" == 0 ]]; then
  id postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user"
  owner=postgres
  as_owner() { runuser -u postgres -- "$@"; }
else
  owner="$(id -un)"
  as_owner() { "$@"; }
fi

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local p
  for p in $(seq 54320 54420); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  die "no free port found"
}

start_server() {
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$1" -w -t 60 start >&2
}

stop_cluster() {
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
  fi
}

require_started() {
  [[ -f "$dir/opts" && -f "$dir/url" ]] || die "no cluster started by this script in $dir"
}

pause_server() {
  require_started
  stop_cluster
  log "server stopped"
}

resume_server() {
  require_started
  start_server "$(cat "$dir/opts")" || { cat "$dir/server.log" >&2; die "pg_ctl start failed"; }
  log "server running: $(cat "$dir/url")"
}

case "$cmd" in
  start)
    stop_cluster
    rm -rf "$dir"
    mkdir -p "$dir"
    chown "$owner" "$dir"
    chmod 700 "$dir"
    log "initdb in $dir/data ($bindir)"
    as_owner "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust \
      --encoding=UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    # The superuser `postgres` needs no password (the tests' admin URL);
    # every other role authenticates with its password over TCP, as in
    # production, so that a wrong password is refused.
    cat >"$dir/data/pg_hba.conf" <<'HBA'
local all all                trust
host  all postgres 127.0.0.1/32 trust
host  all all      127.0.0.1/32 scram-sha-256
HBA
    chown "$owner" "$dir/data/pg_hba.conf"
    # A port found free can be taken by a parallel start before the server
    # binds it: then try another one.
    for attempt in 1 2 3 4 5; do
      port="$(free_port)"
      # Test cluster: durability off for speed (override with PGTEST_SERVER_OPTS).
      opts="-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off"
      opts+=" -c synchronous_commit=off -c full_page_writes=off"
      opts+=" -c max_connections=200 ${PGTEST_SERVER_OPTS:-}"
      if start_server "$opts"; then
        echo "$opts" >"$dir/opts"
        break
      fi
      cat "$dir/server.log" >&2 || true
      [[ $attempt -lt 5 ]] || die "pg_ctl start failed"
      log "start on port $port failed; retrying"
    done
    as_owner "$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
      -v ON_ERROR_STOP=1 -c 'CREATE DATABASE ct_test' >&2
    url="postgres://postgres@127.0.0.1:$port/ct_test"
    echo "$url" >"$dir/url"
    log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') listening on 127.0.0.1:$port"
    echo "$url"
    ;;
  stop)
    stop_cluster
    rm -rf "$dir"
    ;;
  pause)
    pause_server
    ;;
  resume)
    resume_server
    ;;
  restart)
    pause_server
    log "down for ${3:-0}s"
    sleep "${3:-0}"
    resume_server
    ;;
  *)
    die "usage: $0 start|stop [DIR] | pause|resume DIR | restart DIR [DOWN_SECONDS]"
    ;;
esac
