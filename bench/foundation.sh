#!/usr/bin/env bash
# Foundation benchmarks (results and method: bench/README.md).
#
#   add of ITEMS new items                   target <= 3 s (natural keys from
#                                            a file, and keys given on stdin)
#   status --json at ITEMS items and FAILED dead letters
#                                            target <= 5 ms of store time a call
#   requeue --all-failed of FAILED items     target <= 1 s, and no write
#                                            transaction holding the lock > 50 ms
#   time per item of add and claim+complete at 10k, 100k and 1M items: flat
#
# Needs bash, awk, coreutils and the Rust toolchain (to build the release
# binary); nothing else. Sizes: ITEMS=... FAILED=... CALLS=... To measure
# other builds give NS=path/to/nightshift BS=path/to/bench_store (then
# nothing is built).
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-1000000}
FAILED=${FAILED:-100000}
CALLS=${CALLS:-200}

if [[ -z "${NS:-}" ]]; then
    cargo build --release --quiet --bin nightshift --example bench_store
    NS=$PWD/target/release/nightshift
    BS=$PWD/target/release/examples/bench_store
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nightshift-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export NIGHTSHIFT_DB=$WORK/nightshift.db

# timed NAME COMMAND...: runs COMMAND (its stdout to $WORK/NAME.out, its
# stderr to $WORK/NAME.err); NAME_real and NAME_cpu (user + system) in s.
timed() {
    local name=$1
    shift
    local TIMEFORMAT='%R %U %S'
    { time "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"; } 2> "$WORK/$name.time"
    read -r real user sys < "$WORK/$name.time"
    printf -v "${name}_real" '%.2f' "$real"
    printf -v "${name}_cpu" '%.2f' "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')"
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)   load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sizes:   ITEMS=$ITEMS FAILED=$FAILED CALLS=$CALLS"
echo "binary:  $NS"
echo

# Articles with natural keys, about 85 bytes a line.
awk -v n="$ITEMS" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "{\"site\":\"blog%d\",\"category\":\"c%d\",\"slug\":\"post-%d\",\"title\":\"Title number %d\"}\n", i % 4, i % 37, i, i
}' > "$WORK/items.jsonl"
# The same items with their keys given, for `add` on stdin.
awk -v n="$ITEMS" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "{\"key\":\"blog%d/c%d/post-%d\",\"title\":\"Title number %d\"}\n", i % 4, i % 37, i, i
}' > "$WORK/keyed.jsonl"
"$NS" init > /dev/null
rm -f "$WORK/nightshift.toml"

# 1. add, then the same file again (everything already present); every
# write transaction timed. Then items with keys given, on stdin, into a
# second store.
timed add env NIGHTSHIFT_TRACE_TX=1 "$NS" add articles "$WORK/items.jsonl" --key-fields site,category,slug
add_tx=$(awk '/write transaction/ { print $(NF-1) }' "$WORK/add.err" | sort -n |
    awk '{ a[NR] = $1 } END { if (NR) printf "%d tx, max %.0f ms", NR, a[NR]; else print "n/a" }')
timed add_again "$NS" add articles "$WORK/items.jsonl" --key-fields site,category,slug
timed add_keyed env NIGHTSHIFT_DB="$WORK/keyed.db" sh -c '"$1" init > /dev/null && "$1" add keyed - < "$2"' _ "$NS" "$WORK/keyed.jsonl"
rm -f "$WORK"/keyed.db*

# 2. FAILED items failed through the store's own code path (claim, then
# fail: a dead letter each), then status --json: the whole command CALLS
# times, and the store's part alone (read-only open + batch_infos).
"$BS" fail "$NIGHTSHIFT_DB" articles "$FAILED" > "$WORK/fail.out"
"$NS" status --json > /dev/null # warm the OS file cache
timed status bash -c 'for _ in $(seq "$1"); do "$2" status --json > /dev/null; done' _ "$CALLS" "$NS"
status_each=$(awk -v t="$status_real" -v n="$CALLS" 'BEGIN { printf "%.2f", t * 1000 / n }')
"$BS" status "$NIGHTSHIFT_DB" "$CALLS" > "$WORK/store.out"
store_time=$(awk '{ print $7 " / " $10 " / " $13 }' "$WORK/store.out")

