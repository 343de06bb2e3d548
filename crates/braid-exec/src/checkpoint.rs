//! Checkpoints and recovery: a run's state after an epoch, written consistently, and a
//! run that resumes from it with output identical to an uninterrupted one.
//!
//! - **When.** Worker 0 decides, from its wall clock, that the epoch its input is in is
//!   a checkpoint (`c`) when it is about to open a later one and the interval has
//!   passed. It sends `c` on the control stream, which is broadcast to every worker.
//! - **What.** Every `Map` and every sink holds the barrier's capability at `c` until
//!   its input frontier has passed `c`, then writes its part: each stream-function
//!   instance its state (`save`), stored per logical partition (a key group), and a
//!   file sink the length of its file after the rows of epochs up to `c`. Timely's
//!   frontiers align the parts: every part holds the effect of exactly the epochs up to
//!   `c`.
//! - **Commit.** Once the output frontier has passed `c` (so every part, on every worker
//!   of every process, is written), worker 0 writes `chk-c/MANIFEST` and then `LATEST`,
//!   each atomically (a rename in a directory, one PUT on object storage: see
//!   [`crate::checkpoint_store`]); older checkpoints are removed. A checkpoint without a
//!   manifest does not exist.
//! - **Recovery.** A run started with `recover` reads `LATEST`, restores each
//!   partition's instance from its part (on whatever worker now hosts it: another
//!   worker or process count is a redistribution of the same key groups), truncates a
//!   file sink to its committed length, and its sources read their input again from the
//!   start, handing on only the rows of epochs after `c` (they are replayable sources:
//!   files, binary files, generators; the same rows, sequence numbers and epochs).
//!
//! What a consumer of a file sink sees is exactly-once from the file's committed
//! prefix: rows written after the last commit are taken back (truncated) on recovery.

pub use crate::checkpoint_store::{CheckpointBackend, LocalDir};
use crate::error::{Error, Result};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SinkSpec, SourceSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A checkpoint barrier: its epoch, and for a live rescale the shape the plan takes
/// after it (see [`crate::rescale`]).
pub type Barrier = (u64, Option<crate::rescale::Rescale>);

/// The input worker 0 sends checkpoint barriers on: a barrier `c` at time `c`. Every
/// worker advances its handle with its [`crate::render::Feeder`].
pub type Control =
    timely::dataflow::InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<Barrier>>>;

/// Checkpointing for a run.
#[derive(Clone, Debug)]
pub struct CheckpointConfig {
    /// Where checkpoints go (created if missing), unless `backend` is set.
    pub dir: PathBuf,
    /// Wall time between checkpoints.
    pub interval: Duration,
    /// Resume from the last committed checkpoint in `dir` (a fresh start when there is
    /// none), instead of starting over and removing what `dir` holds.
    pub recover: bool,
    /// Where checkpoints go instead of `dir` (object storage: `braid-objstore`); None
    /// keeps them in the local directory `dir`.
    pub backend: Option<Arc<dyn CheckpointBackend>>,
}

impl CheckpointConfig {
    /// The store checkpoints go to: `backend`, or the directory `dir`.
    pub fn store(&self) -> Arc<dyn CheckpointBackend> {
        match &self.backend {
            Some(b) => b.clone(),
            None => Arc::new(LocalDir::new(&self.dir)),
        }
    }
}

/// A committed checkpoint's manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The checkpoint holds the effect of epochs up to and including this one.
    pub epoch: u64,
    /// Fingerprint of the plan it was taken from (a restore into another plan is
    /// refused).
    pub plan: u64,
    /// Partition count of every stage, in stage order.
    pub partitions: Vec<u32>,
    /// Workers in all when it was taken.
    pub workers: usize,
    /// Bytes of state written (all parts).
    pub bytes: u64,
    /// Milliseconds from the barrier to the commit.
    pub millis: u64,
}

/// One taken checkpoint, as the run reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Taken {
    /// Its epoch.
    pub epoch: u64,
    /// Bytes of state written by this process.
    pub bytes: u64,
    /// From the barrier to the commit.
    pub duration: Duration,
}

/// A file sink's committed length.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct SinkMark {
    /// Bytes of the file holding the rows of the epochs up to the checkpoint's.
    pub bytes: u64,
    /// Rows written up to then.
    pub rows: u64,
}

