//! Placing partitions by measured cost.
//!
//! Every stage's partitions are spread over all workers, partition `p` on worker
//! `p % workers`. That balances the load only when the partitions cost about the same.
//! A hot key, or a stage with fewer partitions than workers (a global aggregate runs in
//! one), leaves one worker busier than the others, and the busiest worker sets the
//! speed. [`calibrate`] runs the plan on a prefix of its input, measures each
//! partition's stream-function time, and places the partitions of every stage together
//! ([`placement::balance`]) so that the workers' measured loads are as even as the
//! partitions allow. A stage then gets workers in proportion to its measured cost, at
//! the grain of its partitions.

use crate::error::{Error, Result};
use crate::runtime::{run, RunConfig};
use braid_plan::error::Error as PlanError;
use braid_plan::function::Registry;
use braid_plan::placement;
use braid_plan::plan::{Plan, SinkSpec, SourceSpec, Split};
use std::sync::Arc;

/// The measured placement is used when it lowers the busiest worker's load by at least
/// this fraction.
pub const MIN_GAIN: f64 = 0.05;

/// What a calibration measured and decided.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The plan with every split's placement table set (unchanged when measured
    /// placement would lower the busiest worker's load by less than [`MIN_GAIN`]).
    pub plan: Plan,
    /// Rows the calibration run read.
    pub rows: u64,
    /// Per stage (0 nearest the source): measured nanoseconds, rows, and partitions
    /// that had rows.
    pub stages: Vec<StageCost>,
    /// Measured nanoseconds per worker with partition `p` on worker `p % workers`.
    pub modulo_load: Vec<f64>,
    /// The same with the measured placement (whether or not it was applied).
    pub balanced_load: Vec<f64>,
    /// Whether the plan's placement was changed.
    pub applied: bool,
}

/// One stage's measured cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageCost {
    /// Nanoseconds in the stream function, all partitions.
    pub nanos: u64,
    /// Rows processed.
    pub rows: u64,
    /// Partitions that had rows, of `q`.
    pub busy: u32,
    /// The stage's q.
    pub q: u32,
}

impl Calibration {
    /// Busiest worker's share of all measured work, with `p % workers` and with the
    /// measured placement (1 / workers is perfect balance).
    pub fn busiest_share(&self) -> (f64, f64) {
        let share = |load: &[f64]| {
            let total: f64 = load.iter().sum();
            load.iter().cloned().fold(0.0, f64::max) / total.max(1e-9)
        };
        (share(&self.modulo_load), share(&self.balanced_load))
    }
}

impl std::fmt::Display for Calibration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: u64 = self.stages.iter().map(|s| s.nanos).sum();
        writeln!(f, "calibration on the first {} rows:", self.rows)?;
        for (k, s) in self.stages.iter().enumerate() {
            writeln!(
                f,
                "  stage {}: {:.1} ms ({:.0}% of the measured work), {} rows, {} of {} partitions had rows",
                k + 1,
                s.nanos as f64 / 1e6,
                100.0 * s.nanos as f64 / total.max(1) as f64,
                s.rows,
                s.busy,
                s.q
            )?;
        }
        let pct = |load: &[f64]| {
            let t: f64 = load.iter().sum::<f64>().max(1e-9);
            load.iter()
                .map(|x| format!("{:.0}%", 100.0 * x / t))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        writeln!(
            f,
            "  work per worker: {} with partition p on worker p % workers, {} placed by measured cost{}",
            pct(&self.modulo_load),
            pct(&self.balanced_load),
            if self.applied {
                ""
            } else {
                " (less than 5% better: p % workers kept)"
            }
        )
    }
}

/// Whether `spec` can be read a second time (a calibration reads a prefix first).
fn replayable(spec: &SourceSpec) -> std::result::Result<(), String> {
    match spec {
        SourceSpec::Stdin => Err("standard input".into()),
        SourceSpec::Tcp { addr } => Err(format!("TCP ({addr})")),
        SourceSpec::Interleave(children) => children.iter().try_for_each(|c| replayable(&c.spec)),
        _ => Ok(()),
    }
}

