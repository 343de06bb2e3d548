//! Profiling (`RunConfig::profile`): the operators' times add up to the workers' busy
//! time measured around them, an expensive partition comes out as the hot spot, and
//! EXPLAIN ANALYZE names the plan's nodes with their figures; the live counters say how
//! far a paced run is behind its schedule.

use braid_exec::profile::{annotate, NodeAt, Profile, Profiler};
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_exec::session::Session;
use braid_plan::batch::Row;
use braid_plan::function::{Emitter, Registry, StreamFunction, StreamFunctionFactory};
use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec};
use braid_plan::types::Schema;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Passes rows on; on partition `hot` (if any) it spins `spin` per row first, on the
/// others `cool` per row.
struct Spin {
    hot: Option<u32>,
    spin: Duration,
    cool: Duration,
}

struct SpinPart(Duration);

impl StreamFunction for SpinPart {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let start = Instant::now();
        while start.elapsed() < self.0 {
            std::hint::spin_loop();
        }
        out.emit_row(row);
    }
}

impl StreamFunctionFactory for Spin {
    fn output_schema(&self, input: &Schema) -> braid_plan::error::Result<Schema> {
        Ok(input.clone())
    }
    fn create(&self, partition: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(SpinPart(match Some(partition) == self.hot {
            true => self.spin,
            false => self.cool,
        }))
    }
}

fn registry(spin: Spin) -> Registry {
    let mut r = Registry::with_builtins();
    r.add_function("spin", Arc::new(spin));
    r
}

/// Generator -> Split(q = 8, round robin) -> Map(spin) -> Merge(union) -> Sink(discard).
fn plan(tuples: u64) -> Plan {
    let g = GeneratorSpec {
        tuples,
        rate: 1000.0,
        keys: 8,
        broadcast: 0.0,
        seed: 1,
    };
    Plan::source("gen", SourceSpec::Generator(g), GeneratorSpec::schema())
        .split(8, Route::RoundRobin, None, "fsplit".parse().unwrap())
        .map("spin")
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard)
}

fn profiled(plan: &Plan, registry: &Registry, workers: usize) -> (RunReport, Profile) {
    let cfg = RunConfig {
        workers,
        profile: Some(Profiler::new()),
        ..RunConfig::default()
    };
    let report = run(plan, registry, &cfg).expect("runs");
    let profile = report.profile.clone().expect("a profile");
    (report, profile)
}

const SINK: NodeAt = NodeAt { plan: 0, depth: 0 };
const MERGE: NodeAt = NodeAt { plan: 0, depth: 1 };
const MAP: NodeAt = NodeAt { plan: 0, depth: 2 };
const SPLIT: NodeAt = NodeAt { plan: 0, depth: 3 };
const SOURCE: NodeAt = NodeAt { plan: 0, depth: 4 };

#[test]
fn operator_times_add_up_to_the_busy_time_measured_around_them() {
    let registry = registry(Spin {
        hot: None,
        spin: Duration::ZERO,
        cool: Duration::from_micros(10),
    });
    for workers in [1, 2, 4] {
        // The worst worker's gap between its operators' time and its busy time. A
        // thread the OS takes off its core between two operators widens it (4 workers
        // on 2 cores, beside the other tests): a run over 5% is run again, up to three
        // times, and the best is held to 5%; a profiler that misses time misses it in
        // every run.
        let mut tries = Vec::new();
        let profile = loop {
            let (report, profile) = profiled(&plan(40_000), &registry, workers);
            assert_eq!(report.rows_in, 40_000);
            assert_eq!(profile.workers.len(), workers);
            let mut worst = (0.0f64, String::new());
            for w in &profile.workers {
                // The operators' own intervals, summed, against the dataflow root's
                // intervals around them (timely's progress tracking runs between them).
                let ops: u64 = profile
                    .operators
                    .iter()
                    .filter(|o| o.worker == w.worker)
                    .map(|o| o.nanos)
                    .sum();
                assert!(w.busy > 0 && w.busy <= w.wall, "{w:?}");
                let off = (w.busy as f64 - ops as f64).abs() / w.busy as f64;
                if off >= worst.0 {
                    worst = (
                        off,
                        format!(
                            "worker {} ran operators {ops} ns, busy {} ns ({:.1}% off)",
                            w.worker,
                            w.busy,
                            off * 100.0
                        ),
                    );
                }
            }
            tries.push(worst.1);
            if worst.0 <= 0.05 {
                break profile;
            }
            assert!(tries.len() < 3, "{workers} workers: {tries:?}");
        };
        // Every node of the plan has operators and its time; the rows are the run's.
        // (A union merge only concatenates streams: it has rows but no operator.)
        for at in [SINK, MAP, SPLIT, SOURCE] {
            let f = profile
                .node(at, None)
                .unwrap_or_else(|| panic!("{at:?} measured"));
            assert!(f.activations > 0 && f.nanos > 0, "{at:?}: {f:?}");
        }
        assert_eq!(profile.node(MERGE, None).unwrap().rows_out, Some(40_000));
        let map = profile.node(MAP, None).unwrap();
        assert_eq!(map.rows_in, Some(40_000));
        assert_eq!(map.rows_out, Some(40_000));
        assert_eq!(profile.node(SOURCE, None).unwrap().rows_out, Some(40_000));
        // 40 000 rows spun for 10 us each: at least 400 ms in the Map.
        assert!(map.nanos >= 400_000_000, "{map:?}");
        let rows: u64 = profile.partitions.iter().map(|p| p.rows).sum();
        assert_eq!(rows, 40_000);
    }
}

