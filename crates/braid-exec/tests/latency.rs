//! Latency constraints end to end (`braid_exec::qos`): a paced source held to a
//! constraint meets it at a low and a high rate, while without one the same query
//! waits for its epochs; the output is the same either way; what is not built is
//! refused by name.

use crate::sql::scratch;
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
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

/// A burst, then a lull: 1,000 rows at 2,000 rows/s, then 8 rows 100 ms apart. W grows
/// with the burst (tens of rows fill within the constraint); in the lull a window of W
/// rows would take seconds to fill, and its first rows would wait for it. The flush
/// timeout sends a window once its oldest row has waited that long, so no row waits
/// for a window the lull will not fill (without it, the lull's first row waits 700 ms).
#[test]
fn the_flush_timeout_lets_no_row_wait_for_a_window_a_lull_will_not_fill() {
    let dir = scratch("latency-lull");
    let mut text = String::from("time,v\n");
    for i in 0..1_000u64 {
        text += &format!("{},{}\n", i * 500, (i * 37) % 101);
    }
    for k in 1..=8u64 {
        text += &format!("{},{}\n", 500_000 + k * 100_000, k);
    }
    std::fs::write(dir.0.join("in.csv"), text).expect("input");
    let script = |settings: &str| {
        let text = format!(
            "CREATE STREAM s (time BIGINT NOT NULL, v BIGINT) \
             WITH (path = 'in.csv', event_time = 'time', epoch = 10000000, speed = 1, \
             units_per_second = 1000000);\n\
             CREATE SINK out WITH (sink = 'collect');\n{settings}\n\
             INSERT INTO out SELECT time, v FROM s;"
        );
        compile_script(&text, &dir.0, &Registry::with_builtins()).expect("compile")
    };
    let (free, held) = (script(""), script("SET max_latency = '50ms';"));
    let expected = values(&run_it(&free, 1));
    assert_eq!(expected.len(), 1_008);
    for workers in [1, 2] {
        let r = run_it(&held, workers);
        assert_eq!(values(&r), expected, "{workers} workers");
        let l = r.latency.expect("measured");
        let max = l.max.expect("windows written");
        assert!(
            max <= Duration::from_millis(100),
            "{workers} workers: a row waited {max:?} ({l:?})"
        );
        let last = l.trace.last().expect("the controller decided");
        assert!(
            last.flush > 0.0 && last.flush <= 0.025 + 1e-9,
            "{workers} workers: flush timeout {}",
            last.flush
        );
        let widest = l.trace.iter().map(|d| d.window).max().unwrap_or(0);
        assert!(
            widest > 8,
            "{workers} workers: W grew with the burst: {widest} {:?}",
            l.trace
        );
    }
}

