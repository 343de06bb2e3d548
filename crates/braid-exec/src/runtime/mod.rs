//! Running a plan: timely workers (threads, optionally several processes), each
//! building the same dataflow, feeding its share of the sources and stepping until
//! every dataflow has drained.
//!
//! `run` (this file) sets a run up, loops over timely executions (one, unless a live
//! rescale changes the worker threads) and gathers the report; each worker's source
//! loop is in `feed`, the meeting of the workers at a live rescale's switch and the
//! draining at the end in `switch`.

mod costs;
mod feed;
mod switch;
pub(crate) use switch::commit as commit_checkpoints;

use feed::{feed, FeedCtx, FeedEnd, Shares};
use switch::{abandon, await_switch, drain, drain_committing, Gate};

use crate::cancel::Cancel;
use crate::checkpoint::{CheckpointConfig, Clock, Store, Taken};
use crate::error::{Error, Result};
pub use crate::fault::{FaultRow, Faults};
pub use crate::profile::PartitionCost;
use crate::profile::{Profile, Profiler};
use crate::render::{self, Control, Feeder, Place};
use crate::rescale::{Rescaled, Rescaler};
use crate::shared::{panic_message, Shared};
use crate::source::{Counters, ReadOptions, Rejects};
use braid_plan::function::Registry;
use braid_plan::optimize::{resolve, Env};
use braid_plan::output::OutRow;
use braid_plan::plan::Plan;
use std::sync::Arc;
use std::time::Duration;
use timely::dataflow::ProbeHandle;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Worker threads per process.
    pub workers: usize,
    /// Number of processes (timely cluster mode when > 1).
    pub processes: usize,
    /// This process's index in `hosts`.
    pub process: usize,
    /// `host:port` of every process (cluster mode).
    pub hosts: Vec<String>,
    /// Input reading options.
    pub read: ReadOptions,
    /// Backpressure: a source does not run more than this many epochs ahead of the
    /// output frontier.
    pub max_epochs_ahead: u64,
    /// Epochs per timely time ([`crate::shared::Granule`]); `None`: chosen from the
    /// source's rows per epoch where the run allows it, 1: one epoch per time.
    pub granule: Option<u64>,
    /// Backpressure: a worker does not start a new epoch while more than this many of
    /// its rows are in epochs the output has not completed, unless only the current
    /// epoch is (so epochs larger than this still overlap by one). This bounds memory,
    /// and keeps the rows in flight few enough to be reused from cache: at 2 M, every
    /// window of a fast source landed on memory fresh from the kernel, and zeroing it
    /// cost a quarter of the CPU of a 2-worker split benchmark.
    pub max_rows_in_flight: u64,
    /// Live counters the caller reads while the run goes on (the CLI draws its progress
    /// line from them; the library prints nothing). A fresh set when `None`.
    pub counters: Option<Arc<Counters>>,
    /// Stop reading input once the sources have read this many rows (the run then
    /// drains and ends as at the end of input).
    pub max_rows: Option<u64>,
    /// Measure every partition's stream-function time ([`RunReport::costs`]; what
    /// `--calibrate` places partitions by). Off, `Map` hands rows that arrive in serial
    /// order to their partitions as they come, without per-partition lists and clocks.
    pub measure_costs: bool,
    /// Cancels the run from another thread (see [`crate::cancel`]); none when `None`.
    pub cancel: Option<Cancel>,
    /// Profile the run into this ([`crate::profile`]: each operator's time on each
    /// worker, from timely's logging, and each partition's, as with `measure_costs`);
    /// its figures are live while the run goes, and [`RunReport::profile`] is what it
    /// holds at the end. Give a fresh one to each run. Off (`None`), nothing is timed.
    pub profile: Option<Arc<Profiler>>,
    /// Take checkpoints (and, with `recover`, resume from the last one): see
    /// [`crate::checkpoint`].
    pub checkpoint: Option<CheckpointConfig>,
    /// Cluster mode: how long this process waits for the others to connect before it
    /// stops with an error (a process that never came up, or died while starting).
    pub connect_timeout: Duration,
    /// Live rescaling ([`crate::rescale`]): requests the run takes up while it goes.
    /// Without [`RunConfig::checkpoint`] the run keeps the checkpoints a rescale takes
    /// in a directory of its own, and takes no others.
    pub rescale: Option<Rescaler>,
    /// Rescale automatically: move a partition off a worker whose partitions stay
    /// above a share of a core (see [`crate::rescale::Auto`]; the run measures
    /// partition costs). A cluster gives it to every process, with checkpoints:
    /// process 0 watches, the others send it their costs (`runtime/costs.rs`).
    pub auto_rescale: Option<crate::rescale::Auto>,
    /// Stamp windows and measure latencies per operator and end to end
    /// ([`RunReport::latency`]); always on under a latency constraint
    /// (`Sink::max_latency`, see [`crate::qos`]).
    pub measure_latency: bool,
    /// Under a latency constraint, cut windows of exactly this many rows instead of
    /// steering W (a benchmark's fixed buffers); None: the controller steers.
    pub fixed_window: Option<usize>,
    /// Under a latency constraint, with stages that can be chained onto the reader's
    /// worker (`Plan::chainable_stages`) and several workers: chain them always
    /// (`Some(true)`), never (`Some(false)`), or as the controller decides (None; see
    /// `crate::qos::Chaining`).
    pub chain: Option<bool>,
    /// Chain and split those stages in turn every this many epochs, chained first (their
    /// partitions' state handed over each time: a test's and a benchmark's knob; it
    /// overrides `chain`).
    pub chain_alternate: Option<u64>,
    /// How long a `Map` runs before it yields to the operators after it; None: as its
    /// scheduler and the latency constraint say (`braid_plan::plan::Scheduler`). Zero
    /// yields after every slice of rows (tests run the policies' resumption that way).
    pub quantum: Option<Duration>,
    /// With checkpoints, each worker's barrier input stays open this long after its
    /// rows' input has ended (a test's knob: the barriers' frontier then trails the
    /// rows', as it may across workers).
    pub barriers_linger: Option<Duration>,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            workers: 1,
            processes: 1,
            process: 0,
            hosts: Vec::new(),
            read: ReadOptions {
                tcp_clients: 1,
                ..ReadOptions::default()
            },
            max_epochs_ahead: 64,
            granule: None,
            max_rows_in_flight: 262_144,
            counters: None,
            max_rows: None,
            measure_costs: false,
            cancel: None,
            profile: None,
            checkpoint: None,
            connect_timeout: Duration::from_secs(20),
            rescale: None,
            auto_rescale: None,
            measure_latency: false,
            fixed_window: None,
            chain: None,
            chain_alternate: None,
            quantum: None,
            barriers_linger: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Rows read by this process's sources.
    pub rows_in: u64,
    /// Rows written by this process's sinks.
    pub rows_out: u64,
    /// Malformed records per source.
    pub rejects: Vec<Rejects>,
    /// Rows skipped on runtime faults, per site (none in strict mode: the first fails
    /// the run).
    pub faults: Vec<Faults>,
    /// Wall time.
    pub elapsed: Duration,
    /// Rows of a `Collect` sink (in arrival order); of the first plan of a `Together`.
    pub collected: Vec<OutRow>,
    /// Rows of the `Collect` sinks of the later plans of a `Together`, by plan (the
    /// first is plan 1).
    pub collected_late: Vec<Vec<OutRow>>,
    /// The plan as run (shapes resolved).
    pub plan: Option<Plan>,
    /// Measured cost of every partition that had rows, by stage and partition (with
    /// [`RunConfig::measure_costs`]; empty without).
    pub costs: Vec<PartitionCost>,
    /// The run was cancelled ([`RunConfig::cancel`]): it ended early, and its sinks
    /// wrote a prefix of its output (`rows_out` rows).
    pub cancelled: bool,
    /// The profile, with [`RunConfig::profile`].
    pub profile: Option<Profile>,
    /// With [`RunConfig::checkpoint`]: the epoch of the checkpoint the run resumed
    /// from, if any, and the checkpoints this process committed.
    pub resumed_from: Option<u64>,
    /// Checkpoints committed (by process 0).
    pub checkpoints: Vec<Taken>,
    /// Resuming ([`CheckpointConfig::recover`]), the query had already finished: it
    /// did not run again.
    pub finished_before: bool,
    /// Live rescales done ([`RunConfig::rescale`]); the plan as run is the last shape.
    pub rescales: Vec<Rescaled>,
    /// Epochs per timely time ([`crate::shared::Granule`], [`RunConfig::granule`]).
    pub granule: u64,
    /// Latencies measured ([`RunConfig::measure_latency`], or a latency constraint).
    pub latency: Option<crate::qos::LatencyReport>,
    /// The most rows a worker's source had in epochs (ticks) the output had not
    /// completed (the run's peak of queued rows).
    pub queued_peak: u64,
    /// The most rows one `Map` held waiting for its stream functions
    /// ([`Counters::waiting_peak`]).
    pub waiting_peak: u64,
    /// Rows dropped by load shedding (`Source::shed`): (source, second of its
    /// schedule, rows), in order.
    pub shed: Vec<(String, u64, u64)>,
}

