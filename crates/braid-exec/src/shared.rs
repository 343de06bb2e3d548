//! State shared by the workers of one process during a run: live counters, collected
//! rows, measured costs, and the errors the run ends with. The operators (`render`)
//! write it; the runtime reads it into the run's report.

use crate::cancel::Cancel;
use crate::error::Error;
use crate::fault::{FaultRow, Faults};
use crate::profile::{PartitionCost, Profiler};
use crate::source::{Counters, Rejects};
use braid_plan::batch::RowKey;
use braid_plan::expr::Fault;
use braid_plan::output::OutRow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// State shared by the workers of one process.
pub struct Shared {
    /// Live counters.
    pub counters: Arc<Counters>,
    /// When the run started.
    pub start: Instant,
    /// The system clock at `start`, in nanoseconds since 1970: stamps
    /// ([`Shared::now_ns`]) count from there, so that the processes of a cluster
    /// (on one machine, or on hosts whose clocks agree) compare each other's.
    pub(crate) clock_base: u64,
    /// When a paced source's schedule started: the first source loop of the run.
    pub(crate) schedule: std::sync::OnceLock<Instant>,
    /// Rows of the `Collect` sinks, by plan of a `Together` (0 for other plans).
    pub collected: Mutex<Vec<Vec<OutRow>>>,
    /// Partition costs, and with [`RunConfig::profile`] the operators' times.
    ///
    /// [`RunConfig::profile`]: crate::runtime::RunConfig::profile
    pub(crate) profiler: Arc<Profiler>,
    /// [`RunConfig::measure_costs`], or profiling.
    pub(crate) measure_costs: bool,
    pub(crate) errors: Mutex<Vec<Error>>,
    pub(crate) rejects: Mutex<Vec<Rejects>>,
    pub(crate) fatal: Mutex<Option<Error>>,
    /// Runtime faults fail the run (`ReadOptions::strict`) instead of skipping rows.
    pub(crate) strict: bool,
    pub(crate) faults: Mutex<Vec<Faults>>,
    pub(crate) failed: std::sync::atomic::AtomicBool,
    pub(crate) died: std::sync::atomic::AtomicBool,
    /// The caller's cancel handle ([`crate::runtime::RunConfig::cancel`]).
    pub(crate) cancel: Cancel,
    /// Sinks that may still write: a sink that reached its `LIMIT` takes itself off;
    /// when none is left the sources stop as when cancelled.
    pub(crate) sinks_open: std::sync::atomic::AtomicUsize,
    /// The run's checkpoint store, when it takes checkpoints.
    pub(crate) checkpoints: Option<Arc<crate::checkpoint::Store>>,
    /// A live rescale under way: the epoch its barrier closes, and the shape after.
    pub(crate) switch: Mutex<Option<(u64, crate::rescale::Rescale)>>,
    /// Worker 0: when the barrier of the live rescale under way went, and what asked
    /// for it.
    pub(crate) pause: Mutex<Option<(Instant, crate::rescale::Request)>>,
    /// The shape the last live rescale gave the plan.
    pub(crate) shape: Mutex<Option<crate::rescale::Rescale>>,
    /// A live rescale of the worker threads ended the execution: start this many.
    pub(crate) threads_next: Mutex<Option<usize>>,
    /// The boards of a CSV file read in shares ([`crate::source::par_csv`]), one per
    /// dataflow built: by (execution of the worker threads, dataflow of the execution).
    boards: Mutex<std::collections::HashMap<(usize, usize), Arc<crate::source::par_csv::Board>>>,
    /// How timely's time maps to epochs: ticks within epochs under a latency
    /// constraint ([`crate::qos`]).
    pub(crate) ticks: crate::qos::Ticks,
    /// Epochs per timely time (1: the time is the epoch, or its ticks).
    pub(crate) granule: Granule,
    /// Windows carry latency stamps and operators measure them ([`crate::qos`]).
    pub(crate) stamps: bool,
    /// The run's latency constraint, if any (the tightest of its sinks').
    pub(crate) constraint: Option<std::time::Duration>,
    /// [`crate::runtime::RunConfig::quantum`].
    pub(crate) quantum: Option<std::time::Duration>,
    /// What the stamps measured, and the controller's W.
    pub latencies: Arc<crate::qos::Latencies>,
    /// Rows dropped by load shedding, by (source, second of its schedule).
    pub(crate) shed: Mutex<std::collections::BTreeMap<(String, u64), u64>>,
    /// Process 0 of a cluster rescaling on its own: the partition costs the other
    /// processes measured (`runtime/costs.rs` sends them).
    pub(crate) remote_costs: RemoteCosts,
}