/// A constraint on a named part of the plan (`latency_to`): from the source to an
/// operator's input. The controller and the report judge that operator's age on
/// arrival; EXPLAIN names the part; the output is the same; a name the plan does not
/// have, and a part without a constraint, are refused naming what there is.
#[test]
fn a_constraint_on_a_named_part_of_the_plan_is_judged_there() {
    let dir = scratch("latency-part");
    let free = paced(&dir.0, 2_000, 4_000, "");
    let with = |opts: &str| {
        let text = format!(
            "CREATE STREAM s (time BIGINT NOT NULL, v BIGINT) \
             WITH (path = 'in.csv', event_time = 'time', epoch = 1000000, speed = 1, \
             units_per_second = 1000000);\n\
             CREATE SINK out WITH (sink = 'collect'{opts});\n\
             INSERT INTO out SELECT time, v * 2 AS w FROM s WHERE v < 50;"
        );
        compile_script(&text, &dir.0, &Registry::with_builtins())
    };
    let part = with(", max_latency = '50ms', latency_to = 'query1'").expect("compile");
    let plan = &part.jobs[0].plan;
    assert_eq!(plan.latency_part(), Some("Map(query1)"));
    let text = braid_plan::explain::text(plan, &part.registry, 2);
    assert!(
        text.contains("latency constraint: 50ms from source s to the input of Map(query1)"),
        "{text}"
    );
    let expected = values(&run_it(&free, 1));
    for workers in [1, 2] {
        let r = run_it(&part, workers);
        assert_eq!(values(&r), expected, "{workers} workers");
        let l = r.latency.expect("measured");
        let (name, p99) = l.part.clone().expect("a part");
        assert_eq!(name, "Map(query1)");
        let p99 = p99.expect("windows reached the Map");
        assert!(
            p99 <= Duration::from_millis(50),
            "{workers} workers: {p99:?}"
        );
        assert!(!l.trace.is_empty(), "the controller decided");
        let line = &l.lines()[0];
        assert!(
            line.contains("met (p99 on arrival at Map(query1)"),
            "{line}"
        );
    }
    // A part between two operators, and from an operator to the sinks: the windows
    // are marked on arrival at the first, and the part's latency counted from there.
    for (opts, to) in [
        (
            ", max_latency = '50ms', latency_from = 'query1', latency_to = 'Merge'",
            "Merge",
        ),
        (
            ", max_latency = '50ms', latency_from = 'query1'",
            "the sinks",
        ),
    ] {
        let seg = with(opts).expect("compile");
        let plan = &seg.jobs[0].plan;
        assert_eq!(plan.latency_start(), Some("Map(query1)"));
        let text = braid_plan::explain::text(plan, &seg.registry, 2);
        assert!(
            text.contains("latency constraint: 50ms from the input of Map(query1) to "),
            "{text}"
        );
        for workers in [1, 2] {
            let r = run_it(&seg, workers);
            let what = format!("{opts}, {workers} workers");
            assert_eq!(values(&r), expected, "{what}");
            let l = r.latency.expect("measured");
            assert_eq!(l.from.as_deref(), Some("Map(query1)"), "{what}");
            let (name, p99) = l.part.clone().expect("a part");
            assert_eq!(name, to, "{what}");
            let p99 = p99.expect("marked windows reached its end");
            // A part of the path takes no longer than the path up to its end.
            let whole = match to {
                "Merge" => l
                    .nodes
                    .iter()
                    .find(|n| n.name == "Merge")
                    .and_then(|n| n.reach_p99),
                _ => l.p99,
            }
            .expect("the path measured");
            assert!(p99 <= whole, "{what}: {p99:?} > {whole:?}");
            assert!(
                l.lines()[0].contains(&format!("p99 from the input of Map(query1) to {to}")),
                "{what}: {}",
                l.lines()[0]
            );
        }
    }
    let e = with(", max_latency = '50ms', latency_from = 'Merge', latency_to = 'query1'")
        .err()
        .expect("a part that ends before it begins is refused")
        .to_string();
    assert!(e.contains("must come before"), "{e}");
    let e = with(", latency_from = 'query1'")
        .err()
        .expect("a start without a constraint is refused")
        .to_string();
    assert!(e.contains("has no `max_latency`"), "{e}");
    let e = with(", max_latency = '50ms', latency_to = 'nope'")
        .err()
        .expect("an unknown part is refused")
        .to_string();
    assert!(
        e.contains("no operator of that name") && e.contains("Map(query1), Merge"),
        "{e}"
    );
    let e = with(", latency_to = 'query1'")
        .err()
        .expect("a part without a constraint is refused")
        .to_string();
    assert!(e.contains("has no `max_latency`"), "{e}");
}

