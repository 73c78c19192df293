#!/usr/bin/env bash
# Runners sharing one queue: items/s with 1, 2, 4, 8 `nightshift run`
# processes on one batch (`runners = R`, each with its own host identity),
# persistent mode, a compiled no-op worker, one slot per runner. Each store
# named in STORES gets the same work.
#
#   bench/runners.sh [ITEMS]             # default 40000 items per measurement
#   STORES="sqlite postgresql://..." bench/runners.sh
#
# A STORES entry is `sqlite` (a fresh file per measurement) or a PostgreSQL
# URL (its nightshift schema is dropped before each measurement!). All the
# runners run on this one machine: with 2 cores, more runners mostly show
# what contention costs, not what more hosts would add.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-40000}
STORES=${STORES:-sqlite}
RUNNERS=${RUNNERS:-"1 2 4 8"}
cargo build --release --quiet --bin nightshift --example noop_persistent
BIN=$PWD/target/release/nightshift
NOOP=$PWD/target/release/examples/noop_persistent
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
now() { date +%s%N; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"key\":\"k%d\"}\n", i }' >"$WORK/items.jsonl"

# prepare STORE R: a fresh store (printed: its NIGHTSHIFT_DB) with N items.
prepare() {
    local store=$1 r=$2 db
    rm -rf "$WORK/s"
    mkdir -p "$WORK/s"
    if [ "$store" = sqlite ]; then
        db="$WORK/s/nightshift.db"
    else
        db=$store
        psql -q "$db" -c 'DROP SCHEMA IF EXISTS nightshift CASCADE' >/dev/null 2>&1 || true
    fi
    cat >"$WORK/s/nightshift.toml" <<EOF
[batch.bench]
worker = ["$NOOP"]
mode = "persistent"
concurrency = 1
runners = $r
EOF
    (cd "$WORK/s" && NIGHTSHIFT_DB=$db "$BIN" init >/dev/null 2>&1 || true)
    (cd "$WORK/s" && NIGHTSHIFT_DB=$db "$BIN" add bench "$WORK/items.jsonl" >/dev/null)
    echo "$db"
}

printf '%-12s %8s %10s %12s %14s\n' store runners seconds 'items/s' 'vs 1 runner'
for store in $STORES; do
    base=
    for r in $RUNNERS; do
        db=$(prepare "$store" "$r")
        t0=$(now)
        pids=()
        for i in $(seq 1 "$r"); do
            (cd "$WORK/s" && NIGHTSHIFT_DB=$db NIGHTSHIFT_HOST="host-$i" exec "$BIN" run bench >"$WORK/out-$i" 2>&1) &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p"; done
        t1=$(now)
        done_n=$(cd "$WORK/s" && NIGHTSHIFT_DB=$db "$BIN" status bench --json \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["batches"][0]["done"])')
        [ "$done_n" = "$N" ] || { echo "$store, $r runners: only $done_n of $N done" >&2; cat "$WORK"/out-* >&2; exit 1; }
        label=$store
        [ "$store" = sqlite ] || label=postgresql
        awk -v s="$label" -v r="$r" -v n="$N" -v ns=$((t1 - t0)) -v base="${base:-0}" \
            'BEGIN { rate = n / (ns / 1e9); printf "%-12s %8d %10.2f %12.0f %13.2fx\n", s, r, ns / 1e9, rate, (base > 0 ? rate / base : 1) }'
        [ -n "$base" ] || base=$(awk -v n="$N" -v ns=$((t1 - t0)) 'BEGIN { print n / (ns / 1e9) }')
    done
done
