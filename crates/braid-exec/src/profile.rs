//! Profiling a run: how long each timely operator ran on each worker, how busy each
//! worker was, the rows each plan node put out, and (from `Map`'s own clocks) each
//! logical partition's time in its stream function.
//!
//! Operator times come from timely's logging: with a [`Profiler`] in
//! [`RunConfig::profile`](crate::runtime::RunConfig::profile), every worker registers a
//! logger for timely's `ScheduleEvent`s (an operator starts, stops) and `OperatesEvent`s
//! (its name and address), and adds up each operator's activations and the time between
//! its start and stop. The root of each dataflow is scheduled too, around its operators:
//! its time is the worker's busy time, measured apart from the operators' own. Rendering
//! notes which operators each plan node made (by timely's worker-unique identifiers), so
//! the figures map back onto the plan EXPLAIN prints.
//!
//! The figures are live: the loggers write into the profiler at every step of their
//! worker, so a caller holding the `Arc` may [`Profiler::snapshot`] it while the run
//! goes; the run's report carries the snapshot taken at its end.

pub use braid_plan::explain::NodeAt;
use braid_plan::plan::{MergeKind, Plan};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timely::logging::{StartStop, TimelyEvent, TimelyEventBuilder};

/// The measured cost of one logical partition of one stage: the time its stream
/// function took and the rows it processed, summed over the run. Stage `k` is the `Map`
/// with `k` Maps below it (0 nearest the source).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionCost {
    /// The stage (see the type's doc).
    pub stage: usize,
    /// The partition.
    pub partition: u32,
    /// Nanoseconds in the stream function (`process` and `end_of_epoch`).
    pub nanos: u64,
    /// Rows processed.
    pub rows: u64,
}

/// Epoch closes and frontier moves kept for latencies.
const KEPT: usize = 1024;

/// The live figures of one run (make a fresh one per run).
#[derive(Default)]
pub struct Profiler {
    /// Operators are timed (a profiler a caller handed in); else it only holds the
    /// partition costs of `--calibrate`.
    pub(crate) timed: bool,
    /// Partitions are timed too (`Map`'s per-partition path, which costs more).
    pub(crate) per_partition: bool,
    workers: Mutex<BTreeMap<usize, WorkerLog>>,
    /// (nanoseconds, rows) by (stage, partition).
    partitions: Mutex<BTreeMap<(usize, u32), (u64, u64)>>,
    /// Rows put out, by plan node and worker.
    rows: Mutex<Vec<(NodeOn, Arc<AtomicU64>)>>,
    /// When the source closed each epoch (the live engine notes it), and when each plan
    /// node's output frontier passed each value, by node and worker: their differences
    /// are how long each node took to be done with an epoch.
    closes: Mutex<std::collections::VecDeque<(u64, Instant)>>,
    passes: Mutex<HashMap<NodeOn, std::collections::VecDeque<(u64, Instant)>>>,
}

/// A plan node on a worker.
type NodeOn = (NodeAt, usize);

/// What one worker's logger gathered.
#[derive(Default)]
struct WorkerLog {
    started: Option<Instant>,
    ended: Option<Instant>,
    ops: HashMap<usize, Op>,
    /// Identifiers `[from, to)` the plan node (or nothing: profiling's own operators)
    /// made; the narrowest range holding an identifier names its node.
    nodes: Vec<(usize, usize, Option<NodeAt>)>,
    /// Added to timely's identifiers: a live rescale of the worker threads starts new
    /// workers, whose identifiers start again at 0, after those the old ones used.
    base: usize,
}

#[derive(Default)]
struct Op {
    name: String,
    /// A dataflow's root (its address has one element).
    root: bool,
    activations: u64,
    nanos: u64,
    since: Option<Duration>,
}

/// A profile: what a [`Profiler`] held when it was read.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Each operator on each worker (of this process), by worker then identifier;
    /// dataflow roots left out (their time is [`WorkerProfile::busy`]).
    pub operators: Vec<OperatorProfile>,
    /// Each worker of this process.
    pub workers: Vec<WorkerProfile>,
    /// The time and rows of every partition's stream function, by stage and partition.
    pub partitions: Vec<PartitionCost>,
    /// Rows each plan node put out on each worker, by node and worker.
    pub rows: Vec<(NodeAt, usize, u64)>,
}

