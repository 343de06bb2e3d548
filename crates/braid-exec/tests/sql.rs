//! SQL oracle tests: every query, parallelized automatically over 8 partitions and run
//! on 1, 2 and 4 workers, gives what the same query gives serially (one partition,
//! reference interpreter): identical sequences with the transparent merge, equal
//! multisets with the best-effort merge. Two queries are also checked against answers
//! computed here by plain loops (tumbling counts, an interval join), so the operators'
//! semantics are tested, not only their parallelization.

use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::{Batch, RowKey, Scalar};
use braid_plan::function::Registry;
use braid_plan::interleave;
use braid_plan::output::OutRow;
use braid_plan::plan::{Plan, SourceSpec};
use braid_plan::reference;
use braid_sql::{compile_script, Script};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// A call: (caller, callee, start, dur).
pub(crate) type Call = (i64, i64, i64, i64);

pub(crate) fn calls_strategy() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec((0i64..12, 0i64..30, 0i64..25, 0i64..600, 0u8..10), 0..220).prop_map(
        |v| {
            let mut t = 0i64;
            v.into_iter()
                .map(|(caller, callee, step, dur, back)| {
                    t += step;
                    // Now and then a row out of order (sometimes beyond the lateness).
                    let start = if back == 0 { (t - 70).max(0) } else { t };
                    (caller, callee, start, dur)
                })
                .collect()
        },
    )
}

