//! Live rescaling: a running query's partition counts and placement changed without a
//! restart, by a checkpoint taken on purpose.
//!
//! - **Request.** The caller asks through a [`Rescaler`] (the CLI's dashboard takes
//!   `POST /rescale`): every stage that can be to `q` partitions, one partition moved
//!   to another worker, or the run to another number of worker threads per process.
//! - **Fence.** Worker 0, at the next epoch it closes (`c`), sends a checkpoint barrier
//!   that carries the new shape ([`Rescale`]) and stops reading. Every other worker
//!   hands on its rows up to `c` and stops at its first later window. No operator
//!   processes an epoch after `c`: the input frontier stays at `c + 1`.
//! - **Switch.** Once the output has passed `c` (every part of checkpoint `c` written,
//!   on every worker of every process), every worker drops the dataflow and installs
//!   the plan with the new shape, restored from checkpoint `c` (state split or merged
//!   by key when `q` changed: see [`braid_plan::function::StreamFunction::restore_share`]),
//!   and its source resumes after `c` as after a crash. The pause is that: a barrier,
//!   a drain to `c`, the state written and read back. For another number of worker
//!   threads the workers end instead, and the runtime starts as many as asked on the
//!   same state (`runtime::run`'s loop of executions; a cluster's processes connect
//!   again).

use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The shape of every stage of a plan, in stage order (as checkpoints number them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rescale {
    /// Per stage: its partition count.
    pub partitions: Vec<u32>,
    /// Per stage: the worker of each partition (None: partition `p` on worker
    /// `p % workers`).
    pub placement: Vec<Option<Vec<u32>>>,
    /// Worker threads per process after the switch, when they change (the run's
    /// timely workers end at the switch, on every process, and as many as this start,
    /// restored from it; the processes of a cluster connect again).
    #[serde(default)]
    pub workers: Option<u32>,
}

/// What a user asks of a running query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Every stage whose function keeps its state by key and that has more than one
    /// partition, to `q` partitions (placed `p % workers`).
    Partitions(u32),
    /// Partition `partition` of stage `stage` (counted from 1) onto worker `worker`:
    /// a hot partition moved to a worker of its own.
    Move {
        /// The stage, from 1.
        stage: usize,
        /// The partition.
        partition: u32,
        /// The worker (global index).
        worker: u32,
    },
    /// The run to this many worker threads per process, every partition placed `p %
    /// workers` on the workers of all processes.
    Workers(u32),
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Request::Partitions(q) => write!(f, "{q} partitions per stage"),
            Request::Move {
                stage,
                partition,
                worker,
            } => write!(
                f,
                "partition {partition} of stage {stage} to worker {worker}"
            ),
            Request::Workers(n) => write!(f, "{n} worker threads per process"),
        }
    }
}

/// A live rescale done.
#[derive(Clone, Debug, PartialEq)]
pub struct Rescaled {
    /// What asked for it.
    pub request: Request,
    /// The checkpoint epoch it switched at.
    pub epoch: u64,
    /// The partition count of every stage after it.
    pub partitions: Vec<u32>,
    /// Workers in all after it.
    pub workers: usize,
    /// From the barrier to the first window of the new dataflow (worker 0).
    pub pause: Duration,
}

#[derive(Default)]
struct State {
    pending: Option<Request>,
    done: Vec<Rescaled>,
    refused: Vec<String>,
    /// Why the running query takes no requests (they are refused at once), if so.
    closed: Option<String>,
}

/// Asks a running query to rescale, and tells what came of it. Clones share one state.
#[derive(Clone, Default)]
pub struct Rescaler(Arc<Mutex<State>>);

impl std::fmt::Debug for Rescaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rescaler")
    }
}

impl Rescaler {
    /// A handle with nothing asked.
    pub fn new() -> Rescaler {
        Rescaler::default()
    }

    /// Asks for `request` at the next epoch the run closes (replacing one not yet
    /// taken up).
    pub fn request(&self, request: Request) {
        if let Ok(mut s) = self.0.lock() {
            match s.closed.clone() {
                Some(why) => s.refused.push(format!("{request:?}: {why}")),
                None => s.pending = Some(request),
            }
        }
    }

    /// Refuses every request from now on with `why` (the query running now cannot
    /// rescale live), a request not yet taken up too, or, with `None`, takes them
    /// again.
    pub fn close(&self, why: Option<String>) {
        if let Ok(mut s) = self.0.lock() {
            if let (Some(why), Some(r)) = (&why, s.pending.take()) {
                s.refused.push(format!("{r:?}: {why}"));
            }
            s.closed = why;
        }
    }

    /// The rescales done so far.
    pub fn done(&self) -> Vec<Rescaled> {
        self.0.lock().map(|s| s.done.clone()).unwrap_or_default()
    }

