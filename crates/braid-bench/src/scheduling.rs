//! Part (d) of `braid-bench latency`: the scheduling policies (`SET scheduler`) on a
//! query whose partitions differ in cost and selectivity, the setting StreamAPAS's and
//! Babcock et al.'s schedulers are made for.
//!
//! A stream replayed in real time is split by `value % 16` over 16 partitions on one
//! worker. Partitions 0-7 cost 20 us a row and pass every row on (selectivity 1);
//! partitions 8-15 cost 2 us a row and pass one row in ten on. For each policy, with and
//! without a latency constraint, at two rates near the worker's capacity: end-to-end
//! latency, throughput and the most rows the Map held waiting. The output is the same
//! under every policy (the oracle tests check that); only its timing differs.

use crate::plot::{Chart, Series};
use crate::report::{markdown_table, write_csv, Align};
use anyhow::Result;
use braid_exec::runtime::{self, RunConfig};
use braid_plan::batch::Row;
use braid_plan::function::{Emitter, Registry, StreamFunction, StreamFunctionFactory};
use braid_plan::plan::{MergeKind, Pace, Plan, Route, Scheduler, SinkSpec, SourceSpec, Strategy};
use braid_plan::types::Schema;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Partitions.
const Q: u32 = 16;

/// The partitions' stream function: partition p < Q/2 spins 20 us a row and passes it
/// on; p >= Q/2 spins 2 us and passes one row in ten (`spin` false: no spinning, what
/// the policies' own work costs shows).
struct Skewed {
    spin: bool,
}

struct SkewedState {
    cost: Duration,
    every: u64,
    seen: u64,
}

impl StreamFunctionFactory for Skewed {
    fn output_schema(&self, input: &Schema) -> braid_plan::error::Result<Schema> {
        Ok(input.clone())
    }
    fn create(&self, p: u32, q: u32) -> Box<dyn StreamFunction> {
        let heavy = p < q / 2;
        Box::new(SkewedState {
            cost: match self.spin {
                true => Duration::from_micros(if heavy { 20 } else { 2 }),
                false => Duration::ZERO,
            },
            every: if heavy { 1 } else { 10 },
            seen: 0,
        })
    }
}

impl StreamFunction for SkewedState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        if !self.cost.is_zero() {
            let t = Instant::now();
            while t.elapsed() < self.cost {
                std::hint::spin_loop();
            }
        }
        self.seen += 1;
        if self.seen.is_multiple_of(self.every) {
            out.emit_ints(&[row.int(0).unwrap_or(0), row.int(1).unwrap_or(0)]);
        }
    }
    fn end_of_epoch(&mut self, _: u64, _: &mut Emitter<'_>) {}
    fn finish(&mut self, _: &mut Emitter<'_>) {}
}

#[derive(Serialize)]
struct SchedRow {
    scheduler: String,
    constraint_ms: f64,
    offered_rows_per_second: f64,
    achieved_rows_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    waiting_peak: u64,
}

/// The plan over `gen.csv` in `dir` running `function`: paced at 1 ms per event-time
/// unit (or as fast as possible), epoch 100 ms.
fn plan(
    dir: &Path,
    function: &str,
    paced: bool,
    scheduler: Scheduler,
    constraint: Option<Duration>,
) -> Plan {
    let schema = Schema::ints(&["time", "value"])
        .with_event_time("time")
        .expect("int64 time");
    let value = braid_plan::expr::Expr::col(&schema, "value").expect("value");
    let mut p = Plan::source(
        "gen",
        SourceSpec::Csv {
            path: dir.join("gen.csv"),
            header: true,
        },
        schema,
    );
    if let Plan::Source(s) = &mut p {
        s.epoch = 100;
        if paced {
            s.pace = Pace::EventTime {
                units_per_second: 1000.0,
                speed: 1.0,
            };
        }
    }
    let p = p
        .split(
            Q,
            Route::Expr {
                expr: value,
                when: None,
            },
            None,
            Strategy::Fsplit,
        )
        .map(function)
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard)
        .scheduler(scheduler);
    match constraint {
        Some(c) => p.max_latency(c),
        None => p,
    }
}

/// Writes `n` rows at `per_second` rows/s: `time` in ms, `value` cycling over the
/// partitions.
fn write_input(dir: &Path, n: u64, per_second: f64) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("gen.csv"))?);
    writeln!(f, "time,value")?;
    for i in 0..n {
        let t = (i as f64 * 1000.0 / per_second) as u64;
        // A fixed shuffle of the partitions, so heavy and light rows interleave.
        writeln!(f, "{t},{}", (i * 7 + i / 16) % u64::from(Q))?;
    }
    Ok(f.flush()?)
}

