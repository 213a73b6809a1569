#!/usr/bin/env bash
# Side by side with the authors' YPIR (menonsamir/ypir, "YPIR: High-Throughput
# Single-Server PIR with Silent Preprocessing", USENIX Security 2024): both
# implementations answer single-bit queries over a random database of 2^B bits
# on one pinned core, alternating theirs and ours round by round so both see
# the same machine conditions.
#
#   pir-core/side-by-side.sh [B ...]          # default: 33 34 35
#
# Environment:
#   YPIR_DIR   a built checkout of the authors' code (default: cloned from
#              GitHub into a temporary folder at YPIR_REV and built with their
#              own instructions, `cargo build --release` with target-cpu=native);
#   YPIR_REV   the revision of theirs to check out when cloning (default: the
#              one docs/benchmarks.md measured);
#   ROUNDS     rounds per size (default 3; each round runs both once);
#   TRIALS     answers per run (default 5; the authors' code excludes a warm-up);
#   CPU        the core both are pinned to (default 0);
#   OUT        folder for the raw outputs (default target/side-by-side).
#
# Prints one Markdown row per size: answer time min / median (the authors': over
# every answer of every round; ours: the least per-run minimum and the median of
# the per-run medians), DBSetup throughput, and peak RSS (from /usr/bin/time when it
# exists). Both are single-threaded (RAYON_NUM_THREADS=1, pinned with taskset).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(33 34 35)
rounds=${ROUNDS:-3}
trials=${TRIALS:-5}
cpu=${CPU:-0}
out=${OUT:-target/side-by-side}
mkdir -p "$out"

if [ -z "${YPIR_DIR:-}" ]; then
  YPIR_DIR=$(mktemp -d)/ypir
  git clone --quiet https://github.com/menonsamir/ypir "$YPIR_DIR"
  git -C "$YPIR_DIR" checkout --quiet "${YPIR_REV:-a73e550}"
fi
if [ ! -x "$YPIR_DIR/target/release/run" ]; then
  (cd "$YPIR_DIR" && cargo build --release --quiet)
fi
theirs="$YPIR_DIR/target/release/run"
cargo build --release --quiet -p pir-core --bin pir-bench
ours=${CARGO_TARGET_DIR:-target}/release/pir-bench

timev=()
if [ -x /usr/bin/time ]; then timev=(/usr/bin/time -f '%M'); fi
export RAYON_NUM_THREADS=1

run() { # name size round cmd...
  local name=$1 b=$2 r=$3; shift 3
  local base="$out/$name-b$b-r$r"
  if [ ${#timev[@]} -gt 0 ]; then
    taskset -c "$cpu" "${timev[@]}" -o "$base.rss" "$@" > "$base.out" 2> "$base.err"
  else
    taskset -c "$cpu" "$@" > "$base.out" 2> "$base.err"
  fi
}

echo "| database | authors' answer min / median | ours min / median | ratio (medians) | authors' setup | ours | authors' peak RSS | ours |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for b in "${sizes[@]}"; do
  for r in $(seq 1 "$rounds"); do
    # Alternate who goes first, so neither always runs on a warmer machine.
    if [ $((r % 2)) -eq 1 ]; then
      run theirs "$b" "$r" "$theirs" $((1 << b)) 1 1 "$trials" "$out/theirs-b$b-r$r.json"
      run ours "$b" "$r" "$ours" --db-bits "$b" --trials "$trials" --json
    else
      run ours "$b" "$r" "$ours" --db-bits "$b" --trials "$trials" --json
      run theirs "$b" "$r" "$theirs" $((1 << b)) 1 1 "$trials" "$out/theirs-b$b-r$r.json"
    fi
  done
  python3 - "$out" "$b" "$rounds" <<'EOF'
import json, statistics, sys, os
out, b, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t_ans, o_min, o_ans, t_setup, o_setup, t_rss, o_rss = [], [], [], [], [], [], []
db_mb = (1 << b) / 8 / 1e6
for r in range(1, rounds + 1):
    t = json.load(open(f"{out}/theirs-b{b}-r{r}.json"))
    t_ans += t["online"]["allServerTimesMs"]
    t_setup.append(db_mb / (t["offline"]["serverTimeMs"] / 1e3))
    o = json.loads(open(f"{out}/ours-b{b}-r{r}.out").read())
    o_min.append(o["answer_ms_min"])
    o_ans.append(o["answer_ms_median"])
    o_setup.append(o["prep_mb_per_s"])
    for name, acc in (("theirs", t_rss), ("ours", o_rss)):
        p = f"{out}/{name}-b{b}-r{r}.rss"
        if os.path.exists(p):
            acc.append(int(open(p).read().split()[-1]) * 1024 / 2**30)
med = statistics.median
rss = lambda v: f"{max(v):.2f} GiB" if v else "–"
print(f"| 2^{b} bits | {min(t_ans):.0f} / {med(t_ans):.0f} ms | {min(o_min):.0f} / {med(o_ans):.0f} ms "
      f"| {med(t_ans) / med(o_ans):.2f}× | {med(t_setup):.0f} MB/s | {med(o_setup):.0f} MB/s | {rss(t_rss)} | {rss(o_rss)} |")
EOF
done