/// Runs started by this process (names the directories of rescale-only checkpoints).
static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The addresses of `processes` processes when no hosts file names them: timely's
/// default, localhost:2101, 2102, ...
pub fn default_hosts(processes: usize) -> Vec<String> {
    (0..processes)
        .map(|i| format!("localhost:{}", 2101 + i))
        .collect()
}

/// `timely::execute` on `cfg.workers` threads; with `hosts` (a cluster, `cfg.process`
/// among them), the processes connect through [`crate::cluster::connect`], then
/// timely's network threads take the sockets.
fn execute<T, F>(
    cfg: &RunConfig,
    hosts: Option<&[String]>,
    func: F,
) -> std::result::Result<timely::communication::WorkerGuards<T>, String>
where
    T: Send + 'static,
    F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
{
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
    let Some(hosts) = hosts else {
        use timely::CommunicationConfig as C;
        let communication = match cfg.workers > 1 {
            true => C::Process(cfg.workers),
            false => C::Thread,
        };
        let config = timely::Config {
            communication,
            worker: timely::WorkerConfig::default(),
        };
        return timely::execute(config, func);
    };
    let threads = cfg.workers.max(1);
    let sockets = crate::cluster::connect(cfg.process, hosts);
    let hooks = timely::communication::Hooks::default();
    let local =
        ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) =
        initialize_networking_from_sockets(local, sockets, cfg.process, threads, hooks)
            .map_err(|e| format!("failed to initialize networking: {e}"))?;
    timely::execute::execute_from(
        builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
        Box::new(guard),
        timely::WorkerConfig::default(),
        func,
    )
}