    /// The requests refused so far, with why.
    pub fn refused(&self) -> Vec<String> {
        self.0.lock().map(|s| s.refused.clone()).unwrap_or_default()
    }

    pub(crate) fn take(&self) -> Option<Request> {
        self.0.lock().ok().and_then(|mut s| s.pending.take())
    }

    pub(crate) fn record(&self, r: Rescaled) {
        if let Ok(mut s) = self.0.lock() {
            s.done.push(r);
        }
    }

    pub(crate) fn refuse(&self, why: String) {
        if let Ok(mut s) = self.0.lock() {
            s.refused.push(why);
        }
    }
}

/// Calls `f` on every stage's split and function, in stage order.
fn stages_mut(plan: &mut Plan, f: &mut dyn FnMut(usize, &mut braid_plan::plan::Split, &str)) {
    fn walk(
        p: &mut Plan,
        base: usize,
        f: &mut dyn FnMut(usize, &mut braid_plan::plan::Split, &str),
    ) {
        match p {
            Plan::Source(_) => {}
            Plan::Map(m) => {
                let stage = base + m.input.maps();
                if let Plan::Split(s) = m.input.as_mut() {
                    f(stage, s, &m.function);
                }
                walk(&mut m.input, base, f);
            }
            Plan::Split(s) => walk(&mut s.input, base, f),
            Plan::Merge(m) => walk(&mut m.input, base, f),
            Plan::Sink(s) => walk(&mut s.input, base, f),
            Plan::Together(plans) => {
                let mut base = base;
                for p in plans {
                    walk(p, base, f);
                    base += p.maps();
                }
            }
        }
    }
    walk(plan, 0, f)
}

/// The current shape of `plan`'s stages, and the function each runs.
fn shape(plan: &Plan) -> (Rescale, Vec<String>) {
    let mut stages = Vec::new();
    let mut plan = plan.clone();
    stages_mut(&mut plan, &mut |k, s, f| {
        stages.push((
            k,
            s.q,
            s.placement.as_ref().map(|p| p.to_vec()),
            f.to_string(),
        ))
    });
    stages.sort_by_key(|s| s.0);
    let functions = stages.iter().map(|s| s.3.clone()).collect();
    let shape = Rescale {
        partitions: stages.iter().map(|s| s.1).collect(),
        placement: stages.into_iter().map(|s| s.2).collect(),
        workers: None,
    };
    (shape, functions)
}

/// The shape `request` asks of `plan` (as running, on `workers` workers in all,
/// `threads` of them per process), or why it cannot be had.
pub(crate) fn spec(
    plan: &Plan,
    registry: &Registry,
    (workers, threads): (usize, usize),
    request: &Request,
) -> Result<Rescale, String> {
    let (mut shape, functions) = shape(plan);
    if shape.partitions.is_empty() {
        return Err("the plan has no stage to rescale".into());
    }
    match *request {
        Request::Partitions(q) => {
            if !(1..=1 << 20).contains(&q) {
                return Err(format!("{q} partitions; expected 1..=1048576"));
            }
            let mut changed = false;
            for (k, f) in functions.iter().enumerate() {
                let rescales = registry.function(f).is_ok_and(|f| f.rescales());
                if rescales && shape.partitions[k] > 1 && shape.partitions[k] != q {
                    shape.partitions[k] = q;
                    shape.placement[k] = None;
                    changed = true;
                }
            }
            if !changed {
                let names: Vec<String> = functions.iter().map(|f| format!("`{f}`")).collect();
                return Err(format!(
                    "no stage can go to {q} partitions: stages run {} at {:?} partitions (a stage of one partition stays one; a function whose state is not kept by key keeps its count)",
                    names.join(", "),
                    shape.partitions
                ));
            }
        }
        Request::Workers(n) => {
            if !(1..=1024).contains(&n) {
                return Err(format!("{n} workers; expected 1..=1024"));
            }
            if n as usize == threads {
                return Err(match workers / threads.max(1) {
                    1 => format!("the run has {threads} workers already"),
                    p => format!(
                        "the run has {threads} worker threads in each of its {p} processes already"
                    ),
                });
            }
            for p in &mut shape.placement {
                *p = None;
            }
            shape.workers = Some(n);
        }
        Request::Move {
            stage,
            partition,
            worker,
        } => {
            let Some(k) = stage.checked_sub(1).filter(|&k| k < shape.partitions.len()) else {
                return Err(format!(
                    "stage {stage}; the plan has stages 1..={}",
                    shape.partitions.len()
                ));
            };
            let q = shape.partitions[k];
            if partition >= q || worker as usize >= workers {
                return Err(format!(
                    "partition {partition} onto worker {worker}: stage {stage} has partitions 0..{q}, the run workers 0..{workers}"
                ));
            }
            let table = shape.placement[k]
                .get_or_insert_with(|| (0..q).map(|p| p % workers.max(1) as u32).collect());
            table[partition as usize] = worker;
        }
    }
    Ok(shape)
}

