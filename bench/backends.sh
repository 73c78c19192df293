#!/usr/bin/env bash
# SQLite vs PostgreSQL at the store level: items/s (claim 1 + complete, a
# no-op worker) and claims/s with 1, 2, 4, 8 concurrent claimers, each on
# its own connection. Results: bench/README.md, "Backends".
#
#   bench/backends.sh [ITEMS]        # default 4000 items per measurement
#
# PostgreSQL: a private server (initdb into a temp dir, unix socket only)
# unless NIGHTSHIFT_BENCH_PG_URL names a database to use. Its settings:
# fsync on, synchronous_commit off (what SQLite's WAL + synchronous=NORMAL
# gives: no flush per commit, the last commits lost on power loss).
set -euo pipefail
cd "$(dirname "$0")/.."
export NIGHTSHIFT_PG_OPTS="${NIGHTSHIFT_PG_OPTS:--c fsync=on -c synchronous_commit=off -c shared_buffers=128MB}"
cargo build --release --quiet --example bench_backends
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr), $(date -u +%FT%TZ)"
target/release/examples/bench_backends "${1:-4000}"
