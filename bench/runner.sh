#!/usr/bin/env bash
# Runner throughput against xargs, side by side in one run.
#
#   bench/runner.sh [ITEMS] [ROUNDS]      (defaults: 10000 items, 3 rounds)
#
# Each round: a fresh store with ITEMS items, `nightshift run` with the
# no-op worker `true` at concurrency 4, then `seq ITEMS | xargs -P4 -n1 true`
# over the same count. Every runner transition (claim, done, events) is a
# committed SQLite transaction (WAL, synchronous=NORMAL: survives any process
# crash). Prints each round and the median of the rounds; the target is a
# runner throughput of at least 0.9 x xargs'.
set -euo pipefail

ITEMS=${1:-10000}
ROUNDS=${2:-3}
JOBS=4
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin nightshift
BIN=$PWD/target/release/nightshift
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

seq 1 "$ITEMS" | awk '{ printf "{\"key\":\"k%d\",\"n\":%d}\n", $1, $1 }' >"$WORK/items.jsonl"

now() { date +%s%N; }
rate() { awk -v n="$1" -v ns="$2" 'BEGIN { printf "%.0f", n / (ns / 1e9) }'; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "items:   $ITEMS, concurrency $JOBS, worker: true"
printf '%-6s %14s %14s %8s\n' round 'runner/s' 'xargs/s' ratio
runner_rates=()
xargs_rates=()
ratios=()
for round in $(seq 1 "$ROUNDS"); do
    dir="$WORK/r$round"
    mkdir "$dir"
    export NIGHTSHIFT_DB="$dir/nightshift.db"
    (cd "$dir" && "$BIN" init >/dev/null && rm -f nightshift.toml)
    "$BIN" add bench "$WORK/items.jsonl" >/dev/null

    t0=$(now)
    (cd "$dir" && "$BIN" run bench --concurrency "$JOBS" -- true >/dev/null)
    t1=$(now)
    done_count=$("$BIN" status --json | grep -o '"done":[0-9]*' | head -1 | cut -d: -f2)
    if [ "$done_count" != "$ITEMS" ]; then
        echo "runner finished only $done_count of $ITEMS items" >&2
        exit 1
    fi
    t2=$(now)
    seq "$ITEMS" | xargs -P"$JOBS" -n1 true
    t3=$(now)

    r=$(rate "$ITEMS" $((t1 - t0)))
    x=$(rate "$ITEMS" $((t3 - t2)))
    q=$(awk -v r="$r" -v x="$x" 'BEGIN { printf "%.2f", r / x }')
    printf '%-6s %14s %14s %8s\n' "$round" "$r" "$x" "$q"
    runner_rates+=("$r")
    xargs_rates+=("$x")
    ratios+=("$q")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
printf '%-6s %14s %14s %8s\n' median "$(median "${runner_rates[@]}")" "$(median "${xargs_rates[@]}")" "$(median "${ratios[@]}")"
