//! Paper V's heuristics on this machine: the single-splitter rate `Φ_PS^(1)` (measured
//! with the engine), the number of window splitters `p` from a desired rate (eq. 6,
//! applied by `braid_plan::optimize` once the split's hints carry both rates), the
//! physical window size `W` by doubling until the gain is under 0.15 %
//! (`braid_plan::cost::window_size_by_doubling`), and the CPU-time probes behind the
//! efficiency `η` (eq. 7) that `braid bench split` reports.

use anyhow::{bail, Context, Result};
use braid_exec::host;
use braid_exec::render::{Window, WindowSplitter};
use braid_exec::runtime::{prepare, run, RunConfig};
use braid_exec::source::generator::GeneratorFeed;
use braid_exec::source::{Feed, Next};
use braid_plan::cost::window_size_by_doubling;
use braid_plan::function::Registry;
use braid_plan::plan::{
    GeneratorSpec, MergeKind, Pace, Plan, SinkSpec, SourceSpec, Split, SplitShape, Strategy,
};
use std::time::Instant;

/// The (first) split of a plan.
pub fn split_ref(plan: &Plan) -> Option<&Split> {
    match plan {
        Plan::Source(_) => None,
        Plan::Split(s) => Some(s),
        Plan::Map(m) => split_ref(&m.input),
        Plan::Merge(m) => split_ref(&m.input),
        Plan::Sink(s) => split_ref(&s.input),
        Plan::Together(plans) => plans.first().and_then(split_ref),
    }
}

/// The (first) split of a plan, mutable.
pub fn split_mut(plan: &mut Plan) -> Option<&mut Split> {
    match plan {
        Plan::Source(_) => None,
        Plan::Split(s) => Some(s),
        Plan::Map(m) => split_mut(&mut m.input),
        Plan::Merge(m) => split_mut(&mut m.input),
        Plan::Sink(s) => split_mut(&mut s.input),
        Plan::Together(plans) => plans.first_mut().and_then(split_mut),
    }
}

/// The plan that measures one splitter: the plan's source (a generator cut to `sample`
/// tuples, unpaced) and its route and broadcast, split by one `fsplit` into `q = 1`
/// partition, counted and discarded. The query's own stream function is replaced by
/// `count` so that the split, not the query, is measured.
pub fn splitter_probe(plan: &Plan, sample: u64) -> Result<Plan> {
    let split = split_ref(plan).context("the plan has no split")?;
    let mut source = plan.leaf_source().clone();
    match &mut source.spec {
        SourceSpec::Generator(g) => g.tuples = g.tuples.min(sample.max(1)),
        SourceSpec::Csv { .. }
        | SourceSpec::Binary { .. }
        | SourceSpec::Memory(_)
        | SourceSpec::Interleave(_) => {}
        SourceSpec::Late { .. } => bail!("a plan's first source cannot be late rows"),
        SourceSpec::Stdin | SourceSpec::Tcp { .. } | SourceSpec::Native(_) => bail!(
            "measuring the single-splitter rate needs a generator or file source; \
             give --splitter-rate for stdin or TCP input"
        ),
    }
    source.pace = Pace::Max;
    let mut probe = Plan::Source(source)
        .split(
            1,
            split.route.clone(),
            split.broadcast.clone(),
            Strategy::Fsplit,
        )
        .map("count")
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard);
    if let Some(s) = split_mut(&mut probe) {
        s.hints = split.hints;
    }
    Ok(probe)
}

