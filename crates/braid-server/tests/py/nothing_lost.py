"""Nothing lost, nothing altered (run by tests/nothing_lost.rs with the server's pg port,
HTTP port and a free TCP port). Random rows (NULLs, empty strings, spaces, quotes,
commas, tabs, backslashes, negative and extreme numbers) go in through INSERT with
literals, psycopg's parameters, COPY csv, COPY text, a TCP producer and HTTP, and must
come back identical through SELECT and through SUBSCRIBE; then transactions, INSERT's
expressions, an in-order row after a pause, late rows reported to their sender, and the refusal of an aggregate that would
never answer. Exits non-zero with a message on the first wrong answer."""
import datetime
import random
import socket
import sys
import threading
import time
import urllib.request

import psycopg

pg_port, http_port, tcp_port, seed = (int(a) for a in sys.argv[1:5])
dsn = f"host=127.0.0.1 port={pg_port} user=braid"
rng = random.Random(seed)


def check(got, want, what):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r} (seed {seed})")


TEXTS = ["", " ", "  padded  ", "a,b", 'say "hi"', "tab\there", "back\\slash", "\\N",
         "NULL", "x", "ünï", "'quoted'", ",", '"', "a ,  b"]


def text():
    if rng.random() < 0.15:
        return None
    if rng.random() < 0.6:
        return rng.choice(TEXTS)
    return "".join(rng.choice("ab ,\"'\\\t-") for _ in range(rng.randint(0, 6)))


def number():
    if rng.random() < 0.1:
        return None
    return rng.choice([0, -1, 1, 2**63 - 1, -(2**63), rng.randint(-10**6, 10**6)])


def rows(n, first):
    return [(first + i, text(), number()) for i in range(n)]


def sql_text(v):
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + v.replace("'", "''") + "'"


def csv_field(v):
    if v is None:
        return ""
    if isinstance(v, int):
        return str(v)
    return '"' + v.replace('"', '""') + '"'


def csv_line(r):
    return ",".join(csv_field(v) for v in r)


