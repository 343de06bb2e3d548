//! `CREATE FUNCTION ... LANGUAGE python` through the `braid` command and its server:
//! results against the same arithmetic done here in Rust (it shares nothing with the
//! Python function or Braid's evaluation), on 1, 2 and 4 workers; an exception is a
//! counted fault (or stops the run under `--on-error fail`); what Braid does not run
//! is refused by name.

use crate::recovery::{run_script, Scratch};
use crate::server_recovery::{psql, start};
use std::collections::BTreeMap;
use std::path::Path;

/// `k,x,y` rows: k in 0..20, x and y pseudo-random.
fn write_input(path: &Path, n: u64) -> Vec<(i64, i64, i64)> {
    let mut rows = Vec::new();
    let mut s = 0x9e37_79b9_u64;
    let mut text = String::from("k,x,y\n");
    for _ in 0..n {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (k, x, y) = (
            (s >> 60) as i64 % 20,
            (s >> 20) as i64 % 10_000,
            (s >> 40) as i64 % 1000,
        );
        text += &format!("{k},{x},{y}\n");
        rows.push((k, x, y));
    }
    std::fs::write(path, text).unwrap();
    rows
}

const FUNCTIONS: &str = "
CREATE FUNCTION score(x BIGINT, y BIGINT) RETURNS BIGINT LANGUAGE python AS $$
    h = (x * 31 + y) % 97
    return h if h % 2 == 0 else -h
$$;
CREATE FUNCTION label(k BIGINT) RETURNS TEXT LANGUAGE python AS $$ return 'k%02d' % k $$;
";

#[test]
fn a_python_function_from_sql_equals_the_same_arithmetic_on_1_2_4_workers() {
    let dir = Scratch::new("python-functions");
    let dir = &dir.0;
    let rows = write_input(&dir.join("in.csv"), 20_000);
    let mut want: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for &(k, x, y) in &rows {
        let h = (x * 31 + y) % 97;
        let e = want.entry(format!("k{k:02}")).or_default();
        e.0 += if h % 2 == 0 { h } else { -h };
        e.1 += 1;
    }
    let want: Vec<String> = want
        .iter()
        .map(|(l, (s, n))| format!("{l},{s},{n}"))
        .collect();
    for workers in [1, 2, 4] {
        let out = dir.join(format!("out{workers}.csv"));
        let script = dir.join("q.sql");
        std::fs::write(
            &script,
            format!(
                "CREATE STREAM t (k BIGINT, x BIGINT, y BIGINT) WITH (path = 'in.csv');
                 {FUNCTIONS}
                 CREATE SINK out WITH (sink = 'csv', path = '{}');
                 INSERT INTO out SELECT label(k) AS l, sum(score(x, y)) AS s, count(*) AS n
                   FROM t GROUP BY label(k);",
                out.display()
            ),
        )
        .unwrap();
        let (ok, err) = run_script(&script, workers, &[]);
        assert!(ok, "{workers} workers: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut got: Vec<String> = text.lines().map(String::from).collect();
        got.sort();
        assert_eq!(got, want, "{workers} workers");
    }
}

#[test]
fn an_exception_is_a_counted_fault_or_stops_the_run() {
    let dir = Scratch::new("python-faults");
    let dir = &dir.0;
    std::fs::write(dir.join("in.csv"), "a,b\n1,2\n3,0\n5,5\n").unwrap();
    let script = dir.join("q.sql");
    std::fs::write(
        &script,
        "CREATE STREAM t (a BIGINT, b BIGINT) WITH (path = 'in.csv');
         CREATE FUNCTION ratio(a BIGINT, b BIGINT) RETURNS DOUBLE LANGUAGE python AS $$ return a / b $$;
         CREATE SINK out WITH (sink = 'csv', path = 'out.csv');
         INSERT INTO out SELECT a, ratio(a, b) AS r FROM t;",
    )
    .unwrap();
    let (ok, err) = run_script(&script, 2, &[]);
    assert!(ok, "{err}");
    assert!(err.contains("1 row(s) skipped"), "{err}");
    assert!(
        err.contains("ratio(3, 0): raised ZeroDivisionError: division by zero"),
        "{err}"
    );
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(out, "1,0.5\n5,1\n");
    let (ok, err) = run_script(&script, 2, &["--on-error", "fail"]);
    assert!(!ok);
    assert!(err.contains("ZeroDivisionError"), "{err}");
}

#[test]
fn what_braid_does_not_run_is_refused_by_name() {
    let dir = Scratch::new("python-refusals");
    let dir = &dir.0;
    std::fs::write(dir.join("in.csv"), "a\n1\n").unwrap();
    for (sql, says) in [
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$ BEGIN RETURN x; END $$;",
            "LANGUAGE plpgsql",
        ),
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x +* 2 $$;",
            "SyntaxError",
        ),
        (
            "CREATE FUNCTION upper(x TEXT) RETURNS TEXT LANGUAGE python AS $$ return x $$;",
            "`upper` is a built-in function",
        ),
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS SETOF BIGINT LANGUAGE python AS $$ return [x] $$;",
            "RETURNS SETOF",
        ),
        (
            "CREATE FUNCTION f(x DECIMAL) RETURNS BIGINT LANGUAGE python AS $$ return 1 $$;",
            "argument `x` of function `f`",
        ),
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x $$;
             CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x $$;",
            "write CREATE OR REPLACE FUNCTION",
        ),
        (
            "CREATE FUNCTION f(x TEXT) RETURNS BIGINT LANGUAGE python AS $$ return 1 $$;
             CREATE STREAM t (a BIGINT) WITH (path = 'in.csv');
             SELECT f(a) FROM t;",
            "function f(TEXT) called with (BIGINT)",
        ),
    ] {
        let script = dir.join("q.sql");
        std::fs::write(&script, sql).unwrap();
        let (ok, err) = run_script(&script, 1, &[]);
        assert!(!ok, "{sql} ran");
        assert!(err.contains(says), "{sql}: {err}");
    }
    // DROP FUNCTION, then the name is free again; OR REPLACE replaces.
    let script = dir.join("q.sql");
    std::fs::write(
        &script,
        "CREATE STREAM t (a BIGINT) WITH (path = 'in.csv');
         CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x + 1 $$;
         DROP FUNCTION f;
         CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x + 2 $$;
         CREATE OR REPLACE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$
             y = x * 10
             return y + 3
         $$;
         CREATE SINK out WITH (sink = 'csv', path = 'out.csv');
         INSERT INTO out SELECT f(a) AS v FROM t;",
    )
    .unwrap();
    let (ok, err) = run_script(&script, 1, &[]);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.csv")).unwrap(),
        "13\n"
    );
}

