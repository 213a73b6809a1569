#!/bin/sh
# Entry point of the `ingest` service: `ct-ingest run` against DATABASE_URL.
#
# Config: $INGEST_CONFIG if set; else deploy/ingest-demo.toml when the demo
# test log (`testlog` service, compose profile `demo`) is on this network,
# else deploy/ingest.toml (Chrome's log list).
set -eu

conf_dir=${CONF_DIR:-/etc/ct-auditor}
state_dir=${INGEST_STATE_DIR:-/var/lib/ct-ingest}
testlog_host=${TESTLOG_HOST:-testlog}
demo_list=${DEMO_LOG_LIST:-/var/lib/ct-testlog/log_list.json}

config=${INGEST_CONFIG:-}
if [ -z "$config" ]; then
  if getent hosts "$testlog_host" >/dev/null 2>&1; then
    config=$conf_dir/ingest-demo.toml
    # The testlog service writes its log list once it has issued its entries.
    tries=0
    while [ ! -s "$demo_list" ]; do
      tries=$((tries + 1))
      if [ "$tries" -gt 300 ]; then
        echo "ingest.sh: no $demo_list after 300 s; is the testlog service healthy?" >&2
        exit 1
      fi
      sleep 1
    done
    echo "ingest.sh: demo test log found ($testlog_host); using $config" >&2
  else
    config=$conf_dir/ingest.toml
  fi
fi

exec ct-ingest run --config "$config" --metrics-file "$state_dir/metrics.prom" "$@"
