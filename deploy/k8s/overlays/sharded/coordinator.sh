#!/bin/sh
# Coordinator of a sharded auditor (docs/deploy-kubernetes.md): writes the
# next epoch to the object store with `auditor-server epoch prepare` (the
# sorted, checksummed snapshot of the store's leaf hashes and the epoch
# spec), then runs `auditor-server epoch publish` until it succeeds, that is
# until every shard has built its databases and reported ready, or gives up
# after COORDINATOR_PUBLISH_TIMEOUT_SECONDS (exit status 2: the epoch stays
# unpublished and the shards keep serving the previous one). A failed
# `epoch prepare` exits 1.
#
# Kubernetes runs it once per CronJob run; docker-compose.yml's sharded
# profile sets COORDINATOR_INTERVAL_SECONDS to repeat it.
# Environment: DATABASE_URL, AUDITOR_OBJECT_STORE (+ AWS_*),
# AUDITOR_SHARD_COUNT, AUDITOR_SHARD_URL_TEMPLATE.
set -eu

config=${COORDINATOR_CONFIG:-/etc/ct-auditor/auditor.toml}
publish_timeout=${COORDINATOR_PUBLISH_TIMEOUT_SECONDS:-14400}
poll=${COORDINATOR_POLL_SECONDS:-30}
interval=${COORDINATOR_INTERVAL_SECONDS:-0}

one_epoch() {
  auditor-server --config "$config" epoch prepare || return 1
  started=$(date +%s)
  until auditor-server --config "$config" epoch publish; do
    if [ $(($(date +%s) - started)) -ge "$publish_timeout" ]; then
      echo "coordinator.sh: not every shard ready after ${publish_timeout} s; epoch left unpublished" >&2
      return 2
    fi
    sleep "$poll"
  done
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