/// Resolves the plan's split shapes for `workers` workers in all and checks it.
pub fn prepare(plan: &Plan, registry: &Registry, workers: usize) -> Result<Plan> {
    let mut plan = plan.clone();
    resolve(&mut plan, Env::workers(workers));
    plan.schema(registry)?;
    Ok(plan)
}

/// Runs `plan` to the end of its input.
pub fn run(plan: &Plan, registry: &Registry, cfg: &RunConfig) -> Result<RunReport> {
    let total_workers = cfg.workers.max(1) * cfg.processes.max(1);
    let mut with_rescaler;
    let cfg = match (&cfg.auto_rescale, &cfg.rescale) {
        (Some(_), None) => {
            with_rescaler = cfg.clone();
            with_rescaler.rescale = Some(Rescaler::new());
            &with_rescaler
        }
        _ => cfg,
    };
    // Worker 0 takes a cluster's rescales: the other processes refuse them, saying so.
    if let (Some(r), true) = (&cfg.rescale, cfg.process > 0) {
        r.close(Some(format!(
            "this is process {} of a cluster: ask process 0, whose worker 0 takes the cluster's rescales",
            cfg.process
        )));
    }
    // Rescaling live without checkpoints asked for: the checkpoints it takes go to a
    // directory of the run's own, and none is taken by the clock. A cluster's state
    // moves through a directory every process reads: the user names it.
    if cfg.rescale.is_some() && cfg.checkpoint.is_none() && cfg.processes > 1 {
        return Err(Error::Plan(braid_plan::error::Error::NotSupported(
            "live rescaling of a cluster without checkpoints: its state moves through the checkpoint directory, which every process must read (give --checkpoint DIR to every process)".into(),
        )));
    }
    let own = match (&cfg.checkpoint, &cfg.rescale) {
        (None, Some(_)) => Some(CheckpointConfig {
            dir: std::env::temp_dir().join(format!(
                "braid-rescale-{}-{}",
                std::process::id(),
                RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )),
            interval: Duration::MAX,
            recover: false,
            backend: None,
        }),
        _ => None,
    };
    if let Some(d) = plan.leaf_source().shed {
        if cfg.checkpoint.is_some() || cfg.rescale.is_some() || cfg.auto_rescale.is_some() {
            return Err(Error::Plan(braid_plan::error::Error::NotSupported(format!(
                "load shedding (shed_load {}) with checkpoints or live rescaling: what it drops depends on timing, so a replay would not give the same output",
                braid_plan::explain::duration_text(d)
            ))));
        }
    }
    let store = match cfg.checkpoint.as_ref().or(own.as_ref()) {
        Some(c) => Some(Arc::new(Store::open(
            c,
            plan,
            registry,
            total_workers,
            cfg.process == 0,
        )?)),
        None => None,
    };
    let mut plan = prepare(plan, registry, total_workers)?;
    plan.check_latency_parts()?;
    let constraint = plan.latency_constraint();
    let mut shared = Shared::new(
        cfg.counters.clone().unwrap_or_default(),
        cfg.measure_costs || cfg.auto_rescale.is_some(),
        cfg.profile.clone(),
        cfg.read.strict,
        cfg.cancel.clone().unwrap_or_default(),
        match &plan {
            Plan::Together(p) => p.len(),
            _ => 1,
        },
    );
    shared.checkpoints = store.clone();
    if constraint.is_some() {
        shared.ticks = crate::qos::Ticks::ON;
    }
    shared.granule = granule(&plan, cfg, constraint.is_some() || store.is_some());
    shared.constraint = constraint;
    if let Some(part) = plan.latency_part() {
        let _ = shared.latencies.part.set(part.to_string());
    }
    if let Some(start) = plan.latency_start() {
        let _ = shared.latencies.start.set(start.to_string());
    }
    let chain_wanted = cfg.chain != Some(false) || cfg.chain_alternate.is_some();
    if constraint.is_some() && total_workers > 1 && chain_wanted {
        if let Some(c) = plan.chainable_stages(registry) {
            let mut stages: Vec<bool> = c.stages.iter().map(|s| s.stateless).collect();
            // A stage's state is handed over in memory: a cluster chains the stages
            // before the first that keeps state.
            if cfg.processes > 1 {
                stages.truncate(stages.iter().take_while(|&&stateless| stateless).count());
            }
            if !stages.is_empty() {
                let _ = shared.latencies.chain.set(crate::qos::Chain::new(
                    stages,
                    cfg.chain == Some(true),
                    cfg.chain.is_some(),
                    cfg.chain_alternate,
                ));
            }
        }
    }
    shared.quantum = cfg.quantum;
    // Stamps cost a clock reading per window and operator: taken under a constraint,
    // when asked, and when someone watches the counters (a progress line, a dashboard).
    shared.stamps = constraint.is_some() || cfg.measure_latency || cfg.counters.is_some();
    if shared.stamps {
        let _ = shared.counters.latency.set(shared.latencies.clone());
    }
    let shared = Arc::new(shared);
    let hosts = (cfg.processes > 1).then(|| match cfg.hosts.is_empty() {
        true => default_hosts(cfg.processes),
        false => cfg.hosts.clone(),
    });
    let connected = hosts.as_ref().map(|hosts| {
        crate::cluster::fail_stop(cfg.process, hosts);
        crate::cluster::connect_watchdog(cfg.process, hosts.clone(), cfg.connect_timeout)
    });
    let stop_auto = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The automatic rescaler watches on process 0, whose worker 0 takes its requests;
    // in a cluster the other processes send it their partitions' costs (see `costs`).
    let auto = match (cfg.auto_rescale, &cfg.rescale) {
        (Some(a), Some(r)) if cfg.process == 0 => Some(
            crate::rescale::watch(
                crate::rescale::Watched {
                    costs: Box::new({
                        let s = shared.clone();
                        move || s.remote_costs.with(s.profiler.partitions())
                    }),
                    shape: Box::new({
                        let s = shared.clone();
                        move || s.shape.lock().ok().and_then(|r| r.clone())
                    }),
                },
                plan.clone(),
                total_workers,
                r.clone(),
                a,
                stop_auto.clone(),
            )
            .map_err(|e| Error::io("starting the automatic rescaler", e))?,
        ),
        _ => None,
    };
    // The plan as it runs and this process's worker threads: a live rescale of the
    // threads ends an execution, and the next starts as many on the same state.
    let mut plan_run = plan.clone();
    let mut threads = cfg.workers.max(1);
    let mut connected = connected;
    let mut results = Vec::new();
    let mut execution = 0usize;
    loop {
        execution += 1;
        let cfg_run = RunConfig {
            workers: threads,
            ..cfg.clone()
        };
        let (plan_w, registry_w, shared_w, cfg_w) = (
            plan_run.clone(),
            registry.clone(),
            shared.clone(),
            cfg_run.clone(),
        );
        let gate = Arc::new(Gate::new(threads));
        let guards = execute(&cfg_run, hosts.as_deref(), move |worker| {
            let place = Place {
                index: worker.index(),
                peers: worker.peers(),
                threads: cfg_w.workers.max(1),
            };
            let profiler = shared_w.profiling().cloned();
            if let Some(p) = &profiler {
                p.attach(worker);
            }
            // The plan as it runs now: a live rescale installs it in another shape.
            let mut plan_now = plan_w.clone();
            let mut clock = Clock::new();
            let mut dataflows = 0usize;
            loop {
                dataflows += 1;
                if worker.index() == 0 {
                    // State handed over in an earlier dataflow is in its checkpoint.
                    if let Some(c) = shared_w.latencies.chain.get() {
                        c.clear_handed();
                    }
                }
                let shares = Shares::build(
                    worker,
                    &plan_now,
                    cfg_w.processes,
                    &shared_w,
                    (execution, dataflows),
                );
                let mut input = Feeder::new();
                let mut control = shared_w.checkpoints.as_ref().map(|_| Control::new());
                let probe = ProbeHandle::new();
                let built = worker.dataflow::<u64, _, _>(|scope| {
                    render::render(
                        scope,
                        &plan_now,
                        &registry_w,
                        (&mut input, control.as_mut()),
                        &probe,
                        place,
                        &shared_w,
                    )
                });
                if let Err(e) = built {
                    shared_w.fatal(e);
                    drop(input);
                    drain(worker, &shared_w);
                    gate.abandon();
                    break;
                }
                if let Some(a) = cfg_w.auto_rescale.filter(|_| cfg_w.processes > 1) {
                    costs::build(worker, &shared_w, place, a.period / 2, probe.clone());
                }
                let ctx = FeedCtx {
                    plan: &plan_now,
                    registry: &registry_w,
                    place,
                    cfg: &cfg_w,
                    shared: &shared_w,
                };
                // A panic here (a bug, or user code no operator guards itself: a native sink
                // or source) fails the run; the other workers see the failure and stop
                // instead of waiting for this one forever.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    match feed(worker, input, control, shares, &probe, &mut clock, &ctx) {
                        FeedEnd::Switch(c, fence) => {
                            let passed = await_switch(worker, &probe, &mut clock, &shared_w, c);
                            drop(fence);
                            passed.then_some(c)
                        }
                        FeedEnd::Done => drain_committing(worker, &probe, &mut clock, &shared_w),
                    }
                }));
                match ran {
                    Err(payload) => {
                        shared_w.fatal(Error::Internal(format!(
                            "worker {} panicked: {}",
                            place.index,
                            panic_message(payload.as_ref())
                        )));
                        shared_w
                            .died
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                        abandon(worker);
                        gate.abandon();
                        break;
                    }
                    Ok(None) => break,
                    Ok(Some(c)) => {
                        // Every worker of this process is past `c` before any resets what
                        // the next dataflow counts again; each reads the new shape first.
                        let shape = shared_w.switch.lock().ok().and_then(|s| s.clone());
                        let Some((_, shape)) = shape.filter(|s| s.0 == c) else {
                            shared_w.fatal(Error::Internal(format!(
                                "worker {} switched at epoch {c} without the rescale's shape",
                                place.index
                            )));
                            abandon(worker);
                            gate.abandon();
                            break;
                        };
                        if !gate.wait(&shared_w) {
                            abandon(worker);
                            break;
                        }
                        abandon(worker);
                        if place.index.is_multiple_of(place.threads) {
                            shared_w.rebase(c, &shape);
                        }
                        // Other worker threads: this execution ends here, on every process
                        // (see `run`'s loop); the first worker of each says how many next.
                        if let Some(n) = shape.workers.filter(|&n| n as usize != place.threads) {
                            if place.index.is_multiple_of(place.threads) {
                                if let Ok(mut t) = shared_w.threads_next.lock() {
                                    *t = Some(n as usize);
                                }
                            }
                            break;
                        }
                        match prepare(
                            &crate::rescale::apply(&plan_now, &shape),
                            &registry_w,
                            place.peers,
                        ) {
                            Ok(p) => plan_now = p,
                            Err(e) => {
                                shared_w.fatal(e);
                                gate.abandon();
                                break;
                            }
                        }
                        if !gate.wait(&shared_w) {
                            break;
                        }
                    }
                }
            }
            if let Some(p) = &profiler {
                p.ended(place.index);
            }
        })
        .map_err(|e| {
            stop_auto.store(true, std::sync::atomic::Ordering::Relaxed);
            Error::Startup(e)
        })?;
        if let Some(c) = connected.take() {
            c.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        results.extend(guards.join());
        let next = shared.threads_next.lock().ok().and_then(|mut t| t.take());
        let (Some(n), Some(shape)) = (next, shared.shape.lock().ok().and_then(|s| s.clone()))
        else {
            break;
        };
        if shared.failed() || results.iter().any(|r| r.is_err()) {
            break;
        }
        threads = n;
        let workers = n * cfg.processes.max(1);
        if let Some(s) = &store {
            s.set_workers(workers);
        }
        plan_run = prepare(&crate::rescale::apply(&plan_run, &shape), registry, workers)?;
        // The processes of a cluster connect again, each with its new threads.
        if let Some(hosts) = &hosts {
            connected = Some(crate::cluster::connect_watchdog(
                cfg.process,
                hosts.clone(),
                cfg.connect_timeout,
            ));
        }
    }
    stop_auto.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(a) = auto {
        let _ = a.join();
    }
    // A request made after worker 0's input ended (while the dataflow drained) was
    // never taken up: it is refused, not left unanswered.
    if let Some(r) = cfg.rescale.as_ref().filter(|_| cfg.process == 0) {
        if let Some(q) = r.take() {
            r.refuse(format!("{q:?}: the run ended first"));
        }
    }
    if let Some(s) = &store {
        s.finish()?;
    }
    if let Some(own) = &own {
        let _ = std::fs::remove_dir_all(&own.dir);
    }
    // The plan as run: in the shape of the last live rescale.
    let plan = match shared.shape.lock().ok().and_then(|s| s.clone()) {
        Some(shape) => prepare(
            &crate::rescale::apply(&plan, &shape),
            registry,
            threads * cfg.processes.max(1),
        )?,
        None => plan,
    };
    for r in results {
        if let Err(e) = r {
            return Err(Error::Internal(format!("a worker failed: {e}")));
        }
    }
    let mut rejects: Vec<Rejects> = Vec::new();
    for r in shared.rejects.lock().map(|r| r.clone()).unwrap_or_default() {
        match rejects.iter_mut().find(|x| x.source == r.source) {
            Some(x) => x.absorb(r),
            None => rejects.push(r),
        }
    }
    // A fault names its row's line when its source says where its rows are; a row of
    // an interleave numbered by file, its file and its row there.
    let leaf = plan.leaf_source();
    let locate = |row: &mut FaultRow| {
        if let braid_plan::plan::SourceSpec::Interleave(kids) = &leaf.spec {
            if row.source.as_ref() == Some(&leaf.name)
                && !braid_plan::batch::RowKey::made_at_end(row.seq)
                && braid_plan::interleave::numbered_by_file(kids, leaf.epoch)
            {
                let (c, i) = braid_plan::interleave::place_by_file(kids.len(), leaf.epoch, row.seq);
                if let Some(kid) = kids.get(c) {
                    row.source = Some(format!("{} (_stream {c} of {})", kid.name, leaf.name));
                    row.seq = i;
                    return;
                }
            }
        }
        let source = rejects
            .iter()
            .find(|r| Some(&r.source) == row.source.as_ref());
        row.line = source.and_then(|r| r.line_of(row.seq));
    };
    if let Some(mut e) = shared.fatal.lock().ok().and_then(|mut f| f.take()) {
        if let Error::Fault { row, .. } = &mut e {
            locate(row);
        }
        return Err(e);
    }
    let errors = shared
        .errors
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default();
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut faults = shared
        .faults
        .lock()
        .map(|mut f| std::mem::take(&mut *f))
        .unwrap_or_default();
    for f in &mut faults {
        f.first.iter_mut().for_each(locate);
        f.first.sort();
    }
    faults.sort_by(|a, b| a.site.cmp(&b.site));
    let mut collected = shared
        .collected
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default();
    let plans = match &plan {
        Plan::Together(p) => p.len(),
        _ => 1,
    };
    collected.resize_with(plans.max(collected.len()), Vec::new);
    let collected_late = collected.split_off(1);
    let collected = collected.pop().unwrap_or_default();
    let costs = shared.profiler.partitions();
    let c = &shared.counters;
    Ok(RunReport {
        rows_in: c.rows_in.load(std::sync::atomic::Ordering::Relaxed),
        rows_out: c.rows_out.load(std::sync::atomic::Ordering::Relaxed),
        rejects,
        faults,
        elapsed: shared.start.elapsed(),
        collected,
        collected_late,
        plan: Some(plan),
        costs,
        cancelled: shared.cancel.is_cancelled(),
        profile: shared.profiling().map(|p| p.snapshot()),
        resumed_from: store.as_ref().and_then(|s| s.restored_epoch()),
        checkpoints: store.as_ref().map(|s| s.taken()).unwrap_or_default(),
        finished_before: false,
        rescales: cfg.rescale.as_ref().map(|r| r.done()).unwrap_or_default(),
        granule: shared.granule.0,
        latency: shared.stamps.then(|| shared.latencies.summary(constraint)),
        queued_peak: c.queued_peak.load(std::sync::atomic::Ordering::Relaxed),
        waiting_peak: c.waiting_peak.load(std::sync::atomic::Ordering::Relaxed),
        shed: shared
            .shed
            .lock()
            .map(|s| s.iter().map(|((n, t), r)| (n.clone(), *t, *r)).collect())
            .unwrap_or_default(),
    })
}