/// One timely operator on one worker.
#[derive(Clone, Debug)]
pub struct OperatorProfile {
    /// The worker (global index).
    pub worker: usize,
    /// Timely's worker-unique identifier (after a live rescale of the worker threads,
    /// counted on from the identifiers of the workers before).
    pub id: usize,
    /// Its name (`Map(count)`, `Split`, ...).
    pub name: String,
    /// The plan node that made it; none for timely's and profiling's own operators.
    pub node: Option<NodeAt>,
    /// Times it was scheduled.
    pub activations: u64,
    /// Nanoseconds between its starts and stops (the worker's clock: a thread the
    /// operating system takes off its core still counts).
    pub nanos: u64,
}

/// One worker.
#[derive(Clone, Debug)]
pub struct WorkerProfile {
    /// The worker (global index).
    pub worker: usize,
    /// Nanoseconds since it started, until it ended (or now).
    pub wall: u64,
    /// Nanoseconds its dataflow roots were scheduled: the time it spent running
    /// operators, measured around them, not summed from them.
    pub busy: u64,
}

/// What one plan node measured, over every worker.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFigures {
    /// Rows it was given (rows its input put out), when known (over every worker).
    pub rows_in: Option<u64>,
    /// Rows it put out, when counted.
    pub rows_out: Option<u64>,
    /// Activations of its operators.
    pub activations: u64,
    /// Nanoseconds in its operators.
    pub nanos: u64,
    /// Its time over the workers' wall time (1.0: one worker busy all the run).
    pub busy: f64,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("timed", &self.timed)
            .finish()
    }
}

impl Profiler {
    /// A profiler that times operators, for [`RunConfig::profile`](crate::runtime::RunConfig::profile).
    pub fn new() -> Arc<Profiler> {
        Arc::new(Profiler {
            timed: true,
            per_partition: true,
            ..Profiler::default()
        })
    }

    /// A profiler that times operators but not each partition's stream function (the
    /// live engine's: every query is profiled, so `Map` keeps its faster path).
    pub fn operators_only() -> Arc<Profiler> {
        Arc::new(Profiler {
            timed: true,
            ..Profiler::default()
        })
    }

    /// Registers `worker`'s logger (before it builds its dataflow).
    pub(crate) fn attach(self: &Arc<Self>, worker: &mut timely::worker::Worker) {
        let index = worker.index();
        self.with(index, |w| {
            // A worker of a later execution (a live rescale of the threads) goes on
            // from where the one of its index left off.
            w.base = w.next_id();
            w.started.get_or_insert_with(Instant::now);
            w.ended = None;
        });
        let me = self.clone();
        let Some(mut register) = worker.log_register() else {
            return;
        };
        register.insert::<TimelyEventBuilder, _>("timely", move |_, data| {
            if let Some(events) = data {
                me.with(index, |w| events.iter().for_each(|(t, e)| w.event(*t, e)));
            }
        });
    }

    /// A timely event of `worker` for an operator of this profiler's dataflow (the live
    /// engine's workers run many dataflows, and hand each its own events).
    pub(crate) fn event(&self, worker: usize, at: Duration, e: &TimelyEvent) {
        self.with(worker, |w| {
            if w.started.is_none() {
                w.started = Some(Instant::now());
            }
            w.event(at, e)
        });
    }

    /// Notes the operator identifiers `[from, to)` that plan node `node` made on
    /// `worker` (`None`: profiling's own).
    pub(crate) fn made(&self, worker: usize, from: usize, to: usize, node: Option<NodeAt>) {
        self.with(worker, |w| w.nodes.push((from + w.base, to + w.base, node)));
    }

    /// `worker` has finished.
    pub(crate) fn ended(&self, worker: usize) {
        self.with(worker, |w| w.ended = Some(Instant::now()));
    }

    /// The source closed every epoch before `epoch` at `at`.
    pub(crate) fn closed(&self, epoch: u64, at: Instant) {
        let mut c = self.closes.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() == KEPT {
            c.pop_front();
        }
        c.push_back((epoch, at));
    }

    /// Plan node `node`'s output frontier on `worker` moved to `frontier` at `at`.
    pub(crate) fn passed(&self, node: NodeAt, worker: usize, frontier: u64, at: Instant) {
        let mut all = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        let p = all.entry((node, worker)).or_default();
        if p.len() == KEPT {
            p.pop_front();
        }
        p.push_back((frontier, at));
    }

