//! A batched scalar function (one call for a batch of rows, as Python functions are
//! made: `ScalarUdf::batched`) gives exactly what the same function called row by row
//! gives: the same rows in the same order, the same faults, on 1, 2 and 4 workers; a
//! call in a CASE arm no row takes is made ahead but its fault reaches no row.

use crate::sql::{scratch, write_calls, Call};
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_plan::batch::{Scalar, Value};
use braid_plan::error::{Error, Result};
use braid_plan::expr::ScalarUdf;
use braid_plan::function::Registry;
use braid_plan::types::DataType;
use braid_sql::compile_script;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// `mix(a, b)` = `a * 3 + b`, a fault when `a % 97 = 13`; batched or not; counts how
/// it was called.
#[derive(Default)]
struct Mix {
    batched: bool,
    one: AtomicU64,
    batches: AtomicU64,
    batch_rows: AtomicU64,
}

fn mix(args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
    match (args[0].as_int(), args[1].as_int()) {
        (Some(a), _) if a % 97 == 13 => Err(format!("unlucky {a}")),
        (Some(a), Some(b)) => Ok(Scalar::Int(a * 3 + b)),
        _ => Ok(Scalar::Null),
    }
}

impl ScalarUdf for Mix {
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [DataType::Int64, DataType::Int64] => Ok(DataType::Int64),
            _ => Err(Error::Plan(format!(
                "mix takes (int64, int64), found {args:?}"
            ))),
        }
    }
    fn call(&self, args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
        self.one.fetch_add(1, Relaxed);
        mix(args)
    }
    fn batched(&self) -> bool {
        self.batched
    }
    fn call_batch(
        &self,
        args: &[Value<'_>],
        rows: usize,
    ) -> Vec<std::result::Result<Scalar, String>> {
        self.batches.fetch_add(1, Relaxed);
        self.batch_rows.fetch_add(rows as u64, Relaxed);
        args.chunks(2).map(mix).collect()
    }
}

const HEADER: &str = "
CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', event_time = 'start', epoch = 10, lateness = 20);
CREATE SINK out WITH (sink = 'collect');
SET partitions = 4;
";

const QUERIES: [(&str, &str); 3] = [
    (
        "projection, CASE and filter",
        "INSERT INTO out SELECT caller, start, mix(dur, caller) AS m, \
         CASE WHEN dur < 0 THEN mix(13, 0) ELSE mix(callee, 1) END AS c \
         FROM calls WHERE mix(dur, start) % 3 <> 0;",
    ),
    (
        "aggregate",
        "INSERT INTO out SELECT window_end, caller, count(*) AS n, sum(mix(dur, start)) AS s, \
         count(*) FILTER (WHERE mix(callee, 0) % 2 = 0) AS e \
         FROM calls GROUP BY TUMBLE(start, 16), caller;",
    ),
    (
        "group key",
        "INSERT INTO out SELECT mix(caller, 0) AS k, count(*) AS n, max(mix(dur, 1)) AS m \
         FROM calls GROUP BY mix(caller, 0);",
    ),
];

fn run_with(dir: &std::path::Path, query: &str, f: Arc<Mix>, workers: usize) -> RunReport {
    let mut reg = Registry::with_builtins();
    reg.add_scalar("mix", f);
    let s = compile_script(&format!("{HEADER}{query}"), dir, &reg).expect("compiles");
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    run(&s.jobs[0].plan, &s.registry, &cfg).expect("run")
}

fn rows(r: &RunReport) -> Vec<Vec<Scalar>> {
    r.collected.iter().map(|o| o.values.clone()).collect()
}

fn faults(r: &RunReport) -> u64 {
    r.faults.iter().map(|f| f.count).sum()
}

#[test]
fn sql_batched_udf_equals_row_by_row() {
    let calls: Vec<Call> = (0..3000)
        .map(|i| (i % 13, (i * 7) % 101, i / 3, (i * 37) % 600))
        .collect();
    let dir = scratch("batched-udf");
    write_calls(&dir.0.join("calls.csv"), &calls);
    for (name, query) in QUERIES {
        let serial = Arc::new(Mix::default());
        let want = run_with(&dir.0, query, serial.clone(), 1);
        assert!(want.collected.len() > 10, "{name}: rows to compare");
        assert_eq!(serial.batches.load(Relaxed), 0, "{name}");
        for workers in [1, 2, 4] {
            let f = Arc::new(Mix {
                batched: true,
                ..Mix::default()
            });
            let got = run_with(&dir.0, query, f.clone(), workers);
            assert_eq!(rows(&got), rows(&want), "{name}, {workers} workers");
            assert_eq!(faults(&got), faults(&want), "{name}, {workers} workers");
            // Calls were made a batch at a time, many rows each.
            let (batches, batch_rows) = (f.batches.load(Relaxed), f.batch_rows.load(Relaxed));
            assert!(batches > 0, "{name}, {workers} workers: no batch");
            assert!(
                batch_rows >= 4 * batches && batch_rows >= calls.len() as u64,
                "{name}, {workers} workers: {batch_rows} rows in {batches} batches"
            );
            // Every call the rows reached took its prefetched result.
            assert_eq!(f.one.load(Relaxed), 0, "{name}, {workers} workers");
        }
    }
    // The first query's faults are its own rows' (a == 13 mod 97 in the filter or the
    // projection), never the CASE arm's `mix(13, 0)`, which no row takes.
    let batched = Arc::new(Mix {
        batched: true,
        ..Mix::default()
    });
    let r = run_with(&dir.0, QUERIES[0].1, batched, 2);
    let texts: Vec<String> = r
        .faults
        .iter()
        .flat_map(|f| f.first.iter().map(|x| x.to_string()))
        .collect();
    assert!(faults(&r) > 0, "the data has unlucky rows");
    assert!(texts.iter().all(|t| !t.contains("mix(13, 0)")), "{texts:?}");
}