/// Epochs per timely time for a run of `plan` (see [`crate::shared::Granule`]): as many
/// as make about [`GRANULE_WINDOWS`] physical windows of rows, at most
/// [`MAX_GRANULE`], where the source is read as fast as possible from what is
/// already there (a file, rows in memory) and nothing in the run acts on epochs one at
/// a time by timely's time: not under a latency constraint (ticks) or with checkpoints
/// or live rescaling (both cut at an epoch), not across processes, not with a keyed
/// merge or plans run together. `cfg.granule` sets it (1: off).
fn granule(plan: &Plan, cfg: &RunConfig, timed: bool) -> crate::shared::Granule {
    use crate::shared::Granule;
    use braid_plan::plan::{MergeKind, Pace, SourceSpec};
    fn plain(plan: &Plan) -> bool {
        match plan {
            Plan::Together(_) => false,
            Plan::Merge(m) if matches!(m.kind, MergeKind::Keyed { .. }) => false,
            Plan::Source(s) => !matches!(s.spec, SourceSpec::Late { .. }),
            p => p.input().is_some_and(plain),
        }
    }
    if timed
        || cfg.processes > 1
        || cfg.rescale.is_some()
        || cfg.auto_rescale.is_some()
        || !plain(plan)
    {
        return Granule::ONE;
    }
    if let Some(g) = cfg.granule {
        return Granule(g.max(1));
    }
    let source = plan.leaf_source();
    if source.pace != Pace::Max {
        return Granule::ONE;
    }
    let per_epoch = match source.schema.event_time {
        None => Some(source.epoch as f64),
        Some(c) => crate::source::rows_per_epoch(source, c),
    };
    let Some(per_epoch) = per_epoch.filter(|r| *r > 0.0) else {
        return Granule::ONE;
    };
    let want = (GRANULE_WINDOWS * source.window.max(1)) as f64 / per_epoch;
    Granule((want as u64).clamp(1, MAX_GRANULE))
}

