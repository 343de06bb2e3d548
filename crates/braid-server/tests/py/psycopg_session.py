"""A psycopg 3 client session against `braid server` (run by tests/psycopg.rs with the
server's port). psycopg speaks the extended query protocol: parameters are bound
server-side ($1, $2, ...). Exits non-zero with a message on the first wrong answer."""
import sys
import threading

import psycopg

port = int(sys.argv[1])
dsn = f"host=127.0.0.1 port={port} user=braid"


def check(got, want, what):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute("CREATE STREAM calls (caller BIGINT, dur BIGINT, who VARCHAR)")
    rows = [(i % 4, (i * 37) % 200, f"n'{i}") for i in range(60)]
    want = [r for r in rows if r[1] > 100]

    # A subscriber on another connection, waiting while rows are inserted here.
    got = []

    def subscribe():
        with psycopg.connect(dsn, autocommit=True) as sub:
            cur = sub.execute(
                "SELECT caller, dur, who FROM calls WHERE dur > %s LIMIT %s", (100, len(want))
            )
            check([d.name for d in cur.description], ["caller", "dur", "who"], "columns")
            got.extend(cur.fetchall())

    t = threading.Thread(target=subscribe)
    t.start()
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO calls VALUES (%s, %s, %s)", rows)
    t.join(30)
    check(t.is_alive(), False, "the subscriber finished")
    check(got, want, "subscriber rows")

    # COPY from psycopg.
    with conn.cursor() as cur:
        with cur.copy("COPY calls FROM STDIN") as copy:
            for r in [(9, 500, "copied"), (9, 501, "copied too")]:
                copy.write_row(r)
    cur = conn.execute("SELECT who FROM calls WHERE caller = 9 LIMIT 2")
    check(cur.fetchall(), [("copied",), ("copied too",)], "copied rows")

    # A Postgres error with its SQLSTATE; the connection stays usable.
    try:
        conn.execute("SELECT nope FROM calls")
        sys.exit("an unknown column was accepted")
    except psycopg.Error as e:
        check(e.sqlstate, "42000", "sqlstate")
        check("no column `nope`" in str(e), True, "message")
    try:
        conn.execute("SELECT sum(dur) OVER (PARTITION BY caller) FROM calls")
        sys.exit("an over-aggregation was accepted")
    except psycopg.errors.FeatureNotSupported:
        pass

    states = conn.execute("SHOW QUERIES").fetchall()
    check(len(states) >= 2, True, "SHOW QUERIES lists the queries")
print("ok")