/// Runs part (d); returns its markdown section (the CSV and plot go to `out`).
pub fn run(out: &Path, scratch: &Path, seconds: f64, constraint: Duration) -> Result<String> {
    let dir = scratch.join("schedulers");
    std::fs::create_dir_all(&dir)?;
    let mut registry = Registry::with_builtins();
    registry.add_function("skewed", Arc::new(Skewed { spin: true }));
    registry.add_function("light", Arc::new(Skewed { spin: false }));
    // Mean cost 11 us a row: a core does about 90,000 rows/s.
    let rates = [40_000.0, 75_000.0];
    let policies = [
        Scheduler::Fifo,
        Scheduler::RoundRobin,
        Scheduler::Chain,
        Scheduler::ChainFlush,
    ];
    let mut rows = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for c in [None, Some(constraint)] {
        for &s in &policies {
            let mut p99s = Vec::new();
            for &r in &rates {
                write_input(&dir, (r * seconds) as u64, r)?;
                let cfg = RunConfig {
                    measure_latency: true,
                    ..RunConfig::default()
                };
                let report = runtime::run(&plan(&dir, "skewed", true, s, c), &registry, &cfg)?;
                let l = report.latency.clone().unwrap_or_default();
                let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
                let row = SchedRow {
                    scheduler: s.name().into(),
                    constraint_ms: c.map_or(0.0, |c| c.as_secs_f64() * 1e3),
                    offered_rows_per_second: r,
                    achieved_rows_per_second: report.rows_in as f64 / report.elapsed.as_secs_f64(),
                    p50_ms: ms(l.p50),
                    p99_ms: ms(l.p99),
                    waiting_peak: report.waiting_peak,
                };
                eprintln!(
                    "(d) {} {:?} at {r} rows/s: p50 {:.2} ms, p99 {:.2} ms, {:.0} rows/s, waiting peak {}",
                    row.scheduler,
                    c,
                    row.p50_ms,
                    row.p99_ms,
                    row.achieved_rows_per_second,
                    row.waiting_peak
                );
                p99s.push((r, row.p99_ms.max(0.01)));
                rows.push(row);
            }
            if c.is_some() {
                series.push(Series::line(format!("p99, {}", s.name()), p99s));
            }
        }
    }
    // At full speed, not paced, without the spinning: what each policy's slicing and
    // yielding costs. Rounds of every policy in turn, so that drift hits all alike.
    let n = 8_000_000u64;
    write_input(&dir, n, 1_000_000.0)?;
    let rounds = 7;
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); policies.len()];
    for _ in 0..rounds {
        for (k, &s) in policies.iter().enumerate() {
            let report = runtime::run(
                &plan(&dir, "light", false, s, None),
                &registry,
                &RunConfig::default(),
            )?;
            secs[k].push(report.elapsed.as_secs_f64());
        }
    }
    let medians: Vec<f64> = secs
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    let full: Vec<Vec<String>> = policies
        .iter()
        .zip(&medians)
        .map(|(s, &m)| {
            vec![
                s.name().to_string(),
                n.to_string(),
                format!("{m:.3}"),
                format!("{:.0}", n as f64 / m),
                format!("{:.2}", medians[0] / m),
            ]
        })
        .collect();
    write_csv(&out.join("latency-schedulers.csv"), &rows)?;
    Chart {
        title: "Scheduling policies: p99 under a constraint".into(),
        x_label: "offered rows/s".into(),
        y_label: "p99 latency (ms)".into(),
        log_x: false,
        log_y: true,
        series,
        hlines: vec![(constraint.as_secs_f64() * 1e3, "constraint".into())],
    }
    .write_svg(&out.join("latency-schedulers.svg"), 800, 400)?;
    let table = markdown_table(
        &[
            ("scheduler", Align::Left),
            ("constraint (ms)", Align::Right),
            ("offered rows/s", Align::Right),
            ("achieved rows/s", Align::Right),
            ("p50 (ms)", Align::Right),
            ("p99 (ms)", Align::Right),
            ("most rows waiting", Align::Right),
        ],
        rows.iter()
            .map(|r| {
                vec![
                    r.scheduler.clone(),
                    match r.constraint_ms {
                        0.0 => "-".into(),
                        c => format!("{c:.0}"),
                    },
                    format!("{:.0}", r.offered_rows_per_second),
                    format!("{:.0}", r.achieved_rows_per_second),
                    format!("{:.2}", r.p50_ms),
                    format!("{:.2}", r.p99_ms),
                    r.waiting_peak.to_string(),
                ]
            })
            .collect(),
    );
    let full = markdown_table(
        &[
            ("scheduler", Align::Left),
            ("rows", Align::Right),
            ("seconds (median of 7)", Align::Right),
            ("rows/s", Align::Right),
            ("vs fifo", Align::Right),
        ],
        full,
    );
    Ok(format!(
        "A stream replayed in real time ({seconds} s per run, epoch 100 ms), split by `value % 16` over \
16 partitions on one worker, merged as a union, output discarded. Partitions 0-7 cost 20 us a \
row and pass every row on; partitions 8-15 cost 2 us a row and pass one in ten on (a mean of \
11 us a row: a core does about 90,000 rows/s). Each policy (`SET scheduler`, \
`Plan::scheduler`), without a constraint and with `max_latency = '{c} ms'`; most rows waiting: \
the most rows the Map held come in and not run yet.\n\n{table}\n\
![p99 per policy](latency-schedulers.svg)\n\n\
At full speed ({n} rows read as fast as they parse, no constraint, the same partitions without \
their spinning: what a policy's slices and yields cost):\n\n{full}\n\
Raw numbers: [latency-schedulers.csv](latency-schedulers.csv).\n",
        c = constraint.as_secs_f64() * 1e3,
    ))
}
