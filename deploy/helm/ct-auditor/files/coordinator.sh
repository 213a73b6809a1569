#!/bin/sh
# Coordinator of a sharded auditor (docs/deploy-kubernetes.md): writes the
# next epoch to the object store with `auditor-server epoch prepare` (the
# sorted, checksummed snapshot of the store's leaf hashes and the epoch
# spec), then `auditor-server epoch publish`, which waits until every shard
# has built its databases and reported ready and marks the epoch published,
# or gives up after COORDINATOR_PUBLISH_TIMEOUT_SECONDS (exit status 2: the
# epoch stays unpublished and the shards keep serving the previous one). A
# failed `epoch prepare` (or any other error) exits 1.
#
# Kubernetes runs it once per CronJob run (the Helm chart's coordinator);
# docker-compose.yml's sharded profile sets COORDINATOR_INTERVAL_SECONDS
# to repeat it.
# Environment: DATABASE_URL, AUDITOR_OBJECT_STORE (+ AWS_*),
# AUDITOR_SHARD_COUNT, AUDITOR_SHARD_URL_TEMPLATE.
set -eu

config=${COORDINATOR_CONFIG:-/etc/ct-auditor/auditor.toml}
publish_timeout=${COORDINATOR_PUBLISH_TIMEOUT_SECONDS:-14400}
poll=${COORDINATOR_POLL_SECONDS:-30}
interval=${COORDINATOR_INTERVAL_SECONDS:-0}

one_epoch() {
  auditor-server --config "$config" epoch prepare || return 1
  status=0
  auditor-server --config "$config" epoch publish \
    --timeout-seconds "$publish_timeout" --poll-seconds "$poll" || status=$?
  case "$status" in
    0) return 0 ;;
    2)
      echo "coordinator.sh: not every shard ready after ${publish_timeout} s; epoch left unpublished" >&2
      return 2
      ;;
    *) return 1 ;;
  esac
}

if [ "$interval" -gt 0 ]; then
  while :; do
    one_epoch || echo "coordinator.sh: epoch failed; next try in ${interval} s" >&2
    sleep "$interval"
  done
else
  status=0
  one_epoch || status=$?
  exit "$status"
fi