pub(crate) struct Dir(pub(crate) PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn scratch(tag: &str) -> Dir {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "braid-sql-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("scratch dir");
    Dir(d)
}

fn write_rows(path: &Path, header: &str, rows: &[Call]) {
    let mut s = format!("{header}\n");
    for (a, b, t, d) in rows {
        s += &format!("{a},{b},{t},{d}\n");
    }
    std::fs::write(path, s).expect("write rows");
}

pub(crate) fn write_calls(path: &Path, calls: &[Call]) {
    write_rows(path, "caller,callee,start,dur", calls);
}

pub(crate) fn write_texts(path: &Path, texts: &[Call]) {
    write_rows(path, "sender,receiver,start,dur", texts);
}

fn batch_of(calls: &[Call]) -> Batch {
    let mut b = Batch::new(4);
    for (i, &(a, c, t, d)) in calls.iter().enumerate() {
        b.push_ints(
            RowKey {
                seq: i as u64,
                lane: 0,
            },
            &[a, c, t, d],
        );
    }
    b
}

const HEADER: &str = "
CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', event_time = 'start', epoch = 10, window = 16, lateness = 20);
CREATE STREAM texts (sender BIGINT, receiver BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'texts.csv', event_time = 'start', epoch = 10, window = 16, lateness = 20);
CREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');
CREATE SINK out WITH (sink = 'collect');
";

/// The queries under test: (name, query).
pub(crate) const QUERIES: &[(&str, &str)] = &[
    (
        "stateless",
        "SELECT caller, dur * 2 + 1 AS d, CASE WHEN dur > 300 THEN 'long' ELSE 'short' END AS kind FROM calls WHERE dur % 3 <> 0",
    ),
    (
        "tumble",
        "SELECT window_start, caller, count(*) AS n, sum(dur) AS total, avg(dur) AS mean, min(dur) AS lo, max(callee) AS hi, count(DISTINCT callee) AS peers FROM calls WHERE dur > 10 GROUP BY TUMBLE(start, 50), caller HAVING count(*) > 1",
    ),
    (
        "hop",
        "SELECT window_end, caller % 3 AS g, count(*) AS n FROM calls GROUP BY HOP(start, 20, 60), caller % 3",
    ),
    (
        "hop_all",
        "SELECT window_start, window_end, caller % 4 AS k, count(*) AS n, count(DISTINCT callee) AS peers, sum(dur) AS total, avg(dur) AS mean, min(dur) AS lo, max(callee) AS hi, count(*) FILTER (WHERE dur > 100) AS long, max(dur) FILTER (WHERE callee < 15) AS top FROM calls GROUP BY HOP(start, 6, 45), caller % 4",
    ),
    (
        "cumulate",
        "SELECT window_start, window_end, caller % 3 AS k, count(*) AS n, sum(dur) AS total, max(callee) AS hi FROM TABLE(CUMULATE(TABLE calls, DESCRIPTOR(start), 10, 40)) GROUP BY window_start, window_end, caller % 3",
    ),
    (
        "session",
        "SELECT window_start, window_end, caller, count(*) AS n, sum(dur) AS total, avg(dur) AS mean, min(dur) AS lo, max(dur) AS hi FROM calls GROUP BY SESSION(start, 15), caller",
    ),
    (
        "filter",
        "SELECT window_start, caller, count(*) FILTER (WHERE dur > 100) AS long, count(*) AS n, count(callee) FILTER (WHERE dur % 2 = 0) AS even, count(DISTINCT callee) FILTER (WHERE dur > 200) AS peers, sum(dur) FILTER (WHERE callee < 15) AS low, avg(dur) FILTER (WHERE callee >= 15) AS mean, min(callee) FILTER (WHERE dur > 300) AS lo, max(dur) FILTER (WHERE callee IS NULL OR callee > 20) AS hi FROM calls GROUP BY TUMBLE(start, 50), caller HAVING count(*) FILTER (WHERE dur > 100) > 0",
    ),
    (
        "filter_session",
        "SELECT window_start, window_end, caller % 4 AS k, count(*) FILTER (WHERE dur < 300) AS short, sum(dur) FILTER (WHERE dur >= 300) AS long FROM calls GROUP BY SESSION(start, 15), caller % 4",
    ),
    (
        "rows",
        "SELECT window_start, window_end, caller, count(*) AS n, max(dur) AS m FROM calls GROUP BY ROWS(3), caller",
    ),
    (
        "global",
        "SELECT window_end, count(*) AS n, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 40)",
    ),
    (
        "lookup",
        "SELECT window_end, dur / 100 AS bucket, count(*) AS n, sum(risk) AS risk FROM calls JOIN watch ON calls.caller = watch.number WHERE dur > 50 AND risk > 1 GROUP BY TUMBLE(start, 100), dur / 100",
    ),
    (
        "lookup_residual",
        "SELECT caller, dur, risk FROM calls JOIN watch ON calls.caller = watch.number AND watch.risk < calls.dur % 7",
    ),
    (
        "interval_join",
        "SELECT c.caller, c.start, t.start AS tstart, t.dur FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 10",
    ),
    (
        "left_join",
        "SELECT c.caller, c.start, t.start AS tstart, t.dur FROM calls AS c LEFT JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 10",
    ),
    (
        "right_join",
        "SELECT c.caller, c.dur, t.sender, t.start FROM calls AS c RIGHT OUTER JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 4 AND c.start + 3 AND t.dur > c.dur",
    ),
    (
        "full_join",
        "SELECT * FROM calls AS c FULL JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start AND c.start + 6",
    ),
    (
        "full_theta_join",
        "SELECT c.caller, t.sender, c.start, t.start AS ts FROM calls AS c FULL OUTER JOIN texts AS t ON c.dur < t.dur - 300 AND t.start BETWEEN c.start - 3 AND c.start + 3",
    ),
    (
        "left_join_then_aggregate",
        "SELECT window_end, c.caller, count(*) AS n, count(t.sender) AS met FROM calls AS c LEFT JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 8 GROUP BY TUMBLE(c.start, 50), c.caller",
    ),
    (
        "right_join_then_aggregate",
        "SELECT window_end, c.dur / 60 AS minutes, count(*) AS n, count(c.caller) AS met FROM calls AS c RIGHT JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 8 GROUP BY TUMBLE(t.start, 50), c.dur / 60",
    ),
    (
        "top_n",
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rownum FROM (SELECT window_start, window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller)) WHERE rownum <= 3",
    ),
    (
        "top_n_per_key",
        "SELECT window_end, caller, k, d, r FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, caller ORDER BY d DESC, k) AS r FROM (SELECT window_start, window_end, caller, callee % 4 AS k, sum(dur) AS d FROM calls GROUP BY HOP(start, 20, 40), caller, callee % 4)) t WHERE r <= 2 AND t.d > 100",
    ),
    (
        "left_lookup",
        "SELECT caller, dur, number, risk FROM calls LEFT JOIN watch ON calls.caller = watch.number AND watch.risk < calls.dur % 7",
    ),
    (
        "theta_join",
        "SELECT c.caller, t.sender, c.start FROM calls AS c JOIN texts AS t ON c.dur < t.dur - 500 AND t.start >= c.start - 3 AND t.start <= c.start + 3",
    ),
    (
        "count_join",
        "SELECT a.caller, b.sender FROM LAST(calls, 5) AS a JOIN LAST(texts, 4) AS b ON a.dur < b.dur AND a.caller < 6",
    ),
    (
        "join_then_aggregate",
        "SELECT window_end, c.dur / 60 AS minutes, count(*) AS n, max(t.dur) AS longest FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 8 GROUP BY TUMBLE(c.start, 50), c.dur / 60",
    ),
    (
        "aggregate_then_aggregate",
        "SELECT window_end, count(*) AS callers, sum(n) AS calls FROM (SELECT window_end AS we, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller) AS per GROUP BY TUMBLE(we, 100)",
    ),
    (
        "union",
        "SELECT window_start, who, count(*) AS n FROM (SELECT caller AS who, start FROM calls UNION ALL SELECT sender AS who, start FROM texts) AS u GROUP BY TUMBLE(start, 30), who",
    ),
    (
        "join_then_aggregate_by_key",
        "SELECT window_end, c.caller, count(*) AS n, sum(t.dur) AS d FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 8 GROUP BY TUMBLE(c.start, 50), c.caller",
    ),
    (
        "aggregate_twice_by_key",
        "SELECT window_end, caller, max(n) AS busiest, count(*) AS windows FROM (SELECT window_end AS we, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 20), caller) AS w GROUP BY TUMBLE(we, 100), caller",
    ),
    (
        "join_of_aggregates",
        "SELECT a.caller, a.n, b.m FROM (SELECT window_end AS we, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller) AS a JOIN (SELECT window_end AS we, sender, sum(dur) AS m FROM texts GROUP BY TUMBLE(start, 50), sender) AS b ON a.caller = b.sender AND b.we BETWEEN a.we AND a.we",
    ),
    (
        "join_of_aggregates_on_counts",
        "SELECT a.we, a.caller, b.sender, a.n FROM (SELECT window_end AS we, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller) AS a JOIN (SELECT window_end AS we, sender, count(*) AS n FROM texts GROUP BY TUMBLE(start, 50), sender) AS b ON a.n = b.n AND b.we BETWEEN a.we AND a.we",
    ),
];

