#!/usr/bin/env python3
"""The hand-written peer: a SQLite checkpoint loop in the style of the seeds
(seed 003's Checkpoint class), run with 4 worker threads. Each item is
claimed, its worker program spawned, and marked done, every transition
committed (Python's sqlite3 defaults: rollback journal, synchronous=FULL).

usage: checkpoint_loop.py [--wal] DB N_ITEMS CONCURRENCY -- WORKER ARGV...

--wal: WAL with synchronous=NORMAL, nightshift's durability class (every
commit survives a process crash; a power loss may roll back the last few).
"""
import json
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


class Checkpoint:
    def __init__(self, path, wal=False):
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.lock = threading.Lock()
        if wal:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            """CREATE TABLE IF NOT EXISTS items (
                 key TEXT PRIMARY KEY,
                 status TEXT NOT NULL,
                 op_name TEXT,
                 result TEXT,
                 updated_at REAL)"""
        )
        self.db.commit()

    def seed(self, keys):
        with self.lock:
            for key in keys:
                self.db.execute(
                    "INSERT OR IGNORE INTO items(key, status, updated_at) VALUES (?, 'pending', ?)",
                    (key, time.time()),
                )
            self.db.commit()

    def pending_keys(self):
        with self.lock:
            cur = self.db.execute("SELECT key FROM items WHERE status IN ('pending', 'claimed')")
            return [row[0] for row in cur.fetchall()]

    def set(self, key, status, result=None):
        with self.lock:
            self.db.execute(
                "UPDATE items SET status=?, result=COALESCE(?, result), updated_at=? WHERE key=?",
                (status, json.dumps(result) if result else None, time.time(), key),
            )
            self.db.commit()


def main():
    args = sys.argv[1:]
    wal = args[0] == "--wal"
    if wal:
        args = args[1:]
    db, n, conc = args[0], int(args[1]), int(args[2])
    worker = args[args.index("--") + 1 :]
    cp = Checkpoint(db, wal)
    cp.seed(f"k{i}" for i in range(n))

    def one(key):
        cp.set(key, "claimed")
        proc = subprocess.run(worker, input=b"{}\n", capture_output=True)
        if proc.returncode == 0:
            cp.set(key, "done", proc.stdout.decode() or None)
        else:
            cp.set(key, "failed")

    start = time.time()
    with ThreadPoolExecutor(max_workers=conc) as pool:
        list(pool.map(one, cp.pending_keys()))
    print(f"{n} items in {time.time() - start:.2f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
