#!/usr/bin/env bash
# Runners sharing one queue: items/s with 1, 2, 4, 8 `nightshift run`
# processes on ONE batch (`runners = R`, each with its own host identity),
# persistent mode, the compiled no-op worker, concurrency 2 per runner,
# on SQLite and on PostgreSQL. Items/s = all items / wall time until the
# last runner ended. Results: bench/README.md, "Runners sharing a batch".
#
#   bench/runners.sh [ITEMS]       # default 40000 items per measurement
#   STORES=sqlite bench/runners.sh # one backend only
#   RUNNERS="1 4" bench/runners.sh
#
# PostgreSQL: a private server (initdb into a temp dir, unix socket only,
# as the `postgres` user under root), fsync on, synchronous_commit off (the
# durability class of SQLite's WAL with synchronous=NORMAL), a fresh
# database per measurement. All runners run on this one machine, beside
# the database server: with 2 cores, more runners mostly show what
# contention costs, not what more hosts would add.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-40000}
STORES=${STORES:-"sqlite postgres"}
RUNNERS=${RUNNERS:-"1 2 4 8"}
cargo build --release --quiet --bin nightshift --example noop_persistent
BIN=$PWD/target/release/nightshift
NOOP=$PWD/target/release/examples/noop_persistent
WORK=$(mktemp -d /tmp/nightshift-bench-XXXXXX)
chmod 755 "$WORK"
pg_up=
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
cleanup() {
    [ -n "$pg_up" ] && as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg/data' -m fast stop >/dev/null" || true
    rm -rf "$WORK"
}
trap cleanup EXIT
now() { date +%s%N; }

case " $STORES " in
*" postgres "*)
    PGBIN=$(dirname "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
    PSQL=$(command -v psql || echo "$PGBIN/psql")
    mkdir -p "$WORK/pg"
    [ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
    as_pg "'$PGBIN/initdb' -A trust -U postgres -E UTF8 --locale=C -D '$WORK/pg/data' >/dev/null"
    as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg/data' -l '$WORK/pg/log' -w -o \"-k '$WORK/pg' -c listen_addresses='' -c fsync=on -c synchronous_commit=off -c shared_buffers=128MB\" start >/dev/null"
    pg_up=1
    ;;
esac

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "items:   $N per measurement, one batch, persistent no-op worker, concurrency 2 per runner"
awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"key\":\"k%d\"}\n", i }' >"$WORK/items.jsonl"

db_n=0
printf '%-10s %8s %9s %10s %12s %10s\n' store runners seconds 'items/s' 'vs 1 runner' 'per runner'
for store in $STORES; do
    base=
    for r in $RUNNERS; do
        dir=$WORK/$store-$r
        mkdir -p "$dir"
        if [ "$store" = sqlite ]; then
            db=$dir/nightshift.db
        else
            db_n=$((db_n + 1))
            "$PSQL" -h "$WORK/pg" -U postgres -qc "CREATE DATABASE b$db_n"
            db="postgresql:///b$db_n?host=$WORK/pg&user=postgres"
        fi
        export NIGHTSHIFT_DB=$db
        (cd "$dir" && "$BIN" init >/dev/null)
        printf '[batch.bench]\nworker = ["%s"]\nmode = "persistent"\nconcurrency = 2\nrunners = %d\n' \
            "$NOOP" "$r" >"$dir/nightshift.toml"
        (cd "$dir" && "$BIN" add bench "$WORK/items.jsonl" >/dev/null)
        t0=$(now)
        pids=()
        for i in $(seq 1 "$r"); do
            (cd "$dir" && NIGHTSHIFT_HOST="host-$i" exec "$BIN" run bench >"$dir/out-$i" 2>&1) &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p"; done
        t1=$(now)
        done_n=$(cd "$dir" && "$BIN" status bench --json |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["batches"][0]["done"])')
        [ "$done_n" = "$N" ] || { echo "$store, $r runners: only $done_n of $N done" >&2; cat "$dir"/out-* >&2; exit 1; }
        # Every runner held a seat and did part of the work (none stepped down).
        worked=$(grep -l " done" "$dir"/out-* | wc -l)
        rate=$(awk -v n="$N" -v ns=$((t1 - t0)) 'BEGIN { print n / (ns / 1e9) }')
        [ -n "$base" ] || base=$rate
        awk -v s="$store" -v r="$r" -v ns=$((t1 - t0)) -v rate="$rate" -v base="$base" -v w="$worked" \
            'BEGIN { printf "%-10s %8d %9.2f %10.0f %11.2fx %7d/%d\n", s, r, ns / 1e9, rate, rate / base, w, r }'
    done
done
