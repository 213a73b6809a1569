#!/usr/bin/env bash
# Runs fuzz targets (docs/reliability.md): builds them all once with
# `cargo +nightly fuzz build`, then runs each for a time or a number of
# executions, reading the committed seeds (fuzz/seeds/<target>/) and
# growing the uncommitted corpus (fuzz/corpus/<target>/).
#
#   fuzz/run.sh [-n] [-t SECONDS | -r RUNS] [TARGET...]
#
# Defaults: 10 seconds per target, every target, built with
# AddressSanitizer. -n builds without a sanitizer (coverage-guided all the
# same, 10-80x more executions per second; the long campaign of
# docs/reliability.md). Exits non-zero if a target fails to build or finds
# a crash (libFuzzer leaves the input in fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "$0")"
# The bundled SQLite (linked through ct-ingest) defines two static arrays of
# the same name, which AddressSanitizer reports as an ODR violation.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}"

limit="-max_total_time=10"
san=()
while getopts "nt:r:" opt; do
  case "$opt" in
    n) san=(-s none) ;;
    t) limit="-max_total_time=$OPTARG" ;;
    r) limit="-runs=$OPTARG" ;;
    *) echo "usage: fuzz/run.sh [-n] [-t SECONDS | -r RUNS] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  # `seeds` is the seed-corpus generator, a plain binary of this crate
  mapfile -t targets < <(cargo +nightly fuzz list | grep -vx seeds)
fi

if [ "${#san[@]}" -eq 0 ]; then
  nice -n 19 cargo +nightly fuzz build
else
  # one target at a time: without a sanitizer the seed generator (a plain
  # binary of this crate) does not link against the coverage hooks
  for t in "${targets[@]}"; do nice -n 19 cargo +nightly fuzz build "${san[@]}" "$t"; done
fi
failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log="$(mktemp)"
  if nice -n 19 cargo +nightly fuzz run "${san[@]}" "$t" "corpus/$t" "seeds/$t" -- \
      "$limit" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    last="$(grep -E '^#[0-9]+' "$log" | tail -1 || true)"
    echo "fuzz: $t ok (${runs:-?} executions) ${last}"
  else
    tail -40 "$log" >&2
    echo "fuzz: $t FAILED (see fuzz/artifacts/$t/)" >&2
    failed+=("$t")
  fi
  rm -f "$log"
done
echo "fuzz: $((${#targets[@]} - ${#failed[@]})) of ${#targets[@]} targets ran clean"
[ "${#failed[@]}" -eq 0 ]
