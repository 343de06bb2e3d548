//! Time as SQL writes it: INTERVAL lengths and window table functions give exactly the
//! rows of the integer GROUP BY TUMBLE/HOP forms they spell, on 1, 2 and 4 workers and
//! serially; and a TUMBLE in INTERVALs matches a loop.

use crate::sql::{calls_strategy, scratch, write_calls, write_texts, Call};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_sql::{compile_script, explain_stages, Script};
use proptest::prelude::*;
use std::path::Path;

/// Event time in seconds (calls, texts) and in milliseconds (calls_ms: the same rows,
/// times in ms).
const HEADER: &str = "
CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', event_time = 'start', time_unit = 's', epoch = '10 seconds',
        window = 16, lateness = 20);
CREATE STREAM texts (sender BIGINT, receiver BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'texts.csv', event_time = 'start', time_unit = 's', epoch = 10, window = 16,
        lateness = '20 s');
CREATE STREAM calls_ms (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls_ms.csv', event_time = 'start', time_unit = 'ms', epoch = 10000,
        window = 16, lateness = 20000);
CREATE SINK out WITH (sink = 'collect');
";

/// Pairs of queries that must give the same rows: a form with INTERVAL or a window
/// table function, and the integer GROUP BY form it spells.
const PAIRS: &[(&str, &str, &str)] = &[
    (
        "tumble_tvf_flink",
        "SELECT window_start, window_end, caller, count(*) AS n, sum(dur) AS d FROM TABLE(TUMBLE(TABLE calls, DESCRIPTOR(start), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, caller",
        "SELECT window_start, window_end, caller, count(*) AS n, sum(dur) AS d FROM calls GROUP BY TUMBLE(start, 60), caller",
    ),
    (
        "tumble_tvf_risingwave",
        "SELECT window_end, caller % 3 AS k, max(dur) AS m FROM TUMBLE(calls, start, INTERVAL '50' SECOND) WHERE dur > 10 GROUP BY window_start, window_end, caller % 3",
        "SELECT window_end, caller % 3 AS k, max(dur) AS m FROM calls WHERE dur > 10 GROUP BY TUMBLE(start, 50), caller % 3",
    ),
    (
        "hop_tvf_flink",
        "SELECT window_start, window_end, caller % 4 AS k, count(*) AS n, count(DISTINCT callee) AS peers FROM TABLE(HOP(TABLE calls, DESCRIPTOR(start), INTERVAL '6' SECOND, INTERVAL '45 seconds')) GROUP BY window_start, window_end, caller % 4",
        "SELECT window_start, window_end, caller % 4 AS k, count(*) AS n, count(DISTINCT callee) AS peers FROM calls GROUP BY HOP(start, 6, 45), caller % 4",
    ),
    (
        "hop_tvf_risingwave_global",
        "SELECT window_end, count(*) AS n FROM HOP(calls, start, INTERVAL '20' SECOND, INTERVAL '1' MINUTE) GROUP BY window_start, window_end",
        "SELECT window_end, count(*) AS n FROM calls GROUP BY HOP(start, 20, 60)",
    ),
    (
        "interval_in_group_by_ms",
        "SELECT window_start, caller, count(*) AS n FROM calls_ms GROUP BY TUMBLE(start, INTERVAL '50' SECOND), caller",
        "SELECT window_start, caller, count(*) AS n FROM calls_ms GROUP BY TUMBLE(start, 50000), caller",
    ),
    (
        "interval_join",
        "SELECT c.caller, c.start, t.start AS tstart FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - INTERVAL '5' SECOND AND c.start + INTERVAL '10' SECOND",
        "SELECT c.caller, c.start, t.start AS tstart FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 10",
    ),
    (
        "interval_arithmetic",
        "SELECT caller, start + INTERVAL '1' MINUTE AS later FROM calls WHERE dur > INTERVAL '0.1' MINUTE",
        "SELECT caller, start + 60 AS later FROM calls WHERE dur > 6",
    ),
];

fn script(dir: &Path, settings: &str, query: &str) -> Script {
    let text = format!("{HEADER}{settings}\nINSERT INTO out {query};");
    compile_script(&text, dir, &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("compile {query}: {e}"))
}

fn rows(s: &Script, workers: usize) -> Vec<Vec<Scalar>> {
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    let report = run(&s.jobs[0].plan, &s.registry, &cfg).expect("run");
    report.collected.iter().map(|r| r.values.clone()).collect()
}

fn write_inputs(dir: &Path, calls: &[Call], texts: &[Call]) {
    write_calls(&dir.join("calls.csv"), calls);
    write_texts(&dir.join("texts.csv"), texts);
    let ms: Vec<Call> = calls
        .iter()
        .map(|&(a, b, t, d)| (a, b, t * 1000, d))
        .collect();
    write_calls(&dir.join("calls_ms.csv"), &ms);
}

/// Each pair plans to the same stages and gives the same row sequence, serially and on
/// 1, 2 and 4 workers over 8 partitions.
fn check(calls: &[Call], texts: &[Call]) -> Result<(), TestCaseError> {
    let dir = scratch("time");
    write_inputs(&dir.0, calls, texts);
    for (name, spelled, plain) in PAIRS {
        for settings in ["SET parallel = 'off';", "SET partitions = 8;"] {
            let a = script(&dir.0, settings, spelled);
            let b = script(&dir.0, settings, plain);
            prop_assert_eq!(
                explain_stages(&a.jobs[0]),
                explain_stages(&b.jobs[0]),
                "{} plans",
                name
            );
            let want = rows(&b, 1);
            for workers in [1, 2, 4] {
                prop_assert_eq!(&rows(&a, workers), &want, "{} on {} workers", name, workers);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_time_forms_equal_integer_forms(calls in calls_strategy(), texts in calls_strategy()) {
        check(&calls, &texts)?;
    }
}

/// A TUMBLE of one minute over a milliseconds stream, written as a window table
/// function, counts what a loop counts per caller and minute.
#[test]
fn sql_interval_tumble_matches_a_loop() {
    let calls: Vec<Call> = (0..400)
        .map(|i| ((i * 7) % 5, i % 11, i * 997 + (i % 4) * 13, (i * 37) % 600))
        .collect();
    let dir = scratch("time-loop");
    write_inputs(&dir.0, &calls, &[]);
    // calls_ms holds start * 1000: write the ms times directly instead.
    write_calls(&dir.0.join("calls_ms.csv"), &calls);
    let s = script(
        &dir.0,
        "SET partitions = 4;",
        "SELECT window_start, caller, count(*) AS n FROM TABLE(TUMBLE(TABLE calls_ms, DESCRIPTOR(start), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, caller",
    );
    let mut got: Vec<Vec<i64>> = rows(&s, 2)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    Scalar::Int(i) => i,
                    other => panic!("int expected, got {other:?}"),
                })
                .collect()
        })
        .collect();
    got.sort();
    let mut want: std::collections::BTreeMap<(i64, i64), i64> = Default::default();
    for &(caller, _, start, _) in &calls {
        *want.entry((start - start % 60_000, caller)).or_default() += 1;
    }
    let want: Vec<Vec<i64>> = want.into_iter().map(|((w, c), n)| vec![w, c, n]).collect();
    assert_eq!(got, want);
}
