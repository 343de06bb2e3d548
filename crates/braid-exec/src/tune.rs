//! Paper V's run-time tuning of a split (`braid run --desired-rate`): measure the rate
//! `Φ_PS^(1)` of one splitter with the engine, put it and the desired rate `Φ_D` into
//! the split's hints, and let `braid_plan::optimize` choose the number of window
//! splitters `p` by eq. 6 when the plan is resolved.
//!
//! ```
//! use braid_exec::tune::{describe, resolved_shape, set_rates, single_splitter_rate};
//! use braid_plan::expr::Expr;
//! use braid_plan::function::Registry;
//! use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
//!
//! let schema = GeneratorSpec::schema();
//! let spec = GeneratorSpec { tuples: 20_000, rate: 1000.0, keys: 8, broadcast: 0.0, seed: 1 };
//! let mut plan = Plan::source("gen", SourceSpec::Generator(spec), schema.clone())
//!     .split(8, Route::Expr { expr: Expr::col(&schema, "xway")?, when: None },
//!            None, Strategy::Parasplit)
//!     .map("count")
//!     .merge(MergeKind::Union)
//!     .sink(SinkSpec::Discard);
//! let registry = Registry::with_builtins();
//! let one = single_splitter_rate(&plan, &registry, 10_000, 1)?;
//! set_rates(&mut plan, 3.0 * one, one)?;
//! let shape = resolved_shape(&plan, &registry, 2)?;
//! assert!(describe(&shape).starts_with("parasplit"));
//! # Ok::<(), braid_exec::error::Error>(())
//! ```

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::runtime::{prepare, run, RunConfig};
use braid_plan::error::Error as PlanError;
use braid_plan::function::Registry;
use braid_plan::plan::{MergeKind, Pace, Plan, SinkSpec, SourceSpec, Split, SplitShape, Strategy};
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

/// Whether a source's rows can be read only once (so no trial or probe run can read
/// them before the run proper): standard input, TCP, Kafka (from where the run's group
/// is) and native sources such as a live stream's log.
fn read_once(spec: &SourceSpec) -> bool {
    match spec {
        SourceSpec::Stdin
        | SourceSpec::Tcp { .. }
        | SourceSpec::Native(_)
        | SourceSpec::Kafka(_) => true,
        SourceSpec::Csv { .. }
        | SourceSpec::JsonLines { .. }
        | SourceSpec::Columnar { .. }
        | SourceSpec::Binary { .. }
        | SourceSpec::Memory(_)
        | SourceSpec::Generator(_)
        | SourceSpec::Interleave(_)
        | SourceSpec::Late { .. } => false,
    }
}

fn no_split() -> Error {
    Error::Plan(PlanError::Plan("the plan has no split".into()))
}

/// The plan that measures one splitter: the plan's source (a generator cut to `sample`
/// tuples, unpaced) and its route and broadcast, split by one `fsplit` into `q = 1`
/// partition, counted and discarded. The query's own stream function is replaced by
/// `count` so that the split, not the query, is measured.
pub fn splitter_probe(plan: &Plan, sample: u64) -> Result<Plan> {
    let split = split_ref(plan).ok_or_else(no_split)?;
    probe_of(split, plan.leaf_source(), sample)
}