#[test]
fn an_expensive_partition_is_the_hot_spot() {
    const HOT: u32 = 5;
    let registry = registry(Spin {
        hot: Some(HOT),
        spin: Duration::from_micros(40),
        cool: Duration::ZERO,
    });
    for workers in [1, 2, 4] {
        let (_, profile) = profiled(&plan(16_000), &registry, workers);
        let hottest = profile.hottest_partitions();
        assert_eq!(hottest[0].partition, HOT, "{hottest:?}");
        // 2000 rows x 40 us = 80 ms on the hot partition.
        assert!(hottest[0].nanos >= 80_000_000, "{hottest:?}");
        assert!(hottest[0].nanos > 5 * hottest[1].nanos, "{hottest:?}");
        // The operator that took the most time is the Map on the hot partition's worker.
        let top = profile.operators.iter().max_by_key(|o| o.nanos).unwrap();
        assert_eq!(top.node, Some(MAP), "{top:?}");
        assert_eq!(top.worker, HOT as usize % workers, "{top:?}");
        assert!(top.nanos >= hottest[0].nanos, "{top:?} {hottest:?}");
    }
}

#[test]
fn profiling_is_off_unless_asked_for() {
    let registry = registry(Spin {
        hot: None,
        spin: Duration::ZERO,
        cool: Duration::ZERO,
    });
    let cfg = RunConfig {
        workers: 2,
        ..RunConfig::default()
    };
    let report = run(&plan(1000), &registry, &cfg).expect("runs");
    assert!(report.profile.is_none());
    assert!(report.costs.is_empty());
}

#[test]
fn explain_analyze_shows_each_node_with_its_figures() {
    let mut session = Session::new(
        &Registry::with_builtins(),
        RunConfig {
            workers: 2,
            ..RunConfig::default()
        },
    );
    session.set_profile(Some(Profiler::new()));
    session
        .compile(
            "SET aggregate = 'one_phase';
             CREATE STREAM gen WITH (source = 'generator', tuples = 3000, rate = 1000);
             CREATE SINK out WITH (sink = 'collect');
             INSERT INTO out SELECT xway, count(*) AS n FROM gen GROUP BY xway;",
            Path::new("."),
        )
        .expect("compiles");
    let report = session.run_next().expect("a query").expect("runs");
    let text = session.analyze(&report.run).expect("a profile");
    let plan = report.run.plan.as_ref().unwrap();
    let profile = report.run.profile.as_ref().unwrap();
    assert_eq!(text, annotate(plan, session.registry(), 2, profile));
    // The plan EXPLAIN prints, with a "measured:" line under each node.
    let lines: Vec<&str> = text.lines().collect();
    for (node, rows) in [
        ("Sink:", "rows in "),
        ("Merge:", "rows out "),
        ("Map: query1", "rows in 3000, rows out "),
        ("Split:", "rows in 3000, rows out 3000"),
        ("Source: gen", "rows out 3000"),
    ] {
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(node))
            .unwrap_or_else(|| panic!("{node} in\n{text}"));
        let note = lines[at + 1..]
            .iter()
            .find(|l| l.trim_start().starts_with("measured:"))
            .unwrap();
        assert!(note.contains(rows), "{node}: {note}\n{text}");
        assert!(note.contains(" ms, busy "), "{note}");
        // Every node runs operators (the merge is time-ordered: on worker 0).
        assert!(!note.contains(" 0 activations"), "{note}");
    }
    assert_eq!(
        text.lines().filter(|l| l.contains("measured:")).count(),
        5,
        "{text}"
    );
}

#[test]
fn a_paced_run_that_cannot_keep_up_is_seen_behind_its_schedule() {
    use braid_exec::session::Counters;
    use braid_plan::plan::Pace;
    // 3 epochs of 1000 rows, due over 0.3 s; each row takes 0.5 ms: 1.5 s of work.
    let registry = registry(Spin {
        hot: None,
        spin: Duration::ZERO,
        cool: Duration::from_micros(500),
    });
    let mut plan = plan(3000);
    plan.leaf_source_mut().pace = Pace::EventTime {
        units_per_second: 1.0,
        speed: 10.0,
    };
    let counters = Arc::new(Counters::default());
    let cfg = RunConfig {
        counters: Some(counters.clone()),
        ..RunConfig::default()
    };
    let watch = counters.clone();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let watcher = std::thread::spawn(move || {
        let mut most = Duration::ZERO;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            most = most.max(watch.behind().unwrap_or_default());
            std::thread::sleep(Duration::from_millis(5));
        }
        most
    });
    run(&plan, &registry, &cfg).expect("runs");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = watcher.join().unwrap();
    assert!(most >= Duration::from_millis(500), "{most:?}");
    // An unpaced run has no schedule to be behind.
    let counters = Arc::new(Counters::default());
    let cfg = RunConfig {
        counters: Some(counters.clone()),
        ..RunConfig::default()
    };
    let mut unpaced = self::plan(100);
    unpaced.leaf_source_mut().pace = Pace::Max;
    run(&unpaced, &registry, &cfg).expect("runs");
    assert_eq!(counters.behind(), None);
}
