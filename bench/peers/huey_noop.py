#!/usr/bin/env python3
"""huey's thread consumer on N no-op tasks: enqueue N into a fresh
SqliteHuey (WAL), then drain them with 4 worker threads. Prints the
seconds of enqueue + drain (what nightshift's add + run does).

    huey_noop.py N DB_PATH"""
import sys, threading, time

from huey import SqliteHuey

n, path = int(sys.argv[1]), sys.argv[2]
huey = SqliteHuey(filename=path, journal_mode="wal", results=False)
done = 0
lock = threading.Lock()
finished = threading.Event()


@huey.task()
def noop(i):
    global done
    with lock:
        done += 1
        if done == n:
            finished.set()


t0 = time.perf_counter()
for i in range(n):
    noop(i)
consumer = huey.create_consumer(workers=4, worker_type="thread", periodic=False,
                                initial_delay=0.001, max_delay=0.01,
                                check_worker_health=False)
consumer.start()
if not finished.wait(600):
    sys.exit(f"huey ran only {done} of {n}")
t1 = time.perf_counter()
consumer.stop(graceful=True)
print(f"{t1 - t0:.3f}")
