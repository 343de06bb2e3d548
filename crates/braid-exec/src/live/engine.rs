//! Long-running timely workers that queries are installed on and dropped from while
//! others run.
//!
//! Timely numbers a worker's dataflows in the order they are installed, so every
//! worker must install the same dataflows in the same order: commands reach the
//! workers through one ordered channel each, all written by the [`Engine`] in one
//! order. Each worker loops: apply the commands that came, read what each query's
//! source has (never blocking: an idle source says `Wait`), step the dataflows, park
//! briefly when nothing moved. A query's dataflow ends when its input does (its
//! stream was dropped) or when it is dropped; dropping frees its operators' state.
//!
//! Over several processes (timely's cluster mode) the session runs on process 0 and
//! a follower session on every other process. What changes the catalog or the
//! installed queries travels as a [`Replicated`] command through a timely
//! [`Sequencer`] (a dataflow of its own, the first on every worker): every process
//! sees the same commands in the same order and installs the same dataflows in the
//! same order (see ARCHITECTURE.md).

use super::log::StreamLog;
use crate::checkpoint::{CheckpointConfig, Clock, Store};
use crate::error::{Error, Result};
use crate::render::{self, Control, Feeder, Place, Window};
use crate::shared::Shared;
use crate::source::{self, Counters, Feed, Next, ReadOptions};
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timely::dataflow::ProbeHandle;
use timely::synchronization::Sequencer;

/// Where this process stands among the processes of a cluster (timely's cluster
/// mode: one `host:port` per process, the same list for all).
#[derive(Clone, Debug)]
pub struct Cluster {
    /// This process's index (0 runs the session clients talk to).
    pub process: usize,
    /// One address per process.
    pub hosts: Vec<String>,
    /// How long the process waits for every other one to connect before it stops with
    /// an error naming the addresses (a follower whose process 0 never starts).
    pub connect_timeout: std::time::Duration,
}

/// What every process of a cluster applies, in the same order: a statement that
/// changed the catalog or installed queries (run again by the followers), or the drop
/// of a query (a subscriber that went away).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Replicated {
    /// A statement, and the id the leader's engine gave its first query (a follower
    /// whose next id differs has gone astray and stops).
    Statement {
        /// The statement's text.
        text: String,
        /// The leader's next query id before the statement ran.
        first_id: u64,
        /// Where the query it installs takes checkpoints (a server that keeps its
        /// catalog): every process's dataflow takes them too.
        checkpoints: Option<Checkpoints>,
    },
    /// Drop query `id`.
    Drop(u64),
}

/// Where a replicated statement's query takes checkpoints: a directory every process
/// reaches (the leader's data directory: one machine, or a shared file system), or,
/// when `object` is set, that key under every process's own checkpoint store (object
/// storage, [`crate::live::LiveSession::checkpoint_store`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Checkpoints {
    /// The checkpoint directory.
    pub dir: std::path::PathBuf,
    /// Milliseconds between checkpoints.
    pub interval_ms: u64,
    /// Resuming from the last committed one (a restarted server).
    pub recover: bool,
    /// The partition count an `ALTER ... SET PARALLELISM` gave the query.
    pub partitions: Option<u32>,
    /// The query's key (`q<id>`) in the checkpoint store every process was given;
    /// `None`: the checkpoints are in `dir`.
    #[serde(default)]
    pub object: Option<String>,
}

/// What a worker is told to do.
enum Command {
    Install(Arc<Install>),
    Drop(u64),
}

struct Install {
    id: u64,
    plan: Plan,
    registry: Registry,
    status: Arc<Status>,
}

/// A running query's state, shared by its workers and its owner.
pub struct Status {
    /// Counters, faults, the error it failed with.
    pub(crate) shared: Arc<Shared>,
    /// Workers whose share of the dataflow has ended (it is over when all have).
    ended: AtomicUsize,
    workers: usize,
    /// Logs its output goes to, closed when it ends (their readers then end too).
    closes: Vec<Arc<StreamLog>>,
    /// Its end-to-end latency, epoch by epoch.
    pub latency: Mutex<super::latency::Latency>,
    /// Asked to stop at the next epoch it closes, with a checkpoint there (to be
    /// installed again in another shape, [`Status::pause`]).
    pause: std::sync::atomic::AtomicBool,
    /// The epoch it stopped at.
    paused: Mutex<Option<u64>>,
    /// Its output logs stay open when it ends (it is being replaced).
    keep_open: std::sync::atomic::AtomicBool,
}