    /// Plan node `node`'s output frontier now (on `worker`; the least over the workers
    /// when `None`), if it has moved.
    pub fn node_frontier(&self, node: NodeAt, worker: Option<usize>) -> Option<u64> {
        let all = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|((n, w), _)| *n == node && worker.is_none_or(|x| x == *w))
            .filter_map(|(_, p)| p.back().map(|(f, _)| *f))
            .min()
    }

    /// For each recent epoch the source closed that plan node `node` is done with (on
    /// `worker`; on every worker when `None`, the last of them), how long that took.
    pub fn node_latencies(&self, node: NodeAt, worker: Option<usize>) -> Vec<Duration> {
        let closes: Vec<(u64, Instant)> = self
            .closes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        let all = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        let passes: Vec<&std::collections::VecDeque<(u64, Instant)>> = all
            .iter()
            .filter(|((n, w), _)| *n == node && worker.is_none_or(|x| x == *w))
            .map(|(_, p)| p)
            .collect();
        if passes.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (epoch, closed) in closes {
            // The first time each worker's frontier reached the epoch; the last worker's.
            let done = passes
                .iter()
                .map(|p| p.iter().find(|(f, _)| *f >= epoch).map(|(_, t)| *t))
                .collect::<Option<Vec<Instant>>>()
                .and_then(|ts| ts.into_iter().max());
            if let Some(done) = done {
                out.push(done.saturating_duration_since(closed));
            }
        }
        out
    }

    /// The counter of rows plan node `node` puts out on `worker`.
    pub(crate) fn rows_of(&self, node: NodeAt, worker: usize) -> Arc<AtomicU64> {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = rows.iter().find(|(n, _)| *n == (node, worker)) {
            return c.clone();
        }
        let c = Arc::new(AtomicU64::new(0));
        rows.push(((node, worker), c.clone()));
        c
    }

    /// Adds to the measured costs of partitions `local` of `stage`: `spent[k]`
    /// (nanoseconds, rows) for `local[k]`.
    pub(crate) fn add_costs(&self, stage: usize, local: &[u32], spent: &[(u64, u64)]) {
        let mut all = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        for (&partition, &(nanos, rows)) in local.iter().zip(spent) {
            if rows > 0 || nanos > 0 {
                let c = all.entry((stage, partition)).or_default();
                c.0 += nanos;
                c.1 += rows;
            }
        }
    }

    /// The partition costs measured so far, by stage and partition.
    pub fn partitions(&self) -> Vec<PartitionCost> {
        let all = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .map(|(&(stage, partition), &(nanos, rows))| PartitionCost {
                stage,
                partition,
                nanos,
                rows,
            })
            .collect()
    }

    /// The figures now.
    pub fn snapshot(&self) -> Profile {
        let mut profile = Profile {
            partitions: self.partitions(),
            ..Profile::default()
        };
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for (&worker, w) in workers.iter() {
            let mut busy = 0;
            let mut ops: Vec<(&usize, &Op)> = w.ops.iter().collect();
            ops.sort_by_key(|(id, _)| **id);
            for (&id, op) in ops {
                if op.root {
                    busy += op.nanos;
                    continue;
                }
                profile.operators.push(OperatorProfile {
                    worker,
                    id,
                    name: op.name.clone(),
                    node: w.node_of(id),
                    activations: op.activations,
                    nanos: op.nanos,
                });
            }
            let wall = match (w.started, w.ended) {
                (Some(s), Some(e)) => e - s,
                (Some(s), None) => s.elapsed(),
                _ => Duration::ZERO,
            };
            profile.workers.push(WorkerProfile {
                worker,
                wall: wall.as_nanos() as u64,
                busy,
            });
        }
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        profile.rows = rows
            .iter()
            .map(|((n, w), c)| (*n, *w, c.load(Relaxed)))
            .collect();
        profile.rows.sort();
        profile
    }

    fn with(&self, worker: usize, f: impl FnOnce(&mut WorkerLog)) {
        let mut all = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        f(all.entry(worker).or_default())
    }
}

impl WorkerLog {
    /// The first identifier no operator of this worker's has had.
    fn next_id(&self) -> usize {
        let ops = self.ops.keys().map(|&id| id + 1);
        let nodes = self.nodes.iter().map(|n| n.1);
        ops.chain(nodes).max().unwrap_or(0)
    }