# 3. requeue --all-failed, every write transaction timed (NIGHTSHIFT_TRACE_TX)
# while a runner-like writer (the probe) writes every 2 ms and records how
# long each of its writes waited.
rm -f "$WORK/stop"
"$BS" probe "$NIGHTSHIFT_DB" "$WORK/stop" > "$WORK/probe.out" &
probe=$!
sleep 0.5
timed requeue env NIGHTSHIFT_TRACE_TX=1 "$NS" requeue articles --all-failed
sleep 0.2
touch "$WORK/stop"
wait "$probe"
tx=$(awk '/write transaction/ { print $(NF-1) }' "$WORK/requeue.err" | sort -n |
    awk '{ a[NR] = $1 } END { if (NR) printf "%d tx: p50 %.1f, p99 %.1f, max %.1f ms", NR, a[int((NR+1)/2)], a[int(NR*0.99+0.5)], a[NR]; else print "n/a" }')
probe_wait=$(sed -n 's/.*median \([0-9.]*\) ms, p99 \([0-9.]*\) ms, max \([0-9.]*\) ms.*/p99 \2, max \3 ms/p' "$WORK/probe.out")

# 4. 100,000 (ITEMS / 10) more items added while a runner is live (the
# probe again): the add's transactions and the probe's waits.
awk -v n="$ITEMS" 'BEGIN {
    for (i = n; i < n + n / 10; i++)
        printf "{\"site\":\"blog%d\",\"category\":\"c%d\",\"slug\":\"post-%d\",\"title\":\"Title number %d\"}\n", i % 4, i % 37, i, i
}' > "$WORK/more.jsonl"
rm -f "$WORK/stop"
"$BS" probe "$NIGHTSHIFT_DB" "$WORK/stop" > "$WORK/probe_add.out" &
probe=$!
sleep 0.5
timed add_live env NIGHTSHIFT_TRACE_TX=1 "$NS" add articles "$WORK/more.jsonl" --key-fields site,category,slug
touch "$WORK/stop"
wait "$probe"
add_live_tx=$(awk '/write transaction/ { print $(NF-1) }' "$WORK/add_live.err" | sort -n |
    awk '{ a[NR] = $1 } END { if (NR) printf "%d tx, p50 %.0f, max %.0f ms", NR, a[int((NR+1)/2)], a[NR]; else print "n/a" }')
probe_add_wait=$(sed -n 's/.*median \([0-9.]*\) ms, p99 \([0-9.]*\) ms, max \([0-9.]*\) ms.*/p99 \2, max \3 ms/p' "$WORK/probe_add.out")

# 5. Time per item at three sizes, through the store: add, then claim and
# complete every item (fresh stores; SCALE="10000 100000 1000000").
"$BS" scale "$WORK" ${SCALE:-10000 100000 1000000} > "$WORK/scale.out"

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
row() { printf '%-44s %-34s %s\n' "$1" "$2" "$3"; }
row "measure" "result (wall; cpu = user + sys)" "target"
row "add $ITEMS new items" "${add_real} s (cpu ${add_cpu} s)" "<= 3 s"
row "  its write transactions" "$add_tx" "max <= ~100 ms"
row "add the same file again (all present)" "${add_again_real} s (cpu ${add_again_cpu} s)" "-"
row "add $((ITEMS / 10)) more while a runner is live" "${add_live_real} s (cpu ${add_live_cpu} s)" "-"
row "  its write transactions" "$add_live_tx" "max <= ~100 ms"
row "  a concurrent writer's wait" "$probe_add_wait" "-"
row "add $ITEMS items with keys, on stdin" "${add_keyed_real} s (cpu ${add_keyed_cpu} s)" "<= 3 s"
row "status --json, whole command, mean" "${status_each} ms" "-"
row "status --json, store time median/p99/max" "$store_time ms" "<= 5 ms"
row "requeue --all-failed, $(grep -o '[0-9]* items' "$WORK/requeue.out")" "${requeue_real} s (cpu ${requeue_cpu} s)" "<= 1 s"
row "  write transactions holding the lock" "$tx" "max <= 50 ms"
row "  a concurrent writer's wait" "$probe_wait" "-"
echo
echo "time per item (wall, and cpu of the process):"
cat "$WORK/scale.out"
echo
echo "$(cat "$WORK/add.out") | $(cat "$WORK/add_keyed.out") | $(cat "$WORK/fail.out") | $(cat "$WORK/probe.out")"