/// What a process wrote of a checkpoint: bytes, since when, and the partition counts.
type Written = (u64, Instant, Vec<u32>);

/// The checkpoint store of one run, shared by the workers of a process.
#[derive(Debug)]
pub struct Store {
    backend: Arc<dyn CheckpointBackend>,
    interval: Duration,
    /// The run was started to recover (what it resumes from may be nothing). Read by
    /// the Kafka sink only.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    recovering: bool,
    plan: u64,
    /// The partition count of every stage (changed by a live rescale).
    partitions: Mutex<Vec<u32>>,
    /// Workers in all (changed by a live rescale of the worker threads).
    workers: std::sync::atomic::AtomicUsize,
    /// The checkpoint this run resumed from (a live rescale resumes from the one it
    /// took).
    restored: Mutex<Option<Manifest>>,
    /// Bytes written per checkpoint epoch by this process, when its barrier went, and
    /// the partition counts it was taken with.
    written: Mutex<std::collections::BTreeMap<u64, Written>>,
    taken: Mutex<Vec<Taken>>,
    /// Output files the commits make durable.
    outputs: Mutex<Vec<PathBuf>>,
    /// The committer thread (worker 0's process), started with the first commit: it
    /// syncs a checkpoint's parts and the outputs to disk, then writes the manifest,
    /// off the workers' path.
    committer: Mutex<Option<(std::sync::mpsc::Sender<u64>, std::thread::JoinHandle<()>)>>,
    /// The committer's error, for worker 0 to fail the run with.
    failed: Mutex<Option<Error>>,
    /// One more than the epoch of the last checkpoint committed by this run (0: none).
    committed: std::sync::atomic::AtomicU64,
}

