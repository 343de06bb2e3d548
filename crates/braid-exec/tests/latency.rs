//! Latency constraints end to end (`braid_exec::qos`): a paced source held to a
//! constraint meets it at a low and a high rate, while without one the same query
//! waits for its epochs; the output is the same either way; what is not built is
//! refused by name.

use crate::sql::scratch;
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_plan::function::Registry;
use braid_sql::compile_script;
use std::path::Path;
use std::time::Duration;

/// A filter over `n` rows at `per_second` rows per second, replayed in real time,
/// epoch 1 s; `settings` go before the query.
fn paced(dir: &Path, n: u64, per_second: u64, settings: &str) -> braid_sql::Script {
    let mut text = String::from("time,v\n");
    for i in 0..n {
        text += &format!("{},{}\n", i * 1_000_000 / per_second, (i * 37) % 101);
    }
    std::fs::write(dir.join("in.csv"), text).expect("input");
    let script = format!(
        "CREATE STREAM s (time BIGINT NOT NULL, v BIGINT) \
         WITH (path = 'in.csv', event_time = 'time', epoch = 1000000, speed = 1, \
         units_per_second = 1000000);\n\
         CREATE SINK out WITH (sink = 'collect');\n{settings}\n\
         INSERT INTO out SELECT time, v * 2 AS w FROM s WHERE v < 50;"
    );
    compile_script(&script, dir, &Registry::with_builtins()).expect("compile")
}

fn run_it(s: &braid_sql::Script, workers: usize) -> RunReport {
    let cfg = RunConfig {
        workers,
        measure_latency: true,
        ..RunConfig::default()
    };
    run(&s.jobs[0].plan, &s.registry, &cfg).expect("run")
}

fn values(r: &RunReport) -> Vec<Vec<braid_plan::batch::Scalar>> {
    r.collected.iter().map(|r| r.values.clone()).collect()
}

#[test]
fn a_constraint_is_met_at_low_and_high_rates_with_the_same_output() {
    let dir = scratch("latency");
    // 1.2 s of input: 1,000 rows/s (a window fills slowly) and 50,000 rows/s.
    for (n, rate) in [(1_200u64, 1_000u64), (60_000, 50_000)] {
        let free = paced(&dir.0, n, rate, "");
        let held = paced(&dir.0, n, rate, "SET max_latency = '50ms';");
        let plan = &held.jobs[0].plan;
        assert_eq!(plan.latency_constraint(), Some(Duration::from_millis(50)));
        for workers in [1, 2] {
            let a = run_it(&free, workers);
            let b = run_it(&held, workers);
            assert_eq!(values(&a), values(&b), "{rate} rows/s, {workers} workers");
            assert!(!values(&a).is_empty());
            let (la, lb) = (a.latency.expect("measured"), b.latency.expect("measured"));
            let p99a = la.p99.expect("windows written");
            let p99b = lb.p99.expect("windows written");
            // Without a constraint every row waits for its 1 s epoch to end.
            assert!(
                p99a >= Duration::from_millis(300),
                "{rate} rows/s, {workers} workers, no constraint: p99 {p99a:?}"
            );
            assert!(
                p99b <= Duration::from_millis(50),
                "{rate} rows/s, {workers} workers, max_latency 50ms: p99 {p99b:?} ({lb:?})"
            );
            assert_eq!(lb.constraint, Some(Duration::from_millis(50)));
            assert!(!lb.trace.is_empty(), "the controller decided");
            // Per operator: the Map and the merge measured what reached them.
            assert!(
                lb.nodes
                    .iter()
                    .any(|n| n.name.starts_with("Map(") && n.rows > 0),
                "{:?}",
                lb.nodes
            );
        }
    }
}