/// Physical windows of rows a timely time holds, about, where epochs are small: fraud
/// (`examples/fraud.sql`, epochs of 60 rows) on 2 workers against 1 on one core, runs'
/// own times, medians of 5: 1.30x at one epoch a time, 1.45x at 64 (four windows),
/// 1.61x at 256, 1.78x at 1,024 (64 windows); one core alone is the same from 16 on.
const GRANULE_WINDOWS: usize = 64;

/// The most epochs a timely time holds (a Map holds a time's rows until it is
/// complete: this bounds what a burst in a stream of small epochs can make it hold).
const MAX_GRANULE: u64 = 1024;

#[cfg(test)]
mod granule_tests {
    use super::*;
    use braid_plan::batch::{Batch, RowKey, Value};
    use braid_plan::plan::{Pace, SourceSpec};
    use braid_plan::types::{DataType, Field, Schema};

    /// A plan reading `rows` rows in memory, `per_epoch` of them in each epoch of 10
    /// event-time units (or without event times), in windows of 16 rows (64 windows:
    /// 1,024 rows a time).
    fn plan(rows: i64, per_epoch: i64, timed: bool) -> Plan {
        let mut schema = Schema::new(vec![Field::new("t", DataType::Int64)]);
        if timed {
            schema = schema.with_event_time("t").expect("t");
        }
        let mut b = Batch::new(1);
        for i in 0..rows {
            b.push(
                RowKey { seq: 0, lane: 0 },
                &[Value::Int(i * 10 / per_epoch)],
            );
        }
        let mut p = Plan::source("s", SourceSpec::Memory(Arc::new(b)), schema);
        let s = p.leaf_source_mut();
        s.epoch = 10;
        s.window = 16;
        p
    }

