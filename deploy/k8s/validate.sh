#!/usr/bin/env bash
# Offline validation of the deployment (docs/deploy-kubernetes.md#validation):
#
#   1. `helm lint` the chart deploy/helm/ct-auditor with its default values
#      and with values-5e9.yaml, and render it (`helm template`) with each,
#      with the Gateway API route instead of the Ingress, and with one
#      replica per group allowed;
#   2. validate every rendered object and examples/*.yaml against the
#      Kubernetes API schemas with kubeconform, strictly (unknown fields are
#      errors); ServiceMonitor, PrometheusRule and HTTPRoute against the
#      schemas of their CustomResourceDefinitions;
#   3. check what the schemas cannot (check.py helm): groups, their
#      Services, PodDisruptionBudgets and routes, probes, anti-affinity,
#      credentials, alerts on exported metrics with a runbook section;
#   4. check docker-compose.yml with every profile: composecheck (the
#      compose-go loader of `docker compose config`: Compose Specification
#      schema, interpolation, references), check.py's mirror of the chart
#      in the sharded profile, and `docker compose config` when the compose
#      plugin exists;
#   5. self-test: broken copies of the chart and of the compose file must
#      fail.
#
# Needs go, python3 (+ PyYAML and promql-parser, from PyPI when missing) and
# the Go module proxy only: no cluster, no other network. helm and kubeconform are built with `go install` at the
# pinned versions below; the schemas are generated (openapi2schemas.py) from
# api/openapi-spec/swagger.json of the k8s.io/kubernetes module and from the
# CRDs in the prometheus-operator and gateway-api modules. All are cached
# in $K8S_TOOLS_CACHE (default ~/.cache/ct-auditor/k8s-tools), so later
# runs take seconds.
#
#   deploy/k8s/validate.sh            # validate (exit 1 on any error)
#   deploy/k8s/validate.sh --no-self-test
set -euo pipefail

HELM_VERSION=v3.22.1 # helm.sh/helm/v3
KUBECONFORM_VERSION=v0.8.0 # github.com/yannh/kubeconform
# The API version validated against (the chart needs >= 1.28).
KUBERNETES_VERSION=v1.34.4 # k8s.io/kubernetes (api/openapi-spec/swagger.json)
# The CustomResourceDefinitions of the objects the chart renders beyond the API.
PROMETHEUS_OPERATOR_VERSION=v0.85.0 # ServiceMonitor, PrometheusRule
GATEWAY_API_VERSION=v1.4.0 # sigs.k8s.io/gateway-api: HTTPRoute

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
chart="$repo/deploy/helm/ct-auditor"
cache="${K8S_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ct-auditor/k8s-tools}"
self_test=1
[ "${1:-}" = "--no-self-test" ] && self_test=0

say() { echo "validate.sh: $*" >&2; }

command -v go >/dev/null || { say "go not found (needed to build helm and kubeconform)"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
# check.py parses the alert rules' PromQL with it (Prometheus's grammar).
PROMQL_PARSER_VERSION=0.11.0 # PyPI promql-parser
python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('promql-parser') != '$PROMQL_PARSER_VERSION')" 2>/dev/null \
  || python3 -m pip install --quiet "promql-parser==$PROMQL_PARSER_VERSION"
mkdir -p "$cache/bin"
# Module downloads only; no toolchain switch, no cgo.
export GOTOOLCHAIN=local CGO_ENABLED=0

# go_install NAME PACKAGE VERSION: the cached binary, built when absent.
go_install() {
  local target="$cache/bin/$1-$3" tmp
  if [ ! -x "$target" ]; then
    say "building $2@$3"
    tmp="$(mktemp -d)"
    (cd "$tmp" && GOBIN="$tmp/bin" go install "$2@$3")
    mv "$tmp/bin/$1" "$target"
    rm -rf "$tmp"
  fi
  echo "$target"
}
helm="$(go_install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION")"
kubeconform="$(go_install kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION")"

# composecheck (./composecheck, pinned by its go.sum): cached per source.
cc_sum="$(cat "$here"/composecheck/{go.mod,go.sum,main.go} | sha256sum | cut -c1-16)"
composecheck="$cache/bin/composecheck-$cc_sum"
if [ ! -x "$composecheck" ]; then
  say "building composecheck"
  (cd "$here/composecheck" && go build -mod=readonly -buildvcs=false -o "$composecheck.tmp" .)
  mv "$composecheck.tmp" "$composecheck"