/// Run-time chaining of a stateless first stage: chained (forced), every row runs on
/// worker 0's partitions, the reader's; split (forced), on every worker's; as the
/// controller decides, either. The output is the same every way, on 2 and 4 workers;
/// EXPLAIN says which stage may be chained, and that a stateful one may not.
#[test]
fn a_stateless_stage_chained_onto_the_reader_gives_the_same_output() {
    let dir = scratch("latency-chain");
    let free = paced(&dir.0, 4_000, 20_000, "SET partitions = 4;");
    let held = paced(
        &dir.0,
        4_000,
        20_000,
        "SET partitions = 4; SET max_latency = '20ms';",
    );
    let plan = &held.jobs[0].plan;
    let text = braid_plan::explain::text(plan, &held.registry, 2);
    assert!(
        text.contains(
            "chaining: stages query1 (keeps no state: its rows go to worker 0's partitions)"
        ),
        "{text}"
    );
    let expected = values(&run_it(&free, 1));
    assert!(!expected.is_empty());
    for workers in [2, 4] {
        for chain in [Some(true), Some(false), None] {
            let cfg = RunConfig {
                workers,
                measure_latency: true,
                measure_costs: true,
                chain,
                ..RunConfig::default()
            };
            let r = run(&held.jobs[0].plan, &held.registry, &cfg).expect("run");
            let what = format!("{workers} workers, chain {chain:?}");
            assert_eq!(values(&r), expected, "{what}");
            let rows = |p: u32| -> u64 {
                r.costs
                    .iter()
                    .filter(|c| c.partition == p)
                    .map(|c| c.rows)
                    .sum()
            };
            let on_reader: u64 = (0..4).filter(|p| p % workers as u32 == 0).map(rows).sum();
            let elsewhere: u64 = (0..4).filter(|p| p % workers as u32 != 0).map(rows).sum();
            assert_eq!(on_reader + elsewhere, 4_000, "{what}: {:?}", r.costs);
            match chain {
                Some(true) => assert_eq!(elsewhere, 0, "{what}: {:?}", r.costs),
                Some(false) => assert!(elsewhere >= 1_000, "{what}: {:?}", r.costs),
                None => {}
            }
            let l = r.latency.expect("measured");
            let chained = l.trace.iter().filter(|d| d.chained).count();
            match chain {
                Some(true) => assert_eq!(chained, l.trace.len(), "{what}"),
                Some(false) => assert_eq!(chained, 0, "{what}"),
                None => {}
            }
        }
    }
    // A first stage that keeps state it cannot hand over, or whose split broadcasts to a
    // stateless function, is not chained: see the stateful test below for the others.
}

/// Run-time chaining of stages that keep state: a filter, a keyed count per window and
/// a count of those counts, cut at every operator (three stages: one without state,
/// two with). Chained, every partition of the later stages runs on worker 0, its state
/// handed over from the worker that held it; split, as placed. Forced either way, as
/// the controller decides, and switched every epoch or every third (partitions handed
/// over in both directions mid-run), the output equals one worker's, on 2 and 4
/// workers; EXPLAIN names the stages and how each is chained.
#[test]
fn stages_that_keep_state_are_chained_with_their_state_handed_over() {
    let dir = scratch("latency-chain-stateful");
    let mut text = String::from("time,v\n");
    for i in 0..3_000u64 {
        text += &format!("{},{}\n", i * 400, (i * 37) % 23);
    }
    std::fs::write(dir.0.join("in.csv"), text).expect("input");
    let script = |settings: &str, stages: &str| {
        compile_script(
            &format!(
                "{settings} SET partitions = 4; SET stages = '{stages}';\n\
                 CREATE STREAM s (time BIGINT NOT NULL, v BIGINT) \
                 WITH (path = 'in.csv', event_time = 'time', epoch = 10000);\n\
                 CREATE SINK out WITH (sink = 'collect');\n\
                 INSERT INTO out SELECT window_end, n, count(*) AS k FROM \
                 (SELECT window_end AS we, v, count(*) AS n FROM s WHERE v < 20 \
                 GROUP BY TUMBLE(time, 20000), v) AS per GROUP BY TUMBLE(we, 40000), n;"
            ),
            &dir.0,
            &Registry::with_builtins(),
        )
        .expect("compile")
    };
    for (stages, workers) in [("operator", 2), ("operator", 4), ("subquery", 2)] {
        let expected = values(&run_it(&script("", stages), 1));
        assert!(expected.len() > 20, "{expected:?}");
        let held = script("SET max_latency = '20ms';", stages);
        let plan = &held.jobs[0].plan;
        let chainable = plan.chainable_stages(&held.registry).expect("chainable");
        let kinds: Vec<bool> = chainable.stages.iter().map(|s| s.stateless).collect();
        assert!(kinds.contains(&false), "{chainable:?}");
        let text = braid_plan::explain::text(plan, &held.registry, 2);
        assert!(
            text.contains("chaining: stages")
                && text.contains("(its partitions' state handed over)"),
            "{text}"
        );
        for (chain, alternate) in [
            (Some(true), None),
            (Some(false), None),
            (None, None),
            (None, Some(1)),
            (None, Some(3)),
        ] {
            let cfg = RunConfig {
                workers,
                measure_latency: true,
                chain,
                chain_alternate: alternate,
                ..RunConfig::default()
            };
            let what =
                format!("{stages}: {workers} workers, chain {chain:?}, alternate {alternate:?}");
            let r = run(plan, &held.registry, &cfg).expect("run");
            assert_eq!(values(&r), expected, "{what}");
            let chaining = r.latency.expect("measured").chaining;
            if chain == Some(false) {
                assert_eq!(chaining, None, "{what}: never chained");
                continue;
            }
            let c = chaining.expect("stages could be chained");
            assert_eq!(c.stages, kinds.len(), "{what}");
            match (chain, alternate) {
                (Some(true), None) => assert!(c.switches.is_empty(), "{what}: {c:?}"),
                (None, Some(_)) => {
                    // 120 epochs of rows: the way changed many times, and each change
                    // handed over the partitions not placed on worker 0.
                    assert!(c.switches.len() >= 10, "{what}: {c:?}");
                    assert!(c.handed >= 10 && c.handed_bytes > 0, "{what}: {c:?}");
                }
                _ => {}
            }
        }
    }
}

