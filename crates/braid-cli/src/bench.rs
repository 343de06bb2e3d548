//! `braid bench split`: the thesis's split experiments on this machine.
//!
//! Measures throughput and process CPU seconds of every split strategy on the built-in
//! generator with a counting stream function (so the split dominates), for q = 2..512
//! at b = 0.5% and for b = 0..100% at q = 64, next to a single-threaded baseline loop
//! that does the same generation and routing with no engine. Writes CSV and SVG plots.

use crate::plot::{Chart, Series};
use anyhow::{Context, Result};
use braid_exec::runtime::RunConfig;
use braid_exec::source::generator::tuple;
use braid_plan::function::Registry;
use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_plan::sql::parse_expr;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Which benchmark.
#[derive(clap::Subcommand)]
pub enum Which {
    /// Split strategies vs. q and broadcast fraction.
    Split {
        /// Tuples per measurement.
        #[arg(long, default_value_t = 2_000_000)]
        tuples: u64,
        /// Worker threads.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Repetitions per point (the median is reported).
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Output directory.
        #[arg(long, default_value = "docs/benchmarks")]
        out: PathBuf,
    },
}

fn cpu_seconds() -> f64 {
    // utime + stime of this process, from /proc (clock ticks of 1/100 s on Linux).
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit(')').next()?.split_whitespace().collect::<Vec<_>>();
            let ut: f64 = rest.get(11)?.parse().ok()?;
            let st: f64 = rest.get(12)?.parse().ok()?;
            Some((ut + st) / 100.0)
        })
        .unwrap_or(0.0)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Generation plus routing, one thread, no engine: the reference for overhead.
fn baseline(spec: &GeneratorSpec, q: u32) -> f64 {
    let t = Instant::now();
    let mut counts = vec![0u64; q as usize];
    let mut bcast = 0u64;
    let mut f = [0i64; 15];
    for i in 0..spec.tuples {
        tuple(spec, i, &mut f);
        if f[0] == 2 {
            bcast += 1;
        } else {
            counts[(f[4].rem_euclid(q as i64)) as usize] += 1;
        }
    }
    std::hint::black_box((&counts, bcast));
    spec.tuples as f64 / t.elapsed().as_secs_f64()
}

fn engine(spec: GeneratorSpec, q: u32, strategy: Strategy, workers: usize) -> Result<(f64, f64)> {
    let schema = GeneratorSpec::schema();
    let route = Route::Expr {
        expr: parse_expr("xway", &schema)?,
        when: None,
    };
    let broadcast = Some(parse_expr("type = 2", &schema)?);
    let mut plan = Plan::source("gen", SourceSpec::Generator(spec), schema)
        .split(q, route, broadcast, strategy)
        .map("count")
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard);
    plan.leaf_source_mut().window = 1024;
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let report = braid_exec::runtime::run(
        &plan,
        &Registry::with_builtins(),
        &RunConfig {
            workers,
            ..RunConfig::default()
        },
    )?;
    let secs = t.elapsed().as_secs_f64();
    Ok((report.rows_in as f64 / secs, cpu_seconds() - cpu0))
}

/// Runs the benchmark.
pub fn run(which: Which) -> Result<()> {
    let Which::Split {
        tuples,
        workers,
        reps,
        out,
    } = which;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let strategies = [
        Strategy::Fsplit,
        Strategy::Maxtree,
        Strategy::Exptree,
        Strategy::Parasplit,
    ];
    let mut csv =
        String::from("experiment,strategy,q,b,workers,rows_per_s,cpu_s,baseline_rows_per_s\n");
    let load_before = load();
    let spec = |b: f64| GeneratorSpec {
        tuples,
        rate: 100_000.0,
        keys: 512,
        broadcast: b,
        seed: 1,
    };
    let mut by_q: Vec<Series> = strategies
        .iter()
        .map(|s| Series::line(s.to_string(), vec![]))
        .collect();
    let mut base_q = Series::line("baseline loop (1 thread)", vec![]);
    for q in [2u32, 8, 64, 512] {
        let base = median((0..reps).map(|_| baseline(&spec(0.005), q)).collect());
        base_q.points.push((q as f64, base));
        for (k, &s) in strategies.iter().enumerate() {
            let runs: Vec<(f64, f64)> = (0..reps)
                .map(|_| engine(spec(0.005), q, s, workers))
                .collect::<Result<_>>()?;
            let rate = median(runs.iter().map(|r| r.0).collect());
            let cpu = median(runs.iter().map(|r| r.1).collect());
            eprintln!(
                "q={q:>4} b=0.005 {s:<9} {rate:>12.0} rows/s  cpu {cpu:.2}s  (baseline {base:.0})"
            );
            let _ = writeln!(
                csv,
                "scale-q,{s},{q},0.005,{workers},{rate:.0},{cpu:.3},{base:.0}"
            );
            by_q[k].points.push((q as f64, rate));
        }
    }
    let mut by_b: Vec<Series> = strategies
        .iter()
        .map(|s| Series::line(s.to_string(), vec![]))
        .collect();
    for b in [0.0, 0.01, 0.1, 0.5, 1.0] {
        let base = median((0..reps).map(|_| baseline(&spec(b), 64)).collect());
        for (k, &s) in strategies.iter().enumerate() {
            let runs: Vec<(f64, f64)> = (0..reps)
                .map(|_| engine(spec(b), 64, s, workers))
                .collect::<Result<_>>()?;
            let rate = median(runs.iter().map(|r| r.0).collect());
            let cpu = median(runs.iter().map(|r| r.1).collect());
            eprintln!(
                "q=  64 b={b:<5} {s:<9} {rate:>12.0} rows/s  cpu {cpu:.2}s  (baseline {base:.0})"
            );
            let _ = writeln!(
                csv,
                "scale-b,{s},64,{b},{workers},{rate:.0},{cpu:.3},{base:.0}"
            );
            by_b[k].points.push((b * 100.0, rate));
        }
    }
    by_q.push(base_q);
    std::fs::write(out.join("split.csv"), &csv)?;
    let chart = Chart {
        title: format!("Split throughput vs q (b = 0.5%, {workers} workers, {tuples} tuples; load {load_before})"),
        x_label: "q (partitions)".into(),
        y_label: "rows/s".into(),
        log_x: true,
        series: by_q,
        ..Chart::default()
    };
    std::fs::write(out.join("split-q.svg"), chart.to_svg(800, 450))?;
    let chart = Chart {
        title: format!("Split throughput vs broadcast fraction (q = 64, {workers} workers)"),
        x_label: "b (% broadcast)".into(),
        y_label: "rows/s".into(),
        series: by_b,
        ..Chart::default()
    };
    std::fs::write(out.join("split-b.svg"), chart.to_svg(800, 450))?;
    eprintln!(
        "load before: {load_before}; after: {}; wrote {}/split.csv, split-q.svg, split-b.svg",
        load(),
        out.display()
    );
    Ok(())
}