fi

# module_dir MODULE@VERSION: the module's source, from the Go module proxy
# (checked against the Go checksum database).
module_dir() {
  (cd "$(mktemp -d)" && go mod download -json "$1" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
}
schemas="$cache/schemas-$KUBERNETES_VERSION-po$PROMETHEUS_OPERATOR_VERSION-gw$GATEWAY_API_VERSION"
if [ ! -f "$schemas/.complete" ]; then
  say "generating the API schemas of Kubernetes $KUBERNETES_VERSION and the CRDs"
  rm -rf "$schemas.tmp"
  k8s="$(module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")"
  python3 "$here/openapi2schemas.py" "$k8s/api/openapi-spec/swagger.json" "$schemas.tmp" >&2
  po="$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")"
  gw="$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")"
  python3 "$here/openapi2schemas.py" --crd "$schemas.tmp" \
    "$po/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" \
    "$po/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml" \
    "$gw/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" >&2
  touch "$schemas.tmp/.complete"
  rm -rf "$schemas"
  mv "$schemas.tmp" "$schemas"
fi

kubeconform_strict() {
  "$kubeconform" -strict -summary \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}

# The renders: `name|helm template arguments|check.py arguments`.
RENDERS='default||
5e9|-f values-5e9.yaml|
gateway|--set gateway.enabled=true --set ingress.enabled=false|
single-replica|--set replicasPerGroup=1 --set allowSingleReplica=true|--min-replicas 1'