/// [`splitter_probe`] of split `split` over source `source`.
fn probe_of(split: &Split, source: &braid_plan::plan::Source, sample: u64) -> Result<Plan> {
    let mut source = source.clone();
    match &mut source.spec {
        SourceSpec::Generator(g) => g.tuples = g.tuples.min(sample.max(1)),
        SourceSpec::Late { .. } => {
            return Err(Error::Plan(PlanError::Plan(
                "a plan's first source cannot be late rows".into(),
            )))
        }
        spec if read_once(spec) => {
            return Err(Error::Plan(PlanError::NotSupported(
                "measuring the single-splitter rate needs a generator or file source; \
                 give --splitter-rate (SQL: SET splitter_rate) for stdin, TCP, Kafka \
                 or a live stream"
                    .into(),
            )))
        }
        _ => {}
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

/// `Φ_PS^(1)`: rows/s of one `fsplit` with `q = 1` on one worker (the median of `reps`
/// runs of [`splitter_probe`]; the upper median for an even count).
pub fn single_splitter_rate(
    plan: &Plan,
    registry: &Registry,
    sample: u64,
    reps: usize,
) -> Result<f64> {
    rate_of(&splitter_probe(plan, sample)?, registry, reps, None)
}

/// The median rows/s of `reps` runs of `probe` on one worker, each reading for at most
/// [`WINDOW_TRIAL`] (a large file is not read whole). `outer`, when set and cancelled
/// (Ctrl-C), stops the run under way and the rest: the rate is then of what was read.
fn rate_of(probe: &Plan, registry: &Registry, reps: usize, outer: Option<&Cancel>) -> Result<f64> {
    let cfg = RunConfig::default();
    let mut rates = Vec::new();
    for _ in 0..reps.max(1) {
        if !rates.is_empty() && outer.is_some_and(Cancel::is_cancelled) {
            break;
        }
        rates.push(trial_rate(probe, registry, &cfg, outer)?);
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    Ok(rates[rates.len() / 2])
}

/// Rows of a source's single-splitter measurement for a split with a desired rate and
/// no splitter rate (as `--splitter-sample`'s default: a generator's first rows; a file
/// is read for at most [`WINDOW_TRIAL`] a run).
pub const SPLITTER_SAMPLE: u64 = 500_000;

/// Measures `Φ_PS^(1)` (median of 3) for every split over a source that has a desired
/// rate and no splitter rate, and puts it into its hints (SQL's `SET desired_rate`):
/// what was measured, per source by name. In one process such a split's costs (`b`,
/// `a`) are measured too ([`measure_split_costs`]) unless the source can be read only
/// once. On several processes each would measure its own rate and choose its own
/// shape: a desired rate there needs the splitter rate given, and the costs stay as
/// hinted. `cancel`, when set and cancelled (Ctrl-C while a query is placed to run),
/// stops the measuring: a rate of what was read so far, no costs.
pub fn measure_splitter_rates(
    plan: &mut Plan,
    registry: &Registry,
    processes: usize,
    cancel: Option<&Cancel>,
) -> Result<Vec<(String, f64)>> {
    let mut measured = Vec::new();
    measure_in(plan, registry, processes, cancel, &mut measured)?;
    Ok(measured)
}

fn measure_in(
    plan: &mut Plan,
    registry: &Registry,
    processes: usize,
    cancel: Option<&Cancel>,
    out: &mut Vec<(String, f64)>,
) -> Result<()> {
    match plan {
        Plan::Source(_) => Ok(()),
        Plan::Split(s) => {
            if let (Plan::Source(src), Some(_), None) = (
                s.input.as_ref(),
                s.hints.desired_rate,
                s.hints.splitter_rate,
            ) {
                if processes > 1 {
                    return Err(Error::Plan(PlanError::NotSupported(
                        "SET desired_rate on several processes needs SET splitter_rate \
                         too (each process would measure its own and choose its own \
                         shape)"
                            .into(),
                    )));
                }
                let one = rate_of(&probe_of(s, src, SPLITTER_SAMPLE)?, registry, 3, cancel)?;
                out.push((src.name.clone(), one));
                s.hints.splitter_rate = Some(one);
            }
            let stopped = cancel.is_some_and(Cancel::is_cancelled);
            if s.hints.desired_rate.is_some()
                && processes <= 1
                && s.hints.measured.is_none()
                && !stopped
            {
                measure_costs(s, registry)?;
            }
            measure_in(&mut s.input, registry, processes, cancel, out)
        }
        Plan::Map(m) => measure_in(&mut m.input, registry, processes, cancel, out),
        Plan::Merge(m) => measure_in(&mut m.input, registry, processes, cancel, out),
        Plan::Sink(s) => measure_in(&mut s.input, registry, processes, cancel, out),
        Plan::Together(plans) => plans
            .iter_mut()
            .try_for_each(|p| measure_in(p, registry, processes, cancel, out)),
    }
}

/// Rows of the sample a split's costs are measured on ([`measure_split_costs`]).
pub const COST_SAMPLE: u64 = 65_536;

/// The cost model's costs of `split` over `source`, measured on the source's first
/// [`COST_SAMPLE`] rows (read before timing) with Braid's own splitter, one thread, the
/// least of 3 passes each: the broadcast fraction `b`; `cp`, routing every row; `ce`,
/// routing and copying every row into its destination's batch, less `cp`, per row
/// copied; `cc`, deserializing those batches as a node in another process receives
/// them, per row. None when the source can be read only once (nothing to sample) or
/// has no rows.
pub fn measure_split_costs(
    split: &Split,
    source: &braid_plan::plan::Source,
    registry: &Registry,
) -> Result<Option<braid_plan::plan::MeasuredCosts>> {
    use crate::render::{Window, WindowSplitter};
    use crate::source::{Counters, Next, ReadOptions};
    if read_once(&source.spec) || matches!(source.spec, SourceSpec::Late { .. }) {
        return Ok(None);
    }
    let mut source = source.clone();
    if let SourceSpec::Generator(g) = &mut source.spec {
        g.tuples = g.tuples.min(COST_SAMPLE);
    }
    source.pace = Pace::Max;
    let counters = std::sync::Arc::new(Counters::default());
    let Some(mut feed) = crate::source::open(
        &source,
        0,
        1,
        &ReadOptions::default(),
        counters.clone(),
        registry,
    )?
    else {
        return Ok(None);
    };
    let mut sample = Vec::new();
    let mut rows = 0u64;
    while rows < COST_SAMPLE {
        match feed.next()? {
            Next::Window(_, batch) => {
                rows += batch.len() as u64;
                sample.push(batch);
            }
            Next::Wait => std::thread::yield_now(),
            Next::Done => break,
        }
    }
    if rows == 0 {
        return Ok(None);
    }
    let shared = std::sync::Arc::new(crate::shared::Shared::new(
        counters,
        false,
        None,
        false,
        Cancel::default(),
        0,
    ));
    let mut splitter = WindowSplitter::probe(split, registry, &shared)?;
    let least = |f: &mut dyn FnMut() -> f64| (0..3).map(|_| f()).fold(f64::INFINITY, f64::min);
    let mut broadcast = 0;
    let route = least(&mut || {
        broadcast = 0;
        let t = Instant::now();
        for b in &sample {
            broadcast += splitter.route_only(b);
        }
        t.elapsed().as_secs_f64()
    });
    let mut copied: Vec<Window> = Vec::new();
    let split_all = least(&mut || {
        copied.clear();
        // Windows of their own (a splitter writes its lanes into them), made untimed.
        let windows: Vec<Window> = sample
            .iter()
            .map(|b| Window::new(0, 0, b.clone()))
            .collect();
        let t = Instant::now();
        for w in windows {
            splitter.split(w, &mut |x| copied.push(x));
        }
        t.elapsed().as_secs_f64()
    });
    let emitted: u64 = copied.iter().map(|w| w.len() as u64).sum();
    let bytes: Vec<Vec<u8>> = copied
        .iter()
        .map(|w| bincode::serialize(w).map_err(|e| Error::Internal(format!("cost probe: {e}"))))
        .collect::<Result<_>>()?;
    drop(copied);
    let consume = least(&mut || {
        let t = Instant::now();
        for b in &bytes {
            let w: Window = bincode::deserialize(b).expect("a window just serialized");
            std::hint::black_box(w);
        }
        t.elapsed().as_secs_f64()
    });
    let per = |secs: f64, n: u64| secs * 1e9 / n.max(1) as f64;
    Ok(Some(braid_plan::plan::MeasuredCosts {
        rows,
        broadcast: broadcast as f64 / rows as f64,
        consume_ns: per(consume, emitted),
        route_ns: per(route, rows),
        emit_ns: per((split_all - route).max(0.0), emitted),
    }))
}

/// Measures the costs of `split` over the source it reads ([`measure_split_costs`]) and
/// puts them into its hints ([`set_costs`]): what was measured (nothing for a later
/// stage's split or a source read only once).
pub fn measure_costs(
    split: &mut Split,
    registry: &Registry,
) -> Result<Option<braid_plan::plan::MeasuredCosts>> {
    let Plan::Source(src) = split.input.as_ref() else {
        return Ok(None);
    };
    let measured = measure_split_costs(split, src, registry)?;
    if let Some(m) = measured {
        set_costs(split, m);
    }
    Ok(measured)
}

/// Puts measured costs into a split's hints: the broadcast fraction and `a` are then
/// the measured ones.
pub fn set_costs(split: &mut Split, m: braid_plan::plan::MeasuredCosts) {
    split.hints.broadcast_fraction = m.broadcast;
    split.hints.cost_ratio = m.cost_ratio();
    split.hints.measured = Some(m);
}

/// Puts the desired and measured rates into the split's hints, so that `parasplit` and
/// `autosplit` choose `p` by Paper V eq. 6 when the plan is resolved.
pub fn set_rates(plan: &mut Plan, desired: f64, splitter: f64) -> Result<()> {
    let split = split_mut(plan).ok_or_else(no_split)?;
    split.hints.desired_rate = Some(desired);
    split.hints.splitter_rate = Some(splitter);
    Ok(())
}

/// The shape the optimizer picks for the plan's split on `workers` workers.
pub fn resolved_shape(plan: &Plan, registry: &Registry, workers: usize) -> Result<SplitShape> {
    let plan = prepare(plan, registry, workers)?;
    split_ref(&plan)
        .and_then(|s| s.shape.clone())
        .ok_or_else(no_split)
}

/// One line describing a resolved shape, e.g. `parasplit, p = 4`.
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

/// The physical window size `W` chosen by doubling (Paper V section 3.2.1) for a query:
/// the chosen `W` and each measured `(W, rows/s)`.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowTuning {
    /// The chosen `W`: the last doubling that gained at least
    /// [`braid_plan::cost::WINDOW_GAIN_THRESHOLD`].
    pub chosen: usize,
    /// Every measurement, in order: `W` and the median rows/s at it.
    pub measured: Vec<(usize, f64)>,
}

/// First `W` of [`window_by_doubling`]'s search.
pub const WINDOW_START: usize = 64;
/// Largest `W` it tries.
pub const WINDOW_MAX: usize = 65_536;
/// How long one trial run may read before it is cancelled: its rate is the rows it
/// read over the time it ran (a run that ends sooner is measured whole).
pub const WINDOW_TRIAL: std::time::Duration = std::time::Duration::from_millis(300);

/// `W` by doubling for `plan` (Paper V section 3.2.1): its throughput on `workers`
/// workers, the median of 3 trial runs, at W = 64, 128, ... while a doubling gains at
/// least 0.15 % ([`braid_plan::cost::window_size_by_doubling`]). A trial runs the plan
/// with every source as fast as possible, every source's window W and every sink
/// discarding, for at most [`WINDOW_TRIAL`]. Needs sources that can be read again (a
/// file, the generator, rows in memory); the caller empties anything else a trial
/// writes (late rows). The trials run as `config` says (workers, reading, granule,
/// backpressure), without its counters, profile, checkpoints, rescaling or file of
/// rejected records (the run proper reports those).
/// `config.cancel`, when set, stops the trials (the search keeps what it measured; the
/// run that follows sees the same handle cancelled).
pub fn window_by_doubling(
    plan: &Plan,
    registry: &Registry,
    config: &RunConfig,
) -> Result<WindowTuning> {
    let outer = config.cancel.clone();
    let config = RunConfig {
        read: crate::source::ReadOptions {
            reject_file: None,
            ..config.read.clone()
        },
        counters: None,
        measure_costs: false,
        cancel: None,
        profile: None,
        checkpoint: None,
        rescale: None,
        auto_rescale: None,
        ..config.clone()
    };
    let mut trial = plan.clone();
    for_sources(&mut trial, &mut |s| {
        s.pace = Pace::Max;
        match read_once(&s.spec) {
            false => Ok(()),
            true => Err(Error::Plan(PlanError::NotSupported(format!(
                "SET window = 'auto' over stream {}: the window is chosen by trial runs, \
                 which read the input again (a file or the generator); give the stream's \
                 window instead (WITH (window = ...))",
                s.name
            )))),
        }
    })?;
    crate::calibrate::discard_output(&mut trial);
    let mut error = None;
    let (chosen, measured) =
        braid_plan::cost::window_size_by_doubling(WINDOW_START, WINDOW_MAX, |w| {
            let mut p = trial.clone();
            set_window(&mut p, w);
            let mut rates = Vec::new();
            for _ in 0..3 {
                if outer.as_ref().is_some_and(Cancel::is_cancelled) {
                    return f64::NAN;
                }
                match trial_rate(&p, registry, &config, outer.as_ref()) {
                    Ok(r) => rates.push(r),
                    Err(e) => {
                        error.get_or_insert(e);
                        return f64::NAN;
                    }
                }
            }
            rates.sort_by(|a, b| a.total_cmp(b));
            rates[rates.len() / 2]
        });
    match error {
        Some(e) => Err(e),
        None => Ok(WindowTuning { chosen, measured }),
    }
}

/// Rows/s of one trial run of `plan`, cancelled after [`WINDOW_TRIAL`] (or as soon as
/// `outer` is).
fn trial_rate(
    plan: &Plan,
    registry: &Registry,
    config: &RunConfig,
    outer: Option<&Cancel>,
) -> Result<f64> {
    let cancel = Cancel::new();
    let cfg = RunConfig {
        cancel: Some(cancel.clone()),
        ..config.clone()
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let outer = outer.cloned();
    let timer = std::thread::spawn(move || {
        let end = Instant::now() + WINDOW_TRIAL;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let tick = left.min(std::time::Duration::from_millis(10));
            match done_rx.recv_timeout(tick) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if left.is_zero() || outer.as_ref().is_some_and(Cancel::is_cancelled) {
                cancel.cancel();
                return;
            }
        }
    });
    let t = Instant::now();
    let report = run(plan, registry, &cfg);
    let secs = t.elapsed().as_secs_f64();
    let _ = done_tx.send(());
    let _ = timer.join();
    Ok(report?.rows_in as f64 / secs.max(1e-9))
}

/// Calls `f` on every source of `plan` (the children of an interleave too).
fn for_sources(
    plan: &mut Plan,
    f: &mut dyn FnMut(&mut braid_plan::plan::Source) -> Result<()>,
) -> Result<()> {
    fn source(
        s: &mut braid_plan::plan::Source,
        f: &mut dyn FnMut(&mut braid_plan::plan::Source) -> Result<()>,
    ) -> Result<()> {
        if let SourceSpec::Interleave(kids) = &mut s.spec {
            for k in kids.iter_mut() {
                source(k, f)?;
            }
        }
        f(s)
    }
    match plan {
        Plan::Source(s) => source(s, f),
        Plan::Split(s) => for_sources(&mut s.input, f),
        Plan::Map(m) => for_sources(&mut m.input, f),
        Plan::Merge(m) => for_sources(&mut m.input, f),
        Plan::Sink(s) => for_sources(&mut s.input, f),
        Plan::Together(plans) => plans.iter_mut().try_for_each(|p| for_sources(p, f)),
    }
}

/// Sets every source's window of `plan` to `w`.
pub fn set_window(plan: &mut Plan, w: usize) {
    let _ = for_sources(plan, &mut |s| {
        s.window = w;
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::expr::Expr;
    use braid_plan::plan::{GeneratorSpec, Route};

    /// A split's costs are measured on its source's first [`COST_SAMPLE`] rows: `b` is
    /// the share of them the broadcast condition holds for (counted here from the
    /// generator's own tuples, not through Braid's router), every cost is positive;
    /// a source that can be read only once has none measured.
    #[test]
    fn split_costs_are_measured_on_the_first_rows() {
        let spec = GeneratorSpec {
            tuples: 1_000_000,
            rate: 1000.0,
            keys: 8,
            broadcast: 0.25,
            seed: 7,
        };
        let schema = GeneratorSpec::schema();
        let col = |name: &str| Expr::col(&schema, name).expect("a generator column");
        let split = |spec: SourceSpec| {
            Plan::source("gen", spec, schema.clone())
                .split(
                    8,
                    Route::Expr {
                        expr: col("xway"),
                        when: None,
                    },
                    Some(col("type").eq(Expr::int(2))),
                    Strategy::Autosplit,
                )
                .map("count")
                .merge(MergeKind::Union)
                .sink(SinkSpec::Discard)
        };
        let registry = Registry::with_builtins();
        let plan = split(SourceSpec::Generator(spec));
        let s = split_ref(&plan).expect("a split");
        let m = measure_split_costs(s, plan.leaf_source(), &registry)
            .expect("measures")
            .expect("a generator can be sampled");
        assert_eq!(m.rows, COST_SAMPLE);
        let mut f = [0i64; 15];
        let want = (0..COST_SAMPLE)
            .filter(|&i| {
                crate::source::generator::tuple(&spec, i, &mut f);
                f[0] == 2
            })
            .count();
        assert_eq!(m.broadcast, want as f64 / COST_SAMPLE as f64, "{m:?}");
        assert!((0.2..0.3).contains(&m.broadcast), "{m:?}");
        assert!(
            m.route_ns > 0.0 && m.emit_ns > 0.0 && m.consume_ns > 0.0,
            "{m:?}"
        );
        let stdin = split(SourceSpec::Stdin);
        let s = split_ref(&stdin).expect("a split");
        assert_eq!(
            measure_split_costs(s, stdin.leaf_source(), &registry).expect("no error"),
            None
        );
    }
}
