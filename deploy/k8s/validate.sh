#!/usr/bin/env bash
# Offline validation of the deployment manifests (docs/deploy-kubernetes.md#validation):
#
#   1. render every overlay (deploy/k8s/overlays/*) with kustomize;
#   2. validate the rendered objects and examples/*.yaml against the
#      Kubernetes API schemas with kubeconform, strictly (unknown fields are
#      errors);
#   3. check what the schemas cannot (check.py): shard count = replicas,
#      probes, security context, references, per-shard routing;
#   4. check docker-compose.yml with every profile: composecheck (the
#      compose-go loader of `docker compose config`: Compose Specification
#      schema, interpolation, references), check.py's sharded-profile
#      checks, and `docker compose config` when the compose plugin exists;
#   5. self-test: broken copies of the manifests must fail steps 1-3.
#
# Needs go, python3 (+ PyYAML) and the Go module proxy only: no cluster, no
# other network. kustomize and kubeconform are built with `go install` at the
# pinned versions below; the schemas are generated (openapi2schemas.py) from
# api/openapi-spec/swagger.json of the k8s.io/kubernetes module. Both are
# cached in $K8S_TOOLS_CACHE (default ~/.cache/ct-auditor/k8s-tools), so
# later runs take seconds.
#
#   deploy/k8s/validate.sh            # validate (exit 1 on any error)
#   deploy/k8s/validate.sh --no-self-test
set -euo pipefail

KUSTOMIZE_VERSION=v5.8.2 # sigs.k8s.io/kustomize/kustomize/v5
KUBECONFORM_VERSION=v0.8.0 # github.com/yannh/kubeconform
# The API version validated against: the oldest Kubernetes the manifests
# target (the pod-index label needs >= 1.28).
KUBERNETES_VERSION=v1.34.4 # k8s.io/kubernetes (api/openapi-spec/swagger.json)

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${K8S_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ct-auditor/k8s-tools}"
self_test=1
[ "${1:-}" = "--no-self-test" ] && self_test=0

say() { echo "validate.sh: $*" >&2; }

command -v go >/dev/null || { say "go not found (needed to build kustomize and kubeconform)"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
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
kustomize="$(go_install kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION")"
kubeconform="$(go_install kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION")"

# composecheck (./composecheck, pinned by its go.sum): cached per source.
cc_sum="$(cat "$here"/composecheck/{go.mod,go.sum,main.go} | sha256sum | cut -c1-16)"
composecheck="$cache/bin/composecheck-$cc_sum"
if [ ! -x "$composecheck" ]; then
  say "building composecheck"
  (cd "$here/composecheck" && go build -mod=readonly -buildvcs=false -o "$composecheck.tmp" .)
  mv "$composecheck.tmp" "$composecheck"
fi

schemas="$cache/schemas-$KUBERNETES_VERSION"
if [ ! -f "$schemas/.complete" ]; then
  say "generating API schemas of Kubernetes $KUBERNETES_VERSION"
  moddir="$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$schemas.tmp"
  python3 "$here/openapi2schemas.py" "$moddir/api/openapi-spec/swagger.json" "$schemas.tmp" >&2
  touch "$schemas.tmp/.complete"
  rm -rf "$schemas"
  mv "$schemas.tmp" "$schemas"
fi

# validate_tree DIR OUT: steps 1-3 for the deploy/k8s tree at DIR.
validate_tree() {
  local dir="$1" out="$2" overlay name rc=0
  for overlay in "$dir"/overlays/*/; do
    name="$(basename "$overlay")"
    "$kustomize" build "$overlay" >"$out/$name.yaml" || { say "kustomize build $name failed"; rc=1; continue; }
    "$kubeconform" -strict -summary \
      -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
      "$out/$name.yaml" || rc=1
    python3 "$here/check.py" k8s "$out/$name.yaml" "$dir"/examples/*.yaml || rc=1
  done
  "$kubeconform" -strict -summary \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
    "$dir"/examples/*.yaml || rc=1
  return "$rc"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/ok"
validate_tree "$here" "$work/ok" || { say "FAILED: the manifests are invalid"; exit 1; }

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
  # Each broken copy must be refused; `file|sed expression|what it breaks`.
  broken=0
  while IFS='|' read -r file expr what; do
    [ -n "$file" ] || continue
    broken=$((broken + 1))
    copy="$work/broken-$broken"
    cp -r "$here" "$copy"
    sed -i "$expr" "$copy/$file"
    if cmp -s "$here/$file" "$copy/$file"; then
      say "self-test $broken: '$expr' did not change $file"; exit 1
    fi
    mkdir -p "$copy.out"
    if validate_tree "$copy" "$copy.out" >/dev/null 2>&1; then
      say "self-test $broken FAILED: $what was accepted"; exit 1
    fi
  done <<'CASES'
base/auditor-statefulset.yaml|0,/timeoutSeconds:/s//timeoutSecondz:/|a misspelt probe field (schema)
base/ingest-deployment.yaml|0,/containerPort: 9102/s//containerPort: "9102"/|a port given as a string (schema)
overlays/sharded/kustomization.yaml|s/count: 3/count: 4/|a fourth shard without Service and Ingress host (check.py)
overlays/sharded/shards-patch.yaml|s/shard-{i}.auditor/shards-{i}.auditor/|shard URLs that the Ingress does not route (check.py)
base/auditor-statefulset.yaml|s/path: \/readyz/path: \/healthz/|readiness on /healthz (check.py)
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
s/AUDITOR_SHARD_INDEX: "2"/AUDITOR_SHARD_INDEX: "1"/|two shards with index 1 (check.py)
CASES
  say "self-test: $broken broken copies refused"
fi
say "manifests valid"