impl Status {
    /// The latencies its rows' stamps measured (under a latency constraint: per
    /// operator and end to end, see `crate::qos`); None when it takes no stamps.
    pub fn row_latency(&self) -> Option<crate::qos::LatencyReport> {
        self.shared
            .stamps
            .then(|| self.shared.latencies.summary(self.shared.constraint))
    }

    /// Asks the query to take a checkpoint at the next epoch its source closes and to
    /// read nothing after it; `paused` tells when the checkpoint has committed. Its
    /// output then holds exactly what the checkpoint counted.
    pub(crate) fn pause(&self) {
        self.pause.store(true, Ordering::Relaxed);
    }

    /// The epoch the paused query stopped at, once that checkpoint has committed.
    pub(crate) fn paused(&self) -> Option<u64> {
        let c = (*self.paused.lock().unwrap_or_else(|p| p.into_inner()))?;
        let store = self.shared.checkpoints.as_ref()?;
        store.taken().iter().any(|t| t.epoch == c).then_some(c)
    }

    /// Takes back a pause not yet taken up; whether it was (else the query has
    /// stopped, and its checkpoint is to commit).
    pub(crate) fn unpause(&self) -> bool {
        let paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        if paused.is_some() {
            return false;
        }
        self.pause.store(false, Ordering::Relaxed);
        true
    }

    /// Its output logs stay open when it ends.
    pub(crate) fn keep_open(&self) {
        self.keep_open.store(true, Ordering::Relaxed);
    }

    /// Rows its source read so far.
    pub fn rows_in(&self) -> u64 {
        self.shared.counters.rows_in.load(Ordering::Relaxed)
    }

    /// Rows its sinks wrote so far.
    pub fn rows_out(&self) -> u64 {
        self.shared.counters.rows_out.load(Ordering::Relaxed)
    }

    /// The error the query failed with, if it did.
    pub fn error(&self) -> Option<String> {
        if let Some(e) = self.shared.fatal.lock().ok()?.as_ref() {
            return Some(e.to_string());
        }
        self.shared
            .errors
            .lock()
            .ok()?
            .first()
            .map(|e| e.to_string())
    }

    /// Whether every worker's share has ended (input ended, failed, or dropped).
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire) >= self.workers
    }

    /// Rows skipped on runtime faults so far, over all sites.
    pub fn faults(&self) -> u64 {
        self.shared
            .faults
            .lock()
            .map(|f| f.iter().map(|f| f.count).sum())
            .unwrap_or(0)
    }
}

/// The workers, and the commands' way to them.
pub struct Engine {
    senders: Vec<Sender<Command>>,
    thread: Option<std::thread::JoinHandle<()>>,
    next: u64,
    /// Workers over all processes.
    peers: usize,
    /// Where this process stands in a cluster: the leader proposes commands to the
    /// sequencer (through its worker 0); a follower only applies what comes.
    role: Role,
}

#[derive(Clone)]
enum Role {
    Alone,
    Leader(Sender<Replicated>),
    Follower,
}

impl Engine {
    /// Starts `workers` worker threads with nothing installed.
    pub fn start(workers: usize) -> Result<Engine> {
        Ok(Engine::start_in(workers, None)?.0)
    }