impl Shared {
    /// The board of the file read in shares by dataflow `built` of execution
    /// `execution`, the same for every worker thread of this process; `remote` when
    /// other processes read it too.
    pub(crate) fn board(
        &self,
        (execution, built): (usize, usize),
        remote: bool,
    ) -> Arc<crate::source::par_csv::Board> {
        let mut boards = self.boards.lock().unwrap_or_else(|e| e.into_inner());
        // Boards of earlier dataflows are read no more.
        boards.retain(|&k, _| k >= (execution, built.saturating_sub(1)));
        boards
            .entry((execution, built))
            .or_insert_with(|| Arc::new(crate::source::par_csv::Board::new(remote)))
            .clone()
    }

    /// The state of a new run: `counters` to count in, whether it measures partition
    /// costs, the caller's profiler (which measures them too), whether a runtime fault
    /// fails it (`strict`) or is a reported skip, the caller's cancel handle, and how
    /// many sinks the plan has.
    pub(crate) fn new(
        counters: Arc<Counters>,
        measure_costs: bool,
        profiler: Option<Arc<Profiler>>,
        strict: bool,
        cancel: Cancel,
        sinks: usize,
    ) -> Shared {
        Shared {
            counters,
            start: Instant::now(),
            schedule: std::sync::OnceLock::new(),
            clock_base: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            collected: Mutex::new(Vec::new()),
            measure_costs: measure_costs || profiler.as_ref().is_some_and(|p| p.per_partition),
            profiler: profiler.unwrap_or_default(),
            errors: Mutex::new(Vec::new()),
            rejects: Mutex::new(Vec::new()),
            fatal: Mutex::new(None),
            strict,
            faults: Mutex::new(Vec::new()),
            failed: std::sync::atomic::AtomicBool::new(false),
            died: std::sync::atomic::AtomicBool::new(false),
            constraint: None,
            quantum: None,
            cancel,
            sinks_open: std::sync::atomic::AtomicUsize::new(sinks),
            checkpoints: None,
            switch: Mutex::new(None),
            pause: Mutex::new(None),
            shape: Mutex::new(None),
            threads_next: Mutex::new(None),
            boards: Mutex::new(Default::default()),
            ticks: crate::qos::Ticks::OFF,
            granule: Granule::ONE,
            stamps: false,
            latencies: Default::default(),
            shed: Mutex::new(Default::default()),
            remote_costs: Default::default(),
        }
    }

    /// Counts `rows` of `source` dropped by load shedding, due at second `second` of
    /// its schedule.
    pub(crate) fn shed(&self, source: &str, second: u64, rows: u64) {
        crate::source::Counters::add(&self.counters.shed, rows);
        if let Ok(mut s) = self.shed.lock() {
            *s.entry((source.to_string(), second)).or_default() += rows;
        }
    }

