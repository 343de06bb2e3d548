//! TIMESTAMP, TIMESTAMPTZ and DATE columns: CSV text in, ISO text out; windows and
//! interval joins over a timestamp event time give exactly the rows of the same query
//! over the same instants as BIGINT microseconds (on 1, 2 and 4 workers); a malformed
//! timestamp is a rejected record naming its line, column and the expected format.

use crate::sql::{calls_strategy, scratch, Call};
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_sql::{compile_script, Script};
use proptest::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// 2026-11-24 00:00:00 UTC in microseconds (a second is 1_000_000).
const BASE: i64 = 1_795_478_400_000_000;

/// The same calls twice: `ts_calls` with a TIMESTAMP event time, `us_calls` with the
/// instants as BIGINT microseconds.
const HEADER: &str = "
CREATE STREAM ts_calls (caller BIGINT, callee BIGINT, start TIMESTAMP(6), dur BIGINT,
  WATERMARK FOR start AS start - INTERVAL '20' SECOND)
  WITH (path = 'ts.csv', header = false, epoch = '10 s', window = 16);
CREATE STREAM us_calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'us.csv', header = false, event_time = 'start', time_unit = 'us', epoch = 10000000,
        window = 16, lateness = 20000000);
CREATE STREAM ts_texts (sender BIGINT, start TIMESTAMP)
  WITH (path = 'ts_texts.csv', header = false, event_time = 'start', epoch = '10 s', lateness = '20 s');
CREATE STREAM us_texts (sender BIGINT, start BIGINT)
  WITH (path = 'us_texts.csv', header = false, event_time = 'start', time_unit = 'us', epoch = 10000000,
        lateness = 20000000);
CREATE SINK out WITH (sink = 'collect');
";

/// Queries over the timestamp streams, and the same over the microsecond ones.
const PAIRS: &[(&str, &str, &str)] = &[
    (
        "tumble",
        "SELECT window_start, window_end, caller, count(*) AS n, max(start) AS last FROM TABLE(TUMBLE(TABLE ts_calls, DESCRIPTOR(start), INTERVAL '30' SECOND)) GROUP BY window_start, window_end, caller",
        "SELECT window_start, window_end, caller, count(*) AS n, max(start) AS last FROM us_calls GROUP BY TUMBLE(start, 30000000), caller",
    ),
    (
        "hop",
        "SELECT window_end, caller % 3 AS k, sum(dur) AS d FROM ts_calls GROUP BY HOP(start, INTERVAL '5' SECOND, INTERVAL '20' SECOND), caller % 3",
        "SELECT window_end, caller % 3 AS k, sum(dur) AS d FROM us_calls GROUP BY HOP(start, 5000000, 20000000), caller % 3",
    ),
    (
        "interval_join",
        "SELECT c.caller, c.start, t.start AS ts FROM ts_calls AS c JOIN ts_texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - INTERVAL '5' SECOND AND c.start + INTERVAL '10' SECOND",
        "SELECT c.caller, c.start, t.start AS ts FROM us_calls AS c JOIN us_texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5000000 AND c.start + 10000000",
    ),
    (
        "filter",
        "SELECT caller, start + INTERVAL '1' MINUTE AS later FROM ts_calls WHERE start >= TIMESTAMP '2026-11-24 00:01:00'",
        "SELECT caller, start + 60000000 AS later FROM us_calls WHERE start >= 1795478460000000",
    ),
];

fn script(dir: &Path, settings: &str, query: &str) -> Script {
    let text = format!("{HEADER}{settings}\nINSERT INTO out {query};");
    compile_script(&text, dir, &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("compile {query}: {e}"))
}

fn report(s: &Script, workers: usize) -> RunReport {
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    run(&s.jobs[0].plan, &s.registry, &cfg).expect("run")
}

fn rows(s: &Script, workers: usize) -> Vec<Vec<Scalar>> {
    let r = report(s, workers);
    r.collected.iter().map(|r| r.values.clone()).collect()
}

/// Seconds since BASE as text, written independently of the code under test.
fn stamp(seconds: i64) -> String {
    let (d, s) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}",
        24 + d,
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