    /// Starts `workers` worker threads in this process, one of a `cluster`'s processes
    /// when given. A follower (process > 0) also gets the commands the leader
    /// replicates, in the leader's order.
    pub fn start_in(
        workers: usize,
        cluster: Option<&Cluster>,
    ) -> Result<(Engine, Option<Receiver<Replicated>>)> {
        let workers = workers.max(1);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| channel::<Command>()).unzip();
        let receivers: Arc<Vec<Mutex<Option<Receiver<Command>>>>> =
            Arc::new(receivers.into_iter().map(|r| Mutex::new(Some(r))).collect());
        let (config, peers) = match cluster {
            Some(c) if c.hosts.len() > 1 => {
                let communication = timely::CommunicationConfig::Cluster {
                    threads: workers,
                    process: c.process,
                    addresses: c.hosts.clone(),
                    report: false,
                    zerocopy: false,
                };
                let config = timely::Config {
                    communication,
                    worker: timely::WorkerConfig::default(),
                };
                (config, workers * c.hosts.len())
            }
            _ if workers == 1 => (timely::Config::thread(), 1),
            _ => (timely::Config::process(workers), workers),
        };
        let clustered = peers > workers;
        let leader = cluster.is_some_and(|c| c.process == 0);
        // The leader's proposals reach the sequencer through its worker 0; a
        // follower's worker 0 hands the sequence to the follower session.
        let (propose, proposals) = channel::<Replicated>();
        let (deliver, delivered) = channel::<Replicated>();
        let ends = Arc::new(Mutex::new(Some((proposals, deliver))));
        // `execute` connects every process first: a process that never comes would
        // keep this one waiting for ever.
        let connected = cluster.filter(|_| clustered).map(|c| {
            crate::cluster::connect_watchdog(c.process, c.hosts.clone(), c.connect_timeout)
        });
        let guards = timely::execute(config, move |worker| {
            let sequencer = clustered.then(|| Sequencer::<Replicated>::new(worker, Instant::now()));
            let local = worker.index() % workers;
            let mine = match local {
                0 => ends.lock().ok().and_then(|mut e| e.take()),
                _ => None,
            };
            let (proposals, deliver) = match mine {
                Some((p, _)) if leader => (Some(p), None),
                Some((_, d)) => (None, Some(d)),
                None => (None, None),
            };
            let rx = receivers[local].lock().ok().and_then(|mut r| r.take());
            if let Some(rx) = rx {
                let sequence = sequencer.map(|s| Sequence {
                    sequencer: s,
                    proposals,
                    deliver,
                });
                serve(worker, rx, workers, sequence);
            }
        })
        .map_err(Error::Startup)?;
        if let Some(c) = connected {
            c.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let thread = std::thread::Builder::new()
            .name("braid-engine".into())
            .spawn(move || {
                // Joining panics too when the cluster's network threads did.
                let joined =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
                let failed = joined.map_or(true, |r| r.iter().any(|r| r.is_err()));
                // Fail-stop: a cluster that lost a process (its connection broke, or
                // a worker panicked) cannot go on, and its queries would wait forever.
                if failed && clustered {
                    eprintln!("braid: a process of the cluster stopped; stopping this one too (restart them all)");
                    std::process::exit(1);
                }
            })
            .map_err(|e| Error::io("starting the engine", e))?;
        let role = match (clustered, leader) {
            (false, _) => Role::Alone,
            (true, true) => Role::Leader(propose),
            (true, false) => Role::Follower,
        };
        let follow = matches!(role, Role::Follower).then_some(delivered);
        let engine = Engine {
            senders,
            thread: Some(thread),
            next: 0,
            peers,
            role,
        };
        Ok((engine, follow))
    }

    /// Worker threads over all processes.
    pub fn workers(&self) -> usize {
        self.peers
    }

    /// The id the next installed query gets.
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Whether this engine leads a cluster (its statements are to be replicated).
    pub fn leads(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }

    /// Whether this engine follows a cluster's leader.
    pub fn follows(&self) -> bool {
        matches!(self.role, Role::Follower)
    }

    /// Sends `command` to every process of the cluster (nothing outside one).
    pub fn replicate(&self, command: Replicated) -> Result<()> {
        match &self.role {
            Role::Leader(s) => s
                .send(command)
                .map_err(|_| Error::Internal("the engine's workers have stopped".into())),
            _ => Ok(()),
        }
    }

