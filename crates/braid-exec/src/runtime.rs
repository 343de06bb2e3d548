//! Running a plan: timely workers (threads, optionally several processes), each
//! building the same dataflow, feeding its share of the sources and stepping until
//! every dataflow has drained.

use crate::cancel::Cancel;
use crate::checkpoint::{CheckpointConfig, Clock, Store, Taken};
use crate::error::{Error, Result};
pub use crate::fault::{FaultRow, Faults};
pub use crate::profile::PartitionCost;
use crate::profile::{Profile, Profiler};
use crate::render::{self, Control, Feeder, Place, Window};
use crate::rescale::{Rescaled, Rescaler};
use crate::shared::{panic_message, Shared};
use crate::source::{self, Counters, Next, ReadOptions, Rejects};
use braid_plan::function::Registry;
use braid_plan::optimize::{resolve, Env};
use braid_plan::output::OutRow;
use braid_plan::plan::{Pace, Plan};
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
    /// above a share of a core (see [`crate::rescale::Auto`]; one process only; the
    /// run measures partition costs).
    pub auto_rescale: Option<crate::rescale::Auto>,
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

fn timely_config(cfg: &RunConfig) -> timely::Config {
    use timely::CommunicationConfig as C;
    let communication = if cfg.processes > 1 {
        C::Cluster {
            threads: cfg.workers.max(1),
            process: cfg.process,
            addresses: if cfg.hosts.is_empty() {
                default_hosts(cfg.processes)
            } else {
                cfg.hosts.clone()
            },
            report: false,
            zerocopy: false,
        }
    } else if cfg.workers > 1 {
        C::Process(cfg.workers)
    } else {
        C::Thread
    };
    timely::Config {
        communication,
        worker: timely::WorkerConfig::default(),
    }
}

/// Resolves the plan's split shapes for `workers` workers in all and checks it.
pub fn prepare(plan: &Plan, registry: &Registry, workers: usize) -> Result<Plan> {
    let mut plan = plan.clone();
    resolve(&mut plan, Env { workers });
    plan.schema(registry)?;
    Ok(plan)
}