/// `plan` (as given, or as running) in the shape `spec` says; its split shapes are to
/// be resolved again.
pub(crate) fn apply(plan: &Plan, spec: &Rescale) -> Plan {
    let mut plan = plan.clone();
    stages_mut(&mut plan, &mut |k, s, _| {
        if let Some(&q) = spec.partitions.get(k) {
            s.q = q;
            s.placement = spec.placement.get(k).cloned().flatten().map(Into::into);
            s.shape = None;
            s.why = None;
        }
    });
    plan
}

/// Automatic rescaling: how busy a worker may stay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Auto {
    /// The share of one core a worker's partitions may take (their stream functions'
    /// time), above which a partition moves.
    pub threshold: f64,
    /// How often loads are read.
    pub period: std::time::Duration,
    /// Readings in a row above the threshold before a move.
    pub patience: u32,
}

impl Auto {
    /// Moves above `threshold` of a core, read every 500 ms, after 2 readings.
    pub fn above(threshold: f64) -> Auto {
        Auto {
            threshold,
            period: std::time::Duration::from_millis(500),
            patience: 2,
        }
    }
}

/// The move that best evens out stage loads `load` (per partition: its share of a
/// core over the last period) placed by `worker`, when the busiest of `workers` workers
/// is above `threshold`: the partition of the busiest worker whose move to the least
/// busy one lowers the larger of the two loads most (by a tenth at least).
pub fn best_move(
    load: &[f64],
    worker: impl Fn(u32) -> usize,
    workers: usize,
    threshold: f64,
) -> Option<(u32, usize)> {
    let n = workers.max(1);
    let mut per = vec![0.0; n];
    for (p, &l) in load.iter().enumerate() {
        per[worker(p as u32) % n] += l;
    }
    let (b, &high) = per.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    let (l, &low) = per.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1))?;
    if high < threshold || b == l {
        return None;
    }
    let (p, after) = load
        .iter()
        .enumerate()
        .filter(|&(p, &d)| worker(p as u32) % n == b && d > 0.0)
        .map(|(p, &d)| (p as u32, (high - d).max(low + d)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (after < 0.9 * high).then_some((p, l))
}

/// Whether stage loads `load` placed by `worker` call for more partitions: the
/// busiest of `workers` workers is above `threshold`, another is at less than half its
/// load, and no move of a partition helps ([`best_move`]): the load is in partitions
/// too big to move, which more partitions (their keys spread further) may cut down.
pub fn wants_split(
    load: &[f64],
    worker: impl Fn(u32) -> usize + Copy,
    workers: usize,
    threshold: f64,
) -> bool {
    let n = workers.max(1);
    if n < 2 || best_move(load, worker, workers, threshold).is_some() {
        return false;
    }
    let mut per = vec![0.0; n];
    for (p, &l) in load.iter().enumerate() {
        per[worker(p as u32) % n] += l;
    }
    let high = per.iter().copied().fold(0.0, f64::max);
    let low = per.iter().copied().fold(f64::INFINITY, f64::min);
    high >= threshold && low < 0.5 * high
}

/// The largest partition count automatic splitting goes to, on `workers` workers.
pub fn split_cap(workers: usize) -> u32 {
    (16 * workers.max(1) as u32).min(1024)
}

/// What a run tells its automatic rescaler: the partitions' measured costs so far, and
/// the shape of its plan after the last live rescale (None: none yet).
pub(crate) struct Watched {
    pub costs: Box<dyn Fn() -> Vec<crate::profile::PartitionCost> + Send>,
    pub shape: Box<dyn Fn() -> Option<Rescale> + Send>,
}

/// Watches the partition costs of a single-process run (which the run measures) and
/// asks `rescaler` to move a partition off a worker that stays above `auto.threshold`,
/// or, when no move helps ([`wants_split`]), to double the partition count (up to
/// [`split_cap`]; not again for a stage whose last split left its hottest partition
/// as hot), until `stop`.
pub(crate) fn watch(
    run: Watched,
    plan: Plan,
    workers: usize,
    rescaler: Rescaler,
    auto: Auto,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering;
    std::thread::Builder::new()
        .name("braid-auto-rescale".into())
        .spawn(move || {
            let first = shape(&plan).0;
            let mut before: BTreeMap<(usize, u32), u64> = BTreeMap::new();
            let mut streak = 0u32;
            // The last split: its stage and the load of its hottest partition then;
            // stages whose split did not cool their hottest partition.
            let mut last_split: Option<(usize, f64)> = None;
            let mut hopeless: Vec<usize> = Vec::new();
            // Rescales done and refused once the last request is taken up.
            let mut asked = rescaler.done().len() + rescaler.refused().len();
            let mut last = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(auto.period);
                let now: BTreeMap<(usize, u32), u64> = (run.costs)()
                    .into_iter()
                    .map(|c| ((c.stage, c.partition), c.nanos))
                    .collect();
                let span = last.elapsed().as_nanos().max(1) as f64;
                last = std::time::Instant::now();
                let done = rescaler.done().len();
                let refused = rescaler.refused().len();
                if done + refused < asked {
                    // A move under way: loads from before it say nothing.
                    before = now;
                    streak = 0;
                    continue;
                }
                asked = done + refused;
                let shape = (run.shape)().unwrap_or_else(|| first.clone());
                let mut chosen = None;
                let mut split = None;
                for (k, &q) in shape.partitions.iter().enumerate() {
                    let load: Vec<f64> = (0..q)
                        .map(|p| {
                            let n = now.get(&(k, p)).copied().unwrap_or(0);
                            let b = before.get(&(k, p)).copied().unwrap_or(0);
                            n.saturating_sub(b) as f64 / span
                        })
                        .collect();
                    let table = shape.placement.get(k).cloned().flatten();
                    let worker = |p: u32| match &table {
                        Some(t) => t[p as usize] as usize,
                        None => p as usize,
                    };
                    if let Some((p, w)) = best_move(&load, worker, workers, auto.threshold) {
                        chosen = Some((k, p, w));
                        break;
                    }
                    // The hottest partition: a split that left it as hot as before
                    // met a key too hot to split, and is not tried again.
                    let hottest = load.iter().copied().fold(0.0, f64::max);
                    let helped = !matches!(last_split, Some((stage, was)) if stage == k && hottest >= 0.9 * was);
                    if split.is_none()
                        && q < split_cap(workers)
                        && !hopeless.contains(&k)
                        && wants_split(&load, worker, workers, auto.threshold)
                    {
                        if helped {
                            split = Some((k, (q * 2).min(split_cap(workers)), hottest));
                        } else {
                            hopeless.push(k);
                        }
                    }
                }
                before = now;
                match (chosen, split) {
                    (Some((k, p, w)), _) => {
                        streak += 1;
                        if streak >= auto.patience {
                            rescaler.request(Request::Move {
                                stage: k + 1,
                                partition: p,
                                worker: w as u32,
                            });
                            asked = done + refused + 1;
                            streak = 0;
                        }
                    }
                    (None, Some((k, q, hottest))) => {
                        streak += 1;
                        if streak >= auto.patience {
                            rescaler.request(Request::Partitions(q));
                            last_split = Some((k, hottest));
                            asked = done + refused + 1;
                            streak = 0;
                        }
                    }
                    (None, None) => streak = 0,
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::best_move;

    #[test]
    fn a_load_no_move_evens_out_asks_for_more_partitions() {
        use super::wants_split;
        let on = |p: u32| p as usize;
        // One hot partition alone on worker 0, worker 1 idle: moving it only moves
        // the load, more partitions may spread its keys.
        assert!(wants_split(&[0.95, 0.05], on, 2, 0.8));
        // A move helps: no split.
        assert!(!wants_split(&[0.9, 0.1, 0.6, 0.0], on, 2, 0.8));
        // Nobody above the threshold, or both workers busy alike: no split.
        assert!(!wants_split(&[0.5, 0.05], on, 2, 0.8));
        assert!(!wants_split(&[0.95, 0.9], on, 2, 0.8));
        // One worker: nothing to spread over.
        assert!(!wants_split(&[0.95], on, 1, 0.8));
    }

    #[test]
    fn the_busiest_workers_best_partition_moves() {
        // Worker 0 holds partitions 0 and 2 (0.9 + 0.6), worker 1 partition 1 and 3.
        let load = [0.9, 0.1, 0.6, 0.0];
        assert_eq!(best_move(&load, |p| p as usize, 2, 0.8), Some((2, 1)));
        // Nothing above the threshold, or nothing that helps: no move.
        assert_eq!(best_move(&load, |p| p as usize, 2, 1.6), None);
        assert_eq!(best_move(&[1.0, 0.0], |p| p as usize, 2, 0.5), None);
        // One partition alone on a busy worker and an idle one: moving it only moves
        // the load.
        assert_eq!(best_move(&[0.95, 0.9], |p| p as usize, 2, 0.8), None);
    }
}