    /// Epochs of a few rows go several to a time (about 64 windows of rows each, at most
    /// 1,024 epochs); epochs of many rows one to a time; and one to a time wherever the
    /// run acts on epochs one by one, or is paced.
    #[test]
    fn granule_is_chosen_from_rows_per_epoch_where_the_run_allows_it() {
        let cfg = RunConfig::default();
        let g = |p: &Plan, cfg: &RunConfig, timed: bool| granule(p, cfg, timed).0;
        assert_eq!(g(&plan(1000, 4, true), &cfg, false), 256); // 1,024 rows / 4
        assert_eq!(g(&plan(2000, 1, true), &cfg, false), 1024); // at most 1,024
        assert_eq!(g(&plan(5000, 2000, true), &cfg, false), 1);
        // Without event times an epoch is `epoch` rows: 1,024 / 10.
        assert_eq!(g(&plan(1000, 4, false), &cfg, false), 102);
        assert_eq!(
            g(&plan(1000, 4, true), &cfg, true),
            1,
            "ticks or checkpoints"
        );
        let mut paced = plan(1000, 4, true);
        paced.leaf_source_mut().pace = Pace::EventTime {
            units_per_second: 1.0,
            speed: 1.0,
        };
        assert_eq!(g(&paced, &cfg, false), 1, "paced");
        let cluster = RunConfig {
            processes: 2,
            ..RunConfig::default()
        };
        assert_eq!(g(&plan(1000, 4, true), &cluster, false), 1, "processes");
        let set = RunConfig {
            granule: Some(5),
            ..RunConfig::default()
        };
        assert_eq!(g(&plan(1000, 100, true), &set, false), 5, "as set");
    }
}
