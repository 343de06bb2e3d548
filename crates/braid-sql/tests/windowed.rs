//! A query that only filters and projects computes a window of all-int rows at a time
//! (`StreamFunction::process_rows`). It must make exactly what the operator tree makes
//! row by row (`process`): the same rows under the same keys, in the same order, and
//! the same faults, on windows with overflows, divisions by zero, nulls, rows left
//! out, and expressions the window path does not compute.

use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::function::{Emitter, RowFault, StreamFunction, StreamFunctionFactory};
use braid_sql::run::{LateRows, Layout, QueryFactory};
use std::path::Path;
use std::sync::Arc;

/// The stream function of `query`, and its output's arity.
fn query_fn(query: &str) -> (Box<dyn StreamFunction>, usize) {
    let text =
        format!("CREATE STREAM s (a BIGINT, b BIGINT, c BIGINT) WITH (source = 'stdin'); {query}");
    let script =
        braid_sql::compile_script(&text, Path::new("."), &Default::default()).expect("compiles");
    let logical = script.jobs[0].logical.clone().expect("a logical plan");
    let arity = logical.schema().arity();
    let f = QueryFactory::new(
        logical,
        Layout::single(),
        1,
        0,
        Arc::new(LateRows::default()),
    )
    .create(3, 8);
    (f, arity)
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A value: mostly small, sometimes at the ends of int64 (overflows), sometimes 0
/// (divisions by zero).
fn value(x: &mut u64) -> i64 {
    let r = next(x);
    match r % 16 {
        0 => i64::MAX,
        1 => i64::MIN,
        2 => 0,
        3 => 1 << 40,
        _ => (r >> 8) as i64 % 200 - 100,
    }
}

/// What a function made: the rows (keys and values) and the faults.
type Made = (Vec<(RowKey, String)>, Vec<(u64, &'static str, String)>);

fn made(out: &Batch, faults: &[RowFault]) -> Made {
    (
        (0..out.len())
            .map(|i| (out.key(i), format!("{:?}", out.row(i).to_scalars())))
            .collect(),
        faults
            .iter()
            .map(|f| (f.seq, f.operator, f.fault.to_string()))
            .collect(),
    )
}

const QUERIES: [&str; 8] = [
    // The peer benchmark's filter.
    "SELECT a, b * 2 AS w FROM s WHERE c % 7 = 0",
    // Filters only: the row passes whole.
    "SELECT * FROM s WHERE a > b AND NOT (c < 3) OR a = 0",
    // A projection only, with divisions by zero.
    "SELECT a + b AS x, a / c AS y, c FROM s",
    // Faults in the filter, and in its right operand when the left decides.
    "SELECT a * b AS p FROM s WHERE a % 3 <> 0 AND b / c > 1",
    "SELECT a - 9223372036854775807 AS d, b % c AS m FROM s WHERE a >= -1",
    // A literal column and a literal in a comparison.
    "SELECT 5 AS five, a FROM s WHERE b <= 0",
    // No window path for CASE: every window goes row by row.
    "SELECT CASE WHEN a > 0 THEN b ELSE c END AS z FROM s WHERE c <> 1",
    // Two filters (one on a subquery's output), then a projection.
    "SELECT a * 3 AS t FROM (SELECT a, b FROM s WHERE a < 50) WHERE b > -20",
];

#[test]
fn windows_make_what_rows_make() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut windows_compared = 0;
    for query in QUERIES {
        let (mut by_rows, arity) = query_fn(query);
        let (mut by_window, _) = query_fn(query);
        let mut seq = 0u64;
        let (mut rows_out, mut window_out) = (0, 0);
        for w in 0..120 {
            // Windows of 1 to 1,100 rows; every fifth with a null somewhere, every
            // third with some rows left out (for other partitions).
            let len = 1 + next(&mut x) % 1100;
            let mut batch = Batch::new(3);
            for i in 0..len {
                seq += 1 + next(&mut x) % 3;
                let key = RowKey { seq, lane: 0 };
                // Most windows without the extreme values, so the window path answers.
                let v = |x: &mut u64| match w % 2 {
                    0 => value(x),
                    _ => (next(x) >> 8) as i64 % 200 - 100,
                };
                let (a, b, c) = (v(&mut x), v(&mut x), v(&mut x));
                if w % 5 == 0 && i == len / 2 {
                    batch.push(key, &[Value::Int(a), Value::Null, Value::Int(c)]);
                } else {
                    batch.push_ints(key, &[a, b, c]);
                }
            }
            let rows: Vec<u32> = (0..len as u32)
                .filter(|_| w % 3 != 0 || !next(&mut x).is_multiple_of(4))
                .collect();
            let (mut a_out, mut a_faults) = (Batch::new(arity), Vec::new());
            let (mut b_out, mut b_faults) = (Batch::new(arity), Vec::new());
            {
                let mut e = Emitter::new(&mut a_out, 0, 3).with_faults(&mut a_faults);
                for &i in &rows {
                    e.restart(batch.key(i as usize).seq, 3);
                    by_rows.process(batch.row(i as usize), &mut e);
                }
            }
            {
                let mut e = Emitter::new(&mut b_out, 0, 3).with_faults(&mut b_faults);
                by_window.process_rows(&batch, &rows, &mut e);
            }
            let (want, got) = (made(&a_out, &a_faults), made(&b_out, &b_faults));
            assert_eq!(got, want, "{query}, window {w}");
            rows_out += want.0.len();
            window_out += got.0.len();
            windows_compared += 1;
        }
        assert_eq!(rows_out, window_out);
        assert!(rows_out > 1000, "{query}: only {rows_out} rows came out");
    }
    assert_eq!(windows_compared, 960);
}

/// A query's first stage (its partial aggregate), with its own late-row counter, over
/// `s (ts BIGINT NOT NULL, k BIGINT, v BIGINT)` in epochs of 100 with lateness 50.
fn first_stage(query: &str) -> (Box<dyn StreamFunction>, usize, Arc<LateRows>) {
    let text = format!(
        "CREATE STREAM s (ts BIGINT NOT NULL, k BIGINT, v BIGINT) WITH (source = 'stdin', \
         event_time = 'ts', epoch = 100, lateness = 50); {query}"
    );
    let script =
        braid_sql::compile_script(&text, Path::new("."), &Default::default()).expect("compiles");
    let stage = script.jobs[0].stages[0].0.clone();
    let arity = stage.schema().arity();
    let late = Arc::new(LateRows::default());
    let f = QueryFactory::new(stage, Layout::single(), 100, 50, late.clone()).create(3, 8);
    (f, arity, late)
}

const AGGREGATES: [&str; 6] = [
    "SELECT window_start, k, count(*) AS n, sum(v) AS s FROM s GROUP BY TUMBLE(ts, 100), k",
    "SELECT window_start, k, max(v) AS m, min(v) AS l FROM s GROUP BY HOP(ts, 100, 300), k",
    // An expression as key, an average, and a filter below.
    "SELECT window_start, k % 7 AS g, avg(v) AS a FROM s WHERE v > -50 \
     GROUP BY TUMBLE(ts, 200), k % 7",
    // Keys and arguments that fault in some rows (division by zero, overflow).
    "SELECT window_start, v / k AS q, sum(v * 4611686018427387904) AS s FROM s \
     GROUP BY HOP(ts, 50, 150), v / k",
    // No window path: a FILTER, and a session window.
    "SELECT window_start, k, count(*) FILTER (WHERE v > 0) AS n FROM s \
     GROUP BY TUMBLE(ts, 100), k",
    "SELECT window_start, k, count(*) AS n FROM s GROUP BY SESSION(ts, 30), k",
];

/// The partial aggregates of windows of rows (some late: event times reach 500 below
/// their epoch's start, the lateness is 50) make, at the end of every epoch and of the
/// input, what they make row by row; the same rows are refused as late.
#[test]
fn aggregates_by_window_make_what_rows_make() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for query in AGGREGATES {
        let (mut by_rows, arity, late_rows) = first_stage(query);
        let (mut by_window, _, late_window) = first_stage(query);
        let (mut a_out, mut a_faults) = (Batch::new(arity), Vec::new());
        let (mut b_out, mut b_faults) = (Batch::new(arity), Vec::new());
        let mut seq = 0u64;
        for epoch in 0..40u64 {
            for w in 0..1 + next(&mut x) % 3 {
                let len = 1 + next(&mut x) % 700;
                let mut batch = Batch::new(3);
                for _ in 0..len {
                    seq += 1;
                    let ts = (epoch * 100) as i64 - 500 + (next(&mut x) % 600) as i64;
                    let k = (next(&mut x) % 12) as i64 - 2;
                    let v = match next(&mut x) % 50 {
                        0 => i64::MAX,
                        _ => (next(&mut x) % 200) as i64 - 100,
                    };
                    batch.push_ints(RowKey { seq, lane: 0 }, &[ts, k, v]);
                }
                let rows: Vec<u32> = (0..len as u32)
                    .filter(|_| w == 0 || !next(&mut x).is_multiple_of(3))
                    .collect();
                let mut e = Emitter::new(&mut a_out, 0, 3)
                    .at_epoch(epoch)
                    .with_faults(&mut a_faults);
                for &i in &rows {
                    e.restart(batch.key(i as usize).seq, 3);
                    by_rows.process(batch.row(i as usize), &mut e);
                }
                let mut e = Emitter::new(&mut b_out, 0, 3)
                    .at_epoch(epoch)
                    .with_faults(&mut b_faults);
                by_window.process_rows(&batch, &rows, &mut e);
            }
            for (f, out, faults) in [
                (&mut by_rows, &mut a_out, &mut a_faults),
                (&mut by_window, &mut b_out, &mut b_faults),
            ] {
                let mut e = Emitter::new(out, RowKey::END_OF_EPOCH, 3)
                    .at_epoch(epoch)
                    .with_faults(faults);
                f.end_of_epoch(epoch, &mut e);
            }
        }
        for (f, out, faults) in [
            (&mut by_rows, &mut a_out, &mut a_faults),
            (&mut by_window, &mut b_out, &mut b_faults),
        ] {
            let mut e = Emitter::new(out, RowKey::FINISH, 3)
                .at_epoch(u64::MAX)
                .with_faults(faults);
            f.finish(&mut e);
        }
        let (want, got) = (made(&a_out, &a_faults), made(&b_out, &b_faults));
        assert!(want.0.len() > 100, "{query}: only {} rows", want.0.len());
        assert_eq!(got, want, "{query}");
        let late = |l: &LateRows| l.count.load(std::sync::atomic::Ordering::Relaxed);
        assert!(late(&late_rows) > 100, "{query}: {} late", late(&late_rows));
        assert_eq!(late(&late_window), late(&late_rows), "{query}: late rows");
    }
}