with psycopg.connect(dsn, autocommit=True) as conn:
    # What drivers ask at connect, through the extended protocol (constants typed).
    # A bound number keeps its value wherever it stands: a negative one after `-` is no
    # comment, NaN and the infinities are floats.
    conn.execute("CREATE STREAM bound (a BIGINT, b DOUBLE PRECISION, c DOUBLE PRECISION)")
    conn.execute("INSERT INTO bound VALUES (%s -%s, %s, %s)",
                 (10, -5, float("nan"), float("-inf")))
    got = conn.execute("SELECT a, b, c FROM bound LIMIT 1").fetchone()
    check((got[0], got[1] != got[1], got[2]), (15, True, float("-inf")), "bound numbers")
    # Bound into a query's tree as typed constants: in a running SELECT's WHERE, and a
    # timestamp (psycopg sends a datetime as a TIMESTAMP parameter).
    got = conn.execute("SELECT a FROM bound WHERE a > %s AND a < %s LIMIT 1", (14, 16)).fetchone()
    check(got, (15,), "a parameter in a SELECT's WHERE")
    conn.execute("CREATE STREAM stamps (t TIMESTAMP, s TEXT)")
    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    conn.execute("INSERT INTO stamps VALUES (%s, %s)", (when, "it's $1"))
    got = conn.execute("SELECT t, s FROM stamps LIMIT 1").fetchone()
    check(got, (when, "it's $1"), "a bound timestamp and a string holding a placeholder")
    check(conn.execute("SELECT 1, 'x' || 'y', 2.5").fetchone(), (1, "xy", 2.5), "SELECT 1")
    check(conn.execute("SHOW server_version").fetchone(), ("16.0",), "SHOW server_version")
    conn.execute("CREATE STREAM rt (id BIGINT NOT NULL, s TEXT, v BIGINT) "
                 f"WITH (listen = '127.0.0.1:{tcp_port}', format = 'csv')")
    want = []

    # INSERT with literals the client writes.
    r = rows(40, 0)
    conn.execute("INSERT INTO rt VALUES " + ", ".join(
        "(" + ", ".join(sql_text(v) for v in row) + ")" for row in r))
    want += r
    # psycopg's parameters (the extended protocol).
    r = rows(40, 1000)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO rt VALUES (%s, %s, %s)", r)
    want += r
    # COPY csv: an unquoted empty field is NULL, "" the empty string.
    r = rows(40, 2000)
    with conn.cursor() as cur:
        with cur.copy("COPY rt FROM STDIN WITH (FORMAT csv)") as copy:
            copy.write("".join(csv_line(row) + "\n" for row in r))
    want += r
    # HEADER false: no header, the first line is a row; an option that would read the
    # data otherwise than the format does is refused by name, not ignored.
    r = rows(5, 2500)
    with conn.cursor() as cur:
        with cur.copy("COPY rt FROM STDIN WITH (FORMAT csv, HEADER false)") as copy:
            copy.write("".join(csv_line(row) + "\n" for row in r))
    want += r
    for option in ["DELIMITER ';'", "NULL 'x'", "FORMAT binary"]:
        try:
            with conn.cursor() as cur:
                with cur.copy(f"COPY rt FROM STDIN WITH (FORMAT csv, {option})") as copy:
                    copy.write("1,a,2\n")
            sys.exit(f"COPY with {option} was taken")
        except psycopg.errors.FeatureNotSupported as e:
            check(option.split()[0] in str(e), True, f"the refusal names {option}: {e}")
    # COPY text, as psycopg writes it (\N null, backslash escapes).
    r = rows(40, 3000)
    with conn.cursor() as cur:
        with cur.copy("COPY rt FROM STDIN") as copy:
            for row in r:
                copy.write_row(row)
    want += r
    # A TCP producer, CSV lines.
    r = rows(40, 4000)
    with socket.create_connection(("127.0.0.1", tcp_port)) as sock:
        sock.sendall("".join(csv_line(row) + "\n" for row in r).encode())
    want += r
    # HTTP, a CSV batch.
    r = rows(40, 5000)
    body = "".join(csv_line(row) + "\n" for row in r).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}/streams/rt", data=body,
                                 headers={"Content-Type": "text/csv"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        check(resp.status, 200, "HTTP POST")
    want += r
    want = sorted(want, key=repr)

    # A SELECT with LIMIT waits for its rows (the TCP producer's land a moment later);
    # the harness stops a session that hangs on a lost row.
    got = sorted(conn.execute(f"SELECT id, s, v FROM rt LIMIT {len(want)}").fetchall(),
                 key=repr)
    check(len(got), len(want), "rows back through SELECT")
    for g, w in zip(got, want):
        check(g, w, f"row {w[0]} through SELECT")

    # The same rows through SUBSCRIBE (COPY text out, parsed by psycopg's own loader),
    # on a connection of its own, closed once every row has come (a subscription does
    # not end by itself).
    got = []
    sub = psycopg.connect(dsn, autocommit=True)
    # (The context manager is kept: collected, it would wait for the COPY to end.)
    subscription = sub.cursor().copy("COPY (SUBSCRIBE TO rt) TO STDOUT")
    copy = subscription.__enter__()
    copy.set_types(["int8", "text", "int8"])
    for row in copy.rows():
        got.append(tuple(row))
        if len(got) == len(want):
            break
    sub.close()
    try:
        subscription.__exit__(None, None, None)
    except psycopg.Error:
        pass  # the connection is closed: what a subscriber that goes away does
    check(len(got), len(want), "rows back through SUBSCRIBE")
    got = sorted(got, key=repr)
    for g, w in zip(got, want):
        check(g, w, f"row {w[0]} through SUBSCRIBE")

    # INSERT's values are SQL: expressions evaluated, a bad row refused whole.
    conn.execute("CREATE STREAM ex (a BIGINT, b TEXT)")
    conn.execute("INSERT INTO ex VALUES (5 - 3, '' || 'x'), (-(4), NULL)")
    check(sorted(conn.execute("SELECT a, b FROM ex LIMIT 2").fetchall(), key=repr),
          sorted([(2, "x"), (-4, None)], key=repr), "INSERT expressions")
    try:
        conn.execute("INSERT INTO ex VALUES (7 8)")
        sys.exit("VALUES (7 8) was accepted")
    except psycopg.errors.SyntaxError:
        pass
    try:
        conn.execute("INSERT INTO ex VALUES (1, 'ok'), ('x', 'bad')")
        sys.exit("a text into a BIGINT column was accepted")
    except psycopg.Error as e:
        check("row 2, column a" in str(e), True, f"the bad value is named: {e}")
    # (That the refused INSERT added nothing is checked with the transactions below.)

    # An aggregate without a window over a live stream would never answer: refused.
    try:
        conn.execute("SELECT b, count(*) FROM ex GROUP BY b")
        sys.exit("GROUP BY without a window on a live stream was accepted")
    except psycopg.errors.FeatureNotSupported as e:
        check("GROUP BY TUMBLE" in str(e), True, f"the refusal says what to write: {e}")

    # In-order rows after a pause are not late (a stream without time_unit).
    conn.execute("CREATE STREAM paused (t BIGINT NOT NULL) WITH (event_time = 't', epoch = 10)")
    conn.execute("CREATE MATERIALIZED VIEW pw AS "
                 "SELECT window_end, count(*) AS n FROM paused GROUP BY TUMBLE(t, 10)")
    conn.execute("INSERT INTO paused VALUES (1), (2), (3), (4), (5)")
    time.sleep(0.3)
    conn.execute("INSERT INTO paused VALUES (6), (7), (8), (9)")
    conn.execute("INSERT INTO paused VALUES (25)")
    check(conn.execute("SELECT window_end, n FROM pw LIMIT 1").fetchall(), [(10, 9)],
          "the window counts the rows after the pause")

    # A row a query refuses as late is reported to the client that sent it, as a
    # warning with its next statement, once; another client hears of its own only.
    mine, theirs = [], []
    conn.add_notice_handler(lambda d: mine.append(d.message_primary))
    other = psycopg.connect(dsn, autocommit=True)
    other.add_notice_handler(lambda d: theirs.append(d.message_primary))
    conn.execute("INSERT INTO paused VALUES (3)")
    other.execute("INSERT INTO paused VALUES (4), (26), (5)")
    # (A windowed query takes an epoch's rows when the epoch ends: a later row ends it.)
    conn.execute("INSERT INTO paused VALUES (45)")
    deadline = time.time() + 30
    while (not mine or not theirs) and time.time() < deadline:
        time.sleep(0.05)
        conn.execute("SHOW STREAMS")
        other.execute("SHOW STREAMS")
    conn.execute("SHOW STREAMS")
    other.execute("SHOW STREAMS")
    check(len(mine), 1, f"warnings to the late row's sender: {mine}")
    check(mine[0].startswith("1 row(s) you sent to stream paused were late for query"), True,
          f"the warning: {mine[0]}")
    check(mine[0].endswith("rows 11 of the stream"), True, f"the row named: {mine[0]}")
    check(len(theirs), 1, f"warnings to the other sender: {theirs}")
    check(theirs[0].startswith("2 row(s) you sent"), True, f"the other's warning: {theirs[0]}")
    check(theirs[0].endswith("rows 12, 14 of the stream"), True, f"its rows: {theirs[0]}")
    other.close()

# Transactions: psycopg's default mode sends BEGIN; rows land at COMMIT, never at
# ROLLBACK, and a statement a block refuses fails the block.
with psycopg.connect(dsn) as conn:
    conn.execute("INSERT INTO ex VALUES (100, 'kept'), (101, 'kept')")
    conn.commit()
    conn.execute("INSERT INTO ex VALUES (200, 'dropped')")
    conn.rollback()
    try:
        conn.execute("INSERT INTO ex (a) SELECT a FROM ex")
        sys.exit("INSERT (columns) SELECT inside a transaction block was taken")
    except psycopg.errors.FeatureNotSupported:
        pass
    conn.rollback()
    try:
        conn.execute("CREATE STREAM nope (a BIGINT)")
        sys.exit("CREATE STREAM inside a transaction block was accepted")
    except psycopg.errors.FeatureNotSupported:
        pass
    try:
        conn.execute("INSERT INTO ex VALUES (300, 'after a failure')")
        sys.exit("a failed block went on")
    except psycopg.Error:
        pass
    conn.rollback()
with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute("BEGIN")
    conn.execute("INSERT INTO ex VALUES (400, 'rolled back')")
    conn.execute("ROLLBACK")
    conn.execute("BEGIN; INSERT INTO ex VALUES (500, 'one'); INSERT INTO ex VALUES (501, 'two'); COMMIT")
    got = sorted(conn.execute("SELECT a, b FROM ex LIMIT 6").fetchall(), key=repr)
    want = sorted([(2, "x"), (-4, None), (100, "kept"), (101, "kept"), (500, "one"),
                   (501, "two")], key=repr)
    check(got, want, "what the transactions committed")

print("ok")
