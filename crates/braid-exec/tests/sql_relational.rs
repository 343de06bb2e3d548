//! Common SQL written another way gives exactly the rows of the form Braid had before:
//! CTEs and views as the subqueries they name, `SELECT DISTINCT` as the GROUP BY it
//! means, comma joins as `JOIN ... ON`. Each pair runs serially (`SET parallel = 'off'`)
//! and over 8 partitions on 1, 2 and 4 workers (transparent merge), and every run of
//! the new form must equal the serial run of the old form, row for row and in order.

use crate::sql::{scratch, write_calls, write_texts, Call};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_sql::compile_script;
use std::path::Path;

const HEADER: &str = "
CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', event_time = 'start', epoch = 10, window = 16, lateness = 20);
CREATE STREAM texts (sender BIGINT, receiver BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'texts.csv', event_time = 'start', epoch = 10, window = 16, lateness = 20);
CREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');
CREATE SINK out WITH (sink = 'collect');
";

/// Calls with repeated callers and callees, now and then out of order.
fn calls(n: i64, mul: i64) -> Vec<Call> {
    let mut x = 7 * mul;
    let mut t = 0;
    (0..n)
        .map(|i| {
            x = (x * 1103515245 + 12345) % 2147483648;
            t += x % 5;
            let start = if i % 17 == 0 { (t - 30).max(0) } else { t };
            (x % 9, (x / 9) % 6, start, (x / 54) % 400)
        })
        .collect()
}

/// A directory with the calls, texts and watch data.
fn data() -> crate::sql::Dir {
    let dir = scratch("relational");
    write_calls(&dir.0.join("calls.csv"), &calls(400, 1));
    write_texts(&dir.0.join("texts.csv"), &calls(300, 3));
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n1,3\n2,5\n4,1\n7,2\n").expect("watch");
    dir
}

/// The rows `body` (a script's last statements, the query writing to `out`) writes,
/// with `settings`, on `workers` workers.
fn rows(dir: &Path, settings: &str, body: &str, workers: usize) -> Vec<Vec<Scalar>> {
    let text = format!("{HEADER}{settings}\n{body};");
    let s = compile_script(&text, dir, &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("compile {body}: {e}"));
    let job = s.jobs.last().expect("a query");
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    let report = run(&job.plan, &s.registry, &cfg).unwrap_or_else(|e| panic!("run {body}: {e}"));
    report.collected.into_iter().map(|r| r.values).collect()
}

/// `new` gives the rows of `old` (its serial run, not empty) serially and on 1, 2 and 4
/// workers.
fn same_rows(new: &str, old: &str) {
    let dir = data();
    let serial = "SET parallel = 'off';";
    let want = rows(&dir.0, serial, old, 1);
    assert!(!want.is_empty(), "{old} gives no rows: a vacuous test");
    assert_eq!(rows(&dir.0, serial, new, 1), want, "serial: {new}");
    for workers in [1, 2, 4] {
        let got = rows(&dir.0, "SET partitions = 8;", new, workers);
        assert_eq!(got, want, "{workers} workers: {new}");
    }
}

#[test]
fn a_cte_is_the_subquery_it_names() {
    same_rows(
        "INSERT INTO out WITH long AS (SELECT caller, start, dur FROM calls WHERE dur > 100) \
         SELECT window_end, caller, count(*) AS n FROM long GROUP BY TUMBLE(start, 50), caller",
        "INSERT INTO out SELECT window_end, caller, count(*) AS n FROM (SELECT caller, start, dur FROM calls WHERE dur > 100) AS long GROUP BY TUMBLE(start, 50), caller",
    );
}