/// A constraint's duration is written in `us`, `ms` or `s`: `'10 minutes'` is refused,
/// naming the forms it takes.
#[test]
fn a_constraint_in_minutes_is_refused() {
    let dir = scratch("latency-refused");
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

/// Notes the partition of every row it runs, in order; partitions 0 and 1 are slow and
/// pass every row on, 2 and 3 fast and pass none (Chain runs them first).
struct Order(std::sync::Arc<std::sync::Mutex<Vec<u32>>>);
struct OrderState {
    p: u32,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}
impl braid_plan::function::StreamFunctionFactory for Order {
    fn output_schema(
        &self,
        input: &braid_plan::types::Schema,
    ) -> braid_plan::error::Result<braid_plan::types::Schema> {
        Ok(input.clone())
    }
    fn create(&self, p: u32, _: u32) -> Box<dyn braid_plan::function::StreamFunction> {
        Box::new(OrderState {
            p,
            seen: self.0.clone(),
        })
    }
}
impl braid_plan::function::StreamFunction for OrderState {
    fn process(
        &mut self,
        row: braid_plan::batch::Row<'_>,
        out: &mut braid_plan::function::Emitter<'_>,
    ) {
        self.seen.lock().unwrap().push(self.p);
        if self.p < 2 {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_micros(200) {}
            out.emit_ints(&[row.int(0).unwrap_or(0), row.int(1).unwrap_or(0)]);
        }
    }
    fn end_of_epoch(&mut self, _: u64, _: &mut braid_plan::function::Emitter<'_>) {}
    fn finish(&mut self, _: &mut braid_plan::function::Emitter<'_>) {}
}

/// Each scheduler runs a worker's partitions in its own order (seen by the stream
/// functions), with the same output: FIFO in arrival order, round robin in turn, Chain
/// the fast partitions that drop their rows first once each is measured.
#[test]
fn each_scheduler_runs_partitions_in_its_order_with_the_same_output() {
    use braid_plan::plan::{MergeKind, Route, Scheduler, SinkSpec, SourceSpec, Strategy};
    let schema = braid_plan::types::Schema::ints(&["time", "key"])
        .with_event_time("time")
        .expect("time");
    // 8 rows per partition, keys in turn 0, 1, 2, 3, 0, ...; one epoch.
    let mut input = braid_plan::batch::Batch::new(2);
    for i in 0..32u64 {
        input.push_ints(
            braid_plan::batch::RowKey { seq: i, lane: 0 },
            &[i as i64, (i % 4) as i64],
        );
    }
    let key = braid_plan::expr::Expr::col(&schema, "key").expect("key");
    let mut source = Plan::source("s", SourceSpec::Memory(std::sync::Arc::new(input)), schema);
    if let Plan::Source(s) = &mut source {
        s.epoch = 1000;
    }
    let plan = source
        .split(
            4,
            Route::Expr {
                expr: key,
                when: None,
            },
            None,
            Strategy::Fsplit,
        )
        .map("order")
        .merge(MergeKind::TimeOrdered)
        .sink(SinkSpec::Collect);
    let mut outputs = Vec::new();
    for scheduler in [
        Scheduler::Fifo,
        Scheduler::RoundRobin,
        Scheduler::Chain,
        Scheduler::ChainFlush,
    ] {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut registry = Registry::with_builtins();
        registry.add_function("order", std::sync::Arc::new(Order(seen.clone())));
        let cfg = RunConfig {
            workers: 1,
            // One row a slice, a yield after each.
            quantum: Some(Duration::ZERO),
            ..RunConfig::default()
        };
        let report = run(&plan.clone().scheduler(scheduler), &registry, &cfg).expect("run");
        outputs.push(report.collected);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 32, "{scheduler:?}");
        let turns: Vec<u32> = (0..32).map(|i| i % 4).collect();
        match scheduler {
            Scheduler::Fifo | Scheduler::RoundRobin => assert_eq!(seen, turns, "{scheduler:?}"),
            Scheduler::Chain | Scheduler::ChainFlush => {
                // Each partition once to measure it, then the fast ones' rows, then the
                // slow ones'. (Chain-flush: rows unstamped, nothing is ever "too old".)
                assert_eq!(&seen[..4], &[0, 1, 2, 3], "{scheduler:?}: {seen:?}");
                assert!(
                    seen[4..18].iter().all(|&p| p >= 2) && seen[18..].iter().all(|&p| p < 2),
                    "{scheduler:?}: {seen:?}"
                );
            }
        }
        assert_eq!(
            report.waiting_peak, 32,
            "{scheduler:?}: every row waited at once"
        );
    }
    assert!(outputs.iter().all(|o| *o == outputs[0]) && outputs[0].len() == 16);
}

#[test]
fn a_scheduler_is_set_in_sql_shown_by_explain_and_an_unknown_one_refused() {
    let dir = scratch("scheduler-sql");
    let s = paced(&dir.0, 10, 1000, "SET scheduler = 'chain';");
    let text = braid_plan::explain::text(&s.jobs[0].plan, &s.registry, 2);
    assert!(
        text.contains("scheduler chain: the partition that removes rows fastest first"),
        "{text}"
    );
    let Plan::Sink(sink) = &s.jobs[0].plan else {
        panic!("a sink")
    };
    let mut node = Some(sink.input.as_ref());
    let mut maps = 0;
    while let Some(p) = node {
        if let Plan::Map(m) = p {
            assert_eq!(m.scheduler, braid_plan::plan::Scheduler::Chain);
            maps += 1;
        }
        node = p.input();
    }
    assert!(maps >= 1);
    let fifo = paced(&dir.0, 10, 1000, "");
    // FIFO, the default, is not shown.
    assert!(
        !braid_plan::explain::text(&fifo.jobs[0].plan, &fifo.registry, 2).contains("  scheduler ")
    );
    let text =
        "CREATE STREAM s (time BIGINT NOT NULL) WITH (path = 'x.csv', event_time = 'time');\n\
                SET scheduler = 'lifo';";
    let e = match compile_script(text, &dir.0, &Registry::with_builtins()) {
        Ok(_) => panic!("an unknown scheduler is refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("scheduler `lifo`; expected 'fifo', 'round_robin', 'chain' or 'chain_flush'"),
        "{e}"
    );
}
