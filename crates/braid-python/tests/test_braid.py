"""The braid package against Python-computed expectations (the oracle is plain Python
over the same rows: it shares no code with Braid)."""

import random

import pytest

import braid

WORKERS = [1, 2, 4]


def calls(n=3000, seed=7):
    """(caller, dur, at) rows: at goes up by 0..9 per row."""
    rng = random.Random(seed)
    at = 0
    rows = []
    for _ in range(n):
        at += rng.randrange(10)
        rows.append((rng.randrange(50), rng.randrange(1, 1000), at))
    return rows


COLUMNS = "caller BIGINT, dur BIGINT, at BIGINT"


def session(workers, rows=None):
    s = braid.Session(workers=workers)
    s.create_stream("calls", calls() if rows is None else rows, COLUMNS, event_time="at", epoch=100)
    return s


@pytest.mark.parametrize("workers", WORKERS)
def test_a_select_gives_the_serial_rows_on_any_worker_count(workers):
    rows = calls()
    s = session(workers, rows)
    r = s.query("SELECT caller, dur * 2 AS d FROM calls WHERE dur > 500")
    assert r.columns == ["caller", "d"]
    assert r.types == ["BIGINT", "BIGINT"]
    assert r.rows() == [(c, d * 2) for c, d, _ in rows if d > 500]
    assert r.rows_in == len(rows)
    assert r.faults == []