#[test]
fn ctes_see_the_ones_before_them_and_join() {
    same_rows(
        "INSERT INTO out WITH c AS (SELECT caller, start FROM calls WHERE dur > 50), \
         t AS (SELECT sender, start AS ts FROM texts), \
         ct AS (SELECT c.caller, c.start, t.ts FROM c JOIN t ON c.caller = t.sender AND t.ts BETWEEN c.start - 5 AND c.start + 5) \
         SELECT window_end, caller, count(*) AS n FROM ct GROUP BY TUMBLE(start, 100), caller",
        "INSERT INTO out SELECT window_end, caller, count(*) AS n FROM \
         (SELECT c.caller, c.start, t.ts FROM (SELECT caller, start FROM calls WHERE dur > 50) AS c \
          JOIN (SELECT sender, start AS ts FROM texts) AS t ON c.caller = t.sender AND t.ts BETWEEN c.start - 5 AND c.start + 5) AS ct \
         GROUP BY TUMBLE(start, 100), caller",
    );
}

/// A CTE read twice is planned twice: a self-join of `calls`.
#[test]
fn a_cte_read_twice_is_a_self_join() {
    same_rows(
        "INSERT INTO out WITH c AS (SELECT caller, callee, start FROM calls) \
         SELECT a.caller, a.start, b.callee FROM c AS a JOIN c AS b ON a.caller = b.callee AND b.start BETWEEN a.start - 3 AND a.start + 3",
        "INSERT INTO out SELECT a.caller, a.start, b.callee FROM (SELECT caller, callee, start FROM calls) AS a \
         JOIN (SELECT caller, callee, start FROM calls) AS b ON a.caller = b.callee AND b.start BETWEEN a.start - 3 AND a.start + 3",
    );
}

/// A view over a view, joined with a table, gives the rows of the nested subqueries.
#[test]
fn a_view_over_a_view_is_the_nested_subquery() {
    same_rows(
        "CREATE VIEW busy AS SELECT caller, start, dur FROM calls WHERE dur > 40;
         CREATE VIEW watched AS SELECT b.caller, b.start, w.risk FROM busy AS b JOIN watch AS w ON b.caller = w.number;
         INSERT INTO out SELECT window_start, risk, count(*) AS n FROM watched GROUP BY TUMBLE(start, 60), risk",
        "INSERT INTO out SELECT window_start, risk, count(*) AS n FROM \
         (SELECT b.caller, b.start, w.risk FROM (SELECT caller, start, dur FROM calls WHERE dur > 40) AS b \
          JOIN watch AS w ON b.caller = w.number) AS watched GROUP BY TUMBLE(start, 60), risk",
    );
}

/// A view read twice, joined with itself by a time bound.
#[test]
fn a_view_read_twice_is_a_self_join() {
    same_rows(
        "CREATE VIEW t AS SELECT sender, start FROM texts WHERE dur < 300;
         INSERT INTO out SELECT a.sender, a.start, b.start AS b_start FROM t AS a JOIN t AS b ON a.sender = b.sender AND b.start BETWEEN a.start + 1 AND a.start + 20",
        "INSERT INTO out SELECT a.sender, a.start, b.start AS b_start FROM (SELECT sender, start FROM texts WHERE dur < 300) AS a \
         JOIN (SELECT sender, start FROM texts WHERE dur < 300) AS b ON a.sender = b.sender AND b.start BETWEEN a.start + 1 AND a.start + 20",
    );
}

#[test]
fn select_distinct_is_group_by_its_columns() {
    same_rows(
        "INSERT INTO out SELECT DISTINCT caller, callee FROM calls WHERE dur > 100",
        "INSERT INTO out SELECT caller, callee FROM calls WHERE dur > 100 GROUP BY caller, callee",
    );
    same_rows(
        "INSERT INTO out SELECT DISTINCT caller % 4 AS g, callee FROM calls",
        "INSERT INTO out SELECT caller % 4 AS g, callee FROM calls GROUP BY caller % 4, callee",
    );
}