/// `Φ_PS^(1)`: rows/s of one `fsplit` with `q = 1` on one worker (median of `reps`
/// runs of [`splitter_probe`]).
pub fn single_splitter_rate(
    plan: &Plan,
    registry: &Registry,
    sample: u64,
    reps: usize,
) -> Result<f64> {
    let probe = splitter_probe(plan, sample)?;
    let cfg = RunConfig::default();
    let mut rates = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let report = run(&probe, registry, &cfg)?;
        rates.push(report.rows_in as f64 / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok(median(rates))
}

/// Puts the desired and measured rates into the split's hints, so that `parasplit` and
/// `autosplit` choose `p` by Paper V eq. 6 when the plan is resolved.
pub fn set_rates(plan: &mut Plan, desired: f64, splitter: f64) -> Result<()> {
    let split = split_mut(plan).context("the plan has no split")?;
    split.hints.desired_rate = Some(desired);
    split.hints.splitter_rate = Some(splitter);
    Ok(())
}

/// The shape the optimizer picks for the plan's split on `workers` workers.
pub fn resolved_shape(plan: &Plan, registry: &Registry, workers: usize) -> Result<SplitShape> {
    let plan = prepare(plan, registry, workers)?;
    split_ref(&plan)
        .and_then(|s| s.shape.clone())
        .context("the plan has no split")
}

/// One line describing a resolved shape.
pub fn describe(shape: &SplitShape) -> String {
    match shape {
        SplitShape::Fsplit => "fsplit".into(),
        SplitShape::Tree(t) => format!("tree {:?}", t.fanouts),
        SplitShape::Parasplit { p, router_fanout } => match router_fanout {
            Some(f) => format!("parasplit, p = {p} ({f} sub-routers)"),
            None => format!("parasplit, p = {p}"),
        },
    }
}

/// Median (upper median for even counts); 0 for no values.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
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

/// Physical window size by doubling (Paper V section 3.2.1): throughput of `plan` on
/// `workers` workers (median of `reps` runs) at W = start, 2 start, ... up to `max`,
/// while a doubling gains at least 0.15 %. Returns the chosen W and every measurement.
pub fn window_by_doubling(
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

/// Per-tuple costs of Braid's own pieces without the engine, in seconds (wall time of
/// this one thread; the kernel's per-thread CPU counters advance in scheduler ticks,
/// too coarse here): making the generator's windows as the engine's source does, and
/// one splitter's work on them for each worker count in `workers` (the engine's own
/// `WindowSplitter`, as worker 0 of a process holding all workers: the window is
/// shared with the workers that have enough rows in it, the others get copies,
/// exactly as in a run). Every window is
/// split right after it is made, while it is in cache, as in the engine; the split's cost
/// is the time of a generate-and-split pass minus that of a generate-only pass. The
/// least of `reps` passes (the least disturbed) is kept.
pub fn probe_costs(
    spec: GeneratorSpec,
    window: usize,
    split: &Split,
    registry: &Registry,
    workers: &[usize],
    reps: usize,
) -> Result<(f64, Vec<f64>)> {
    // The engine's own splitter, as worker 0 of each worker count.
    let mut splitters = workers
        .iter()
        .map(|&w| Ok((w, WindowSplitter::new(split, registry, w, 0..w)?)))
        .collect::<Result<std::collections::HashMap<usize, WindowSplitter>>>()?;
    let mut source = match Plan::source("gen", SourceSpec::Generator(spec), GeneratorSpec::schema())
    {
        Plan::Source(s) => s,
        _ => unreachable!("Plan::source makes a source"),
    };
    source.window = window;
    let n = spec.tuples.max(1) as f64;
    // One pass only generates; one pass per worker count generates and splits each
    // window at once; the split's cost is the difference (no per-window timers).
    let mut pass = |split_for: Option<usize>| -> Result<f64> {
        let mut feed = GeneratorFeed::new(spec, &source, 0, 1);
        let mut keep = Vec::new();
        let t = Instant::now();
        loop {
            match feed.next()? {
                Next::Window(_, batch) => match split_for.and_then(|w| splitters.get_mut(&w)) {
                    Some(s) => s.split(Window::new(0, 0, batch), &mut |w| keep.push(w)),
                    None => keep.push(Window::new(0, 0, batch)),
                },
                Next::Wait => {}
                Next::Done => break,
            }
        }
        let secs = t.elapsed().as_secs_f64();
        drop(keep);
        Ok(secs / n)
    };
    let mut best_gen = f64::INFINITY;
    let mut best_total = vec![f64::INFINITY; workers.len()];
    for _ in 0..reps.max(1) {
        best_gen = best_gen.min(pass(None)?);
        for (k, &w) in workers.iter().enumerate() {
            best_total[k] = best_total[k].min(pass(Some(w))?);
        }
    }
    let best_split = best_total.iter().map(|t| (t - best_gen).max(0.0)).collect();
    Ok((best_gen, best_split))
}
