#!/usr/bin/env bash
# SQLite vs PostgreSQL through the runner: N runner processes at once, each
# on a batch of its own (one batch has one runner at a time: the batch
# lock), persistent mode with the compiled no-op worker, concurrency 2.
# Items/s = all items / wall time of the slowest runner. Results:
# bench/README.md, "Backends: SQLite vs PostgreSQL (runner level)".
#
#   bench/backends_runner.sh [ITEMS] [RUNNERS...]   # default 20000 items, 1 2 4
#
# PostgreSQL: a private server (initdb into a temp dir, unix socket only,
# as the `postgres` user under root), fsync on, synchronous_commit off
# (the durability class of SQLite's WAL with synchronous=NORMAL).
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${1:-20000}
shift || true
RUNNERS=${*:-"1 2 4"}
cargo build --release --quiet --bin nightshift --example noop_persistent
BIN=$PWD/target/release/nightshift
NOOP=$PWD/target/release/examples/noop_persistent
PSQL=$(command -v psql || echo "$PGBIN/psql")

PGBIN=$(dirname "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
WORK=$(mktemp -d /tmp/nightshift-bench-XXXXXX)
chmod 755 "$WORK"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
mkdir -p "$WORK/pg"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
as_pg "'$PGBIN/initdb' -A trust -U postgres -E UTF8 --locale=C -D '$WORK/pg/data' >/dev/null"
as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg/data' -l '$WORK/pg/log' -w -o \"-k '$WORK/pg' -c listen_addresses='' -c fsync=on -c synchronous_commit=off -c shared_buffers=128MB\" start >/dev/null"
cleanup() {
    as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg/data' -m fast stop >/dev/null" || true
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "items: $ITEMS in total, split over the runners' batches"
printf '%-9s %7s %9s %8s\n' backend runners seconds items/s

db_n=0
for backend in sqlite postgres; do
    for n in $RUNNERS; do
        dir=$WORK/$backend-$n
        mkdir -p "$dir"
        if [ "$backend" = sqlite ]; then
            db=$dir/nightshift.db
        else
            db_n=$((db_n + 1))
            "$PSQL" -h "$WORK/pg" -U postgres -qc "CREATE DATABASE b$db_n"
            db="postgresql:///b$db_n?host=$WORK/pg&user=postgres"
        fi
        export NIGHTSHIFT_DB=$db
        (cd "$dir" && "$BIN" init >/dev/null)
        : >"$dir/nightshift.toml"
        per=$((ITEMS / n))
        for r in $(seq 1 "$n"); do
            printf '[batch.b%d]\nworker = ["%s"]\nmode = "persistent"\nconcurrency = 2\n' "$r" "$NOOP" >>"$dir/nightshift.toml"
            awk -v n="$per" -v r="$r" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"key\":\"r%dk%d\",\"n\":%d}\n", r, i, i }' >"$dir/items$r.jsonl"
            (cd "$dir" && "$BIN" add "b$r" "items$r.jsonl" >/dev/null)
        done
        start=$(date +%s%N)
        pids=()
        for r in $(seq 1 "$n"); do
            (cd "$dir" && "$BIN" run "b$r" >/dev/null) &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p"; done
        end=$(date +%s%N)
        done_n=$(cd "$dir" && "$BIN" status --json | python3 -c 'import json,sys; print(sum(b["done"] for b in json.load(sys.stdin)["batches"]))')
        [ "$done_n" = $((per * n)) ] || { echo "only $done_n of $((per * n)) done ($backend, $n runners)" >&2; exit 1; }
        secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        printf '%-9s %7d %9s %8.0f\n' "$backend" "$n" "$secs" "$(awk -v i="$done_n" -v s="$secs" 'BEGIN { print i / s }')"
    done
done