impl Store {
    /// Opens the store for `plan` (as the user gave it: before shapes are resolved for
    /// a worker count) run on `workers` workers in all: on `recover`, reads the last
    /// committed checkpoint; otherwise clears `dir` of earlier checkpoints.
    pub fn open(
        cfg: &CheckpointConfig,
        plan: &Plan,
        registry: &Registry,
        workers: usize,
        leader: bool,
    ) -> Result<Store> {
        check_plan(plan, registry)?;
        let backend = cfg.store();
        backend.prepare()?;
        let fingerprint = fingerprint(plan);
        let stages = stage_partitions(plan);
        let partitions: Vec<u32> = stages.iter().map(|s| s.0).collect();
        let restored = match cfg.recover {
            true => latest_in(&*backend)?,
            false => None,
        };
        if let Some(m) = &restored {
            if m.partitions.len() != partitions.len() {
                return Err(Error::UnusableCheckpoint(format!(
                    "the checkpoint in {} has {} stages, this plan {}; recover with the same query",
                    backend.location(),
                    m.partitions.len(),
                    partitions.len()
                )));
            }
            // Another partition count: each entry of a stage's state goes to the new
            // partition its key routes to, which only functions that keep state by
            // key can tell.
            for (k, ((q, function), &was)) in stages.iter().zip(&m.partitions).enumerate() {
                let rescales = registry.function(function).is_ok_and(|f| f.rescales());
                if *q != was && !rescales {
                    return Err(Error::Plan(braid_plan::error::Error::NotSupported(format!(
                        "restoring a checkpoint with other partition counts (taken with {:?}, this plan has {:?}): stage {} runs `{function}`, whose state is not kept by key (SQL queries under a hash partitioning and stateless functions can be restored with another q; any function onto other worker and process counts)",
                        m.partitions, partitions, k + 1
                    ))));
                }
            }
            if m.plan != fingerprint {
                return Err(Error::UnusableCheckpoint(format!(
                    "the checkpoint in {} (epoch {}) was taken from another plan; recover with the same query, sources and sinks",
                    backend.location(),
                    m.epoch
                )));
            }
        }
        if leader {
            // Checkpoints that never committed (or, starting over, all of them) go.
            let keep = restored.as_ref().map(|m| m.epoch);
            for (epoch, path) in checkpoint_dirs(&*backend)? {
                if Some(epoch) != keep {
                    let _ = backend.delete_prefix(&path);
                }
            }
            if keep.is_none() {
                let _ = backend.delete("LATEST");
            }
        }
        Ok(Store {
            backend,
            interval: cfg.interval,
            recovering: cfg.recover,
            plan: fingerprint,
            partitions: Mutex::new(partitions),
            workers: std::sync::atomic::AtomicUsize::new(workers),
            restored: Mutex::new(restored),
            written: Mutex::new(Default::default()),
            taken: Mutex::new(Vec::new()),
            outputs: Mutex::new(Vec::new()),
            committer: Mutex::new(None),
            failed: Mutex::new(None),
            committed: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Whether the run was started to recover (from the last checkpoint, or from the
    /// start when none was committed).
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub(crate) fn recovering(&self) -> bool {
        self.recovering
    }

    /// Where the checkpoints are (a directory or an object-store URL).
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub(crate) fn location(&self) -> String {
        self.backend.location()
    }

    /// The epoch of the last checkpoint this run committed.
    pub(crate) fn committed(&self) -> Option<u64> {
        self.committed
            .load(std::sync::atomic::Ordering::Acquire)
            .checked_sub(1)
    }

    /// The epoch of the checkpoint this run resumed from.
    pub fn restored_epoch(&self) -> Option<u64> {
        self.restored().map(|m| m.epoch)
    }

    fn restored(&self) -> Option<Manifest> {
        self.restored.lock().ok().and_then(|m| m.clone())
    }

    /// The partition count stage `stage` had in the checkpoint this run resumed from.
    pub(crate) fn restored_partitions(&self, stage: usize) -> Option<u32> {
        self.restored()
            .and_then(|m| m.partitions.get(stage).copied())
    }

    /// The partition count of every stage now.
    pub(crate) fn partitions(&self) -> Vec<u32> {
        self.partitions
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The run goes on with `workers` workers in all (a live rescale of the threads).
    pub(crate) fn set_workers(&self, workers: usize) {
        self.workers
            .store(workers, std::sync::atomic::Ordering::Relaxed);
    }

    /// A live rescale: the next dataflow resumes from checkpoint `epoch` (taken with
    /// the partition counts before) and runs with `partitions`.
    pub(crate) fn rebase(&self, epoch: u64, partitions: Vec<u32>) {
        let before = self.partitions();
        if let Ok(mut r) = self.restored.lock() {
            *r = Some(Manifest {
                epoch,
                plan: self.plan,
                partitions: before,
                workers: self.workers.load(std::sync::atomic::Ordering::Relaxed),
                bytes: 0,
                millis: 0,
            });
        }
        if let Ok(mut p) = self.partitions.lock() {
            *p = partitions;
        }
    }

    /// Wall time between checkpoints.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The checkpoints this process committed (worker 0's) or wrote parts of.
    pub fn taken(&self) -> Vec<Taken> {
        self.taken.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn chk(&self, epoch: u64) -> String {
        format!("chk-{epoch:020}")
    }

    fn part(&self, epoch: u64, stage: usize, partition: u32) -> String {
        format!("{}/map-{stage}-{partition}.bin", self.chk(epoch))
    }

    fn sink(&self, epoch: u64, output: usize) -> String {
        format!("{}/sink-{output}.json", self.chk(epoch))
    }

    /// Notes that the barrier of checkpoint `epoch` went out (worker 0).
    pub(crate) fn barrier(&self, epoch: u64) {
        let partitions = self.partitions();
        if let Ok(mut w) = self.written.lock() {
            w.entry(epoch).or_insert((0, Instant::now(), partitions));
        }
    }

    /// Writes a partition's state for checkpoint `epoch`.
    pub(crate) fn write_part(
        &self,
        epoch: u64,
        stage: usize,
        partition: u32,
        bytes: &[u8],
    ) -> Result<()> {
        self.backend
            .put(&self.part(epoch, stage, partition), bytes)?;
        let partitions = self.partitions();
        if let Ok(mut w) = self.written.lock() {
            w.entry(epoch).or_insert((0, Instant::now(), partitions)).0 += bytes.len() as u64;
        }
        Ok(())
    }

    /// A partition's state in the checkpoint this run resumed from (None: the partition
    /// had not been made by then).
    pub(crate) fn read_part(&self, stage: usize, partition: u32) -> Result<Option<Vec<u8>>> {
        let Some(m) = &self.restored() else {
            return Ok(None);
        };
        self.backend.get(&self.part(m.epoch, stage, partition))
    }

    /// Writes where worker `worker`'s source resumes after checkpoint `epoch` (a
    /// [`crate::source::Feed::resume_point`]).
    pub(crate) fn write_source(&self, epoch: u64, worker: usize, bytes: &[u8]) -> Result<()> {
        let path = format!("{}/source-{worker}.bin", self.chk(epoch));
        self.backend.put(&path, bytes)
    }

    /// Where worker `worker`'s source resumes, when resuming and its feed said.
    pub(crate) fn read_source(&self, worker: usize) -> Result<Option<Vec<u8>>> {
        let Some(m) = &self.restored() else {
            return Ok(None);
        };
        let path = format!("{}/source-{worker}.bin", self.chk(m.epoch));
        self.backend.get(&path)
    }

    /// Writes a file sink's committed length for checkpoint `epoch`.
    pub(crate) fn write_sink(&self, epoch: u64, output: usize, mark: SinkMark) -> Result<()> {
        let text = serde_json::to_vec(&mark).map_err(|e| Error::Internal(e.to_string()))?;
        self.backend.put(&self.sink(epoch, output), &text)
    }

    /// Notes an output file that commits must make durable.
    pub(crate) fn output(&self, path: &Path) {
        if let Ok(mut o) = self.outputs.lock() {
            o.push(path.to_path_buf());
        }
    }

    /// Hands checkpoint `epoch` to the committer thread (see [`Store::commit`]); an
    /// error of an earlier commit comes back here.
    pub(crate) fn request_commit(self: &Arc<Self>, epoch: u64) -> Result<()> {
        if let Some(e) = self.failed.lock().ok().and_then(|mut f| f.take()) {
            return Err(e);
        }
        let mut c = self
            .committer
            .lock()
            .map_err(|_| Error::Internal("the checkpoint committer's lock".into()))?;
        if c.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            let me = self.clone();
            let thread = std::thread::Builder::new()
                .name("braid-commit".into())
                .spawn(move || {
                    for epoch in rx {
                        if let Err(e) = me.commit(epoch) {
                            if let Ok(mut f) = me.failed.lock() {
                                *f = Some(e);
                            }
                            return;
                        }
                    }
                })
                .map_err(|e| Error::io("starting the checkpoint committer", e))?;
            *c = Some((tx, thread));
        }
        if let Some((tx, _)) = c.as_ref() {
            let _ = tx.send(epoch);
        }
        Ok(())
    }

    /// Waits for the commits handed on so far; the first error of any.
    pub fn finish(&self) -> Result<()> {
        let c = self.committer.lock().ok().and_then(|mut c| c.take());
        if let Some((tx, thread)) = c {
            drop(tx);
            let _ = thread.join();
        }
        match self.failed.lock().ok().and_then(|mut f| f.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The committed length of sink `output`, when resuming.
    pub(crate) fn read_sink(&self, output: usize) -> Result<Option<SinkMark>> {
        let Some(m) = &self.restored() else {
            return Ok(None);
        };
        let path = self.sink(m.epoch, output);
        let Some(text) = self.backend.get(&path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| Error::Internal(format!("{}/{path}: {e}", self.backend.location())))
    }

    /// Commits checkpoint `epoch` (the committer thread, once the output frontier has
    /// passed it): syncs its parts and the outputs, writes its manifest, then `LATEST`;
    /// earlier checkpoints are removed.
    fn commit(&self, epoch: u64) -> Result<()> {
        let (bytes, since, partitions) = self
            .written
            .lock()
            .ok()
            .and_then(|mut w| {
                let v = w.get(&epoch).cloned();
                w.retain(|&e, _| e > epoch);
                v
            })
            .unwrap_or_else(|| (0, Instant::now(), self.partitions()));
        let manifest = Manifest {
            epoch,
            plan: self.plan,
            partitions,
            workers: self.workers.load(std::sync::atomic::Ordering::Relaxed),
            bytes,
            millis: since.elapsed().as_millis() as u64,
        };
        let dir = self.chk(epoch);
        // Everything the manifest vouches for is on disk before it is.
        let sync = |path: &Path| {
            std::fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(format!("syncing {}", path.display()), e))
        };
        self.backend.sync(&format!("{dir}/"))?;
        for out in self.outputs.lock().map(|o| o.clone()).unwrap_or_default() {
            sync(&out)?;
        }
        let text =
            serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(e.to_string()))?;
        self.backend.replace(&format!("{dir}/MANIFEST"), &text)?;
        self.backend
            .replace("LATEST", format!("{epoch}\n").as_bytes())?;
        self.committed
            .fetch_max(epoch + 1, std::sync::atomic::Ordering::Release);
        for (e, path) in checkpoint_dirs(&*self.backend)? {
            if e < epoch {
                let _ = self.backend.delete_prefix(&path);
            }
        }
        if let Ok(mut t) = self.taken.lock() {
            t.push(Taken {
                epoch,
                bytes,
                duration: since.elapsed(),
            });
        }
        Ok(())
    }
}

/// Worker 0's checkpoint clock: which epochs are checkpoints, and which of them wait
/// for their commit.
pub(crate) struct Clock {
    last: Instant,
    pending: std::collections::VecDeque<u64>,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            last: Instant::now(),
            pending: Default::default(),
        }
    }

    /// Whether the epoch being closed (`epoch`, about to be followed by a later one) is
    /// to be a checkpoint; `now` makes it one whatever the interval (a live rescale).
    pub(crate) fn due(&mut self, store: &Store, epoch: u64, now: bool) -> bool {
        let early = self.last.elapsed() < store.interval && !now;
        if early || store.restored_epoch() >= Some(epoch) {
            return false;
        }
        self.last = Instant::now();
        self.pending.push_back(epoch);
        store.barrier(epoch);
        true
    }

    /// Closes epoch `closing` on worker `worker`, the one reading the source: when it
    /// is to be a checkpoint ([`Clock::due`]), writes where `feed` starts again after
    /// it (the window it returned last is the first after the checkpoint) and sends
    /// the barrier, carrying `shape` (a live rescale's), on `control`. `Some` when it
    /// did, with the resume point written (None: the feed gave none).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn barrier(
        &mut self,
        store: &Store,
        closing: u64,
        now: bool,
        worker: usize,
        feed: &dyn crate::source::Feed,
        control: &mut Control,
        shape: Option<crate::rescale::Rescale>,
    ) -> Result<Option<Option<Vec<u8>>>> {
        if !self.due(store, closing, now) {
            return Ok(None);
        }
        let at = feed.resume_after(closing);
        if let Some(at) = &at {
            store.write_source(closing, worker, at)?;
        }
        control.send((closing, shape));
        Ok(Some(at))
    }

    /// Commits the pending checkpoints the output frontier has passed (`passed(c)`).
    pub(crate) fn commit_passed(
        &mut self,
        store: &Arc<Store>,
        passed: impl Fn(u64) -> bool,
    ) -> Result<()> {
        while let Some(&c) = self.pending.front() {
            if !passed(c) {
                break;
            }
            self.pending.pop_front();
            store.request_commit(c)?;
        }
        Ok(())
    }
}

/// The last committed checkpoint in `dir`.
pub fn latest(dir: &Path) -> Result<Option<Manifest>> {
    latest_in(&LocalDir::new(dir))
}

/// The last committed checkpoint in `store`.
pub fn latest_in(store: &dyn CheckpointBackend) -> Result<Option<Manifest>> {
    let at = store.location();
    let Some(text) = store.get("LATEST")? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&text);
    let epoch: u64 = text
        .trim()
        .parse()
        .map_err(|_| Error::Internal(format!("{at}/LATEST: `{}` is not an epoch", text.trim())))?;
    let mpath = format!("chk-{epoch:020}/MANIFEST");
    let m = store.get(&mpath)?.ok_or_else(|| {
        Error::io(
            format!("reading {at}/{mpath}"),
            std::io::ErrorKind::NotFound.into(),
        )
    })?;
    serde_json::from_slice(&m)
        .map(Some)
        .map_err(|e| Error::Internal(format!("{at}/{mpath}: {e}")))
}

/// Refuses, by name, what a checkpointed run cannot make exactly-once.
fn check_plan(plan: &Plan, registry: &Registry) -> Result<()> {
    let refuse = |what: String| {
        Err(Error::Plan(braid_plan::error::Error::NotSupported(
            format!("{what} in a run with checkpoints"),
        )))
    };
    let mut bad = None;
    walk(plan, &mut |p| {
        if bad.is_some() {
            return;
        }
        match p {
            Plan::Source(s) => {
                let replayable = |spec: &SourceSpec| {
                    matches!(
                        spec,
                        SourceSpec::Csv { .. }
                            | SourceSpec::JsonLines { .. }
                            | SourceSpec::Columnar { .. }
                            | SourceSpec::Binary { .. }
                            | SourceSpec::Generator(_)
                            | SourceSpec::Memory(_)
                            | SourceSpec::Late { .. }
                            | SourceSpec::Kafka(_)
                    )
                };
                let replayable = |spec: &SourceSpec| match spec {
                    SourceSpec::Native(n) => registry.source(n).is_ok_and(|f| f.replayable()),
                    spec => replayable(spec),
                };
                let ok = match &s.spec {
                    SourceSpec::Interleave(kids) => kids.iter().all(|k| replayable(&k.spec)),
                    spec => replayable(spec),
                };
                if !ok {
                    bad = Some(format!(
                        "source {} (stdin, TCP and native sources cannot be read again after a crash: checkpoints need a file, binary file, Kafka topic or generator)",
                        s.name
                    ));
                }
            }
            Plan::Map(m) => match registry.function(&m.function) {
                Ok(f) if !f.checkpoints() => {
                    bad = Some(format!(
                        "stream function `{}`, which does not save its state",
                        m.function
                    ))
                }
                _ => {}
            },
            Plan::Sink(s)
                if !(matches!(
                    s.spec,
                    SinkSpec::File(_) | SinkSpec::Discard | SinkSpec::Kafka(_)
                ) || committed_native(&s.spec, registry))
                    || s.limit.is_some() =>
            {
                bad = Some(format!(
                    "sink {:?} (exactly-once output needs a file sink, which recovery truncates to its committed length, or a Kafka sink, written in transactions; without LIMIT)",
                    s.spec
                ));
            }
            _ => {}
        }
    });
    match bad {
        Some(what) => refuse(what),
        None => Ok(()),
    }
}

/// Whether `spec` is a sink written in Rust that can be cut back to a row count
/// ([`braid_plan::function::SinkFn::committed_rows`]): a stream's log in the server.
pub(crate) fn committed_native(spec: &SinkSpec, registry: &Registry) -> bool {
    matches!(spec, SinkSpec::Native(n) if registry.sink(n).is_ok_and(|s| s.committed_rows().is_some()))
}

/// The partition count and function of every stage, in stage order (Maps bottom-up,
/// plan by plan).
fn stage_partitions(plan: &Plan) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let plans = match plan {
        Plan::Together(p) => p.as_slice(),
        one => std::slice::from_ref(one),
    };
    for p in plans {
        let mut stages = Vec::new();
        walk(p, &mut |n| {
            if let Plan::Map(m) = n {
                if let Plan::Split(s) = m.input.as_ref() {
                    stages.push((m.input.maps(), s.q, m.function.clone()));
                }
            }
        });
        stages.sort();
        out.extend(stages.into_iter().map(|(_, q, f)| (q, f)));
    }
    out
}

