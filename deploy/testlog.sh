#!/bin/sh
# Entry point of the `testlog` service (compose profile `demo`, image target
# `testlog`): a local CT log (ct-testlog) that writes its log list, CA
# certificate and corpus to the shared `testlog-data` volume for the `ingest`
# service and for operators (`audit-sim simulate`, `sct-audit`).
#
# It waits one MMD (TESTLOG_MMD, 10 s) after issuing and signs a new head
# before writing the files, so ingest's first pass already covers every
# corpus SCT: keep TESTLOG_MMD short.
#
# ct-testlog puts the address it listens on into the log list's URLs, so it
# listens on this container's address on the compose network (not 0.0.0.0,
# which other containers cannot connect to).
set -eu

out_dir=${TESTLOG_OUT_DIR:-/var/lib/ct-testlog}
port=${TESTLOG_PORT:-8962}
addr=${TESTLOG_ADDR:-}
if [ -z "$addr" ]; then
  ip=$(getent ahostsv4 "$(hostname)" | awk 'NR == 1 { print $1 }')
  [ -n "$ip" ] || { echo "testlog.sh: cannot find this container's IPv4 address" >&2; exit 1; }
  case $ip in
    127.*) echo "testlog.sh: warning: $(hostname) resolves to $ip; other containers cannot reach it (set TESTLOG_ADDR)" >&2 ;;
  esac
  addr=$ip:$port
fi

# The healthcheck waits for a fresh log list (a restarted log is a new log
# with a new random key: the old list and corpus must not be used).
rm -f "$out_dir/log_list.json" "$out_dir/corpus.jsonl"
exec ct-testlog --addr "$addr" --out-dir "$out_dir" \
  --entries "${TESTLOG_ENTRIES:-2000}" \
  --omitted "${TESTLOG_OMITTED:-20}" --forged "${TESTLOG_FORGED:-10}" \
  --mmd "${TESTLOG_MMD:-10}" --wait-mmd \
  --grow-by "${TESTLOG_GROW_BY:-100}" --grow-interval-s "${TESTLOG_GROW_INTERVAL_S:-60}" \
  "$@"