/// The distinct (caller, callee) pairs, computed by a loop, are the rows.
#[test]
fn select_distinct_gives_each_distinct_row_once() {
    let dir = data();
    let want: std::collections::BTreeSet<Vec<Scalar>> = calls(400, 1)
        .iter()
        .filter(|c| c.3 > 100)
        .map(|c| vec![Scalar::Int(c.0), Scalar::Int(c.1)])
        .collect();
    let q = "INSERT INTO out SELECT DISTINCT caller, callee FROM calls WHERE dur > 100";
    for workers in [1, 2, 4] {
        let got = rows(&dir.0, "SET partitions = 8;", q, workers);
        assert_eq!(got.len(), want.len(), "{workers} workers: a row twice");
        let got: std::collections::BTreeSet<_> = got.into_iter().collect();
        assert_eq!(got, want, "{workers} workers");
    }
}

/// DISTINCT over a window's groups, all keys and the window selected: the rows as they
/// are; without a key or the window: the distinct rows of the aggregate at the end.
#[test]
fn select_distinct_over_an_aggregate_is_distinct_over_its_rows() {
    same_rows(
        "INSERT INTO out SELECT DISTINCT window_start, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller",
        "INSERT INTO out SELECT window_start, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller",
    );
    same_rows(
        "INSERT INTO out SELECT DISTINCT caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller",
        "INSERT INTO out SELECT caller, n FROM (SELECT caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller) AS a GROUP BY caller, n",
    );
}

#[test]
fn a_comma_join_with_a_table_is_the_lookup_join() {
    same_rows(
        "INSERT INTO out SELECT c.caller, c.dur, w.risk FROM calls c, watch w WHERE c.caller = w.number AND c.dur > 50 AND w.risk < c.dur % 7",
        "INSERT INTO out SELECT c.caller, c.dur, w.risk FROM calls c JOIN watch w ON c.caller = w.number AND w.risk < c.dur % 7 WHERE c.dur > 50",
    );
}

#[test]
fn a_comma_join_of_streams_is_the_interval_join() {
    same_rows(
        "INSERT INTO out SELECT c.caller, c.start, t.start AS ts, w.risk FROM calls AS c, texts AS t, watch AS w \
         WHERE c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 10 AND w.number = t.sender AND c.dur > 20",
        "INSERT INTO out SELECT c.caller, c.start, t.start AS ts, w.risk FROM calls AS c \
         JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 10 \
         JOIN watch AS w ON w.number = t.sender WHERE c.dur > 20",
    );
}

/// What a csv sink with `options` writes for `query`, on `workers` workers.
fn csv_written(dir: &Path, options: &str, query: &str, workers: usize) -> String {
    let path = dir.join("f.csv");
    let _ = std::fs::remove_file(&path);
    let body = format!(
        "CREATE SINK f WITH (sink = 'csv', path = 'f.csv'{options});\nINSERT INTO f {query}"
    );
    let text = format!("{HEADER}SET partitions = 8;\n{body};");
    let s = compile_script(&text, dir, &Registry::with_builtins()).expect("compiles");
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    run(&s.jobs[0].plan, &s.registry, &cfg).expect("runs");
    std::fs::read_to_string(&path).expect("the sink's file")
}

/// `header = true` writes the column names first, then exactly the rows written without
/// it; the default writes no header.
#[test]
fn a_sink_with_a_header_writes_the_column_names_first() {
    let dir = data();
    let q = "SELECT window_end, caller AS who, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller";
    let plain = csv_written(&dir.0, "", q, 1);
    assert!(plain.lines().count() > 10, "{plain}");
    assert!(!plain.starts_with("window_end"), "{plain}");
    for workers in [1, 2, 4] {
        let with = csv_written(&dir.0, ", header = true", q, workers);
        assert_eq!(
            with,
            format!("window_end,who,n\n{plain}"),
            "{workers} workers"
        );
    }
    let stamped = csv_written(&dir.0, ", header = 'true', stamp_emit = true", q, 2);
    assert_eq!(stamped.lines().next(), Some("window_end,who,n,emit_ms"));
    assert_eq!(stamped.lines().count(), plain.lines().count() + 1);
}