pub(crate) fn script(dir: &Path, settings: &str, query: &str) -> Script {
    let text = format!("{HEADER}{settings}\nINSERT INTO out {query};");
    compile_script(&text, dir, &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("compile {query}: {e}"))
}

/// The serial input the reference interpreter reads for `plan`.
fn reference_input(plan: &Plan, calls: &[Call], texts: &[Call]) -> Batch {
    let source = plan.leaf_source();
    match &source.spec {
        SourceSpec::Interleave(kids) => {
            let (a, b) = (batch_of(calls), batch_of(texts));
            let parts: Vec<(&braid_plan::plan::Source, &Batch)> = kids
                .iter()
                .map(|k| (k, if k.name == "calls" { &a } else { &b }))
                .collect();
            interleave::rows(&parts, source.epoch)
        }
        _ => batch_of(calls),
    }
}

fn values(rows: &[OutRow]) -> Vec<Vec<Scalar>> {
    rows.iter().map(|r| r.values.clone()).collect()
}

fn check(calls: &[Call], texts: &[Call], watch: &[(i64, i64)]) -> Result<(), TestCaseError> {
    let dir = scratch("oracle");
    write_calls(&dir.0.join("calls.csv"), calls);
    write_texts(&dir.0.join("texts.csv"), texts);
    let mut w = String::from("number,risk\n");
    for (n, r) in watch {
        w += &format!("{n},{r}\n");
    }
    std::fs::write(dir.0.join("watch.csv"), w).expect("watch");
    for (name, q) in QUERIES {
        let configs: [(&str, &str, &[usize]); 3] = [
            ("transparent", "subquery", &[1, 2, 4]),
            ("best_effort", "subquery", &[1, 2, 4]),
            ("transparent", "operator", &[2]),
        ];
        for (merge, stages, workers) in configs {
            // The serial run of the same plan: the same stages, each in one partition.
            let serial = script(
                &dir.0,
                &format!("SET parallel = 'off'; SET stages = '{stages}';"),
                q,
            );
            let job = &serial.jobs[0];
            let input = reference_input(&job.plan, calls, texts);
            let mut expected = reference::run(&job.plan, &serial.registry, &input)
                .unwrap_or_else(|e| panic!("{name}: reference: {e}"));
            expected.sort_by_key(|r| (r.epoch, r.key));
            let expected = values(&expected);
            let par = script(
                &dir.0,
                &format!("SET partitions = 8; SET merge = '{merge}'; SET stages = '{stages}';"),
                q,
            );
            for &workers in workers {
                let cfg = RunConfig {
                    workers,
                    ..RunConfig::default()
                };
                let report = run(&par.jobs[0].plan, &par.registry, &cfg)
                    .unwrap_or_else(|e| panic!("{name}: run: {e}"));
                let mut got = values(&report.collected);
                let what = format!(
                    "{name}, {merge}, {stages} stages, {workers} workers ({})",
                    par.jobs[0].partitioning
                );
                if merge == "transparent" {
                    prop_assert_eq!(&got, &expected, "{}", what);
                } else {
                    let mut exp = expected.clone();
                    exp.sort();
                    got.sort();
                    prop_assert_eq!(&got, &exp, "{}", what);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn sql_parallel_equals_serial(
        calls in calls_strategy(),
        texts in calls_strategy(),
        watch in prop::collection::vec((0i64..12, 1i64..5), 0..6),
    ) {
        check(&calls, &texts, &watch)?;
    }
}

#[test]
fn sql_edge_cases() {
    // Empty streams; everything late; a single row.
    check(&[], &[], &[]).expect("empty");
    check(&[(1, 2, 100, 5)], &[(1, 2, 100, 500)], &[(1, 3)]).expect("one row");
    let late = late_calls();
    check(&late, &late, &[(0, 1), (1, 2)]).expect("late rows");
    let extreme = extreme_calls();
    check(&extreme, &extreme, &[(0, 1)]).expect("extreme times");
}

/// Calls of which every other one comes far behind the others: many late rows.
pub(crate) fn late_calls() -> Vec<Call> {
    (0..40)
        .map(|i| (i % 5, i, if i % 2 == 0 { 500 + i } else { i }, 600 - i))
        .collect()
}

/// Calls with event times at the ends of i64: window ends, session gaps and join
/// distances saturate instead of overflowing.
pub(crate) fn extreme_calls() -> Vec<Call> {
    [
        0,
        7,
        i64::MAX - 30,
        i64::MAX - 3,
        i64::MAX,
        i64::MIN,
        i64::MIN + 9,
    ]
    .iter()
    .enumerate()
    .map(|(i, &t)| (i as i64 % 3, i as i64, t, 20 + i as i64))
    .collect()
}

/// A two-phase aggregate's partitioning, as EXPLAIN states it.
const TWO_PHASE: &str = "stage 1: any partition (partial aggregates: each window whole on the worker that splits it; a group's partials in any partition); stage 2: hash hash(window_start";

/// Partitioning chosen for each query, as EXPLAIN states it.
#[test]
fn sql_partitioning_follows_state() {
    let dir = scratch("parts");
    write_calls(&dir.0.join("calls.csv"), &[]);
    write_calls(&dir.0.join("texts.csv"), &[]);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let expect = [
        ("stateless", "any partition (no operator keeps state"),
        ("tumble", "hash hash(caller)"),
        ("hop", TWO_PHASE),
        ("global", TWO_PHASE),
        ("lookup", TWO_PHASE),
        ("interval_join", "hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END"),
        ("theta_join", "grid, left rows where (_stream <> 1)"),
        ("full_theta_join", "single partition"),
        ("top_n", "stage 1: hash hash(caller) (group-by keys); stage 2: single partition"),
        ("top_n_per_key", "stage 1: hash hash(caller, (callee % 4)) (group-by keys); stage 2: hash hash(caller) (top-N partition keys)"),
        ("right_join_then_aggregate", "stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (equi-join keys); stage 2: hash hash((dur / 60))"),
        ("left_join_then_aggregate", "hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (group-by keys, equi-join keys)"),
        ("count_join", "single partition"),
        ("union", TWO_PHASE),
        ("join_then_aggregate_by_key", "hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (group-by keys, equi-join keys)"),
        ("aggregate_twice_by_key", "hash hash(caller) (group-by keys)"),
        ("join_of_aggregates", "hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END"),
        ("join_of_aggregates_on_counts", "stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (group-by keys); stage 2: hash CASE WHEN (_stream = 0) THEN hash(left.n) WHEN (_stream = 1) THEN hash(right.n) END (equi-join keys)"),
        ("join_then_aggregate", "stage 1: hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END (equi-join keys); stage 2: hash hash((dur / 60))"),
    ];
    for (name, want) in expect {
        let q = QUERIES.iter().find(|(n, _)| *n == name).expect("query").1;
        let s = script(&dir.0, "", q);
        let got = &s.jobs[0].partitioning;
        assert!(got.starts_with(want), "{name}: {got}");
    }
    // One phase, the aggregates are partitioned by their keys or run in one partition.
    for (name, want) in [
        ("hop", "hash hash((caller % 3))"),
        ("global", "single partition"),
        ("lookup", "hash hash((dur / 100))"),
        ("union", "hash CASE WHEN (_stream = 0) THEN hash(calls.caller) WHEN (_stream = 1) THEN hash(texts.sender) END"),
    ] {
        let q = QUERIES.iter().find(|(n, _)| *n == name).expect("query").1;
        let s = script(&dir.0, "SET aggregate = 'one_phase';", q);
        let got = &s.jobs[0].partitioning;
        assert!(got.starts_with(want), "{name}: {got}");
    }
}

/// Tumbling counts per caller, computed by a loop, equal the query's answer.
#[test]
fn sql_tumble_matches_a_loop() {
    let calls: Vec<Call> = (0..500)
        .map(|i| ((i * 7) % 5, i % 11, i * 3 + (i % 4), (i * 37) % 600))
        .collect();
    let dir = scratch("loop");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_calls(&dir.0.join("texts.csv"), &calls);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let s = script(
        &dir.0,
        "SET partitions = 4;",
        "SELECT window_start, caller, count(*) AS n, sum(dur) AS s FROM calls GROUP BY TUMBLE(start, 100), caller",
    );
    let report = run(
        &s.jobs[0].plan,
        &s.registry,
        &RunConfig {
            workers: 2,
            ..RunConfig::default()
        },
    )
    .expect("run");
    let mut got: Vec<(i64, i64, i64, i64)> = report
        .collected
        .iter()
        .map(|r| {
            let i = |k: usize| match r.values[k] {
                Scalar::Int(v) => v,
                _ => panic!("int"),
            };
            (i(0), i(1), i(2), i(3))
        })
        .collect();
    got.sort();
    let mut want: std::collections::BTreeMap<(i64, i64), (i64, i64)> = Default::default();
    for &(caller, _, start, dur) in &calls {
        let e = want.entry((start - start % 100, caller)).or_default();
        e.0 += 1;
        e.1 += dur;
    }
    let want: Vec<(i64, i64, i64, i64)> = want
        .into_iter()
        .map(|((w, c), (n, s))| (w, c, n, s))
        .collect();
    assert_eq!(got, want);
}

/// Runs `query` over `calls` (as both streams) with 4 partitions on 2 workers and
/// returns the rows as ints, sorted.
pub(crate) fn int_rows(name: &str, calls: &[Call], query: &str) -> Vec<Vec<i64>> {
    let dir = scratch(name);
    write_calls(&dir.0.join("calls.csv"), calls);
    write_calls(&dir.0.join("texts.csv"), calls);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let s = script(&dir.0, "SET partitions = 4;", query);
    let cfg = RunConfig {
        workers: 2,
        ..RunConfig::default()
    };
    let report = run(&s.jobs[0].plan, &s.registry, &cfg).expect("run");
    sorted_ints(&report.collected)
}

/// Rows whose values are all ints, as ints, sorted.
pub(crate) fn sorted_ints(rows: &[OutRow]) -> Vec<Vec<i64>> {
    let mut got: Vec<Vec<i64>> = rows
        .iter()
        .map(|r| {
            r.values
                .iter()
                .map(|v| match v {
                    Scalar::Int(v) => *v,
                    other => panic!("int expected, got {other:?}"),
                })
                .collect()
        })
        .collect();
    got.sort();
    got
}

/// Session windows per caller, computed by a loop over in-order calls, equal the
/// query's answer: a call less than `gap` after the caller's previous one extends the
/// session, window_end = last call + gap.
#[test]
fn sql_session_matches_a_loop() {
    let gap = 20;
    let mut t = 0;
    let calls: Vec<Call> = (0..400)
        .map(|i| {
            t += [1, 3, 7, 2, 9, 1, 4][i as usize % 7];
            (i * 5 % 3, 0, t, i % 50)
        })
        .collect();
    let got = int_rows(
        "session",
        &calls,
        &format!("SELECT window_start, window_end, caller, count(*) AS n, sum(dur) AS s FROM calls GROUP BY SESSION(start, {gap}), caller"),
    );
    let mut want = Vec::new();
    for caller in 0..3 {
        let mut open: Option<(i64, i64, i64, i64)> = None; // start, last, n, sum
        for &(c, _, start, dur) in calls.iter().filter(|c| c.0 == caller) {
            open = match open {
                Some((s, last, n, sum)) if start < last + gap => Some((s, start, n + 1, sum + dur)),
                Some((s, last, n, sum)) => {
                    want.push(vec![s, last + gap, c, n, sum]);
                    Some((start, start, 1, dur))
                }
                None => Some((start, start, 1, dur)),
            };
        }
        if let Some((s, last, n, sum)) = open {
            want.push(vec![s, last + gap, caller, n, sum]);
        }
    }
    want.sort();
    assert_eq!(got, want);
}

/// Count windows per caller (every 3 calls of a caller, in order; the partial last
/// window at the end), computed by a loop, equal the query's answer.
#[test]
fn sql_count_windows_match_a_loop() {
    let calls: Vec<Call> = (0..300).map(|i| (i * 7 % 4, 0, i, (i * 13) % 97)).collect();
    let got = int_rows(
        "rows",
        &calls,
        "SELECT window_start, window_end, caller, count(*) AS n, max(dur) AS m FROM calls GROUP BY ROWS(3), caller",
    );
    let mut want = Vec::new();
    for caller in 0..4 {
        let durs: Vec<i64> = calls
            .iter()
            .filter(|c| c.0 == caller)
            .map(|c| c.3)
            .collect();
        for (w, chunk) in durs.chunks(3).enumerate() {
            let w = w as i64;
            let max = *chunk.iter().max().expect("non-empty");
            want.push(vec![
                w * 3,
                w * 3 + chunk.len() as i64,
                caller,
                chunk.len() as i64,
                max,
            ]);
        }
    }
    want.sort();
    assert_eq!(got, want);
}

/// A third stream that no stateful operator keys (a stateless branch of a union next
/// to a keyed join) is spread over the partitions, not dropped: the union gives every
/// joined pair and every row of the third stream, on 1, 2 and 4 workers.
#[test]
fn sql_unkeyed_stream_beside_a_keyed_join_is_kept() {
    let dir = scratch("third");
    let calls: Vec<Call> = (0..60).map(|i| (i % 6, 0, i, 0)).collect();
    let texts: Vec<Call> = (0..60).map(|i| (i % 4, 0, i, 0)).collect();
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_texts(&dir.0.join("texts.csv"), &texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let mut sms = String::from("who,start\n");
    for i in 0..40 {
        sms.push_str(&format!("{},{}\n", 100 + i, i));
    }
    std::fs::write(dir.0.join("sms.csv"), sms).expect("sms");
    let text = format!(
        "{HEADER}CREATE STREAM sms (who BIGINT, start BIGINT) WITH (path = 'sms.csv', event_time = 'start', epoch = 10, window = 16, lateness = 20);
SET partitions = 4;
INSERT INTO out SELECT c.caller AS k, c.start AS a, t.start AS b FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 2 AND c.start + 2
UNION ALL SELECT who AS k, start AS a, start AS b FROM sms;"
    );
    let s = compile_script(&text, &dir.0, &Registry::with_builtins()).expect("compile");
    let mut want: Vec<Vec<i64>> = Vec::new();
    for &(c, _, ct, _) in &calls {
        for &(t, _, tt, _) in &texts {
            if c == t && (ct - 2..=ct + 2).contains(&tt) {
                want.push(vec![c, ct, tt]);
            }
        }
    }
    want.extend((0..40).map(|i| vec![100 + i, i, i]));
    want.sort();
    for workers in [1, 2, 4] {
        let cfg = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let report = run(&s.jobs[0].plan, &s.registry, &cfg).expect("run");
        let got = sorted_ints(&report.collected);
        assert_eq!(got, want, "{workers} workers ({})", s.jobs[0].partitioning);
    }
}

/// An interval join computed by a loop equals the query's answer.
#[test]
fn sql_interval_join_matches_a_loop() {
    let calls: Vec<Call> = (0..200).map(|i| (i % 7, 0, i * 2, i)).collect();
    let texts: Vec<Call> = (0..150).map(|i| (i % 5, 0, i * 3 + 1, i)).collect();
    let dir = scratch("join");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_texts(&dir.0.join("texts.csv"), &texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let s = script(
        &dir.0,
        "SET partitions = 6; SET merge = 'best_effort';",
        "SELECT c.caller, c.start, t.start AS ts FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 4 AND c.start + 6",
    );
    let report = run(
        &s.jobs[0].plan,
        &s.registry,
        &RunConfig {
            workers: 4,
            ..RunConfig::default()
        },
    )
    .expect("run");
    let mut got: Vec<Vec<Scalar>> = report.collected.iter().map(|r| r.values.clone()).collect();
    got.sort();
    let mut want = Vec::new();
    for &(c, _, cs, _) in &calls {
        for &(snd, _, ts, _) in &texts {
            if c == snd && ts >= cs - 4 && ts <= cs + 6 {
                want.push(vec![Scalar::Int(c), Scalar::Int(cs), Scalar::Int(ts)]);
            }
        }
    }
    want.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

/// `capped(x, limit)`: a scalar UDF written in Rust.
struct Capped;
impl braid_plan::expr::ScalarUdf for Capped {
    fn return_type(
        &self,
        args: &[braid_plan::types::DataType],
    ) -> braid_plan::error::Result<braid_plan::types::DataType> {
        use braid_plan::types::DataType::Int64;
        match args {
            [Int64, Int64] => Ok(Int64),
            _ => Err(braid_plan::error::Error::Plan(format!(
                "capped takes (int64, int64), found {args:?}"
            ))),
        }
    }
    fn call(&self, args: &[braid_plan::batch::Value<'_>]) -> Result<Scalar, String> {
        Ok(match (args[0].as_int(), args[1].as_int()) {
            (Some(x), Some(l)) => Scalar::Int(x.min(l)),
            _ => Scalar::Null,
        })
    }
}

/// A registered scalar UDF is callable from SQL (also as a group key), in parallel.
#[test]
fn sql_scalar_udf() {
    let calls: Vec<Call> = (0..300).map(|i| (i % 4, 0, i, (i * 53) % 600)).collect();
    let dir = scratch("udf");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_calls(&dir.0.join("texts.csv"), &calls);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let mut reg = Registry::with_builtins();
    reg.add_scalar("capped", std::sync::Arc::new(Capped));
    let text = format!(
        "{HEADER}SET partitions = 4; SET aggregate = 'one_phase'; INSERT INTO out SELECT capped(dur, 300) AS d, count(*) AS n FROM calls GROUP BY capped(dur, 300);"
    );
    let s = compile_script(&text, &dir.0, &reg).expect("compiles");
    assert!(
        s.jobs[0].partitioning.contains("capped(dur, 300)"),
        "{}",
        s.jobs[0].partitioning
    );
    let report = run(
        &s.jobs[0].plan,
        &s.registry,
        &RunConfig {
            workers: 2,
            ..RunConfig::default()
        },
    )
    .expect("run");
    let mut got: Vec<Vec<Scalar>> = report.collected.iter().map(|r| r.values.clone()).collect();
    got.sort();
    let mut want: std::collections::BTreeMap<i64, i64> = Default::default();
    for &(_, _, _, d) in &calls {
        *want.entry(d.min(300)).or_default() += 1;
    }
    let want: Vec<Vec<Scalar>> = want
        .into_iter()
        .map(|(d, n)| vec![Scalar::Int(d), Scalar::Int(n)])
        .collect();
    assert_eq!(got, want);
    // Wrong argument types are a plan error naming them; unknown functions list UDFs.
    let bad = format!("{HEADER}SELECT capped(dur, 1.5) FROM calls;");
    let e = compile_script(&bad, &dir.0, &reg)
        .err()
        .expect("type error")
        .to_string();
    assert!(e.contains("capped takes (int64, int64)"), "{e}");
    let bad = format!("{HEADER}SELECT nope(dur) FROM calls;");
    let e = compile_script(&bad, &dir.0, &reg)
        .err()
        .expect("unknown")
        .to_string();
    assert!(
        e.contains("no function `nope`") && e.contains("capped"),
        "{e}"
    );
}

/// A join of two aggregates on their counts runs in two stages (both aggregates hashed
/// by their group keys, then the join hashed by the counts) and gives what one stage in
/// one partition, which cuts nothing, gives, on 1, 2 and 4 workers.
#[test]
fn sql_join_on_aggregate_results_equals_the_uncut_query() {
    // Calls and texts by the same few numbers at the same times, so many windows hold a
    // caller and a sender with equal counts.
    let calls: Vec<Call> = (0..400).map(|i| (i % 7, i % 5, i * 2, i % 50)).collect();
    let texts: Vec<Call> = (0..300)
        .map(|i| ((i * 3) % 7, i % 4, i * 3, i % 40))
        .collect();
    let dir = scratch("join-counts");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_texts(&dir.0.join("texts.csv"), &texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let q = QUERIES
        .iter()
        .find(|(n, _)| *n == "join_of_aggregates_on_counts")
        .expect("query")
        .1;
    let whole = script(&dir.0, "SET parallel = 'off'; SET stages = 'query';", q);
    assert!(whole.jobs[0].partitioning.starts_with("single partition"));
    let input = reference_input(&whole.jobs[0].plan, &calls, &texts);
    let mut expected =
        values(&reference::run(&whole.jobs[0].plan, &whole.registry, &input).expect("reference"));
    expected.sort();
    assert!(
        expected.len() > 20,
        "too few matches to check: {expected:?}"
    );
    let cut = script(&dir.0, "SET partitions = 8;", q);
    assert!(
        cut.jobs[0].partitioning.starts_with("stage 1: hash"),
        "{}",
        cut.jobs[0].partitioning
    );
    for workers in [1, 2, 4] {
        let cfg = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let mut got = values(
            &run(&cut.jobs[0].plan, &cut.registry, &cfg)
                .expect("run")
                .collected,
        );
        got.sort();
        assert_eq!(got, expected, "{workers} workers");
    }
}

/// The queries of [`QUERIES`] whose operators refuse late rows.
pub(crate) const LATE_QUERIES: &[&str] = &[
    "tumble",
    "hop",
    "hop_all",
    "session",
    "interval_join",
    "left_join",
    "full_join",
    "join_then_aggregate",
    "aggregate_then_aggregate",
];

/// `query` writing to `out`, and two queries over its late rows: all of them, and a
/// count per window of refusal time.
pub(crate) fn late_script(dir: &Path, settings: &str, query: &str) -> Script {
    let text = format!(
        "{HEADER}CREATE SINK late_rows WITH (sink = 'collect');\n\
         CREATE SINK late_counts WITH (sink = 'collect');\n{settings}\n\
         INSERT INTO out {query};\n\
         INSERT INTO late_rows SELECT * FROM LATE(out);\n\
         INSERT INTO late_counts SELECT window_end, _operator, count(*) AS n, max(_refused_at) AS last \
           FROM LATE(out) GROUP BY TUMBLE(_refused_at, 30), _operator;"
    );
    compile_script(&text, dir, &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("compile {query}: {e}"))
}

fn check_late(calls: &[Call], texts: &[Call]) -> Result<(), TestCaseError> {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = scratch("late");
    write_calls(&dir.0.join("calls.csv"), calls);
    write_texts(&dir.0.join("texts.csv"), texts);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    for name in LATE_QUERIES {
        let q = QUERIES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, q)| *q)
            .expect("a query of QUERIES");
        let serial = late_script(&dir.0, "SET parallel = 'off';", q);
        let runs_in: Vec<_> = serial.jobs.iter().map(|j| j.runs_in).collect();
        prop_assert_eq!(runs_in, vec![None, Some((0, 1)), Some((0, 2))]);
        let job = &serial.jobs[0];
        let input = reference_input(&job.plan, calls, texts);
        let expected: Vec<Vec<Vec<Scalar>>> =
            reference::run_all(&job.plan, &serial.registry, &input)
                .unwrap_or_else(|e| panic!("{name}: reference: {e}"))
                .into_iter()
                .map(|mut rows| {
                    rows.sort_by_key(|r| (r.epoch, r.key));
                    values(&rows)
                })
                .collect();
        // Nothing refused vanishes: the late stream holds every row counted late.
        prop_assert_eq!(
            expected[1].len() as u64,
            job.late.count.load(Relaxed),
            "{}",
            name
        );
        let par = late_script(&dir.0, "SET partitions = 8;", q);
        for workers in [1, 2, 4] {
            let cfg = RunConfig {
                workers,
                ..RunConfig::default()
            };
            let before = par.jobs[0].late.count.load(Relaxed);
            let report = run(&par.jobs[0].plan, &par.registry, &cfg)
                .unwrap_or_else(|e| panic!("{name}: run: {e}"));
            let refused = par.jobs[0].late.count.load(Relaxed) - before;
            prop_assert_eq!(report.collected_late.len(), 2);
            let got = [
                values(&report.collected),
                values(&report.collected_late[0]),
                values(&report.collected_late[1]),
            ];
            for (k, what) in ["output", "late rows", "late counts"].iter().enumerate() {
                prop_assert_eq!(
                    &got[k],
                    &expected[k],
                    "{}: {}, {} workers",
                    name,
                    what,
                    workers
                );
            }
            prop_assert_eq!(
                got[1].len() as u64,
                refused,
                "{}: {} workers",
                name,
                workers
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Queries over `LATE(out)` run in the dataflow of the query writing to `out`; on
    /// 1, 2 and 4 workers over 8 partitions they give exactly what the serial run gives,
    /// and the late stream holds every row the query counted as late.
    #[test]
    fn sql_late_rows_as_a_stream_equal_serial(
        calls in calls_strategy(),
        texts in calls_strategy(),
    ) {
        check_late(&calls, &texts)?;
    }
}

/// The late stream of a tumbling aggregate holds exactly the rows a loop finds late:
/// a row processed in epoch `e` (the largest `start / 10` so far) whose window ends at
/// or before `e * 10 - 20`, refused at `e * 10`.
#[test]
fn sql_late_rows_match_a_loop() {
    let mut calls: Vec<Call> = Vec::new();
    let mut t = 0;
    for i in 0..400i64 {
        t += i % 4;
        let start = if i % 9 == 4 { (t - 90).max(0) } else { t };
        calls.push((i % 7, i % 5, start, i % 40));
    }
    let dir = scratch("late-loop");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_texts(&dir.0.join("texts.csv"), &[]);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let mut expected: Vec<Vec<Scalar>> = Vec::new();
    let mut epoch = 0;
    for &(caller, callee, start, dur) in &calls {
        epoch = epoch.max(start / 10);
        let end = start - start % 50 + 50;
        if dur > 10 && end <= epoch * 10 - 20 {
            expected.push(vec![
                Scalar::Str("aggregate".into()),
                Scalar::Int(epoch * 10),
                Scalar::Int(caller),
                Scalar::Int(callee),
                Scalar::Int(start),
                Scalar::Int(dur),
            ]);
        }
    }
    assert!(expected.len() > 10, "too few late rows to check");
    expected.sort();
    let script = late_script(
        &dir.0,
        "SET partitions = 4;",
        "SELECT window_start, caller, count(*) AS n FROM calls WHERE dur > 10 GROUP BY TUMBLE(start, 50), caller",
    );
    for workers in [1, 2, 4] {
        let cfg = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let report = run(&script.jobs[0].plan, &script.registry, &cfg).expect("run");
        let mut got = values(&report.collected_late[0]);
        got.sort();
        assert_eq!(got, expected, "{workers} workers");
    }
}