# validate_chart DIR OUT [quick]: steps 1-3 for the chart at DIR; quick
# (the self-test's broken copies) leaves out the large 5e9 render.
validate_chart() {
  local dir="$1" out="$2" quick="${3:-}" name args check rc=0
  for args in "" "-f $dir/values-5e9.yaml"; do
    [ -n "$quick" ] && [ -n "$args" ] && continue
    # shellcheck disable=SC2086 # arguments split on purpose
    "$helm" lint --quiet --strict --kube-version "${KUBERNETES_VERSION#v}" $args "$dir" >&2 || rc=1
  done
  while IFS='|' read -r name args check; do
    [ -n "$quick" ] && [ "$name" = 5e9 ] && continue
    # shellcheck disable=SC2086
    if ! (cd "$dir" && "$helm" template ct-auditor . --namespace ct-auditor \
      --kube-version "${KUBERNETES_VERSION#v}" $args) >"$out/$name.yaml"; then
      say "helm template ($name) failed"; rc=1; continue
    fi
    kubeconform_strict "$out/$name.yaml" >&2 || rc=1
    # shellcheck disable=SC2086
    python3 "$here/check.py" helm "$out/$name.yaml" "$here"/examples/*.yaml $check >&2 || rc=1
  done <<<"$RENDERS"
  return "$rc"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/ok"
validate_chart "$chart" "$work/ok" || { say "FAILED: the chart is invalid"; exit 1; }
kubeconform_strict "$here"/examples/*.yaml || { say "FAILED: examples/*.yaml are invalid"; exit 1; }
for f in "$here"/examples/*.json; do
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" || { say "FAILED: $f is no JSON"; exit 1; }
done

for profiles in "" "demo" "sharded" "demo sharded"; do
  # shellcheck disable=SC2086 # one word per profile
  "$composecheck" "$repo/docker-compose.yml" $profiles
done
python3 "$here/check.py" compose "$repo/docker-compose.yml"
if docker compose version >/dev/null 2>&1; then
  (cd "$repo" && docker compose --profile demo --profile sharded config --quiet)
else
  say "docker compose plugin not installed; compose file checked by composecheck and check.py"
fi

if [ "$self_test" = 1 ]; then
  # Each broken copy of the chart must be refused;
  # `file|sed expression|what it breaks`.
  broken=0
  while IFS='|' read -r file expr what; do
    [ -n "$file" ] || continue
    broken=$((broken + 1))
    copy="$work/broken-$broken"
    cp -r "$chart" "$copy"
    sed -i "$expr" "$copy/$file"
    if cmp -s "$chart/$file" "$copy/$file"; then
      say "self-test $broken: '$expr' did not change $file"; exit 1
    fi
    mkdir -p "$copy.out"
    if validate_chart "$copy" "$copy.out" quick >/dev/null 2>&1; then
      say "self-test $broken FAILED: $what was accepted"; exit 1
    fi
  done <<'CASES'
templates/groups.yaml|0,/timeoutSeconds:/s//timeoutSecondz:/|a misspelt probe field (schema)
templates/ingest.yaml|0,/containerPort: 9102/s//containerPort: "9102"/|a port given as a string (schema)
templates/monitoring.yaml|0,/interval:/s//intervall:/|a misspelt ServiceMonitor field (CRD schema)
templates/services.yaml|s/type: PathPrefix/type: PathPrefixx/|an unknown HTTPRoute path type (CRD schema)
templates/services.yaml|0,/path: {{ $.Values.groupPathPrefix }}\/{{ $i }}/s//path: {{ $.Values.groupPathPrefix }}{{ $i }}/|Ingress paths that miss the manifest's group URLs (check.py)
templates/groups.yaml|s/maxUnavailable: 1/maxUnavailable: 2/|a PodDisruptionBudget that can take a whole group (check.py)
templates/groups.yaml|s/path: \/readyz/path: \/healthz/|readiness on /healthz (check.py)
templates/groups.yaml|s/path: \/livez/path: \/healthz/|liveness on /healthz, 503 before the first epoch (check.py)
templates/groups.yaml|s/topologyKey: kubernetes.io\/hostname/topologyKey: topology.kubernetes.io\/zone/|a group's replicas allowed on one node (check.py)
templates/monitoring.yaml|s/auditor_object_store_errors_total/auditor_object_store_failures_total/|an alert on a metric the server does not export (check.py)
templates/coordinator.yaml|s/name: {{ .Values.objectStore.writerSecret }}/name: {{ .Values.objectStore.groupSecret }}/|the coordinator with the groups' credentials (check.py)
templates/coordinator.yaml|s/concurrencyPolicy: Forbid/concurrencyPolicy: Allow/|coordinators that may overlap (check.py)
templates/monitoring.yaml|s/\[2h\]))/[2h]/|an alert expression that does not parse (check.py, PromQL)
values.yaml|s/^allowSingleReplica: false/allowSingleReplica: true/;s/^replicasPerGroup: 2/replicasPerGroup: 1/|one replica per group (check.py)
templates/groups.yaml|s/value: "false"/value: "true"/|group pods that build with read-only credentials (check.py)
templates/builder.yaml|s/completions: {{ .Values.groups }}/completions: 1/|one builder index for every group (check.py)
templates/builder.yaml|s/- \$(JOB_COMPLETION_INDEX)/- "0"/|every builder index building group 0 (check.py)
templates/builder.yaml|s/name: {{ .Values.objectStore.builderSecret }}/name: {{ .Values.objectStore.writerSecret }}/|builders with the coordinator's credentials (check.py)
CASES
  # Broken copies of docker-compose.yml: `sed expression|what it breaks`.
  while IFS='|' read -r expr what; do
    [ -n "$expr" ] || continue
    broken=$((broken + 1))
    copy="$work/broken-$broken.yml"
    sed "$expr" "$repo/docker-compose.yml" >"$copy"
    if cmp -s "$repo/docker-compose.yml" "$copy"; then
      say "self-test $broken: '$expr' did not change docker-compose.yml"; exit 1
    fi
    if "$composecheck" "$copy" demo sharded >/dev/null 2>&1 \
      && python3 "$here/check.py" compose "$copy" >/dev/null 2>&1; then
      say "self-test $broken FAILED: $what was accepted"; exit 1
    fi
  done <<'CASES'
s/start_interval: 2s/start_intervall: 2s/|a misspelt healthcheck key (composecheck)
s/condition: service_completed_successfully/condition: service_done/|an unknown dependency condition (composecheck)
0,/AUDITOR_SHARD_INDEX: "1"/s//AUDITOR_SHARD_INDEX: "0"/|a group with three replicas and one with one (check.py)
s/\/g\/{i}/\/group\/{i}/|group URLs off the chart's path (check.py)
s/BUILDER_GROUP: "2"/BUILDER_GROUP: "1"/|no builder for group 2 (check.py)
CASES
  say "self-test: $broken broken copies refused"
fi
say "chart and compose file valid (${SECONDS} s)"
