#!/bin/sh
# Entry point of the one-shot `demo-epoch` service (compose profile `demo`):
# waits until the ingest service has finished its first pass (it writes its
# metrics file after every pass), then builds an epoch with
# `auditor-server build-epoch` into the shared epochs volume. The running
# `auditor` picks it up at its next reload (reload_seconds = 30), so the demo
# serves ingested entries without waiting for the daily build.
set -eu

metrics=${INGEST_METRICS_FILE:-/var/lib/ct-ingest/metrics.prom}
tries=0
while [ ! -s "$metrics" ]; do
  tries=$((tries + 1))
  if [ "$tries" -gt 600 ]; then
    echo "demo-epoch.sh: no $metrics after 600 s; did the ingest service run?" >&2
    exit 1
  fi
  sleep 1
done
exec auditor-server build-epoch --config "${CONF_DIR:-/etc/ct-auditor}/auditor.toml" "$@"
