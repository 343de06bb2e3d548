//! One engine run measured: input rows per wall second, this process's CPU seconds and
//! the cores other processes kept busy meanwhile (the noise seen); and the median the
//! benchmarks report over repetitions.

use crate::host;
use anyhow::Result;
use braid_exec::runtime::{run, RunConfig};
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use std::time::Instant;

/// One engine run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Input rows.
    pub rows: u64,
    /// Input rows per wall second.
    pub rate: f64,
    /// CPU seconds of this process (all threads).
    pub cpu: f64,
    /// Cores kept busy by other processes during the run (system busy time minus ours,
    /// per wall second): the noise seen.
    pub others: f64,
}

/// Runs `plan` once on `workers` workers and measures it.
pub fn measure(plan: &Plan, registry: &Registry, workers: usize) -> Result<Measured> {
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    let sys0 = host::system_busy();
    let cpu0 = host::process_cpu();
    let t = Instant::now();
    let report = run(plan, registry, &cfg)?;
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    let cpu = host::process_cpu() - cpu0;
    let busy = host::system_busy() - sys0;
    Ok(Measured {
        rows: report.rows_in,
        rate: report.rows_in as f64 / secs,
        cpu,
        others: ((busy - cpu) / secs).max(0.0),
    })
}

/// Median (upper median for even counts); 0 for no values.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
