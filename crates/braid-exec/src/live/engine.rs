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
//! One process for now: cluster mode would carry the commands in a timely dataflow
//! of their own (see ARCHITECTURE.md).

use super::log::StreamLog;
use crate::error::{Error, Result};
use crate::render::{self, Feeder, Place, Window};
use crate::shared::Shared;
use crate::source::{self, Counters, Feed, Next, ReadOptions};
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use timely::dataflow::ProbeHandle;

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
}

impl Status {
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
}

impl Engine {
    /// Starts `workers` worker threads with nothing installed.
    pub fn start(workers: usize) -> Result<Engine> {
        let workers = workers.max(1);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| channel::<Command>()).unzip();
        let receivers: Arc<Vec<Mutex<Option<Receiver<Command>>>>> =
            Arc::new(receivers.into_iter().map(|r| Mutex::new(Some(r))).collect());
        let config = match workers {
            1 => timely::Config::thread(),
            n => timely::Config::process(n),
        };
        let guards = timely::execute(config, move |worker| {
            let rx = receivers[worker.index()]
                .lock()
                .ok()
                .and_then(|mut r| r.take());
            if let Some(rx) = rx {
                serve(worker, rx);
            }
        })
        .map_err(Error::Startup)?;
        let thread = std::thread::Builder::new()
            .name("braid-engine".into())
            .spawn(move || drop(guards.join()))
            .map_err(|e| Error::io("starting the engine", e))?;
        Ok(Engine {
            senders,
            thread: Some(thread),
            next: 0,
        })
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.senders.len()
    }

    /// Installs `plan` (its sources and sinks named in `registry`) on every worker; it
    /// runs until its input ends or [`Engine::drop_query`]. A runtime fault fails it
    /// when `strict`, and is a counted skip otherwise.
    pub fn install(
        &mut self,
        plan: &Plan,
        registry: &Registry,
        strict: bool,
        closes: Vec<Arc<StreamLog>>,
    ) -> Result<(u64, Arc<Status>)> {
        let workers = self.workers();
        let plan = crate::runtime::prepare(plan, registry, workers)?;
        let sinks = match &plan {
            Plan::Together(p) => p.len(),
            _ => 1,
        };
        let shared = Shared::new(Arc::default(), false, strict, Default::default(), sinks);
        let status = Arc::new(Status {
            shared: Arc::new(shared),
            ended: AtomicUsize::new(0),
            workers,
            closes,
        });
        let id = self.next;
        self.next += 1;
        let install = Arc::new(Install {
            id,
            plan,
            registry: registry.clone(),
            status: status.clone(),
        });
        self.send(|| Command::Install(install.clone()))?;
        Ok((id, status))
    }

    /// Drops query `id` on every worker (its state is freed; its sinks write nothing
    /// more). Dropping an ended query does nothing.
    pub fn drop_query(&self, id: u64) -> Result<()> {
        self.send(|| Command::Drop(id))
    }

    /// A function that drops a query from any thread (what a subscription that owns its
    /// query calls when it goes away).
    pub fn dropper(&self) -> impl Fn(u64) + Send + 'static {
        let senders = self.senders.clone();
        move |id| {
            for s in &senders {
                let _ = s.send(Command::Drop(id));
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
    _probe: ProbeHandle<u64>,
    status: Arc<Status>,
}

/// A worker's loop: commands, sources, steps.
fn serve(worker: &mut timely::worker::Worker, rx: Receiver<Command>) {
    let place = Place {
        index: worker.index(),
        peers: worker.peers(),
        threads: worker.peers(),
    };
    let mut running: Vec<Running> = Vec::new();
    loop {
        loop {
            match rx.try_recv() {
                Ok(Command::Install(i)) => running.push(install(worker, &i, place)),
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
        let mut busy = false;
        for r in &mut running {
            busy |= poll(r, place);
        }
        // A query whose input ended has drained once its dataflow is gone.
        let installed = worker.installed_dataflows();
        let mut k = 0;
        while k < running.len() {
            let r = &running[k];
            if r.input.is_none() && (!installed.contains(&r.dataflow) || r.status.shared.failed()) {
                let r = running.swap_remove(k);
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
    let probe = ProbeHandle::new();
    let built = worker.dataflow::<u64, _, _>(|scope| {
        render::render(
            scope,
            &i.plan,
            &i.registry,
            &mut input,
            &probe,
            place,
            shared,
        )
    });
    let feed = built.and_then(|()| {
        source::open(
            i.plan.leaf_source(),
            place.index,
            place.peers,
            &ReadOptions::default(),
            shared.counters.clone(),
            &i.registry,
        )
    });
    let (input, feed) = match feed {
        Ok(Some(f)) => (Some(input), Some(f)),
        Ok(None) => (None, None), // this worker reads nothing: its input closes
        Err(e) => {
            shared.fatal(e);
            (None, None)
        }
    };
    Running {
        id: i.id,
        dataflow,
        input,
        feed,
        _probe: probe,
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
        return true;
    }
    // No backpressure on epochs here: an operator holds the capability of an open
    // window, so the output frontier lags by a window's length, and a source held back
    // by epochs would never deliver the heartbeat that closes it. The rows are in the
    // log already; what is in flight is bounded by the 16 windows read per round.
    let mut busy = false;
    for _ in 0..16 {
        match feed.next() {
            Ok(Next::Window(epoch, batch)) => {
                busy = true;
                let epoch = epoch.max(*input.time());
                if epoch > *input.time() {
                    input.advance_to(epoch);
                    shared.counters.epoch_in.fetch_max(epoch, Ordering::Relaxed);
                }
                // An empty window is a heartbeat: it tells the stream functions that
                // time moved, so their windows close.
                Counters::add(&shared.counters.rows_in, batch.len() as u64);
                input.send(Window::new(place.index as u64, 0, batch));
            }
            Ok(Next::Wait) => break,
            Ok(Next::Done) => {
                r.input = None;
                r.feed = None;
                return true;
            }
            Err(e) => {
                shared.fatal(e);
                r.input = None;
                r.feed = None;
                return true;
            }
        }
    }
    input.flush();
    busy
}

/// Takes a query off this worker.
fn end(worker: &mut timely::worker::Worker, r: Running) {
    drop(r.input);
    if worker.installed_dataflows().contains(&r.dataflow) {
        worker.drop_dataflow(r.dataflow);
    }
    let status = &r.status;
    if status.ended.fetch_add(1, Ordering::AcqRel) + 1 == status.workers {
        for log in &status.closes {
            log.close();
        }
    }
}