fn write_inputs(dir: &Path, calls: &[Call]) {
    let (mut ts, mut us, mut tt, mut ut) =
        (String::new(), String::new(), String::new(), String::new());
    for (i, &(a, b, t, d)) in calls.iter().enumerate() {
        writeln!(ts, "{a},{b},{},{d}", stamp(t)).unwrap();
        writeln!(us, "{a},{b},{},{d}", BASE + t * 1_000_000).unwrap();
        let t2 = t + (i as i64 % 7) - 3;
        writeln!(tt, "{b},{}", stamp(t2).replace('T', " ")).unwrap();
        writeln!(ut, "{b},{}", BASE + t2 * 1_000_000).unwrap();
    }
    for (name, text) in [
        ("ts.csv", ts),
        ("us.csv", us),
        ("ts_texts.csv", tt),
        ("us_texts.csv", ut),
    ] {
        std::fs::write(dir.join(name), text).expect("write");
    }
}

fn check(calls: &[Call]) -> Result<(), TestCaseError> {
    let dir = scratch("timestamp");
    write_inputs(&dir.0, calls);
    for (name, stamped, plain) in PAIRS {
        let a = script(&dir.0, "SET partitions = 8;", stamped);
        let b = script(&dir.0, "SET parallel = 'off';", plain);
        let want = rows(&b, 1);
        for workers in [1, 2, 4] {
            prop_assert_eq!(&rows(&a, workers), &want, "{} on {} workers", name, workers);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_timestamps_equal_microseconds(calls in calls_strategy()) {
        check(&calls)?;
    }
}

/// Timestamps, instants and dates in a CSV file come out of a CSV sink as ISO text.
#[test]
fn sql_timestamp_csv_round_trip() {
    let dir = scratch("ts-trip");
    std::fs::write(
        dir.0.join("in.csv"),
        "2026-11-24 10:15:00,2026-11-24T10:15:00.123Z,2026-11-24\n\
         1969-12-31T23:59:59.5,2026-11-24T11:15:00+01:00,1970-01-01\n\
         2026-02-28 00:00:00.000001,2026-11-24 10:15:00,2000-02-29\n",
    )
    .expect("input");
    let text =
        "CREATE STREAM s (a TIMESTAMP, b TIMESTAMP WITH TIME ZONE, c DATE) WITH (path = 'in.csv', header = false);
CREATE SINK f WITH (sink = 'csv', path = 'out.csv');
INSERT INTO f SELECT a, b, c, CAST(a AS BIGINT) AS us, CAST(c AS BIGINT) AS days FROM s;";
    let s = compile_script(text, &dir.0, &Registry::with_builtins()).expect("compile");
    report(&s, 2);
    let out = std::fs::read_to_string(dir.0.join("out.csv")).expect("output");
    assert_eq!(
        out,
        "2026-11-24 10:15:00,2026-11-24T10:15:00.123Z,2026-11-24,1795515300000000,20781\n\
         1969-12-31 23:59:59.5,2026-11-24T10:15:00Z,1970-01-01,-500000,0\n\
         2026-02-28 00:00:00.000001,2026-11-24T10:15:00Z,2000-02-29,1772236800000001,11016\n"
    );
}

/// A malformed timestamp or date is a rejected record, with line, column and format.
#[test]
fn sql_malformed_timestamps_are_reported() {
    let dir = scratch("ts-bad");
    std::fs::write(
        dir.0.join("in.csv"),
        "1,2026-11-24 10:15:00,2026-11-24\n\
         2,2026-11-24 25:00:00,2026-11-24\n\
         3,2026-11-24 10:16:00,2026-02-30\n\
         4,yesterday,2026-11-24\n\
         5,2026-11-24 10:17:00,2026-11-24\n",
    )
    .expect("input");
    let text =
        "CREATE STREAM s (n BIGINT, t TIMESTAMP, d DATE) WITH (path = 'in.csv', header = false, event_time = 't');
SELECT n FROM s;";
    let s = compile_script(text, &dir.0, &Registry::with_builtins()).expect("compile");
    let r = report(&s, 1);
    assert_eq!(r.rows_in, 2);
    let shown = r.rejects[0].to_string();
    for part in [
        "3 malformed record(s)",
        "line 2, column 3: field `t`: \"2026-11-24 25:00:00\" is not a timestamp, YYYY-MM-DD HH:MM:SS",
        "line 3, column 23: field `d`: \"2026-02-30\" is not a date, YYYY-MM-DD",
        "line 4, column 3: field `t`: \"yesterday\" is not a timestamp",
    ] {
        assert!(shown.contains(part), "{part:?} in:\n{shown}");
    }
}