#[test]
fn what_a_constraint_cannot_do_yet_is_refused_by_name() {
    let dir = scratch("latency-refused");
    let held = paced(&dir.0, 10, 1000, "SET max_latency = '5ms';");
    let cfg = RunConfig {
        checkpoint: Some(braid_exec::checkpoint::CheckpointConfig {
            dir: dir.0.join("ck"),
            interval: Duration::from_secs(1),
            recover: false,
            backend: None,
        }),
        ..RunConfig::default()
    };
    let e = run(&held.jobs[0].plan, &held.registry, &cfg)
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("latency constraint (max_latency 5ms) with checkpoints"),
        "{e}"
    );
    let text =
        "CREATE STREAM s (time BIGINT NOT NULL) WITH (path = 'x.csv', event_time = 'time');\n\
                SET max_latency = '10 minutes';";
    let e = match compile_script(text, &dir.0, &Registry::with_builtins()) {
        Ok(_) => panic!("a duration of 10 minutes is refused"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("expected a positive duration"), "{e}");
}

/// `n` rows at times 0..n µs replayed `speed` times faster than real time, with
/// `settings` before the filter query.
fn fast(dir: &Path, n: u64, speed: u64, settings: &str) -> braid_sql::Script {
    let mut text = String::from("time,v\n");
    for i in 0..n {
        text += &format!("{i},{}\n", (i * 37) % 101);
    }
    std::fs::write(dir.join("fast.csv"), text).expect("input");
    let script = format!(
        "CREATE STREAM s (time BIGINT NOT NULL, v BIGINT) \
         WITH (path = 'fast.csv', event_time = 'time', epoch = 1000, speed = {speed}, \
         units_per_second = 1000000, window = 64);\n\
         CREATE SINK out WITH (sink = 'collect');\n{settings}\n\
         INSERT INTO out SELECT time, v FROM s;"
    );
    compile_script(&script, dir, &Registry::with_builtins()).expect("compile")
}

#[test]
fn shedding_drops_what_falls_behind_and_counts_every_row() {
    let dir = scratch("shed");
    let n = 200_000u64;
    // The schedule takes 2 ms; reading alone takes longer, so the source falls
    // behind at once.
    let keep = fast(&dir.0, n, 100, "");
    let shed = fast(&dir.0, n, 100, "SET shed_load = '1ms';");
    assert!(shed.jobs[0].plan.leaf_source().shed.is_some());
    for workers in [1, 2] {
        let cfg = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let all = run(&keep.jobs[0].plan, &keep.registry, &cfg).expect("run");
        assert!(all.shed.is_empty(), "without shed_load nothing is dropped");
        let full = values(&all);
        let some = run(&shed.jobs[0].plan, &shed.registry, &cfg).expect("run");
        let dropped: u64 = some.shed.iter().map(|s| s.2).sum();
        assert!(dropped > 0, "{workers} workers: nothing shed");
        assert_eq!(some.rows_in, n, "every row is read, sent or shed");
        // What was kept gives a subsequence of the full output, and only the shed rows
        // are missing: fewer rows out, in the same order.
        let got = values(&some);
        assert_eq!(full.len() as u64, n);
        assert_eq!(
            got.len() as u64 + dropped,
            n,
            "{workers} workers: every row is written or counted as shed"
        );
        let mut it = full.iter();
        assert!(
            got.iter().all(|r| it.any(|f| f == r)),
            "{workers} workers: the output is not a subsequence of the full one"
        );
        // Per second of the schedule: all within the 2 ms schedule's first second.
        assert!(some.shed.iter().all(|(s, sec, _)| s == "s" && *sec == 0));
    }
    // Shedding needs a schedule.
    let text =
        "CREATE STREAM s (time BIGINT NOT NULL) WITH (path = 'fast.csv', event_time = 'time');\n\
                CREATE SINK out WITH (sink = 'collect');\n\
                SET shed_load = '1ms';\nINSERT INTO out SELECT time FROM s;";
    let e = match compile_script(text, &dir.0, &Registry::with_builtins()) {
        Ok(_) => panic!("shed_load on an unpaced stream is refused"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("no schedule to fall behind"), "{e}");
}
