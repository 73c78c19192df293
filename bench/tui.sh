#!/bin/sh
# Dashboard benchmarks; results and how to read them: bench/README.md,
# section "Dashboard".
#
#   bench/tui.sh                 # all of it (about 5 minutes, ~450 MB of disk)
#   IDLE_SECONDS=10 bench/tui.sh # a shorter idle measurement
#   BENCH_DIR=/path bench/tui.sh # where the big store is kept between runs
set -eu
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/nightshift-bench-tui}
IDLE=${IDLE_SECONDS:-60}
BIN="$PWD/target/release/nightshift"
TOOL="$PWD/target/release/examples/tui_bench"

cargo build --release --quiet --bin nightshift --example tui_bench
mkdir -p "$DIR"
# Renamed whenever the schema the store is generated with changes (v1 is
# still edited in place before its release): an old store would lack indexes.
DB="$DIR/big-25.db"
if [ ! -f "$DB" ]; then
    echo "generating $DB: 1,000,000 items, 100,000 dead letters, 1,000,000 events"
    "$TOOL" gen "$DB"
fi

echo
echo "## Store time per poll (no writer: the file is fully checkpointed)"
"$TOOL" poll "$DB"
echo
echo "## Store time per poll (a writer holds the WAL open, as a live runner does)"
BENCH_WAL=1 "$TOOL" poll "$DB"
echo
echo "## The dashboard in a pseudo-terminal (80x24, --read-only, idle ${IDLE}s)"
"$TOOL" pty "$DB" "$BIN" "$IDLE" 2>/dev/null
echo
echo "## Same, with a writer holding the WAL open"
BENCH_WAL=1 "$TOOL" pty "$DB" "$BIN" "$IDLE" 2>/dev/null
