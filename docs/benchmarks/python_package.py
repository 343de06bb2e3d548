"""The braid package's Python parts, timed: a stream from a Python list (a Python
source), and a stateful Python stream function called a batch at a time, against the
same function in a plain Python loop (the physical reference). Run with the release
wheel installed:

    maturin build --release -m crates/braid-python/Cargo.toml -o target/wheels
    pip install target/wheels/braid_streams-*.whl
    python docs/benchmarks/python_package.py [rows]
"""

import statistics
import sys
import time

import braid

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
rows = [(i % 1000, i % 97, i) for i in range(N)]
COLUMNS = "k BIGINT, v BIGINT, at BIGINT"


class Total:
    def __init__(self, partition, partitions):
        self.t = {}

    def process(self, row):
        k, v, at = row
        self.t[k] = self.t.get(k, 0) + v
        return [(k, self.t[k])]


def timed(f, rounds=3):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def loop():
    fn = Total(0, 1)
    out = []
    for r in rows:
        out.extend(fn.process(r))
    return len(out)


print(f"{N} rows, median of 3")
t, n = timed(loop)
print(f"plain Python loop over the function: {t:.3f} s ({n} rows out)")
for workers in (1, 2):
    s = braid.Session(workers=workers)
    s.create_stream("r", rows, COLUMNS, event_time="at", epoch=10_000)
    s.register_stream_function("total", Total, "k BIGINT, total BIGINT")
    t, r = timed(lambda: s.query("SELECT count(*) AS n FROM r"))
    print(f"{workers} worker(s): Python source, count(*): {t:.3f} s")
    t, r = timed(
        lambda: s.query(
            "SELECT * FROM PARALLEL(r, partitions => 4, route => k, apply => total, merge => 'time')"
        )
    )
    print(f"{workers} worker(s): source + stream function, time-ordered merge: {t:.3f} s ({len(r)} rows out)")