/// Calls `f` on every split of `plan`, nearest the source first (the split of stage
/// `k` is the `k`-th; the plans of a `Together` in order).
fn for_each_split(plan: &mut Plan, f: &mut dyn FnMut(&mut Split)) {
    match plan {
        Plan::Source(_) => {}
        Plan::Split(s) => {
            for_each_split(&mut s.input, f);
            f(s);
        }
        Plan::Map(m) => for_each_split(&mut m.input, f),
        Plan::Merge(m) => for_each_split(&mut m.input, f),
        Plan::Sink(s) => for_each_split(&mut s.input, f),
        Plan::Together(plans) => plans.iter_mut().for_each(|p| for_each_split(p, f)),
    }
}

/// Sets every sink of `plan` to discard its rows (also the window trials of
/// [`crate::tune::window_by_doubling`]).
pub(crate) fn discard_output(plan: &mut Plan) {
    match plan {
        Plan::Together(plans) => plans.iter_mut().for_each(discard_output),
        Plan::Sink(s) => {
            s.spec = SinkSpec::Discard;
            s.stamp_emit = false;
            s.header = false;
        }
        _ => {}
    }
}

/// Runs `plan` on its first `rows` input rows (output discarded), measures every
/// partition's cost, and returns the plan with its partitions placed by that cost (see
/// the module doc). The input must be readable twice (a file or the generator), and
/// the run must be one process: each process measures only its own partitions.
pub fn calibrate(
    plan: &Plan,
    registry: &Registry,
    cfg: &RunConfig,
    rows: u64,
) -> Result<Calibration> {
    if cfg.processes > 1 {
        return Err(PlanError::NotSupported(
            "calibration with several processes: each process would measure only its own \
             partitions, and all processes must place partitions alike"
                .into(),
        )
        .into());
    }
    if let Err(what) = replayable(&plan.leaf_source().spec) {
        return Err(PlanError::Plan(format!(
            "calibration reads a prefix of the input before the run, but the input is {what}, \
             which cannot be read twice"
        ))
        .into());
    }
    let mut pilot = plan.clone();
    discard_output(&mut pilot);
    let pilot_cfg = RunConfig {
        max_rows: Some(rows),
        counters: None,
        measure_costs: true,
        profile: None,
        ..cfg.clone()
    };
    let report = run(&pilot, registry, &pilot_cfg)?;
    let mut plan = plan.clone();
    let mut stages: Vec<StageCost> = Vec::new();
    for_each_split(&mut plan, &mut |s| {
        stages.push(StageCost {
            q: s.q,
            ..StageCost::default()
        })
    });
    let mut costs: Vec<Vec<f64>> = stages.iter().map(|s| vec![0.0; s.q as usize]).collect();
    for c in &report.costs {
        let (Some(stage), Some(cost)) = (stages.get_mut(c.stage), costs.get_mut(c.stage)) else {
            return Err(Error::Internal(format!(
                "a cost was measured for stage {} of a plan with {} splits",
                c.stage,
                costs.len()
            )));
        };
        let Some(x) = cost.get_mut(c.partition as usize) else {
            return Err(Error::Internal(format!(
                "a cost was measured for partition {} of a stage with q = {}",
                c.partition, stage.q
            )));
        };
        *x += c.nanos as f64;
        stage.nanos += c.nanos;
        stage.rows += c.rows;
        stage.busy += u32::from(c.rows > 0);
    }
    let workers = cfg.workers.max(1);
    let (tables, balanced) = placement::balance(&costs, workers);
    let modulo_load = placement::modulo_load(&costs, workers);
    let max = |l: &[f64]| l.iter().cloned().fold(0.0, f64::max);
    // A gain within timing noise changes nothing.
    let applied = max(&balanced) < max(&modulo_load) * (1.0 - MIN_GAIN);
    if applied {
        let mut tables = tables.into_iter();
        for_each_split(&mut plan, &mut |s| {
            s.placement = tables.next().map(Arc::from);
        });
    }
    Ok(Calibration {
        plan,
        rows: report.rows_in,
        stages,
        balanced_load: balanced,
        modulo_load,
        applied,
    })
}