    fn event(&mut self, at: Duration, e: &TimelyEvent) {
        match e {
            TimelyEvent::Operates(o) => {
                let op = self.ops.entry(o.id + self.base).or_default();
                op.name = o.name.clone();
                op.root = o.addr.len() == 1;
            }
            TimelyEvent::Schedule(s) => {
                let op = self.ops.entry(s.id + self.base).or_default();
                match s.start_stop {
                    StartStop::Start => op.since = Some(at),
                    StartStop::Stop => {
                        if let Some(since) = op.since.take() {
                            op.activations += 1;
                            op.nanos += at.saturating_sub(since).as_nanos() as u64;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The plan node that made operator `id`: the narrowest range holding it.
    fn node_of(&self, id: usize) -> Option<NodeAt> {
        self.nodes
            .iter()
            .filter(|(from, to, _)| (*from..*to).contains(&id))
            .min_by_key(|(from, to, _)| to - from)
            .and_then(|(_, _, node)| *node)
    }
}

impl Profile {
    /// What plan node `node` measured on `worker`, or over every worker when `None`
    /// (a union merge runs no operator of its own: only its rows); `None` if nothing.
    pub fn node(&self, node: NodeAt, worker: Option<usize>) -> Option<NodeFigures> {
        let on = |w: usize| worker.is_none_or(|x| x == w);
        let ops: Vec<&OperatorProfile> = self
            .operators
            .iter()
            .filter(|o| o.node == Some(node) && on(o.worker))
            .collect();
        let rows = |n: NodeAt| {
            let mut of = self.rows.iter().filter(|r| r.0 == n && on(r.1)).peekable();
            of.peek().is_some().then(|| of.map(|r| r.2).sum::<u64>())
        };
        if ops.is_empty() && rows(node).is_none() {
            return None;
        }
        let wall: u64 = self
            .workers
            .iter()
            .filter(|w| on(w.worker))
            .map(|w| w.wall)
            .sum();
        let nanos: u64 = ops.iter().map(|o| o.nanos).sum();
        Some(NodeFigures {
            // A worker's node reads what the node below put out on any worker.
            rows_in: match worker {
                None => rows(NodeAt {
                    depth: node.depth + 1,
                    ..node
                }),
                Some(_) => None,
            },
            rows_out: rows(node),
            activations: ops.iter().map(|o| o.activations).sum(),
            nanos,
            busy: nanos as f64 / wall.max(1) as f64,
        })
    }

    /// The partitions by time in their stream function, most first.
    pub fn hottest_partitions(&self) -> Vec<PartitionCost> {
        let mut p = self.partitions.clone();
        p.sort_by(|a, b| b.nanos.cmp(&a.nanos).then(a.partition.cmp(&b.partition)));
        p
    }
}

impl NodeFigures {
    /// One line: rows, time and busy share (EXPLAIN ANALYZE's note).
    pub fn line(&self) -> String {
        let mut s = String::from("measured:");
        if let Some(n) = self.rows_in {
            s.push_str(&format!(" rows in {n},"));
        }
        if let Some(n) = self.rows_out {
            s.push_str(&format!(" rows out {n},"));
        }
        s.push_str(&format!(
            " {} activations, {:.2} ms, busy {:.1}%",
            self.activations,
            self.nanos as f64 / 1e6,
            self.busy * 100.0
        ));
        s
    }
}

/// The physical plan `plan` (as run: shapes resolved) as EXPLAIN prints it, each node
/// with what it measured in `profile` below it (EXPLAIN ANALYZE).
pub fn annotate(
    plan: &Plan,
    registry: &braid_plan::function::Registry,
    workers: usize,
    profile: &Profile,
) -> String {
    braid_plan::explain::text_with(plan, registry, workers, &|at| {
        profile.node(at, None).map(|f| f.line())
    })
}

/// The plan node at `at` as the profile names it: its kind and what EXPLAIN heads it
/// with (`Source: gen`, `Split: q = 8`, `Map: count`, `Merge: union`, `Sink`).
pub fn node_label(plan: &Plan, at: NodeAt) -> Option<String> {
    let mut node = match plan {
        Plan::Together(plans) => plans.get(at.plan)?,
        one if at.plan == 0 => one,
        _ => return None,
    };
    for _ in 0..at.depth {
        node = node.input()?;
    }
    Some(match node {
        Plan::Source(s) => format!("Source: {}", s.name),
        Plan::Split(s) => format!("Split: q = {}", s.q),
        Plan::Map(m) => format!("Map: {}", m.function),
        Plan::Merge(m) => match &m.kind {
            MergeKind::Union => "Merge: union".into(),
            MergeKind::TimeOrdered | MergeKind::Sorted(_) => "Merge: time-ordered".into(),
            MergeKind::Keyed { .. } => "Merge: keyed".into(),
        },
        Plan::Sink(_) => "Sink".into(),
        Plan::Together(_) => "Together".into(),
    })
}
