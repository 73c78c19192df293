#!/usr/bin/env bash
# Persistent worker mode (`mode = "persistent"`): throughput, scaling, memory
# and WAL growth.
#
#   bench/persistent.sh                 # 100k throughput, 10k/100k/1M scaling
#   SIZES="10000 100000" bench/persistent.sh   # skip the 1M run
#
# 1. Throughput: 100,000 items, concurrency 2, with the Python no-op
#    persistent worker (bench/peers/noop_persistent.py) and with a compiled
#    no-op (examples/noop_persistent.rs), which separates the worker's cost
#    from the runner's.
# 2. Scaling: time per item at each of SIZES (default 10k, 100k, 1M) with
#    the compiled no-op: flat means no O(n) work per claim.
# 3. During the largest run: the runner's RSS (VmRSS from /proc every
#    0.5 s) and the largest size of the WAL file, while a poller runs
#    `nightshift status --json` in a loop (a dashboard's read load).
#
# Every item ends `done` (checked); every success is committed before its
# slot claims more (WAL, synchronous=NORMAL).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"10000 100000 1000000"}
CONC=${CONC:-2}
cargo build --release --quiet --bin nightshift --example noop_persistent
BIN=$PWD/target/release/nightshift
PEERS=$PWD/bench/peers
WORK=$(mktemp -d)
poller=
cleanup() {
    [ -n "$poller" ] && kill "$poller" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s%N; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# prepare DIR N WORKER_TOML: a fresh store with N items, batch `bench`.
prepare() {
    local dir=$1 n=$2 worker=$3
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && "$BIN" init >/dev/null)
    cat >"$dir/nightshift.toml" <<EOF
db = "nightshift.db"
[batch.bench]
worker = $worker
mode = "persistent"
concurrency = $CONC
EOF
    awk -v n="$n" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"key\":\"k%d\",\"n\":%d}\n", i, i }' >"$dir/items.jsonl"
    (cd "$dir" && "$BIN" add bench items.jsonl >/dev/null)
}

# check DIR N: every item done. (Through a read-write connection: a
# read-only `status` refuses a WAL left without its -shm, which the poller
# racing the runner's exit can leave behind; see bench/README.md.)
check() {
    local done
    done=$(python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM items WHERE status = \x27done\x27").fetchone()[0])' "$1/nightshift.db")
    [ "$done" = "$2" ] || { echo "only $done of $2 items done" >&2; exit 1; }
}

RS_NOOP="[\"$PWD/target/release/examples/noop_persistent\"]"
PY_NOOP="[\"python3\", \"$PEERS/noop_persistent.py\"]"

echo
echo "## throughput: 100000 items, concurrency $CONC"
printf '%-22s %10s %12s %10s\n' worker seconds 'items/s' 'us/item'
for w in python compiled; do
    case $w in
        python) worker=$PY_NOOP ;;
        compiled) worker=$RS_NOOP ;;
    esac
    prepare "$WORK/t" 100000 "$worker"
    t0=$(now)
    (cd "$WORK/t" && "$BIN" run bench >/dev/null)
    t1=$(now)
    check "$WORK/t" 100000
    awk -v w="$w no-op" -v n=100000 -v ns=$((t1 - t0)) \
        'BEGIN { printf "%-22s %10.2f %12.0f %10.1f\n", w, ns / 1e9, n / (ns / 1e9), ns / 1e3 / n }'
done

echo
echo "## scaling (compiled no-op, concurrency $CONC); the largest run sampled"
printf '%-10s %10s %12s %10s\n' items seconds 'items/s' 'us/item'
largest=$(printf '%s\n' $SIZES | sort -n | tail -1)
for n in $SIZES; do
    dir="$WORK/s$n"
    prepare "$dir" "$n" "$RS_NOOP"
    samples="$WORK/samples-$n"
    : >"$samples"
    if [ "$n" = "$largest" ]; then
        # A dashboard's load: status polled all the time, read-only.
        (while :; do NIGHTSHIFT_DB="$dir/nightshift.db" "$BIN" status --json >/dev/null 2>&1; sleep 0.2; done) &
        poller=$!
    fi
    t0=$(now)
    (cd "$dir" && exec "$BIN" run bench >/dev/null) &
    runner=$!
    if [ "$n" = "$largest" ]; then
        while kill -0 "$runner" 2>/dev/null; do
            rss=$(awk '/VmRSS/ { print $2 }' "/proc/$runner/status" 2>/dev/null || true)
            wal=$(stat -c %s "$dir/nightshift.db-wal" 2>/dev/null || echo 0)
            [ -n "$rss" ] && echo "$(( ($(now) - t0) / 1000000 )) $rss $wal" >>"$samples"
            sleep 0.5
        done
    fi
    wait "$runner"
    t1=$(now)
    if [ -n "$poller" ]; then
        kill "$poller" 2>/dev/null || true
        wait "$poller" 2>/dev/null || true
        poller=
    fi
    check "$dir" "$n"
    awk -v n="$n" -v ns=$((t1 - t0)) \
        'BEGIN { printf "%-10s %10.2f %12.0f %10.1f\n", n, ns / 1e9, n / (ns / 1e9), ns / 1e3 / n }'
    if [ "$n" = "$largest" ] && [ -s "$samples" ]; then
        echo
        echo "## during the $n-item run (status --json polled every 0.2 s)"
        # RSS after the first 10% of the run (start-up settled) vs the rest.
        awk '{ t[NR] = $1; r[NR] = $2; if ($3 > w) w = $3 }
             END {
               s = int(NR / 10) + 1; min = 1e18; max = 0
               for (i = s; i <= NR; i++) { if (r[i] < min) min = r[i]; if (r[i] > max) max = r[i] }
               printf "runner RSS (KiB): samples %d; after the first 10%%: min %d, max %d, spread %.1f%% of min\n", NR, min, max, (max - min) * 100 / min
               printf "runner RSS (KiB) at 10%%, 50%%, 90%% of the run: %d, %d, %d\n", r[s], r[int(NR / 2)], r[int(NR * 0.9)]
               printf "largest WAL file: %.1f MiB\n", w / 1048576
             }' "$samples"
    fi
    rm -rf "$dir"
done