/// Runs `plan` to the end of its input.
pub fn run(plan: &Plan, registry: &Registry, cfg: &RunConfig) -> Result<RunReport> {
    let total_workers = cfg.workers.max(1) * cfg.processes.max(1);
    // Automatic rescaling reads the partitions' costs of this process: one process.
    if cfg.auto_rescale.is_some() && cfg.processes > 1 {
        return Err(Error::Plan(braid_plan::error::Error::NotSupported(
            "automatic rescaling of a cluster (each process measures only its own workers' partitions); ask for moves with POST /api/rescale instead".into(),
        )));
    }
    let mut with_rescaler;
    let cfg = match (&cfg.auto_rescale, &cfg.rescale) {
        (Some(_), None) => {
            with_rescaler = cfg.clone();
            with_rescaler.rescale = Some(Rescaler::new());
            &with_rescaler
        }
        _ => cfg,
    };
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
    let plan = prepare(plan, registry, total_workers)?;
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
    let shared = Arc::new(shared);
    let connected = match cfg.processes > 1 {
        true => {
            let hosts = match cfg.hosts.is_empty() {
                true => default_hosts(cfg.processes),
                false => cfg.hosts.clone(),
            };
            crate::cluster::fail_stop(cfg.process, &hosts);
            Some(crate::cluster::connect_watchdog(
                cfg.process,
                hosts,
                cfg.connect_timeout,
            ))
        }
        false => None,
    };
    let stop_auto = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let auto = match (cfg.auto_rescale, &cfg.rescale) {
        (Some(a), Some(r)) => Some(
            crate::rescale::watch(
                crate::rescale::Watched {
                    costs: Box::new({
                        let s = shared.clone();
                        move || s.profiler.partitions()
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
    loop {
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
        let guards = timely::execute(timely_config(&cfg_run), move |worker| {
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
            loop {
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
                    match feed(worker, input, control, &probe, &mut clock, &ctx) {
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
                        // Other worker threads: this execution ends here (see `run`'s loop).
                        if let Some(n) = shape.workers.filter(|&n| n as usize != place.threads) {
                            if place.index == 0 {
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
        if let Some(s) = &store {
            s.set_workers(n);
        }
        plan_run = prepare(&crate::rescale::apply(&plan_run, &shape), registry, n)?;
    }
    stop_auto.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(a) = auto {
        let _ = a.join();
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
    // A fault names its row's line when its source says where its rows are.
    let locate = |row: &mut FaultRow| {
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
    })
}

/// How a worker's source loop ended.
enum FeedEnd {
    /// The input ended (or the run stopped).
    Done,
    /// A live rescale's barrier closed epoch `c`: this worker handed on its rows up to
    /// `c` and none after; its inputs, held at `c + 1` so that no operator goes past
    /// `c`, are dropped with the dataflow.
    Switch(u64, Box<(Feeder, Option<Control>)>),
}

/// Waits, stepping, until the output has passed live rescale `c` (every part of its
/// checkpoint written everywhere); worker 0 commits meanwhile. False if the run failed
/// or a worker died first.
fn await_switch(
    worker: &mut timely::worker::Worker,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    shared: &Shared,
    c: u64,
) -> bool {
    let store = shared.checkpoints.as_ref().filter(|_| worker.index() == 0);
    while probe.less_equal(&c) {
        if shared.worker_died() || shared.failed() {
            abandon(worker);
            return false;
        }
        if let Some(store) = store {
            commit(store, clock, probe, shared);
        }
        worker.step_or_park(Some(Duration::from_millis(1)));
    }
    if let Some(store) = store {
        commit(store, clock, probe, shared);
    }
    true
}

/// A meeting point of the workers of one process (a live rescale's switch): each
/// waits for all; a failure of the run lets them all go.
struct Gate {
    workers: usize,
    state: std::sync::Mutex<(usize, u64, bool)>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn new(workers: usize) -> Gate {
        Gate {
            workers,
            state: std::sync::Mutex::new((0, 0, false)),
            cv: std::sync::Condvar::new(),
        }
    }

    /// Waits for every worker of the process; false if the run failed meanwhile.
    fn wait(&self, shared: &Shared) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.workers {
            (s.0, s.1) = (0, s.1 + 1);
            self.cv.notify_all();
            return !s.2;
        }
        while s.1 == generation && !s.2 {
            if shared.failed() || shared.worker_died() {
                s.2 = true;
                self.cv.notify_all();
                break;
            }
            s = match self.cv.wait_timeout(s, Duration::from_millis(10)) {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
        !s.2
    }

    /// A worker leaves the run: nobody waits for it.
    fn abandon(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.2 = true;
            self.cv.notify_all();
        }
    }
}

/// Steps `worker` until its dataflows are done, or until a worker died (it would never
/// let them finish).
fn drain(worker: &mut timely::worker::Worker, shared: &Shared) {
    while worker.has_dataflows() {
        if shared.worker_died() {
            abandon(worker);
            return;
        }
        worker.step_or_park(Some(Duration::from_millis(50)));
    }
}

/// [`drain`], committing on worker 0 the checkpoints the output passes meanwhile; a
/// live rescale another worker started ends it at its epoch, once the output has
/// passed that (see [`await_switch`]).
fn drain_committing(
    worker: &mut timely::worker::Worker,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    shared: &Shared,
) -> Option<u64> {
    let Some(store) = shared.checkpoints.as_ref() else {
        drain(worker, shared);
        return None;
    };
    let leader = worker.index() == 0;
    while worker.has_dataflows() {
        if shared.worker_died() {
            abandon(worker);
            return None;
        }
        if let Some(c) = shared.switching() {
            return await_switch(worker, probe, clock, shared, c).then_some(c);
        }
        if leader {
            commit(store, clock, probe, shared);
        }
        worker.step_or_park(Some(Duration::from_millis(if leader { 50 } else { 5 })));
    }
    None
}

/// Commits the checkpoints the output frontier has passed (worker 0).
fn commit(store: &Arc<Store>, clock: &mut Clock, probe: &ProbeHandle<u64>, shared: &Shared) {
    // A failed or cancelled run's sinks stop writing: what they skipped would be in
    // the state of any later checkpoint, so none commits. (A sink skips a row only
    // after the flag is set, which comes before the output passes that row's epoch.)
    if shared.failed() || shared.cancel.is_cancelled() {
        return;
    }
    if let Err(e) = clock.commit_passed(store, |c| !probe.less_equal(&c)) {
        shared.fatal(e);
    }
}

/// Drops the worker's dataflows unfinished: timely steps a worker's dataflows until
/// they are done after its closure returns, which after a panic would run the failed
/// operator again or wait forever for a dead peer.
fn abandon(worker: &mut timely::worker::Worker) {
    for id in worker.installed_dataflows() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.drop_dataflow(id)));
    }
}

/// The worker's source loop: sends windows, advances time, paces, and holds back when
/// the output frontier lags too far.
/// What a worker's source loop reads.
struct FeedCtx<'a> {
    plan: &'a Plan,
    registry: &'a Registry,
    place: Place,
    cfg: &'a RunConfig,
    shared: &'a Arc<Shared>,
}

fn feed(
    worker: &mut timely::worker::Worker,
    mut input: Feeder,
    mut control: Option<Control>,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    ctx: &FeedCtx<'_>,
) -> FeedEnd {
    let FeedCtx {
        plan,
        registry,
        place,
        cfg,
        shared,
    } = *ctx;
    let source = plan.leaf_source();
    // Resuming, a feed that said where to start again (a CSV file) starts there; any
    // other reads from its start and the windows up to the checkpoint are dropped.
    let resume_at = match shared
        .checkpoints
        .as_ref()
        .map(|s| s.read_source(place.index))
    {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            shared.fatal(e);
            return FeedEnd::Done;
        }
        None => None,
    };
    let mut feed = match source::open_at(
        source,
        place.index,
        place.peers,
        &cfg.read,
        shared.counters.clone(),
        registry,
        resume_at.as_deref(),
    ) {
        Ok(Some(f)) => f,
        Ok(None) => return FeedEnd::Done, // this worker reads nothing: dropping `input` closes it
        Err(e) => {
            shared.fatal(e);
            return FeedEnd::Done;
        }
    };
    let counts_rows_itself = source::counts_rows_itself(&source.spec);
    let start = shared.start;
    // Pacing: when event time `t` may be released.
    let release = match source.pace {
        Pace::EventTime {
            units_per_second,
            speed,
        } => Some(move |t: u64| {
            Duration::from_secs_f64(t as f64 / units_per_second / speed.max(1e-9))
        }),
        Pace::Max => None,
    };
    let wait_until = |worker: &mut timely::worker::Worker, at: Duration| {
        while start.elapsed() < at && !shared.stopping() {
            let left = at.saturating_sub(start.elapsed());
            worker.step_or_park(Some(left.min(Duration::from_millis(1))));
        }
    };
    if let Some(at) = release {
        let epoch = at(source.epoch).as_secs_f64();
        let _ = shared.counters.pacing.set((start, epoch));
    }
    let mut sent = 0u64;
    // Rows this worker sent per epoch not yet completed at the output, oldest first.
    let mut in_flight: std::collections::VecDeque<(u64, u64)> = Default::default();
    let mut in_flight_rows = 0u64;
    // Checkpoints: the store, and (worker 0) who decides them; resuming, the epochs
    // already in the checkpoint are read again but not handed on.
    let store = shared.checkpoints.as_ref();
    let leader = place.index == 0;
    let resumed = store.and_then(|s| s.restored_epoch());
    loop {
        // Failed, cancelled, or every sink has its LIMIT: end the input here.
        if shared.stopping() {
            break;
        }
        if let (Some(store), true) = (store, leader) {
            commit(store, clock, probe, shared);
        }
        match feed.next() {
            Ok(Next::Window(epoch, batch)) => {
                // Input time cannot go back: a window of an earlier epoch than the
                // current one joins the current epoch (the reference clamps alike).
                let epoch = epoch.max(*input.time());
                if resumed.is_some_and(|r| epoch <= r) {
                    if epoch > *input.time() {
                        input.advance_to(epoch);
                        if let Some(c) = control.as_mut() {
                            c.advance_to(epoch);
                        }
                    }
                    if !counts_rows_itself {
                        Counters::add(&shared.counters.rows_in, batch.len() as u64);
                    }
                    continue;
                }
                // A live rescale under way at `c`: rows up to `c` go on, and this
                // worker stops at its first later window (which it reads again after
                // the switch).
                if let Some(c) = shared.switching().filter(|&c| epoch > c) {
                    return fence(input, control, c);
                }
                if epoch > *input.time() {
                    // The epoch closing may be a checkpoint (worker 0 decides), and a
                    // live rescale's.
                    if let (Some(store), Some(c), true) = (store, control.as_mut(), leader) {
                        let closing = *input.time();
                        let shape = rescale_asked(ctx, store, closing);
                        if clock.due(store, closing, shape.is_some()) {
                            // This window is the first after the checkpoint: where it
                            // starts is where the source resumes.
                            if let Some(at) = feed.resume_point() {
                                if let Err(e) = store.write_source(closing, place.index, &at) {
                                    shared.fatal(e);
                                    break;
                                }
                            }
                            c.send((closing, shape.clone()));
                            if let Some(shape) = shape {
                                shared.switch_at(closing, shape);
                                if let Ok(mut p) = shared.pause.lock() {
                                    *p = Some(std::time::Instant::now());
                                }
                                return fence(input, control, closing);
                            }
                        }
                        c.advance_to(epoch);
                        c.flush();
                    } else if let Some(c) = control.as_mut() {
                        c.advance_to(epoch);
                    }
                    // Before opening a new epoch, wait while too many rows of older
                    // epochs are still in the dataflow.
                    loop {
                        while let Some(&(e, n)) = in_flight.front() {
                            if probe.less_equal(&e) {
                                break;
                            }
                            in_flight.pop_front();
                            in_flight_rows -= n;
                        }
                        if in_flight_rows <= cfg.max_rows_in_flight
                            || in_flight.len() <= 1
                            || shared.worker_died()
                            || shared.stopping()
                            || shared.switching().is_some()
                        {
                            break;
                        }
                        input.flush();
                        worker.step_or_park(Some(Duration::from_millis(1)));
                    }
                    // When pacing, the current epoch is complete once the clock has passed
                    // the last event time it can hold; close it then (never earlier: that
                    // would read ahead of the clock).
                    if let Some(at) = release {
                        let last = (input.time().saturating_add(1))
                            .saturating_mul(source.epoch)
                            .saturating_sub(1);
                        input.flush();
                        wait_until(worker, at(last));
                    }
                    input.advance_to(epoch);
                    shared
                        .counters
                        .epoch_in
                        .fetch_max(epoch, std::sync::atomic::Ordering::Relaxed);
                }
                // A row is released when the clock reaches its event time: the window
                // goes when its latest row may.
                if let Some(at) = release {
                    let latest = match source.schema.event_time {
                        Some(c) => (0..batch.len())
                            .filter_map(|i| batch.row(i).int(c))
                            .max()
                            .map_or(epoch * source.epoch, |t| t.max(0) as u64),
                        None => epoch * source.epoch,
                    };
                    input.flush();
                    wait_until(worker, at(latest));
                }
                if let Some(c) = shared.switching().filter(|&c| epoch > c) {
                    return fence(input, control, c);
                }
                if leader {
                    // The first window after a live rescale: the pause ends.
                    if let Some(at) = shared.pause.lock().ok().and_then(|mut p| p.take()) {
                        record_rescale(ctx, at);
                    }
                }
                if !counts_rows_itself {
                    Counters::add(&shared.counters.rows_in, batch.len() as u64);
                }
                let rows = batch.len() as u64;
                match in_flight.back_mut() {
                    Some((e, n)) if *e == epoch => *n += rows,
                    _ => in_flight.push_back((epoch, rows)),
                }
                in_flight_rows += rows;
                input.send(Window::new(place.index as u64, 0, batch));
                sent += 1;
                if sent.is_multiple_of(4) {
                    input.flush();
                    worker.step();
                }
                if let Some(n) = cfg.max_rows {
                    if shared
                        .counters
                        .rows_in
                        .load(std::sync::atomic::Ordering::Relaxed)
                        >= n
                    {
                        break;
                    }
                }
                let horizon = epoch.saturating_sub(cfg.max_epochs_ahead);
                while probe.less_than(&horizon)
                    && !shared.worker_died()
                    && !shared.stopping()
                    && shared.switching().is_none()
                {
                    worker.step_or_park(Some(Duration::from_millis(1)));
                }
            }
            Ok(Next::Wait) => {
                input.flush();
                worker.step_or_park(Some(Duration::from_millis(1)));
            }
            Ok(Next::Done) => break,
            Err(e) => {
                shared.fatal(e);
                break;
            }
        }
    }
    if let Ok(mut r) = shared.rejects.lock() {
        r.push(feed.rejects());
    }
    if leader {
        // A live rescale after which the input had nothing more: its pause ends here.
        if let Some(at) = shared.pause.lock().ok().and_then(|mut p| p.take()) {
            record_rescale(ctx, at);
        }
        if let Some(r) = cfg.rescale.as_ref().and_then(|r| r.take().map(|q| (r, q))) {
            r.0.refuse(format!("{:?}: the input ended first", r.1));
        }
    }
    FeedEnd::Done
}

/// Ends a worker's source loop for live rescale `c`: its inputs are held at `c + 1`
/// (no operator goes past `c`) until the dataflow is dropped.
fn fence(mut input: Feeder, mut control: Option<Control>, c: u64) -> FeedEnd {
    let at = (*input.time()).max(c + 1);
    input.advance_to(at);
    input.flush();
    if let Some(k) = control.as_mut() {
        if *k.time() < at {
            k.advance_to(at);
        }
        k.flush();
    }
    FeedEnd::Switch(c, Box::new((input, control)))
}

/// The shape a live rescale request asks for, taken up at the closing of epoch
/// `closing` (worker 0); a request that cannot be had is refused, with why.
fn rescale_asked(
    ctx: &FeedCtx<'_>,
    store: &Store,
    closing: u64,
) -> Option<crate::rescale::Rescale> {
    let r = ctx.cfg.rescale.as_ref()?;
    let request = r.take()?;
    if store.restored_epoch() >= Some(closing) {
        // The epoch is in the checkpoint resumed from: at a later one.
        r.request(request);
        return None;
    }
    if let crate::rescale::Request::Workers(_) = request {
        let why = match () {
            _ if ctx.cfg.processes > 1 => {
                Some("the worker threads of a cluster are fixed (its processes connect once)")
            }
            _ if ctx.cfg.auto_rescale.is_some() => {
                Some("the automatic rescaler watches the workers the run started with")
            }
            _ if ctx.cfg.profile.is_some() => {
                Some("a profiled run times the workers it started with")
            }
            _ => None,
        };
        if let Some(why) = why {
            r.refuse(format!("{request:?}: {why}"));
            return None;
        }
    }
    match crate::rescale::spec(ctx.plan, ctx.registry, ctx.place.peers, &request) {
        Ok(shape) => Some(shape),
        Err(why) => {
            r.refuse(format!("{request:?}: {why}"));
            None
        }
    }
}

/// Notes a live rescale done, `at` its barrier (worker 0, at the new dataflow's first
/// window).
fn record_rescale(ctx: &FeedCtx<'_>, at: std::time::Instant) {
    let (Some(r), Some(store)) = (&ctx.cfg.rescale, &ctx.shared.checkpoints) else {
        return;
    };
    r.record(Rescaled {
        epoch: store.restored_epoch().unwrap_or(0),
        partitions: store.partitions(),
        workers: ctx.place.peers,
        pause: at.elapsed(),
    });
}