    /// Installs `plan` (its sources and sinks named in `registry`) on every worker; it
    /// runs until its input ends or [`Engine::drop_query`]. A runtime fault fails it
    /// when `strict`, and is a counted skip otherwise. Returns its id, its status and the
    /// plan as installed (shapes resolved).
    ///
    /// With `checkpoint`, the query takes checkpoints (every source a [`StreamLog`]
    /// whose reader resumes, every sink one that is cut back on recovery; see
    /// [`crate::checkpoint`]), and on `recover` resumes from the last one committed.
    pub fn install(
        &mut self,
        plan: &Plan,
        registry: &Registry,
        strict: bool,
        closes: Vec<Arc<StreamLog>>,
        checkpoint: Option<&CheckpointConfig>,
    ) -> Result<(u64, Arc<Status>, Plan)> {
        let constraint = plan.latency_constraint();
        let store = match checkpoint {
            Some(c) => {
                // Process 0 clears what never committed; every process reads and
                // writes its partitions' parts.
                let leader = !self.follows();
                let store = Store::open(c, plan, registry, self.peers, leader)?;
                // Outputs are cut back to what the checkpoint counted before this
                // returns (the sink does it again when it opens, to the same length):
                // a subscriber that comes meanwhile never reads a row the recovery
                // takes back, and then again.
                if leader {
                    crate::render::sink::cut_back_native_sinks(plan, registry, &store)?;
                }
                Some(Arc::new(store))
            }
            None => None,
        };
        // A desired rate without one splitter's rate is measured (over a file or the
        // generator; a live stream's rows cannot be read twice: refused, by name).
        let mut plan = plan.clone();
        crate::tune::measure_splitter_rates(&mut plan, registry, 1, None)?;
        let plan = crate::runtime::prepare(&plan, registry, self.peers)?;
        let workers = self.senders.len();
        let sinks = match &plan {
            Plan::Together(p) => p.len(),
            _ => 1,
        };
        // Every live query is profiled: the dashboard and /metrics show its operators.
        let mut shared = Shared::new(
            Arc::default(),
            false,
            Some(crate::profile::Profiler::operators_only()),
            strict,
            Default::default(),
            sinks,
        );
        shared.checkpoints = store;
        // Under a latency constraint, time moves in ticks within epochs and windows
        // carry stamps, as in a batch run (see `crate::qos`).
        if constraint.is_some() {
            shared.ticks = crate::qos::Ticks::ON;
            shared.stamps = true;
            shared.constraint = constraint;
            if let Some(part) = plan.latency_part() {
                let _ = shared.latencies.part.set(part.to_string());
            }
            if let Some(start) = plan.latency_start() {
                let _ = shared.latencies.start.set(start.to_string());
            }
            let _ = shared.counters.latency.set(shared.latencies.clone());
        }
        let status = Arc::new(Status {
            shared: Arc::new(shared),
            ended: AtomicUsize::new(0),
            workers,
            closes,
            latency: Mutex::default(),
            pause: Default::default(),
            paused: Mutex::new(None),
            keep_open: Default::default(),
        });
        let id = self.next;
        self.next += 1;
        let install = Arc::new(Install {
            id,
            plan: plan.clone(),
            registry: registry.clone(),
            status: status.clone(),
        });
        self.send(|| Command::Install(install.clone()))?;
        Ok((id, status, plan))
    }

    /// Drops query `id` on every worker (its state is freed; its sinks write nothing
    /// more). Dropping an ended query does nothing.
    pub fn drop_query(&self, id: u64) -> Result<()> {
        self.send(|| Command::Drop(id))
    }

