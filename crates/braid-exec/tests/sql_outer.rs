//! Outer joins against plain loops: LEFT, RIGHT and FULL interval joins (with and
//! without equality keys, with a residual condition) and a LEFT lookup, over random
//! inputs with no late row, run serially and parallelized on 1, 2 and 4 workers with
//! both merges. The loops are SQL's outer join by definition: every pair meeting the
//! condition, then each row of a preserved side that met none with nulls for the other
//! side. Late rows of a preserved side are checked against the reference in
//! `sql_reference.rs` (`left_join`, `full_join` in `LATE_QUERIES`).

use crate::sql::{scratch, script, write_calls, write_texts, Call};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use proptest::prelude::*;
use std::path::Path;

/// Rows in time order (nothing is late: times only grow, within a stream).
pub(crate) fn in_order() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec((0i64..6, 0i64..4, 0i64..600, 0i64..4), 0..80).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(k, step, dur, callee)| {
                t += step;
                (k, callee, t, dur)
            })
            .collect()
    })
}

/// The rows of `query` run serially and on 1, 2, 4 workers (8 partitions, both
/// merges), each sorted; all must be equal, and the serial one is returned.
pub(crate) fn runs(dir: &Path, query: &str) -> Vec<Vec<Scalar>> {
    let rows = |settings: &str, workers: usize| {
        let s = script(dir, settings, query);
        let cfg = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let report = run(&s.jobs[0].plan, &s.registry, &cfg).expect("run");
        let mut got: Vec<Vec<Scalar>> = report.collected.iter().map(|r| r.values.clone()).collect();
        got.sort();
        got
    };
    let serial = rows("SET parallel = 'off';", 1);
    for merge in ["transparent", "best_effort"] {
        for workers in [1, 2, 4] {
            let set = format!("SET partitions = 8; SET merge = '{merge}';");
            assert_eq!(
                rows(&set, workers),
                serial,
                "{query}: {merge}, {workers} workers"
            );
        }
    }
    serial
}

fn int(x: i64) -> Scalar {
    Scalar::Int(x)
}

/// SQL's outer join of `calls` and `texts` by a loop: `keeps` (left, right) says which
/// sides are preserved; `meets(c, t)` is the ON condition; a row is `(caller, start,
/// dur)` of each side.
fn outer_loop(
    calls: &[Call],
    texts: &[Call],
    keeps: (bool, bool),
    meets: impl Fn(&Call, &Call) -> bool,
) -> Vec<Vec<Scalar>> {
    let side = |r: Option<&Call>| match r {
        Some(&(k, _, t, d)) => vec![int(k), int(t), int(d)],
        None => vec![Scalar::Null; 3],
    };
    let mut want = Vec::new();
    let mut right_met = vec![false; texts.len()];
    for c in calls {
        let mut met = false;
        for (j, t) in texts.iter().enumerate() {
            if meets(c, t) {
                met = true;
                right_met[j] = true;
                want.push([side(Some(c)), side(Some(t))].concat());
            }
        }
        if keeps.0 && !met {
            want.push([side(Some(c)), side(None)].concat());
        }
    }
    for (j, t) in texts.iter().enumerate() {
        if keeps.1 && !right_met[j] {
            want.push([side(None), side(Some(t))].concat());
        }
    }
    want.sort();
    want
}

fn check(calls: &[Call], texts: &[Call]) -> Result<(), TestCaseError> {
    let dir = scratch("outer");
    write_calls(&dir.0.join("calls.csv"), calls);
    write_texts(&dir.0.join("texts.csv"), texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n1,3\n2,1\n2,6\n4,2\n").expect("watch");
    let cols =
        "SELECT c.caller, c.start, c.dur, t.sender, t.start AS ts, t.dur AS td FROM calls AS c";
    let keyed = |c: &Call, t: &Call| c.0 == t.0 && t.2 >= c.2 - 4 && t.2 <= c.2 + 6 && c.3 < t.3;
    let theta = |c: &Call, t: &Call| t.2 >= c.2 - 2 && t.2 <= c.2 + 2 && c.3 < t.3 - 200;
    for (kind, keeps) in [
        ("LEFT", (true, false)),
        ("RIGHT", (false, true)),
        ("FULL OUTER", (true, true)),
    ] {
        let q = format!("{cols} {kind} JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 4 AND c.start + 6 AND c.dur < t.dur");
        prop_assert_eq!(
            runs(&dir.0, &q),
            outer_loop(calls, texts, keeps, keyed),
            "{}",
            q
        );
        let q = format!("{cols} {kind} JOIN texts AS t ON t.start BETWEEN c.start - 2 AND c.start + 2 AND c.dur < t.dur - 200");
        prop_assert_eq!(
            runs(&dir.0, &q),
            outer_loop(calls, texts, keeps, theta),
            "{}",
            q
        );
    }
    // A LEFT lookup: each call meets the watch rows of its caller with risk < dur % 7.
    let watch = [(1, 3), (2, 1), (2, 6), (4, 2)];
    let q = "SELECT caller, dur, number, risk FROM calls LEFT JOIN watch ON calls.caller = watch.number AND watch.risk < calls.dur % 7";
    let mut want = Vec::new();
    for &(k, _, _, d) in calls {
        let hits: Vec<_> = watch.iter().filter(|w| w.0 == k && w.1 < d % 7).collect();
        for w in &hits {
            want.push(vec![int(k), int(d), int(w.0), int(w.1)]);
        }
        if hits.is_empty() {
            want.push(vec![int(k), int(d), Scalar::Null, Scalar::Null]);
        }
    }
    want.sort();
    prop_assert_eq!(runs(&dir.0, q), want, "{}", q);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_outer_joins_match_a_loop(calls in in_order(), texts in in_order()) {
        check(&calls, &texts)?;
    }
}

/// Rows far apart in time: most rows meet nobody and come out padded.
#[test]
fn sql_outer_joins_of_sparse_rows_match_a_loop() {
    let calls: Vec<Call> = (0..40).map(|i| (i % 3, 0, i * 9, i * 13 % 600)).collect();
    let texts: Vec<Call> = (0..40)
        .map(|i| (i % 4, 0, i * 7 + 3, i * 29 % 600))
        .collect();
    check(&calls, &texts).expect("sparse");
    check(&calls, &[]).expect("one side empty");
}