    /// A latency stamp: nanoseconds since 1970 by this process's clock (the system
    /// clock at the run's start, then the monotonic clock).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock_base + self.start.elapsed().as_nanos() as u64
    }

    /// Switches this process to the next dataflow of live rescale `c` (one worker,
    /// while the others wait): it resumes from checkpoint `c` in `shape`, and what the
    /// sources and sinks count is counted again from that checkpoint, as on recovery.
    pub(crate) fn rebase(&self, c: u64, shape: &crate::rescale::Rescale) {
        if let Some(store) = &self.checkpoints {
            store.rebase(c, shape.partitions.clone());
        }
        for n in [
            &self.counters.rows_in,
            &self.counters.rows_out,
            &self.counters.malformed,
        ] {
            n.store(0, Ordering::Relaxed);
        }
        if let Ok(mut r) = self.rejects.lock() {
            r.clear();
        }
        // The restored partitions count their late rows again, from the checkpoint.
        if let Ok(late) = self.counters.late_rows.lock() {
            for l in late.iter() {
                l.recount();
            }
        }
        if let Ok(mut s) = self.shape.lock() {
            *s = Some(shape.clone());
        }
        if let Ok(mut s) = self.switch.lock() {
            *s = None;
        }
    }

    /// A live rescale's barrier `c` came (see [`crate::rescale`]): the workers of this
    /// process hand on no rows after `c`, and switch once the output has passed it.
    pub(crate) fn switch_at(&self, c: u64, shape: crate::rescale::Rescale) {
        if let Ok(mut s) = self.switch.lock() {
            s.get_or_insert((c, shape));
        }
    }

    /// The epoch of the live rescale under way, if any.
    pub(crate) fn switching(&self) -> Option<u64> {
        self.switch
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.0))
    }

    /// Records a non-fatal error to report at the end.
    pub fn error(&self, e: String) {
        self.io_error(e, std::io::Error::other("output failed"));
    }

    /// Records a failed write of the output, to fail the run with at the end.
    pub fn io_error(&self, context: String, e: std::io::Error) {
        if let Ok(mut v) = self.errors.lock() {
            v.push(Error::Io { context, error: e });
        }
    }

    /// Adds to a Map's measured costs (after each epoch): `spent[k]` (nanoseconds,
    /// rows) of partition `local[k]` of `stage`.
    pub(crate) fn add_costs(&self, stage: usize, local: &[u32], spent: &[(u64, u64)]) {
        self.profiler.add_costs(stage, local, spent);
    }

    /// Whether operators are timed ([`RunConfig::profile`]).
    ///
    /// [`RunConfig::profile`]: crate::runtime::RunConfig::profile
    pub(crate) fn profiling(&self) -> Option<&Arc<Profiler>> {
        Some(&self.profiler).filter(|p| p.timed)
    }

    /// Records a runtime fault of `operator` at `site` (a stream function, a split) on
    /// the row with sequence number `seq` (`source`: the source whose rows it counts,
    /// if it counts a source's rows): a counted, reported skip, or in strict mode the
    /// error the run fails with.
    pub(crate) fn fault(
        &self,
        site: &str,
        operator: &str,
        seq: u64,
        source: Option<&str>,
        f: &Fault,
    ) {
        let row = FaultRow {
            seq,
            source: source
                .filter(|_| !RowKey::made_at_end(seq))
                .map(str::to_string),
            line: None,
            operator: operator.to_string(),
            what: f.to_string(),
        };
        if self.strict {
            self.fatal(Error::Fault {
                site: site.to_string(),
                row,
            });
            return;
        }
        Counters::add(&self.counters.faults, 1);
        if let Ok(mut all) = self.faults.lock() {
            let at = match all.iter().position(|x| x.site == site) {
                Some(i) => i,
                None => {
                    all.push(Faults {
                        site: site.to_string(),
                        ..Faults::default()
                    });
                    all.len() - 1
                }
            };
            let x = &mut all[at];
            x.count += 1;
            // The faults of the first rows are kept, whichever worker met them first.
            if x.first.len() < Faults::KEEP {
                x.first.push(row);
            } else if let Some(last) = x.first.iter_mut().max_by_key(|f| f.seq) {
                if seq < last.seq {
                    *last = row;
                }
            }
        }
    }

    /// Records that user code (`what`, e.g. "routing function `f`") panicked (the run
    /// then stops reading and ends with the error).
    pub(crate) fn user_code_panicked(&self, what: &str, payload: &(dyn std::any::Any + Send)) {
        self.fatal(Error::UserCode {
            what: what.to_string(),
            message: panic_message(payload),
        });
    }

    /// Whether the run has failed: sources stop reading, and what was read drains.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a worker died: the others stop waiting for the dataflows to drain.
    pub(crate) fn worker_died(&self) -> bool {
        self.died.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the sources should stop: the run failed, was cancelled, or every sink
    /// reached its `LIMIT`.
    pub(crate) fn stopping(&self) -> bool {
        self.failed() || self.cancel.is_cancelled() || self.sinks_open.load(Ordering::Relaxed) == 0
    }

    /// A sink reached its `LIMIT`.
    pub(crate) fn sink_done(&self) {
        self.sinks_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Records a bug found while running (the run then ends with an internal error).
    pub(crate) fn bug(&self, what: String) {
        self.fatal(Error::Internal(what));
    }

    pub(crate) fn fatal(&self, e: Error) {
        self.failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut f) = self.fatal.lock() {
            f.get_or_insert(e);
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Per (stage, partition): nanoseconds in the stream function so far.
pub(crate) type Costs = Vec<(u64, u32, u64)>;

/// The costs other processes sent, by process: the last of each.
#[derive(Default)]
pub(crate) struct RemoteCosts(Mutex<std::collections::BTreeMap<u64, Costs>>);

impl RemoteCosts {
    /// Every process's partition costs: `own` (this process's) and the last each
    /// other process sent, summed by (stage, partition). A partition moved between
    /// processes has costs in both; only the one running it adds to them.
    pub(crate) fn with(&self, own: Vec<PartitionCost>) -> Vec<PartitionCost> {
        let mut all: std::collections::BTreeMap<(usize, u32), PartitionCost> = own
            .into_iter()
            .map(|c| ((c.stage, c.partition), c))
            .collect();
        let remote = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for &(stage, partition, nanos) in remote.values().flatten() {
            let c = all
                .entry((stage as usize, partition))
                .or_insert_with(|| PartitionCost {
                    stage: stage as usize,
                    partition,
                    ..PartitionCost::default()
                });
            c.nanos += nanos;
        }
        all.into_values().collect()
    }

    pub(crate) fn set(&self, process: u64, costs: Costs) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(process, costs);
    }
}

/// Epochs per timely time. An epoch is a unit of meaning (lateness, when windows
/// close); timely pays for each of its times in progress tracking, every worker for
/// every operator. A stream of small epochs read as fast as possible (a file of call
/// records in epochs of a minute, a few dozen rows each) then costs more in progress
/// than in its query, and each worker pays it again. With a granule of `g` epochs,
/// epoch `e` runs at time `e - e % g`: windows carry their epoch (`Window::epoch`),
/// and every operator still does per epoch, in epoch order, what it did per time (a
/// Map runs each epoch's rows and then its end, a time-ordered merge orders by epoch
/// first), so the output is the same; what changes is that a time completes only
/// once its last epoch has, so results wait for up to `g` epochs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granule(pub u64);

impl Granule {
    /// The time is the epoch.
    pub const ONE: Granule = Granule(1);

    /// Whether a time holds several epochs.
    #[inline]
    pub fn on(self) -> bool {
        self.0 > 1
    }

    /// The granule's first epoch for epoch `e`: the (epoch-unit) time `e` runs at.
    #[inline]
    pub fn start(self, e: u64) -> u64 {
        if e == u64::MAX {
            e
        } else {
            e - e % self.0
        }
    }

    /// The epoch of a window at (epoch-unit) time `t` that says it is of epoch `own`
    /// (`Window::epoch`): its own when granules are on, else `t`.
    #[inline]
    pub fn epoch(self, t: u64, own: u64) -> u64 {
        if self.on() {
            own
        } else {
            t
        }
    }
}