    /// A function that drops a query from any thread (what a subscription that owns its
    /// query calls when it goes away). The leader of a cluster drops it on every
    /// process; a follower's does nothing (the leader's drop reaches it).
    pub fn dropper(&self) -> impl Fn(u64) + Send + 'static {
        let senders = match self.role {
            Role::Follower => Vec::new(),
            _ => self.senders.clone(),
        };
        let role = self.role.clone();
        move |id| {
            for s in &senders {
                let _ = s.send(Command::Drop(id));
            }
            if let Role::Leader(s) = &role {
                let _ = s.send(Replicated::Drop(id));
            }
        }
    }

    fn send(&self, command: impl Fn() -> Command) -> Result<()> {
        for s in &self.senders {
            s.send(command())
                .map_err(|_| Error::Internal("the engine's workers have stopped".into()))?;
        }
        Ok(())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.senders.clear(); // the workers see their channels close and stop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A query installed on this worker.
struct Running {
    id: u64,
    dataflow: usize,
    input: Option<Feeder>,
    feed: Option<Box<dyn Feed>>,
    /// Checkpoint barriers, sent by the worker that reads the source.
    control: Option<Control>,
    clock: Clock,
    probe: ProbeHandle<u64>,
    /// Epochs its source closed (all before this one), and when: the output frontier
    /// passing one gives its latency.
    closed: std::collections::VecDeque<(u64, Instant)>,
    /// Worker 0's controller of W under a latency constraint.
    steer: Option<crate::qos::Steering>,
    /// The resume points its source gave for checkpoints not yet known to have
    /// committed, by epoch: once one has, the source is told (a stream log then keeps
    /// only what a recovery would read again).
    resumes: std::collections::VecDeque<(u64, Vec<u8>)>,
    status: Arc<Status>,
}

/// The cluster's sequence of commands on one worker: worker 0 of the leader proposes
/// the leader's, worker 0 of a follower delivers them to its session, the others only
/// keep up (every worker must take part for the sequence to form).
struct Sequence {
    sequencer: Sequencer<Replicated>,
    proposals: Option<Receiver<Replicated>>,
    deliver: Option<Sender<Replicated>>,
}

impl Sequence {
    /// Proposes and delivers what there is; whether anything moved.
    fn turn(&mut self) -> bool {
        let mut busy = false;
        if let Some(p) = &self.proposals {
            while let Ok(c) = p.try_recv() {
                self.sequencer.push(c);
                busy = true;
            }
        }
        for c in self.sequencer.by_ref() {
            busy = true;
            if let Some(d) = &self.deliver {
                let _ = d.send(c);
            }
        }
        busy
    }
}

/// Each dataflow's profiler, by dataflow index, on one worker: the worker's one timely
/// logger hands each operator's events to the profiler of the dataflow it is in (the
/// first element of its address).
struct Profilers {
    by_dataflow: std::rc::Rc<std::cell::RefCell<Registered>>,
}

#[derive(Default)]
struct Registered {
    profilers: std::collections::HashMap<usize, std::sync::Weak<crate::profile::Profiler>>,
    /// Operator id -> dataflow index.
    operators: std::collections::HashMap<usize, usize>,
}

impl Profilers {
    fn attach(worker: &mut timely::worker::Worker) -> Profilers {
        use timely::logging::{TimelyEvent, TimelyEventBuilder};
        let by_dataflow = std::rc::Rc::new(std::cell::RefCell::new(Registered::default()));
        let index = worker.index();
        let all = by_dataflow.clone();
        if let Some(mut register) = worker.log_register() {
            register.insert::<TimelyEventBuilder, _>("timely", move |_, data| {
                let Some(events) = data else { return };
                let mut all = all.borrow_mut();
                for (at, e) in events.iter() {
                    let dataflow = match e {
                        TimelyEvent::Operates(o) => {
                            let Some(&d) = o.addr.first() else { continue };
                            all.operators.insert(o.id, d);
                            d
                        }
                        TimelyEvent::Schedule(s) => match all.operators.get(&s.id) {
                            Some(&d) => d,
                            None => continue,
                        },
                        _ => continue,
                    };
                    match all.profilers.get(&dataflow).and_then(|p| p.upgrade()) {
                        Some(p) => p.event(index, *at, e),
                        None => {
                            all.profilers.remove(&dataflow);
                        }
                    }
                }
            });
        }
        Profilers { by_dataflow }
    }

    fn add(&self, dataflow: usize, profiler: &Arc<crate::profile::Profiler>) {
        let mut all = self.by_dataflow.borrow_mut();
        // The operators of dropped dataflows go with them.
        let live: Vec<usize> = all.profilers.keys().copied().collect();
        all.operators.retain(|_, d| live.contains(d));
        all.profilers.insert(dataflow, Arc::downgrade(profiler));
    }
}

/// A worker's loop: commands, sources, steps.
fn serve(
    worker: &mut timely::worker::Worker,
    rx: Receiver<Command>,
    threads: usize,
    mut sequence: Option<Sequence>,
) {
    let place = Place {
        index: worker.index(),
        peers: worker.peers(),
        threads,
    };
    let mut running: Vec<Running> = Vec::new();
    let profilers = Profilers::attach(worker);
    loop {
        loop {
            match rx.try_recv() {
                Ok(Command::Install(i)) => {
                    profilers.add(worker.next_dataflow_index(), &i.status.shared.profiler);
                    running.push(install(worker, &i, place));
                }
                Ok(Command::Drop(id)) => {
                    if let Some(k) = running.iter().position(|r| r.id == id) {
                        let r = running.swap_remove(k);
                        end(worker, r);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    for r in running.drain(..) {
                        end(worker, r);
                    }
                    return;
                }
            }
        }
        let mut busy = sequence.as_mut().is_some_and(Sequence::turn);
        for r in &mut running {
            busy |= poll(r, place);
            measure(r);
        }
        // A query whose input ended has drained once its dataflow is gone.
        let installed = worker.installed_dataflows();
        let mut k = 0;
        while k < running.len() {
            let r = &running[k];
            if r.input.is_none() && (!installed.contains(&r.dataflow) || r.status.shared.failed()) {
                let mut r = running.swap_remove(k);
                // Done, the output passed every checkpoint whose barrier went out: they
                // commit rather than stay, uncommitted, beside an older LATEST.
                let shared = &r.status.shared;
                if let Some(store) = &shared.checkpoints {
                    crate::runtime::commit_checkpoints(store, &mut r.clock, &r.probe, shared);
                }
                end(worker, r);
            } else {
                k += 1;
            }
        }
        worker.step_or_park(Some(Duration::from_millis(if busy { 0 } else { 2 })));
    }
}

fn install(worker: &mut timely::worker::Worker, i: &Install, place: Place) -> Running {
    let shared = &i.status.shared;
    let dataflow = worker.next_dataflow_index();
    let mut input = Feeder::new();
    let mut control = shared.checkpoints.as_ref().map(|_| Control::new());
    let probe = ProbeHandle::new();
    let built = worker.dataflow::<u64, _, _>(|scope| {
        render::render(
            scope,
            &i.plan,
            &i.registry,
            (&mut input, control.as_mut()),
            &probe,
            place,
            shared,
        )
    });
    // Recovering, the source starts where the checkpoint left it.
    let resume = match &shared.checkpoints {
        Some(store) => store.read_source(source::resumes_from(
            &i.plan.leaf_source().spec,
            place.index,
            place.peers,
        )),
        None => Ok(None),
    };
    // Under a latency constraint worker 0 reads the source alone: ticks then hold runs
    // of sequence numbers in order (see `crate::qos`).
    let (index, peers) = match shared.ticks.on() {
        true => (0, 1),
        false => (place.index, place.peers),
    };
    let feed = built.and(resume).and_then(|resume| {
        if shared.ticks.on() && place.index > 0 {
            return Ok(None);
        }
        source::open_at(
            i.plan.leaf_source(),
            index,
            peers,
            &ReadOptions::default(),
            shared.counters.clone(),
            &i.registry,
            resume.as_deref(),
            None,
        )
    });
    let (input, feed, control) = match feed {
        Ok(Some(f)) => (Some(input), Some(f), control),
        Ok(None) => (None, None, None), // this worker reads nothing: its inputs close
        Err(e) => {
            shared.fatal(e);
            (None, None, None)
        }
    };
    // Worker 0 steers W under a latency constraint.
    let steer = match (shared.constraint, place.index == 0 && feed.is_some()) {
        (Some(target), true) => Some(crate::qos::Steering::new(
            target,
            i.plan.leaf_source().window,
            false,
            &shared.latencies,
        )),
        _ => None,
    };
    Running {
        id: i.id,
        dataflow,
        input,
        feed,
        steer,
        control,
        clock: Clock::new(),
        probe,
        closed: Default::default(),
        resumes: Default::default(),
        status: i.status.clone(),
    }
}

/// Reads what the query's source has; whether anything moved.
fn poll(r: &mut Running, place: Place) -> bool {
    let shared = &r.status.shared;
    let (Some(input), Some(feed)) = (r.input.as_mut(), r.feed.as_mut()) else {
        return false;
    };
    if shared.stopping() {
        r.input = None;
        r.feed = None;
        r.control = None;
        return true;
    }
    // Checkpoints the output has passed are committed.
    if let Some(store) = &shared.checkpoints {
        crate::runtime::commit_checkpoints(store, &mut r.clock, &r.probe, shared);
        // The source learns of the last checkpoint committed.
        if let Some(c) = store.committed() {
            let mut last = None;
            while r.resumes.front().is_some_and(|(e, _)| *e <= c) {
                last = r.resumes.pop_front();
            }
            if let Some((_, at)) = last {
                feed.committed(&at);
            }
        }
    }
    // Paused for a new shape: nothing more is read.
    if r.status.paused.lock().is_ok_and(|p| p.is_some()) {
        return false;
    }
    // No backpressure on epochs here: an operator holds the capability of an open
    // window, so the output frontier lags by a window's length, and a source held back
    // by epochs would never deliver the heartbeat that closes it. The rows are in the
    // log already; what is in flight is bounded by the 16 windows read per round.
    let mut busy = false;
    for _ in 0..16 {
        let next = match feed.next() {
            // To stop at the end of an epoch, an idle source closes its epoch now.
            Ok(Next::Wait) if r.status.pause.load(Ordering::Relaxed) => {
                feed.close_epoch().map(|n| n.unwrap_or(Next::Wait))
            }
            n => n,
        };
        match next {
            Ok(Next::Window(epoch, batch)) => {
                busy = true;
                let ticks = shared.ticks;
                let epoch = epoch.max(ticks.epoch(*input.time()));
                if epoch > ticks.epoch(*input.time()) {
                    // The epoch closing may be a checkpoint (see `Clock::barrier`).
                    if let (Some(store), Some(c)) = (&shared.checkpoints, r.control.as_mut()) {
                        let closing = ticks.epoch(*input.time());
                        let pause = r.status.pause.load(Ordering::Relaxed);
                        let sent = match r.clock.barrier(
                            store,
                            closing,
                            pause,
                            place.index,
                            &**feed,
                            c,
                            None,
                        ) {
                            Ok(sent) => sent,
                            Err(e) => {
                                shared.fatal(e);
                                return true;
                            }
                        };
                        c.advance_to(ticks.first(epoch));
                        c.flush();
                        let due = sent.is_some();
                        if let Some(at) = sent.flatten() {
                            r.resumes.push_back((closing, at));
                        }
                        if pause && due {
                            // This window is read again by the query that replaces
                            // this one: it goes no further than `closing`.
                            input.advance_to(ticks.first(epoch));
                            input.flush();
                            // Under the lock `unpause` takes: a pause taken back
                            // is not taken up.
                            let mut p = r.status.paused.lock().unwrap_or_else(|p| p.into_inner());
                            if r.status.pause.load(Ordering::Relaxed) {
                                *p = Some(closing);
                                return true;
                            }
                        }
                    }
                    input.advance_to(ticks.first(epoch));
                    let now = Instant::now();
                    r.closed.push_back((epoch, now));
                    shared.profiler.closed(epoch, now);
                    shared.counters.epoch_in.fetch_max(epoch, Ordering::Relaxed);
                }
                // An empty window is a heartbeat: it tells the stream functions that
                // time moved, so their windows close.
                Counters::add(&shared.counters.rows_in, batch.len() as u64);
                if !ticks.on() {
                    input.send(Window::new(place.index as u64, 0, batch));
                    continue;
                }
                // Under a latency constraint each window of at most W rows is a tick of
                // its own, stamped with when it was read.
                for piece in crate::qos::pieces(batch, shared.latencies.window()) {
                    if let Some(s) = r.steer.as_mut() {
                        s.sent(piece.len());
                    }
                    let now = shared.now_ns();
                    input.send(Window::new(place.index as u64, 0, piece).stamped(now, now));
                    let t = *input.time();
                    let next = ticks.next(t);
                    if next > t {
                        input.advance_to(next);
                    }
                }
                if let Some(s) = r.steer.as_mut() {
                    s.poll(&shared.latencies, shared.start);
                }
            }
            Ok(Next::Wait) => break,
            Ok(Next::Done) => {
                r.input = None;
                r.feed = None;
                r.control = None;
                return true;
            }
            Err(e) => {
                shared.fatal(e);
                r.input = None;
                r.feed = None;
                r.control = None;
                return true;
            }
        }
    }
    input.flush();
    busy
}

/// The latency of each epoch the output frontier has passed since the last look.
fn measure(r: &mut Running) {
    if r.closed.is_empty() {
        return;
    }
    let ticks = r.status.shared.ticks;
    let done = r
        .probe
        .with_frontier(|f| f.first().copied().map_or(u64::MAX, |t| ticks.epoch(t)));
    let mut latency = r.status.latency.lock().unwrap_or_else(|p| p.into_inner());
    while let Some(&(epoch, at)) = r.closed.front() {
        if epoch > done {
            break;
        }
        latency.record(at.elapsed());
        r.closed.pop_front();
    }
}

/// Takes a query off this worker.
fn end(worker: &mut timely::worker::Worker, r: Running) {
    drop(r.input);
    if worker.installed_dataflows().contains(&r.dataflow) {
        worker.drop_dataflow(r.dataflow);
    }
    let status = &r.status;
    if status.ended.fetch_add(1, Ordering::AcqRel) + 1 == status.workers {
        if !status.keep_open.load(Ordering::Relaxed) {
            for log in &status.closes {
                log.close();
            }
        }
        // Its committer ends with the commits handed to it.
        if let Some(store) = &status.shared.checkpoints {
            if let Err(e) = store.finish() {
                status.shared.fatal(e);
            }
        }
    }
}
