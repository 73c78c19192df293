#!/usr/bin/env bash
# Limit-pool bookkeeping in persistent mode (issue 17): the same 100,000
# no-op items (compiled no-op worker, concurrency 2) run without a pool and
# with one, side by side in one run, rounds interleaved so that a change in
# the machine's load hits every variant alike; the median of the rounds.
#
#   bench/pools.sh              # N=100000, ROUNDS=3
#   N=20000 ROUNDS=5 bench/pools.sh
#   BIN=/path/nightshift NOOP=/path/noop_persistent bench/pools.sh   # built already
#   VARIANTS="none tokens" ROUNDS=9 bench/pools.sh                    # two of them
#
# Variants:
#   none       no pool
#   requests   [limit] requests = ["100000000/min", "1000000000/day"]: every
#              call asks the store for its place (one transaction per batch
#              of queued calls)
#   tokens     the same plus tokens = "1000000000/min" and token_estimate =
#              100: every call also reserves tokens, and its settlement (the
#              estimate standing: the no-op reports no usage) is a usage row
#   in-flight  requests plus concurrency = 4096: a place in flight per call,
#              given back when it answers; above what the slots pipeline
#              (2 x 1,024 requests), so no call waits for a place
#   in-flight-64
#              the same with concurrency = 64: the limit binds (not a
#              bookkeeping figure: it shows what waiting for places costs a
#              no-op worker; not run unless named in VARIANTS)
# The limits of the first four are far above what the run reaches: they
# measure the bookkeeping, not a wait. Every item ends done (checked).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-100000}
ROUNDS=${ROUNDS:-3}
CONC=${CONC:-2}
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet --bin nightshift --example noop_persistent
    BIN=$PWD/target/release/nightshift
    NOOP=$PWD/target/release/examples/noop_persistent
fi
NOOP="[\"${NOOP:-$PWD/target/release/examples/noop_persistent}\"]"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
now() { date +%s%N; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

pool_of() {
    case $1 in
        none) ;;
        requests) printf '[limit.p]\nrequests = ["100000000/min", "1000000000/day"]\n' ;;
        tokens) printf '[limit.p]\nrequests = ["100000000/min", "1000000000/day"]\ntokens = "1000000000/min"\n' ;;
        in-flight) printf '[limit.p]\nrequests = ["100000000/min", "1000000000/day"]\nconcurrency = 4096\n' ;;
        in-flight-64) printf '[limit.p]\nrequests = ["100000000/min", "1000000000/day"]\nconcurrency = 64\n' ;;
    esac
}

batch_of() {
    case $1 in
        none) ;;
        tokens) printf 'limit = "p"\ntoken_estimate = 100\n' ;;
        *) printf 'limit = "p"\n' ;;
    esac
}

# run VARIANT: prints the seconds of one run of N items.
run() {
    local dir="$WORK/$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && "$BIN" init >/dev/null)
    {
        echo 'db = "nightshift.db"'
        pool_of "$1"
        printf '[batch.bench]\nworker = %s\nmode = "persistent"\nconcurrency = %s\n' "$NOOP" "$CONC"
        batch_of "$1"
    } >"$dir/nightshift.toml"
    awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"key\":\"k%d\",\"n\":%d}\n", i, i }' >"$dir/items.jsonl"
    (cd "$dir" && "$BIN" add bench items.jsonl >/dev/null)
    local t0 t1 done
    t0=$(now)
    (cd "$dir" && "$BIN" run bench >/dev/null)
    t1=$(now)
    done=$(python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM items WHERE status = \x27done\x27").fetchone()[0])' "$dir/nightshift.db")
    [ "$done" = "$N" ] || { echo "$1: only $done of $N items done" >&2; exit 1; }
    awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}

VARIANTS=${VARIANTS:-"none requests tokens in-flight"}
declare -A times
for r in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do
        times[$v]="${times[$v]:-} $(run "$v")"
    done
done

median() { printf '%s\n' $1 | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base=$(median "${times[none]}")
echo
echo "## $N items, persistent mode, compiled no-op, concurrency $CONC; median of $ROUNDS rounds"
printf '%-12s %10s %12s %12s   %s\n' pool seconds 'items/s' 'vs none' 'rounds (s)'
for v in $VARIANTS; do
    m=$(median "${times[$v]}")
    awk -v v="$v" -v m="$m" -v b="$base" -v n="$N" -v all="${times[$v]}" \
        'BEGIN { printf "%-12s %10.2f %12.0f %+11.1f%%   %s\n", v, m, n / m, (m / b - 1) * 100, all }'
done
