#!/usr/bin/env bash
# End-to-end tests of the extension: builds the wasm package and the XPI
# (../build.sh),
# starts audit-demo's demo-server (test log → ct-ingest → auditor-server on
# 127.0.0.1, new epoch every EPOCH_INTERVAL s), runs against it the tests
# named in EXTENSION_TESTS (default "node"), stops the server:
#   node     e2e.mjs (the wasm32 build through its Node glue) and
#            background.mjs (the extension's background.js with the web glue,
#            WebExtension APIs stood in for, against demo-server and against
#            browser-client's fake_auditor example: hostile auditors, failures,
#            timing); extra arguments go to e2e.mjs
#   firefox  firefox.mjs: the built XPI installed in headless Firefox ESR (as
#            with signature checks off) over HTTPS sites whose certificates
#            embed the test log's SCTs (needs firefox-esr, certutil and
#            geckodriver, as .ci/run installs them); the popup's screenshot
#            (taken on every run) goes to $SCREENSHOT if set, else into the
#            run's work folder, and a copy to $REPORT_SCREENSHOT if set
#
# DEMO_SERVER_PROFILE picks the cargo profile of demo-server: release (the
# default) or dev (pir-core is optimised in dev builds too, so the server
# keeps up; .ci/run uses it because `cargo test --workspace` has just built
# the dev binary, which saves a release build of the whole server side).
#
# The server's stdin is a pipe held by this script: whenever the script
# ends, even by SIGKILL, the server sees end of file and shuts down.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
EPOCH_INTERVAL="${EPOCH_INTERVAL:-20}"
EXTENSION_TESTS="${EXTENSION_TESTS:-node}"
for t in $EXTENSION_TESTS; do
  case "$t" in node | firefox) ;; *) echo "run.sh: unknown test '$t' in EXTENSION_TESTS" >&2; exit 2 ;; esac
done
wants() { [[ " $EXTENSION_TESTS " == *" $1 "* ]]; }

"$here/../build.sh"
case "${DEMO_SERVER_PROFILE:-release}" in
  release) profile=(--release) out=release ;;
  dev) profile=() out=debug ;;
  *) echo "run.sh: DEMO_SERVER_PROFILE must be release or dev" >&2; exit 2 ;;
esac
(cd "$root" && cargo build "${profile[@]}" -p audit-demo --bin demo-server)
server="$target/$out/demo-server"
# The fake auditors of background.mjs (all ones, all zeros, a wrong fill).
(cd "$root" && cargo build -p browser-client --example fake_auditor)
fake="$target/debug/examples/fake_auditor"

work="$(mktemp -d "${TMPDIR:-/tmp}/ct-extension-e2e.XXXXXX")"
server_pid=""
node_pid=""
keep=1
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$node_pid" ]; then kill -TERM "$node_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ]; then
    exec {ctl}>&- # end of file on the server's stdin
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$server_pid" 2>/dev/null; then
      kill -TERM "$server_pid" 2>/dev/null || true
      sleep 2
      kill -KILL "$server_pid" 2>/dev/null || true
    fi
  fi
  if [ "$rc" -eq 0 ] && [ "$keep" -eq 0 ]; then
    rm -rf "$work"
  else
    echo "run.sh: exit $rc; server output and data kept in $work" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

exec {ctl}> >(exec "$server" --out "$work/data" \
  --logged 100 --omitted 12 --forged 8 --epoch-interval "$EPOCH_INTERVAL" \
  >"$work/server.out" 2>"$work/server.err")
server_pid=$!

url=""
for _ in $(seq 600); do
  url="$(sed -n 's/^AUDITOR_URL=//p' "$work/server.out" 2>/dev/null || true)"
  [ -n "$url" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "run.sh: demo-server exited:" >&2
    cat "$work/server.err" >&2
    exit 1
  fi
  sleep 0.2
done
[ -n "$url" ] || { echo "run.sh: demo-server did not print AUDITOR_URL within 120 s" >&2; exit 1; }
echo "run.sh: auditor at $url (data in $work/data)" >&2

# Node runs in the background and is waited for, so that a signal to this
# script is handled at once (bash runs traps only between foreground
# commands); it does not inherit the server's stdin pipe.
run_node() {
  node "$@" {ctl}>&- &
  node_pid=$!
  local rc=0
  wait "$node_pid" || rc=$?
  node_pid=""
  return "$rc"
}
data="$work/data"
common=(--auditor "$url" --corpus "$data/corpus.jsonl" --log-list "$data/log_list.json")
if wants node; then
  echo "run.sh: e2e.mjs (wasm32 client, Node glue)" >&2
  run_node "$here/e2e.mjs" "${common[@]}" --recheck-timeout $((EPOCH_INTERVAL * 3 + 60)) "$@"
  echo "run.sh: background.mjs (the extension's background.js, web glue)" >&2
  run_node "$here/background.mjs" "${common[@]}" --fake-auditor "$fake" --epoch-timeout $((EPOCH_INTERVAL * 3 + 60))
fi
if wants firefox; then
  echo "run.sh: firefox.mjs (the extension in headless Firefox)" >&2
  shot=()
  [ -n "${SCREENSHOT:-}" ] && shot=(--screenshot "$SCREENSHOT")
  [ -n "${REPORT_SCREENSHOT:-}" ] && shot+=(--report-screenshot "$REPORT_SCREENSHOT")
  version="$(node -p 'require(process.argv[1]).version' "$here/../manifest.json")"
  xpi="${XPI_DIR:-$target/extension}/private-ct-auditor-$version.xpi"
  run_node "$here/firefox.mjs" --auditor "$url" --data "$data" --work "$work/firefox" --xpi "$xpi" \
    --epoch-timeout $((EPOCH_INTERVAL * 3 + 60)) "${shot[@]}"
fi
keep=0
