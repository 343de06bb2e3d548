//! `braid-bench tune`: Paper V's heuristics on this machine: the single-splitter rate
//! `Φ_PS^(1)` (measured with the engine, `braid_exec::tune`), the number of window
//! splitters `p` it gives for desired rates (eq. 6), and the physical window size `W`
//! by doubling until a doubling gains less than 0.15 %
//! (`braid_plan::cost::window_size_by_doubling`).
//!
//! ```text
//! cargo run --release -p braid-bench -- tune --tuples 200000 --reps 1
//! ```

use crate::host;
use crate::measure::{measure, median};
use crate::query::{gen_spec, pct, plan};
use crate::report::write_csv;
use anyhow::{Context, Result};
use braid_exec::tune::{describe, resolved_shape, set_rates, single_splitter_rate};
use braid_plan::cost::window_size_by_doubling;
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SplitShape, Strategy};
use serde::Serialize;
use std::path::PathBuf;

/// Options of `braid-bench tune`.
#[derive(clap::Args)]
pub struct TuneArgs {
    /// Logical partitions q.
    #[arg(long, default_value_t = 64)]
    parts: u32,
    /// Generator broadcast fraction b (rows with type = 2 are broadcast).
    #[arg(long, default_value_t = 0.005)]
    broadcast_fraction: f64,
    /// Split strategy whose throughput W is tuned for.
    #[arg(long, default_value = "parasplit")]
    strategy: String,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Tuples per measurement of the W search.
    #[arg(long, default_value_t = 1_000_000)]
    tuples: u64,
    /// Tuples of the single-splitter measurement.
    #[arg(long, default_value_t = 500_000)]
    sample: u64,
    /// Desired input rate Φ_D (rows/s); without it p is shown for 1, 2, 4 and 8 times
    /// the single-splitter rate.
    #[arg(long)]
    desired_rate: Option<f64>,
    /// Repetitions per measurement (median).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// First W of the doubling.
    #[arg(long, default_value_t = 64)]
    start_window: usize,
    /// Largest W tried.
    #[arg(long, default_value_t = 65_536)]
    max_window: usize,
    /// Generator tuples per event-time second (= per epoch).
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Also write the W measurements as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

/// A line of the `--csv` file: one W of the doubling.
#[derive(Serialize)]
struct WindowRow {
    window: usize,
    rows_per_s: u64,
}

/// Runs the benchmark.
pub fn run(a: TuneArgs) -> Result<()> {
    let registry = Registry::with_builtins();
    let strategy: Strategy = a.strategy.parse()?;
    eprintln!("bench tune: load average {}", host::loadavg());
    let spec = gen_spec(a.tuples, a.rate, a.broadcast_fraction);
    let mut p = plan(spec, a.parts, strategy, 1024)?;
    // p first (W = 1024), so that the W search runs the plan as it will run.
    let one = single_splitter_rate(&p, &registry, a.sample, a.reps)?;
    println!(
        "single-splitter rate Φ_PS^(1) = {one:.0} rows/s (fsplit, q = 1, 1 worker, {} tuples, W = 1024)",
        a.sample.min(a.tuples)
    );
    let desired: Vec<f64> = match a.desired_rate {
        Some(d) => vec![d],
        None => [1.0, 2.0, 4.0, 8.0].iter().map(|k| k * one).collect(),
    };
    for &d in &desired {
        let mut q = p.clone();
        set_rates(&mut q, d, one)?;
        let shape = resolved_shape(&q, &registry, a.workers)?;
        println!(
            "desired Φ_D = {d:.0} rows/s -> eq. 6: p = {} (resolved shape for {strategy}: {})",
            braid_plan::cost::parasplit_p(d, one, a.parts, a.broadcast_fraction.max(0.01)),
            describe(&shape)
        );
    }
    if let Some(d) = a.desired_rate {
        set_rates(&mut p, d, one)?;
    }
    eprintln!(
        "W by doubling for {strategy}, q = {}, b = {}%, {} worker(s), {} tuples, median of {}:",
        a.parts,
        pct(a.broadcast_fraction),
        a.workers,
        a.tuples,
        a.reps
    );
    let (w, log) = window_by_doubling(
        &p,
        &registry,
        a.workers,
        a.reps,
        a.start_window,
        a.max_window,
    )?;
    for (i, &(ww, r)) in log.iter().enumerate() {
        let gain = if i == 0 {
            String::new()
        } else {
            format!("{:+.2}%", (r / log[i - 1].1 - 1.0) * 100.0)
        };
        println!("W = {ww:>6}: {r:>12.0} rows/s {gain}");
    }
    println!(
        "chosen W = {w} (last doubling with a gain of at least {:.2}%)",
        braid_plan::cost::WINDOW_GAIN_THRESHOLD * 100.0
    );
    if let SplitShape::Parasplit { p: n, .. } = resolved_shape(&p, &registry, a.workers)? {
        println!("chosen p = {n}");
    }
    if let Some(path) = &a.csv {
        write_csv(
            path,
            log.iter().map(|&(window, r)| WindowRow {
                window,
                rows_per_s: r as u64,
            }),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("bench tune: load average after {}", host::loadavg());
    Ok(())
}

/// Physical window size by doubling (Paper V section 3.2.1): throughput of `plan` on
/// `workers` workers (median of `reps` runs) at W = start, 2 start, ... up to `max`,
/// while a doubling gains at least 0.15 %. Returns the chosen W and every measurement.
fn window_by_doubling(
    plan: &Plan,
    registry: &Registry,
    workers: usize,
    reps: usize,
    start: usize,
    max: usize,
) -> Result<(usize, Vec<(usize, f64)>)> {
    let mut error = None;
    let (w, log) = window_size_by_doubling(start, max, |w| {
        let mut p = plan.clone();
        p.leaf_source_mut().window = w;
        let mut rates = Vec::new();
        for _ in 0..reps.max(1) {
            match measure(&p, registry, workers) {
                Ok(m) => rates.push(m.rate),
                Err(e) => {
                    error.get_or_insert(e);
                    return f64::NAN;
                }
            }
        }
        let r = median(rates);
        eprintln!("  W = {w:>6}: {r:>12.0} rows/s");
        r
    });
    if let Some(e) = error {
        return Err(e);
    }
    Ok((w, log))
}
