//! Count-window joins (`LAST(calls, n) JOIN LAST(texts, m) ON ...`) checked against a
//! plain loop over random streams, on 1, 2 and 4 workers: every conjunct of the ON
//! clause (one time bound, two, an equality with a bound, a residual, an OR) applies to
//! every pair.
//!
//! The loop: rows arrive in the order of the interleaved source (epoch of 10, clamped
//! so that it never goes back within a stream; within an epoch by start time, clamped
//! alike (a row earlier than the one before it in its stream takes that one's time);
//! calls before texts at the same time; file order within a stream); each row meets the
//! other stream's last rows (n calls, m texts) that arrived before it, and a pair comes
//! out when the condition holds.

use crate::sql::{calls_strategy, scratch, script, write_calls, write_texts, Call};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use proptest::prelude::*;

/// A condition of the join, as SQL (`a` the call, `b` the text) and as Rust.
type Cond = (&'static str, fn(&Call, &Call) -> bool);

const CONDITIONS: &[Cond] = &[
    ("a.start < b.start", |a, b| a.2 < b.2),
    ("b.start <= a.start + 2", |a, b| b.2 <= a.2 + 2),
    (
        "b.start >= a.start - 5 AND b.start <= a.start + 4",
        |a, b| b.2 >= a.2 - 5 && b.2 <= a.2 + 4,
    ),
    ("a.caller = b.sender AND b.start > a.start", |a, b| {
        a.0 == b.0 && b.2 > a.2
    }),
    ("a.dur < b.dur AND a.callee % 3 = b.receiver % 3", |a, b| {
        a.3 < b.3 && a.1 % 3 == b.1 % 3
    }),
    ("a.start < b.start OR a.caller = b.sender", |a, b| {
        a.2 < b.2 || a.0 == b.0
    }),
    (
        "b.start - a.start BETWEEN 0 AND 6 AND a.start >= b.start - 4",
        |a, b| (0..=4).contains(&(b.2 - a.2)),
    ),
];

/// The rows in the order the join meets them: (is a text, row).
fn arrival(calls: &[Call], texts: &[Call]) -> Vec<(bool, Call)> {
    let mut all = Vec::new();
    for (side, rows) in [(false, calls), (true, texts)] {
        let (mut epoch, mut time) = (0, 0);
        for (i, r) in rows.iter().enumerate() {
            epoch = epoch.max(r.2.max(0) / 10);
            time = time.max(r.2.max(0));
            all.push(((epoch, time, side, i), (side, *r)));
        }
    }
    all.sort_by_key(|e| e.0);
    all.into_iter().map(|e| e.1).collect()
}

/// The pairs (call, text) the join gives, by a loop.
fn expected(calls: &[Call], texts: &[Call], n: usize, m: usize, cond: Cond) -> Vec<Vec<i64>> {
    let (mut last_calls, mut last_texts): (Vec<Call>, Vec<Call>) = (Vec::new(), Vec::new());
    let mut out = Vec::new();
    for (is_text, r) in arrival(calls, texts) {
        if is_text {
            let from = last_calls.len().saturating_sub(n);
            for c in &last_calls[from..] {
                if cond.1(c, &r) {
                    out.push(vec![c.0, c.1, c.2, c.3, r.0, r.1, r.2, r.3]);
                }
            }
            last_texts.push(r);
        } else {
            let from = last_texts.len().saturating_sub(m);
            for t in &last_texts[from..] {
                if cond.1(&r, t) {
                    out.push(vec![r.0, r.1, r.2, r.3, t.0, t.1, t.2, t.3]);
                }
            }
            last_calls.push(r);
        }
    }
    out.sort();
    out
}

fn check(calls: &[Call], texts: &[Call]) -> Result<(), TestCaseError> {
    let dir = scratch("count_join");
    write_calls(&dir.0.join("calls.csv"), calls);
    write_texts(&dir.0.join("texts.csv"), texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    for &(n, m) in &[(1, 1), (3, 2)] {
        for &cond in CONDITIONS {
            let want = expected(calls, texts, n, m, cond);
            let s = script(
                &dir.0,
                "SET partitions = 4;",
                &format!(
                    "SELECT a.caller, a.callee, a.start, a.dur, b.sender, b.receiver, b.start, b.dur \
                     FROM LAST(calls, {n}) AS a JOIN LAST(texts, {m}) AS b ON {}",
                    cond.0
                ),
            );
            for workers in [1, 2, 4] {
                let cfg = RunConfig {
                    workers,
                    ..RunConfig::default()
                };
                let report = run(&s.jobs[0].plan, &s.registry, &cfg).expect("run");
                let mut got: Vec<Vec<i64>> = report
                    .collected
                    .iter()
                    .map(|r| {
                        r.values
                            .iter()
                            .map(|v| match v {
                                Scalar::Int(i) => *i,
                                other => panic!("int expected, got {other:?}"),
                            })
                            .collect()
                    })
                    .collect();
                got.sort();
                prop_assert_eq!(
                    &got,
                    &want,
                    "LAST {} / {} ON {}, {} workers",
                    n,
                    m,
                    cond.0,
                    workers
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_count_join_matches_a_loop(calls in calls_strategy(), texts in calls_strategy()) {
        check(&calls, &texts)?;
    }
}

/// Fixed streams on which each condition keeps some pairs and drops others.
#[test]
fn sql_count_join_matches_a_loop_on_fixed_streams() {
    let calls: Vec<Call> = (0..80)
        .map(|i| (i % 5, i % 7, i * 4, (i * 37) % 100))
        .collect();
    let texts: Vec<Call> = (0..60)
        .map(|i| (i % 4, i % 9, i * 5 + 2, (i * 53) % 100))
        .collect();
    for &cond in CONDITIONS {
        let all = expected(&calls, &texts, 3, 2, ("", |_, _| true)).len();
        let kept = expected(&calls, &texts, 3, 2, cond).len();
        assert!(kept > 0 && kept < all, "{}: {kept} of {all}", cond.0);
    }
    check(&calls, &texts).expect("fixed streams");
}