/// A function declared through psql runs in a materialized view, and comes back with
/// the view when the server starts again on its data directory.
#[test]
fn the_server_takes_python_functions_from_psql_and_keeps_them() {
    let dir = Scratch::new("python-server");
    let data = dir.0.join("data");
    let port = crate::free_port();
    let s = start(&data, port, 2);
    for sql in [
        "CREATE FUNCTION twice(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return 2 * x $$",
        "CREATE STREAM s (k BIGINT, t BIGINT) WITH (event_time = t)",
        "CREATE MATERIALIZED VIEW v AS SELECT k, sum(twice(k)) AS s, window_start \
         FROM TUMBLE(TABLE s, t, 10) GROUP BY window_start, window_end, k",
        "INSERT INTO s VALUES (1, 1), (2, 2), (1, 3), (3, 25)",
    ] {
        psql(port, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // A SELECT in the server is continuous: LIMIT ends it.
    let sorted = |text: String| {
        let mut l: Vec<String> = text.lines().map(String::from).collect();
        l.sort();
        l
    };
    let got = psql(port, "SELECT k, s, window_start FROM v LIMIT 2").expect("SELECT");
    assert_eq!(sorted(got), ["1,4,0", "2,4,0"]);
    drop(s);
    let port = crate::free_port();
    let _s = start(&data, port, 2);
    psql(port, "INSERT INTO s VALUES (5, 31), (5, 42)").expect("INSERT");
    let got = psql(port, "SELECT k, s, window_start FROM v LIMIT 3").expect("SELECT");
    assert_eq!(sorted(got), ["1,4,0", "2,4,0", "3,6,20"]);
}