/// Calls `f` on every node of `plan`.
fn walk(plan: &Plan, f: &mut dyn FnMut(&Plan)) {
    f(plan);
    match plan {
        Plan::Source(_) => {}
        Plan::Split(s) => walk(&s.input, f),
        Plan::Map(m) => walk(&m.input, f),
        Plan::Merge(m) => walk(&m.input, f),
        Plan::Sink(s) => walk(&s.input, f),
        Plan::Together(plans) => plans.iter().for_each(|p| walk(p, f)),
    }
}

/// A stable fingerprint of `plan` (FNV-1a over its debug form), without its partition
/// counts and placements: a checkpoint can be restored with others (see [`Store::open`]).
/// Nor the names its stream functions are registered under, which number a session's
/// queries (`query3_1`): the same query compiled after other statements, ad-hoc SELECTs
/// say, is the same plan, and a SQL function's own fingerprint, checked when its state is
/// restored, covers what it computes.
fn fingerprint(plan: &Plan) -> u64 {
    fn unnamed(plan: &mut Plan, n: &mut usize) {
        match plan {
            Plan::Source(_) => {}
            Plan::Split(s) => unnamed(&mut s.input, n),
            Plan::Map(m) => {
                unnamed(&mut m.input, n);
                m.function = format!("function{n}");
                *n += 1;
            }
            Plan::Merge(m) => unnamed(&mut m.input, n),
            Plan::Sink(s) => unnamed(&mut s.input, n),
            Plan::Together(plans) => plans.iter_mut().for_each(|p| unnamed(p, n)),
        }
    }
    fn unscaled(plan: &mut Plan) {
        match plan {
            Plan::Source(_) => {}
            Plan::Split(s) => {
                s.q = 0;
                s.placement = None;
                s.shape = None;
                s.why = None;
                // Measured again by each run (`tune::measure_splitter_rates`).
                s.hints.splitter_rate = None;
                if s.hints.measured.take().is_some() {
                    let hinted = braid_plan::plan::SplitHints::default();
                    s.hints.broadcast_fraction = hinted.broadcast_fraction;
                    s.hints.cost_ratio = hinted.cost_ratio;
                }
                if let braid_plan::plan::Route::Grid { rows, cols, .. } = &mut s.route {
                    (*rows, *cols) = (0, 0);
                }
                unscaled(&mut s.input);
            }
            Plan::Map(m) => unscaled(&mut m.input),
            Plan::Merge(m) => unscaled(&mut m.input),
            Plan::Sink(s) => unscaled(&mut s.input),
            Plan::Together(plans) => plans.iter_mut().for_each(unscaled),
        }
    }
    let mut plan = plan.clone();
    unscaled(&mut plan);
    unnamed(&mut plan, &mut 0);
    let text = format!("{plan:?}");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The `chk-*` directories in `store`, with their epochs (as key prefixes `chk-…/`).
fn checkpoint_dirs(store: &dyn CheckpointBackend) -> Result<Vec<(u64, String)>> {
    let mut out = Vec::new();
    for key in store.list("chk-")? {
        let name = key.split('/').next().unwrap_or_default();
        let Some(epoch) = name
            .strip_prefix("chk-")
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((epoch, format!("{name}/")));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::fingerprint;
    use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};

    fn plan(desired: Option<f64>, splitter: Option<f64>) -> Plan {
        let schema = GeneratorSpec::schema();
        let spec = GeneratorSpec {
            tuples: 100,
            rate: 10.0,
            keys: 4,
            broadcast: 0.0,
            seed: 1,
        };
        let mut p = Plan::source("gen", SourceSpec::Generator(spec), schema)
            .split(4, Route::Any, None, Strategy::Autosplit)
            .map("count")
            .merge(MergeKind::Union)
            .sink(SinkSpec::Discard);
        p.set_rates(desired, splitter);
        p
    }

    /// One splitter's rate and the split's costs are measured anew by every run
    /// (`--desired-rate`, SQL's `SET desired_rate`): a resumed run's plan is the same
    /// plan; the desired rate, which the user gives, is part of it.
    #[test]
    fn a_fingerprint_leaves_out_the_measured_splitter_rate_only() {
        let a = fingerprint(&plan(Some(1e7), Some(2.1e6)));
        assert_eq!(a, fingerprint(&plan(Some(1e7), Some(2.3e6))));
        assert_eq!(a, fingerprint(&plan(Some(1e7), None)));
        assert_ne!(a, fingerprint(&plan(Some(2e7), Some(2.1e6))));
        // So are the split's measured costs (b, a), whatever they came to.
        let measured = |consume_ns: f64| {
            let mut p = plan(Some(1e7), Some(2.1e6));
            let s = crate::tune::split_mut(&mut p).expect("a split");
            crate::tune::set_costs(
                s,
                braid_plan::plan::MeasuredCosts {
                    rows: 100,
                    broadcast: 0.03,
                    consume_ns,
                    route_ns: 5.0,
                    emit_ns: 15.0,
                },
            );
            fingerprint(&p)
        };
        assert_eq!(a, measured(20.0));
        assert_eq!(a, measured(7.0));
    }
}