@pytest.mark.parametrize("workers", WORKERS)
def test_a_python_function_in_an_aggregate_matches_python(workers):
    rows = calls()
    s = session(workers, rows)

    def cost(dur, rate):
        return round(dur * rate, 2)

    s.register_function("cost", cost, returns="DOUBLE", args=["BIGINT", "DOUBLE"])
    r = s.query(
        "SELECT window_start, caller, sum(cost(dur, 0.5)) AS spent, count(*) AS n "
        "FROM TUMBLE(calls, at, 1000) GROUP BY window_start, window_end, caller"
    )
    want = {}
    for c, d, at in rows:
        k = (at // 1000 * 1000, c)
        spent, n = want.get(k, (0.0, 0))
        want[k] = (spent + cost(d, 0.5), n + 1)
    got = {(w, c): (spent, n) for w, c, spent, n in r.rows()}
    assert got.keys() == want.keys()
    for k, (spent, n) in want.items():
        assert got[k][1] == n
        assert got[k][0] == pytest.approx(spent, rel=1e-12)


@pytest.mark.parametrize("workers", WORKERS)
def test_create_function_language_python_from_sql(workers):
    rows = calls()
    s = session(workers, rows)
    s.execute(
        """
        CREATE FUNCTION bucket(d BIGINT) RETURNS TEXT LANGUAGE python AS $$
            if d < 100:
                return "short"
            return "long" if d > 900 else "mid"
        $$;
        """
    )
    r = s.query("SELECT caller, bucket(dur) AS b FROM calls")

    def bucket(d):
        return "short" if d < 100 else ("long" if d > 900 else "mid")

    assert r.rows() == [(c, bucket(d)) for c, d, _ in rows]


@pytest.mark.parametrize("workers", WORKERS)
def test_a_vectorized_function_is_called_once_per_batch_and_matches_python(workers):
    rows = calls()
    s = braid.Session(workers=workers)
    # Batches are a partition's rows of an epoch (or 1,024): long epochs, large batches.
    s.create_stream("calls", rows, COLUMNS, event_time="at", epoch=10000)
    sizes = []

    def scaled(durs, rates):
        sizes.append(len(durs))
        assert len(rates) == len(durs)
        return [round(d * r, 2) for d, r in zip(durs, rates)]

    s.register_function(
        "scaled", scaled, returns="DOUBLE", args=["BIGINT", "DOUBLE"], vectorized=True
    )
    r = s.query("SELECT caller, scaled(dur, 0.5) AS c FROM calls WHERE dur > 100")
    assert r.rows() == [(c, round(d * 0.5, 2)) for c, d, _ in rows if d > 100]
    assert r.faults == []
    # Batches of many rows, not a call per row.
    assert sum(sizes) >= len(r.rows())
    assert len(sizes) * 5 < len(r.rows()), sizes[:20]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_numpy_vectorized_function_in_an_aggregate(workers):
    np = pytest.importorskip("numpy")
    rows = calls()
    s = session(workers, rows)
    s.register_function(
        "sq", lambda xs: np.asarray(xs, dtype=np.int64) ** 2, returns="BIGINT", vectorized=True
    )
    r = s.query("SELECT caller, sum(sq(dur)) AS s, count(*) AS n FROM calls GROUP BY caller")
    want = {}
    for c, d, _ in rows:
        t, n = want.get(c, (0, 0))
        want[c] = (t + d * d, n + 1)
    assert {c: (t, n) for c, t, n in r.rows()} == want


def test_a_vectorized_function_that_fails_faults_its_batch_never_null():
    rows = [(i % 3, 10 + i, i) for i in range(40)]
    s = session(1, rows)
    s.register_function("boom", lambda xs: 1 // 0, returns="BIGINT", vectorized=True)
    r = s.query("SELECT caller, boom(dur) AS x FROM calls")
    assert r.rows() == []
    assert len(r.faults) >= 1 and "ZeroDivisionError" in r.faults[0]
    s.register_function("short", lambda xs: xs[1:], returns="BIGINT", vectorized=True)
    r = s.query("SELECT caller, short(dur) AS x FROM calls")
    assert r.rows() == []
    assert "values for a batch of" in r.faults[0]
    # A value of the wrong type faults its own row only.
    s.register_function(
        "odd", lambda xs: [x if x % 2 else "even" for x in xs], returns="BIGINT", vectorized=True
    )
    r = s.query("SELECT dur, odd(dur) AS x FROM calls")
    assert r.rows() == [(d, d) for _, d, _ in rows if d % 2]
    assert "'even' (str) is not a BIGINT" in r.faults[0]


def test_an_exception_skips_the_row_and_is_counted_never_null():
    rows = [(1, 10, 0), (2, 0, 1), (3, 5, 2)]
    s = session(2, rows)
    s.register_function("inv", lambda d: 100 // d, returns="BIGINT")
    r = s.query("SELECT caller, inv(dur) AS x FROM calls")
    assert r.rows() == [(1, 10), (3, 20)]
    assert len(r.faults) == 1
    assert "ZeroDivisionError" in r.faults[0]


def test_a_value_of_the_wrong_type_is_a_fault():
    rows = [(1, 10, 0), (2, 20, 1)]
    s = session(1, rows)
    s.register_function("half", lambda d: d / 2 if d > 15 else "ten", returns="DOUBLE")
    r = s.query("SELECT caller, half(dur) AS x FROM calls")
    assert r.rows() == [(2, 10.0)]
    assert "'ten' (str) is not a DOUBLE" in r.faults[0]
    s.register_function("big", lambda d: 2**70, returns="BIGINT")
    r = s.query("SELECT big(dur) AS x FROM calls")
    assert r.rows() == []
    assert "out of BIGINT's range" in r.faults[0]


def test_mismatched_arguments_are_refused_by_name():
    s = session(1, [(1, 1, 0)])
    s.register_function("f", lambda x: x, returns="BIGINT", args=["TEXT"])
    with pytest.raises(ValueError, match=r"function f\(TEXT\) called with \(BIGINT\)"):
        s.query("SELECT f(dur) FROM calls")
    with pytest.raises(ValueError, match="built-in"):
        s.register_function("upper", lambda x: x, returns="TEXT")
    with pytest.raises(ValueError, match="LANGUAGE js"):
        s.execute("CREATE FUNCTION g(x BIGINT) RETURNS BIGINT LANGUAGE js AS $$ return x $$")


class RunningTotal:
    """Per caller: the running total of durations (state kept per partition)."""

    def __init__(self, partition, partitions):
        self.partition = partition
        self.totals = {}

    def process(self, row):
        caller, dur, at = row
        t = self.totals.get(caller, 0) + dur
        self.totals[caller] = t
        return [(caller, at, t)]

    def end_of_epoch(self, epoch):
        return []

    def finish(self):
        return [(c, -1, t) for c, t in sorted(self.totals.items())]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stateful_stream_function_equals_the_serial_run(workers):
    rows = calls(5000)
    totals = {}
    want = []
    for c, d, at in rows:
        totals[c] = totals.get(c, 0) + d
        want.append((c, at, totals[c]))
    s = session(workers, rows)
    s.register_stream_function("running", RunningTotal, "caller BIGINT, at BIGINT, total BIGINT")
    r = s.query(
        "SELECT * FROM PARALLEL(calls, partitions => 4, route => caller, apply => running, merge => 'time')"
    )
    got = r.rows()
    # Every input row's output, in the serial order; then each partition's finish rows.
    assert got[: len(rows)] == want
    assert sorted(got[len(rows) :]) == sorted((c, -1, t) for c, t in totals.items())


def test_a_stream_function_that_raises_faults_its_rows():
    class Boom:
        def __init__(self, p, q):
            pass

        def process(self, row):
            if row[0] == 3:
                raise RuntimeError("no caller 3")
            return [(row[0],)]

    s = session(1, [(1, 1, 0), (3, 1, 1)])
    s.register_stream_function("boom", Boom, "caller BIGINT")
    r = s.query("SELECT * FROM PARALLEL(calls, partitions => 1, route => caller, apply => boom)")
    # One batch: the exception faults every row of it, none is emitted as a NULL.
    assert r.rows() == []
    assert any("no caller 3" in f for f in r.faults)


def test_results_as_arrow_and_pandas():
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    rows = calls(500)
    s = session(2, rows)
    r = s.query("SELECT caller, dur, dur > 500 AS long, 'x' AS tag FROM calls")
    t = r.to_arrow()
    assert t.schema.names == ["caller", "dur", "long", "tag"]
    assert t.schema.field("dur").type == pa.int64()
    assert t.column("dur").to_pylist() == [d for _, d, _ in rows]
    df = r.to_pandas()
    assert list(df["long"]) == [d > 500 for _, d, _ in rows]


def test_a_pyarrow_table_is_a_source():
    pa = pytest.importorskip("pyarrow")
    rows = calls(2000)
    table = pa.table(
        {
            "caller": [r[0] for r in rows],
            "dur": [r[1] for r in rows],
            "at": [r[2] for r in rows],
        }
    )
    s = braid.Session(workers=2)
    s.create_stream("calls", table, COLUMNS, event_time="at", epoch=100)
    r = s.query("SELECT caller, count(*) AS n FROM calls GROUP BY caller")
    want = {}
    for c, _, _ in rows:
        want[c] = want.get(c, 0) + 1
    assert dict(r.rows()) == want


def test_subscribe_hands_results_over_as_they_are_made():
    def slow_rows():
        for i in range(4000):
            yield (i % 10, i, i)

    s = braid.Session(workers=2)
    s.create_stream("calls", slow_rows(), COLUMNS, event_time="at", epoch=100)
    batches = []
    for b in s.subscribe("SELECT caller, at FROM calls WHERE caller = 3"):
        batches.append(b.rows())
    assert len(batches) > 1
    assert [r for b in batches for r in b] == [(3, i) for i in range(4000) if i % 10 == 3]


def test_a_bad_row_fails_the_run_naming_row_and_column():
    s = braid.Session(workers=1)
    s.create_stream("calls", [(1, 2, 3), (1, "two", 4)], COLUMNS)
    with pytest.raises(ValueError, match=r"row 2: column dur: 'two' \(str\) is not a BIGINT"):
        s.query("SELECT * FROM calls")


def test_explain_shows_the_plan():
    s = session(2)
    text = s.explain("SELECT caller, count(*) FROM calls GROUP BY caller")
    assert "Aggregate" in text


def test_a_generator_is_read_once_a_list_every_run():
    s = braid.Session(workers=1)
    s.create_stream("calls", ((i, i, i) for i in range(10)), COLUMNS)
    assert len(s.query("SELECT * FROM calls")) == 10
    with pytest.raises(ValueError, match="an iterator a run has read already"):
        s.query("SELECT * FROM calls")
    s.create_stream("calls", [(i, i, i) for i in range(10)], COLUMNS, replace=True)
    assert len(s.query("SELECT * FROM calls")) == 10
    assert len(s.query("SELECT * FROM calls")) == 10


def test_the_docs_example_runs():
    """docs/python.md's example, as written."""
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md"
    code = "\n".join(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S))
    assert "Session" in code
    exec(compile(code, str(doc), "exec"), {"__name__": "docs_example"})


def test_a_row_of_the_wrong_type_faults_its_input_row_only():
    class Bad:
        def __init__(self, p, q):
            pass

        def process(self, row):
            # A generator: its rows are read as Braid needs them.
            yield (row[0], "x" if row[0] == 2 else row[0] * 10)

    s = session(2, [(1, 1, 0), (2, 1, 1), (3, 1, 2)])
    s.register_stream_function("bad", Bad, "caller BIGINT, y BIGINT")
    r = s.query("SELECT * FROM PARALLEL(calls, partitions => 2, route => caller, apply => bad, merge => 'time')")
    assert r.rows() == [(1, 10), (3, 30)]
    assert len(r.faults) == 1 and "column y: 'x' (str) is not a BIGINT" in r.faults[0]


def test_leaving_a_subscription_early_frees_the_session():
    s = braid.Session(workers=2)
    s.create_stream("calls", [(i % 7, i, i) for i in range(50_000)], COLUMNS, event_time="at", epoch=10)
    for batch in s.subscribe("SELECT caller, at FROM calls"):
        assert len(batch) > 0
        break
    # The abandoned query stops; the next one runs.
    assert len(s.query("SELECT * FROM calls WHERE caller = 1")) == len(range(1, 50_000, 7))


def test_a_script_file_runs(tmp_path):
    (tmp_path / "in.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "q.sql").write_text(
        "CREATE STREAM t (a BIGINT, b BIGINT) WITH (path = 'in.csv');\n"
        "CREATE SINK out WITH (sink = 'collect');\n"
        "INSERT INTO out SELECT a + b AS s FROM t;\n"
    )
    [r] = braid.Session(workers=2).execute_file(str(tmp_path / "q.sql"))
    assert r.rows() == [(3,), (7,)]
