#!/usr/bin/env bash
# Side by side, in one run: N no-op items at concurrency 4 through
#   xargs -P4 (no state at all: the spawn ceiling), GNU parallel --joblog,
#   a hand-written Python SQLite checkpoint loop (the seeds' style), and
#   nightshift (per-process mode), then nightshift's persistent mode.
# Usage: bench/peers.sh [N] [N_PERSISTENT]      (defaults 10000 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
NP=${2:-100000}
ROOT=$(mktemp -d /tmp/nightshift-bench.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT

cargo build --release -q
NS=$PWD/target/release/nightshift
if ! command -v parallel >/dev/null 2>&1; then
  (apt-get install -y -qq parallel >/dev/null 2>&1 || sudo apt-get install -y -qq parallel >/dev/null 2>&1) || true
fi

now() { date +%s.%N; }
rate() { python3 -c "print(f'{$1/($3-$2):.0f}')"; }
secs() { python3 -c "print(f'{$2-$1:.2f}')"; }
declare -A RATE SECS

measure() { # name, items, command...
  local name=$1 n=$2; shift 2
  local t0 t1
  t0=$(now); "$@" >/dev/null 2>&1; t1=$(now)
  RATE[$name]=$(rate "$n" "$t0" "$t1"); SECS[$name]=$(secs "$t0" "$t1")
}

store() { # dir, batch, n
  mkdir -p "$1"
  "$NS" --db "$1/ns.db" init >/dev/null
  rm -f "$1/nightshift.toml"
  python3 -c "import sys
for i in range($3): sys.stdout.write('{\"key\":\"k%d\"}\n' % i)" > "$1/items.jsonl"
  "$NS" --db "$1/ns.db" add "$2" "$1/items.jsonl" >/dev/null
}

store "$ROOT/ns" b "$N"
store "$ROOT/nsp" p "$NP"
cat > "$ROOT/nsp/nightshift.toml" <<TOML
[batch.p]
worker = ["python3", "$PWD/bench/peers/noop_persistent.py"]
mode = "persistent"
concurrency = 4
TOML

measure xargs "$N" sh -c "seq $N | xargs -P4 -n1 true"
if command -v parallel >/dev/null 2>&1; then
  measure parallel "$N" sh -c "seq $N | parallel -j4 --joblog $ROOT/joblog true"
fi
measure python_seed "$N" python3 bench/peers/checkpoint_loop.py "$ROOT/py.db" "$N" 4 -- true
measure python_wal "$N" python3 bench/peers/checkpoint_loop.py --wal "$ROOT/pyw.db" "$N" 4 -- true
measure nightshift "$N" "$NS" --db "$ROOT/ns/ns.db" run b -j4 -- true
measure persistent "$NP" "$NS" --db "$ROOT/nsp/ns.db" --config "$ROOT/nsp/nightshift.toml" run p

ratio() { python3 -c "print(f'{${RATE[$1]}/${RATE[$2]}:.2f}')"; }
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d)"
printf '%-34s %8s %10s %10s\n' "peer ($N items, concurrency 4)" seconds items/s "nightshift÷"
for p in xargs parallel python_seed python_wal nightshift; do
  [ -n "${RATE[$p]:-}" ] || { printf '%-34s %8s\n' "$p" "n/a"; continue; }
  printf '%-34s %8s %10s %10s\n' "$p" "${SECS[$p]}" "${RATE[$p]}" "$(ratio nightshift "$p")"
done
printf '%-34s %8s %10s\n' "nightshift persistent ($NP items)" "${SECS[persistent]}" "${RATE[persistent]}"
python3 - "$ROOT" <<'PY'
import sqlite3, sys
root = sys.argv[1]
for name, db, table in [("nightshift", "ns/ns.db", "items"), ("persistent", "nsp/ns.db", "items"), ("python", "py.db", "items")]:
    n = sqlite3.connect(f"{root}/{db}").execute(f"select count(*) from {table} where status='done'").fetchone()[0]
    print(f"check: {name}: {n} items done")
PY
