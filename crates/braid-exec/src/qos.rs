//! Latency as a contract: ticks within an epoch, latency stamps, and the controller
//! that sizes the ticks to meet a constraint (after Nephele's adaptive output buffers).
//!
//! **Ticks.** An epoch is a unit of meaning (lateness, when windows close), so a
//! constraint never changes it. Without a constraint, timely's time is the epoch, and
//! an operator holds an epoch's rows until the epoch is complete: latency is at least
//! the epoch. With one, timely's time is `epoch << TICK_BITS | tick`: the source hands
//! each window on as a tick of its own, and the first stage's `Map` runs each tick's
//! rows as soon as the tick is complete, in serial order, calling `end_of_epoch` only
//! when the whole epoch is. Results made from rows come at their tick; results made at
//! the end of an epoch at the epoch's last tick (`Ticks::end`), which no source uses,
//! so they follow the epoch's rows. What waits for the whole epoch still does: a later
//! stage (its rows are keyed by a hash over the epoch), a keyed merge, the end of an
//! epoch. The rows each stream function sees, their order, their epochs, and the
//! output are those of a run without ticks.
//!
//! **Stamps.** Every window carries `born`, when its oldest row came into Braid (the
//! source read it, or a paced source's schedule released it), and `sent`, when its
//! producer handed it on (nanoseconds since the run started). A window made from
//! others takes the oldest `born` among them, except the results made at the end of
//! an epoch, which take the newest (they are caused by the epoch closing). Operators
//! note the time in queues (`now - sent`) and the age of what they receive
//! (`now - born`); sinks the end-to-end latency. Each row of a window counts as one
//! sample of its window's latency (quantiles are those of rows); one clock reading per
//! window and operator: no per-row cost.
//!
//! **Controller.** Worker 0 reads the end-to-end latencies of each interval and sets
//! W, the rows in a window (a tick), for every reader: the largest that meets the
//! constraint, more when the source falls behind its schedule (throughput first).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bits of timely's time below the epoch under a latency constraint.
pub const TICK_BITS: u32 = 16;

/// "No stamp" in a window's `born` and `sent`.
pub const UNSTAMPED: u64 = u64::MAX;

/// How timely's time maps to epochs in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticks {
    bits: u32,
}

impl Ticks {
    /// Timely's time is the epoch (no constraint).
    pub const OFF: Ticks = Ticks { bits: 0 };
    /// Ticks within each epoch.
    pub const ON: Ticks = Ticks { bits: TICK_BITS };

    /// Whether epochs are cut into ticks.
    pub fn on(self) -> bool {
        self.bits > 0
    }

    /// The epoch of time `t` (the end of input stays the end of input).
    #[inline]
    pub fn epoch(self, t: u64) -> u64 {
        if t == u64::MAX {
            u64::MAX
        } else {
            t >> self.bits
        }
    }

    /// The first time of epoch `e` (where a source opens it).
    #[inline]
    pub fn first(self, e: u64) -> u64 {
        e << self.bits
    }

    /// The last time of epoch `e`: where results made at its end go; no source uses it.
    #[inline]
    pub fn end(self, e: u64) -> u64 {
        (e << self.bits) | ((1u64 << self.bits) - 1)
    }

    /// Whether the output `probe` watches has passed epoch `c` (all its ticks): a
    /// checkpoint of `c` is then written everywhere.
    pub(crate) fn passed(self, probe: &timely::dataflow::ProbeHandle<u64>, c: u64) -> bool {
        !probe.less_equal(&self.end(c))
    }

    /// The time after `t` for the source's next window within the same epoch (`t`
    /// itself once the epoch's ticks are used up: later windows share the last one).
    #[inline]
    pub fn next(self, t: u64) -> u64 {
        let mask = (1u64 << self.bits) - 1;
        if self.bits == 0 || t & mask >= mask - 1 {
            t
        } else {
            t + 1
        }
    }

    /// The largest epoch a run with these ticks can hold.
    pub fn max_epoch(self) -> u64 {
        (u64::MAX >> self.bits) - 1
    }
}

/// Buckets per doubling of a latency histogram.
const PER_DOUBLING: u32 = 4;
/// Buckets: from 1 ns up past 2^40 ns (18 minutes).
const BUCKETS: usize = 42 * PER_DOUBLING as usize;

/// The newer of two stamps, either of which may be [`UNSTAMPED`].
#[inline]
pub fn newest(a: u64, b: u64) -> u64 {
    match (a, b) {
        (UNSTAMPED, x) | (x, UNSTAMPED) => x,
        (a, b) => a.max(b),
    }
}

/// A histogram of latencies, written by any thread without locks: buckets of a
/// quarter of a doubling (a quantile is its bucket's upper bound, at most 19% high).
/// Counts only grow; an interval's distribution is the difference of two readings.
pub struct Hist {
    buckets: Box<[AtomicU64]>,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl std::fmt::Debug for Hist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hist({} samples)", self.read().total())
    }
}

/// The bucket of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns < 2 {
        return 0;
    }
    let log = 63 - ns.leading_zeros(); // 2^log <= ns
    let frac = if log >= 2 {
        (ns >> (log - 2)) & 3
    } else {
        (ns << (2 - log)) & 3
    };
    ((log * PER_DOUBLING) as usize + frac as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `k`, in nanoseconds.
fn upper(k: usize) -> u64 {
    let log = k as u32 / PER_DOUBLING;
    let frac = (k as u32 % PER_DOUBLING) as u64;
    let base = 1u64 << log;
    base + (base * (frac + 1)) / PER_DOUBLING as u64
}

impl Hist {
    /// Counts one latency.
    #[inline]
    pub fn record(&self, d: Duration) {
        self.record_ns(d.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Counts one latency in nanoseconds.
    #[inline]
    pub fn record_ns(&self, ns: u64) {
        self.record_rows(ns, 1);
    }

    /// Counts a latency in nanoseconds `rows` times (a window's rows, each a sample).
    #[inline]
    pub fn record_rows(&self, ns: u64, rows: u64) {
        if rows > 0 {
            self.buckets[bucket(ns)].fetch_add(rows, Ordering::Relaxed);
        }
    }

    /// The counts so far.
    pub fn read(&self) -> Counts {
        Counts(
            self.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        )
    }
}

/// A histogram's counts at one reading (or between two: [`Counts::since`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(Vec<u64>);

impl Counts {
    /// The latencies counted after `earlier` (a reading of the same histogram).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts(
            self.0
                .iter()
                .enumerate()
                .map(|(k, &n)| n - earlier.0.get(k).copied().unwrap_or(0))
                .collect(),
        )
    }

    /// How many latencies.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The `q` quantile (0..=1), as its bucket's upper bound; None without samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.total();
        if n == 0 {
            return None;
        }
        let rank = ((n as f64 * q).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (k, &c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Duration::from_nanos(upper(k)));
            }
        }
        None
    }
}

/// What one operator measures: time windows waited in queues before it, and the age
/// of the windows it receives.
#[derive(Debug, Default)]
pub struct NodeLatency {
    /// The node's name (`Map(query1)`, `Merge`); every worker's instance shares it.
    pub name: String,
    /// `now - sent` of each window received: the edge into the node.
    pub queue: Hist,
    /// `now - born` of each window received: the latency up to the node.
    pub reach: Hist,
    /// `now - mark` of each marked window received: the latency from the input of the
    /// operator where a constrained part of the plan begins (`Sink::latency_from`).
    pub segment: Hist,
    /// This node is where that part begins: it marks the windows it receives.
    pub starts: bool,
}

/// A run's latency measurements and the controller's setting.
#[derive(Debug, Default)]
pub struct Latencies {
    /// End to end, at the sinks: `written - born` of each window, once per row.
    pub end_to_end: Hist,
    /// Per operator, in the order they were built (sources first).
    pub nodes: Mutex<Vec<Arc<NodeLatency>>>,
    /// Rows per window (per tick) the sources cut now (0: as the source makes them).
    pub window: AtomicUsize,
    /// The flush timeout, in nanoseconds (0: none): a paced source's window goes once
    /// its oldest row has waited this long for the rest, full or not.
    pub flush_ns: AtomicU64,
    /// `sent - born` of each window a source sent, once per row: the time its rows
    /// waited in the source's output buffer (for its window to fill).
    pub buffered: Hist,
    /// The controller's decisions, in order.
    pub trace: Mutex<Vec<Decision>>,
    /// The operator whose input ends the part of the plan the constraint covers (None:
    /// the whole plan; [`braid_plan::plan::Sink::latency_to`]): the controller and the
    /// report judge its age on arrival instead of the latency end to end.
    pub part: std::sync::OnceLock<String>,
    /// The operator whose input begins the part of the plan the constraint covers (None:
    /// the source; [`braid_plan::plan::Sink::latency_from`]): it marks the windows it
    /// receives, and the part's latency is counted from that mark.
    pub start: std::sync::OnceLock<String>,
    /// `written - mark` at the sinks, once per row, when the part ends there.
    pub segment_end: Hist,
    /// The stages the controller may chain onto the reader's worker, when the plan has
    /// any and the run has several workers ([`Chain`]).
    pub chain: std::sync::OnceLock<Chain>,
}

/// Run-time chaining (after Nephele's dynamic task chaining) of the stages a plan runs
/// from its source on ([`braid_plan::plan::Plan::chainable_stages`]) onto worker 0,
/// which reads the source: chained, their rows cross no exchange; split, they go to
/// their partitions' workers as planned.
///
/// - **Where.** Chained, a first stage that keeps no state gives every row to worker
///   0's own partitions (a stateless function's output depends on the row alone); every
///   other chained stage has all its partitions on worker 0, their state handed over
///   by the workers that held them (its checkpoint bytes, in memory: [`Chain::give`],
///   [`Chain::take`]).
/// - **When.** A way holds for whole epochs: the first stage's splitter (one, on worker
///   0) reads the way wanted at its first window of each epoch ([`Chain::record`]) and
///   a change begins there; every later splitter and `Map` reads the way of an epoch
///   ([`Chain::at`]), always after that record (their rows of the epoch come through
///   the first splitter). A `Map` switches between epochs: the workers losing
///   partitions hand them over once every earlier epoch is done there, the worker
///   gaining them waits for them before its first row of the new way.
#[derive(Debug)]
pub struct Chain {
    /// Per stage from the source on (stage 0 first): whether its function keeps no
    /// state. Only these stages are chained.
    pub stages: Vec<bool>,
    /// The way wanted now (the controller's, or the configuration's).
    pub on: std::sync::atomic::AtomicBool,
    /// Set by the run's configuration (`RunConfig::chain`): the controller leaves it.
    pub forced: bool,
    /// Chained and split in turn every this many epochs, chained first (a test's and
    /// a benchmark's way to run hand-overs in both directions; the controller leaves
    /// it).
    pub alternate: Option<u64>,
    ways: Mutex<Ways>,
    /// Partitions' state on its way to another worker, by (stage, partition, the first
    /// epoch of the way it is handed over for): None for a partition never made (the
    /// new worker makes it fresh, as the old one would). The epoch keeps hand-overs of
    /// successive switches apart: a worker may reach the next switch before the worker
    /// it handed a partition to has taken it.
    handed: Mutex<Handed>,
    /// Partitions handed over so far, and the bytes of their state.
    gave: AtomicU64,
    gave_bytes: AtomicU64,
}

/// What chaining did in a run ([`LatencyReport::chaining`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainReport {
    /// Stages that could be chained (from the source on).
    pub stages: usize,
    /// Of them, those whose partitions move with their state.
    pub keeping_state: usize,
    /// Epochs at which the way changed.
    pub switches: Vec<(u64, bool)>,
    /// Partitions handed from one worker to another, and the bytes of their state.
    pub handed: u64,
    /// See `handed`.
    pub handed_bytes: u64,
}

/// State handed over: by (stage, partition, first epoch of the way), the bytes.
type Handed = std::collections::HashMap<(usize, u32, u64), Option<Vec<u8>>>;

#[derive(Debug, Default)]
struct Ways {
    /// (first epoch, chained) of every way taken, in order; the first from epoch 0.
    switches: Vec<(u64, bool)>,
    /// The latest epoch the first splitter recorded.
    seen: Option<u64>,
}

impl Chain {
    /// Chaining of `stages` (their statelessness, from the source on), chained from
    /// the start when `on`.
    pub fn new(stages: Vec<bool>, on: bool, forced: bool, alternate: Option<u64>) -> Chain {
        let on = on || alternate.is_some();
        Chain {
            stages,
            on: std::sync::atomic::AtomicBool::new(on),
            forced: forced || alternate.is_some(),
            alternate: alternate.map(|n| n.max(1)),
            ways: Mutex::new(Ways {
                switches: vec![(0, on)],
                seen: None,
            }),
            handed: Mutex::default(),
            gave: AtomicU64::new(0),
            gave_bytes: AtomicU64::new(0),
        }
    }

    /// What chaining did so far.
    pub fn report(&self) -> ChainReport {
        let w = self.ways.lock().expect("chain ways");
        ChainReport {
            stages: self.stages.len(),
            keeping_state: self.stages.iter().filter(|&&stateless| !stateless).count(),
            switches: w.switches[1..].to_vec(),
            handed: self.gave.load(Ordering::Relaxed),
            handed_bytes: self.gave_bytes.load(Ordering::Relaxed),
        }
    }

    /// Whether chaining is wanted now.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Whether stage `stage` (from the source on, 0 first) is one chained, and then
    /// whether its function keeps no state.
    pub fn stage(&self, stage: usize) -> Option<bool> {
        self.stages.get(stage).copied()
    }

    /// The first stage's splitter, for each window, in order, of epoch `epoch`: the way
    /// of the epoch. At an epoch's first window a change wanted since begins.
    pub fn record(&self, epoch: u64) -> bool {
        let mut w = self.ways.lock().expect("chain ways");
        let last = *w.switches.last().expect("a first way");
        if w.seen.is_some_and(|s| s >= epoch) {
            return Self::way(&w.switches, epoch);
        }
        w.seen = Some(epoch);
        let want = match self.alternate {
            Some(n) => (epoch / n).is_multiple_of(2),
            None => self.on(),
        };
        // (The way of epoch 0 is the one the run began with: the `Map`s placed their
        // partitions by it.)
        if want != last.1 && epoch > last.0 {
            w.switches.push((epoch, want));
        }
        Self::way(&w.switches, epoch)
    }

    /// Whether epoch `epoch` runs chained.
    pub fn at(&self, epoch: u64) -> bool {
        Self::way(&self.ways.lock().expect("chain ways").switches, epoch)
    }

    fn way(switches: &[(u64, bool)], epoch: u64) -> bool {
        switches
            .iter()
            .rev()
            .find(|s| s.0 <= epoch)
            .map_or(switches[0].1, |s| s.1)
    }

    /// The way of epoch `epoch` as recorded so far, and how many ways recorded so far
    /// begin at or before it: a `Map` starting at `epoch` takes that way and then every
    /// way from that index on ([`Chain::switch`]), in turn, including one recorded
    /// later at `epoch` itself (a run resumed from a checkpoint starts at an epoch whose
    /// way its first splitter has yet to record).
    pub fn settled(&self, epoch: u64) -> (bool, usize) {
        let w = self.ways.lock().expect("chain ways");
        let n = w.switches.iter().take_while(|s| s.0 <= epoch).count();
        (Self::way(&w.switches, epoch), n)
    }

    /// The `i`th way recorded (0: the one the run began with), with its first epoch.
    pub fn switch(&self, i: usize) -> Option<(u64, bool)> {
        self.ways
            .lock()
            .expect("chain ways")
            .switches
            .get(i)
            .copied()
    }

    /// Hands partition `partition` of stage `stage` (its state's checkpoint bytes, None
    /// when it was never made) to the worker taking it at the switch to the way that
    /// begins at epoch `at`.
    pub fn give(&self, stage: usize, partition: u32, at: u64, state: Option<Vec<u8>>) {
        self.gave.fetch_add(1, Ordering::Relaxed);
        self.gave_bytes.fetch_add(
            state.as_ref().map_or(0, |b| b.len() as u64),
            Ordering::Relaxed,
        );
        self.handed
            .lock()
            .expect("chain hand-overs")
            .insert((stage, partition, at), state);
    }

    /// Forgets every hand-over (a new dataflow restores its partitions from a
    /// checkpoint instead).
    pub fn clear_handed(&self) {
        self.handed.lock().expect("chain hand-overs").clear();
    }

    /// The state of every one of `partitions` of stage `stage` handed over at the
    /// switch to the way that begins at epoch `at`, once all have been (None until
    /// then, taking none of them).
    pub fn take(
        &self,
        stage: usize,
        partitions: &[u32],
        at: u64,
    ) -> Option<Vec<(u32, Option<Vec<u8>>)>> {
        let mut h = self.handed.lock().expect("chain hand-overs");
        if !partitions.iter().all(|&p| h.contains_key(&(stage, p, at))) {
            return None;
        }
        Some(
            partitions
                .iter()
                .map(|&p| (p, h.remove(&(stage, p, at)).expect("checked")))
                .collect(),
        )
    }
}

/// Decides chaining by trial: both of the costs Nephele weighs (what the exchange
/// adds to latency, what the parallelism takes off) show in the end-to-end latency of
/// an interval run each way, so the controller runs one interval the other way every
/// `TRIAL_EVERY` decisions and keeps the way whose interval p99 was lower by a tenth.
/// A chained stage whose source falls behind its schedule (the reader's worker
/// saturated) is split at once, and the next trial of chaining waits twice as long
/// (up to 64 intervals). It starts split (the plan as written).
#[derive(Clone, Debug, Default)]
pub struct Chaining {
    chained: bool,
    /// The last interval p99 seen split and chained.
    seen: [Option<Duration>; 2],
    /// Decisions since the last trial.
    since: u32,
    /// This interval is a trial of the other way.
    trial: bool,
    /// Decisions between trials of chaining (doubled when chaining fell behind).
    every: u32,
}

/// Decisions between trials, at first.
pub const TRIAL_EVERY: u32 = 8;

impl Chaining {
    /// Split, no trial yet.
    pub fn new() -> Chaining {
        Chaining {
            every: TRIAL_EVERY,
            ..Chaining::default()
        }
    }

    /// Whether the stage is chained now.
    pub fn chained(&self) -> bool {
        self.chained
    }

    /// Takes one interval's p99 (None: too few rows to judge) and whether the source
    /// fell behind its schedule in it; returns whether to chain in the next.
    pub fn step(&mut self, p99: Option<Duration>, behind: bool) -> bool {
        let here = self.chained as usize;
        if behind && self.chained {
            // The reader's worker cannot carry the stage too: split, and try again
            // later than before.
            self.chained = false;
            self.trial = false;
            self.since = 0;
            self.seen[1] = None;
            self.every = (self.every * 2).min(64);
            return false;
        }
        if p99.is_some() {
            self.seen[here] = p99;
        }
        if self.trial {
            self.trial = false;
            self.since = 0;
            let keep = match (self.seen[here], self.seen[1 - here]) {
                (Some(t), Some(o)) => t.as_secs_f64() < 0.9 * o.as_secs_f64(),
                _ => false,
            };
            if !keep {
                self.chained = !self.chained;
            } else if self.chained {
                self.every = TRIAL_EVERY;
            }
            return self.chained;
        }
        self.since += 1;
        if self.since >= self.every && self.seen[here].is_some() && !behind {
            self.trial = true;
            self.chained = !self.chained;
        }
        self.chained
    }
}

/// One decision of the controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// Seconds since the run started.
    pub at: f64,
    /// Rows per window after the decision.
    pub window: usize,
    /// The interval's 99th percentile end to end, in seconds (0 when it wrote too few
    /// rows to judge).
    pub p99: f64,
    /// The source was behind its schedule.
    pub behind: bool,
    /// The flush timeout after the decision, in seconds (0: none).
    pub flush: f64,
    /// The interval's 99th percentile of the time rows waited in the source's buffer,
    /// in seconds (0 when unmeasured).
    pub buffered_p99: f64,
    /// The first stage is chained onto the reader's worker after the decision.
    pub chained: bool,
}

impl Latencies {
    /// Rows per window the sources cut now (`usize::MAX`: as the source makes them).
    pub fn window(&self) -> usize {
        match self.window.load(Ordering::Relaxed) {
            0 => usize::MAX,
            w => w,
        }
    }

    /// The flush timeout the sources keep now (None: none).
    pub fn flush(&self) -> Option<Duration> {
        match self.flush_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The measurements of operator `name` (every worker's instance shares them).
    pub fn node(&self, name: String) -> Arc<NodeLatency> {
        // Found or made under one lock: the workers render their copies of a node at
        // once, and two entries of one name would split its measurements (the report
        // reads the first).
        let mut v = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = v.iter().find(|n| n.name == name) {
            return n.clone();
        }
        let n = Arc::new(NodeLatency {
            starts: self.start.get().is_some_and(|s| *s == name),
            name,
            ..NodeLatency::default()
        });
        v.push(n.clone());
        n
    }

    /// A summary for the run report.
    pub fn summary(&self, constraint: Option<Duration>) -> LatencyReport {
        let e2e = self.end_to_end.read();
        let nodes = self
            .nodes
            .lock()
            .map(|v| {
                v.iter()
                    .map(|n| {
                        let (q, r) = (n.queue.read(), n.reach.read());
                        NodeReport {
                            name: n.name.clone(),
                            rows: q.total(),
                            queue_p50: q.quantile(0.5),
                            queue_p99: q.quantile(0.99),
                            reach_p50: r.quantile(0.5),
                            reach_p99: r.quantile(0.99),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let from = self.start.get().cloned();
        let part = match (self.part.get(), &from) {
            (Some(name), None) => Some((name.clone(), self.node(name.clone()).reach.read())),
            (Some(name), Some(_)) => Some((name.clone(), self.node(name.clone()).segment.read())),
            (None, Some(_)) => Some((SINKS.to_string(), self.segment_end.read())),
            (None, None) => None,
        }
        .map(|(name, c)| (name, c.quantile(0.99)));
        LatencyReport {
            constraint,
            rows: e2e.total(),
            p50: e2e.quantile(0.5),
            p99: e2e.quantile(0.99),
            max: e2e.quantile(1.0),
            part,
            from,
            nodes,
            trace: self.trace.lock().map(|t| t.clone()).unwrap_or_default(),
            chaining: self.chain.get().map(Chain::report),
        }
    }
}

/// Where a constrained part of the plan ends when it ends at the sinks (in reports).
pub const SINKS: &str = "the sinks";

/// The latencies a run measured.
#[derive(Clone, Debug, Default)]
pub struct LatencyReport {
    /// The constraint the run was held to, if any.
    pub constraint: Option<Duration>,
    /// Rows written by the sinks with a stamp (each one sample of its window's
    /// latency).
    pub rows: u64,
    /// End to end: median, 99th percentile and largest (bucket upper bounds).
    pub p50: Option<Duration>,
    /// See `p50`.
    pub p99: Option<Duration>,
    /// See `p50`.
    pub max: Option<Duration>,
    /// A constraint on a part of the plan: the operator whose input ends it, and the
    /// 99th percentile of the age of the windows it received (what is judged).
    pub part: Option<(String, Option<Duration>)>,
    /// The operator whose input begins the constrained part, when not the source: the
    /// part's latency (`part`'s p99) is then counted from there.
    pub from: Option<String>,
    /// Per operator.
    pub nodes: Vec<NodeReport>,
    /// The controller's decisions.
    pub trace: Vec<Decision>,
    /// What run-time chaining did, when the run could chain stages.
    pub chaining: Option<ChainReport>,
}

impl LatencyReport {
    /// The report in words, under a constraint (none without one): end to end and
    /// whether the constraint was met, W now, then one line per operator. The run's
    /// report (`braid run`) and `EXPLAIN ANALYZE` in the server print these.
    pub fn lines(&self) -> Vec<String> {
        let Some(c) = self.constraint else {
            return Vec::new();
        };
        let ms = |d: Option<Duration>| {
            d.map_or("-".to_string(), |d| {
                format!("{:.2} ms", d.as_secs_f64() * 1e3)
            })
        };
        let (judged, what) = match (&self.part, &self.from) {
            (Some((name, p99)), None) => (*p99, format!("p99 on arrival at {name}")),
            (Some((name, p99)), Some(from)) => {
                (*p99, format!("p99 from the input of {from} to {name}"))
            }
            (None, _) => (self.p99, "p99".to_string()),
        };
        let met = match judged {
            Some(p) if p <= c => "met",
            Some(_) => "missed",
            None => "nothing measured",
        };
        let w = self.trace.last().map_or(String::new(), |d| {
            let flush = match d.flush > 0.0 {
                true => format!(", flush timeout {:.2} ms", d.flush * 1e3),
                false => String::new(),
            };
            format!("; W last set to {} rows{flush}", d.window)
        });
        let mut lines = vec![format!(
            "latency end to end p50 {}, p99 {}, max {} over {} rows; max_latency {}: {met} ({what}{}){w}",
            ms(self.p50),
            ms(self.p99),
            ms(self.max),
            self.rows,
            braid_plan::explain::duration_text(c),
            match &self.part {
                Some(_) => format!(" {}", ms(judged)),
                None => String::new(),
            },
        )];
        if let Some(c) = &self.chaining {
            let to_chained = c.switches.iter().filter(|s| s.1).count();
            lines.push(format!(
                "  chaining: {} stage(s) ({} keeping state); the way changed {} times ({} to chained); {} partitions handed over with {} bytes of state",
                c.stages,
                c.keeping_state,
                c.switches.len(),
                to_chained,
                c.handed,
                c.handed_bytes
            ));
        }
        for n in &self.nodes {
            lines.push(format!(
                "  {}: queue before it p50 {}, p99 {}; age on arrival p50 {}, p99 {}",
                n.name,
                ms(n.queue_p50),
                ms(n.queue_p99),
                ms(n.reach_p50),
                ms(n.reach_p99)
            ));
        }
        lines
    }
}

/// One operator's latencies.
#[derive(Clone, Debug, Default)]
pub struct NodeReport {
    /// Its name.
    pub name: String,
    /// Rows it received with a stamp.
    pub rows: u64,
    /// Time in the queue before it: median and 99th percentile.
    pub queue_p50: Option<Duration>,
    /// See `queue_p50`.
    pub queue_p99: Option<Duration>,
    /// Age of the windows it received: median and 99th percentile.
    pub reach_p50: Option<Duration>,
    /// See `reach_p50`.
    pub reach_p99: Option<Duration>,
}

/// Where the window of `batch` that starts at row `from` ends (exclusive): after at
/// most `w` rows, and, given `span = (column, units)`, before the first row whose time
/// in `column` (ints; a row without one goes with the window it falls in) lies more than
/// `units` after the window's earliest: a paced source's flush timeout in event-time
/// units, so that no row waits longer than it for the window's last.
fn cut(
    batch: &braid_plan::batch::Batch,
    from: usize,
    w: usize,
    span: Option<(usize, u64)>,
) -> usize {
    let end = from.saturating_add(w.max(1)).min(batch.len());
    let Some((col, units)) = span else {
        return end;
    };
    let mut earliest: Option<i64> = None;
    for i in from..end {
        let t = batch.row(i).int(col);
        if let (Some(e), Some(t)) = (earliest, t) {
            if i > from && t.saturating_sub(e) > units as i64 {
                return i;
            }
        }
        earliest = match (earliest, t) {
            (Some(e), Some(t)) => Some(e.min(t)),
            (e, t) => e.or(t),
        };
    }
    end
}

/// Rows `from..end` of `batch` as a window of their own; the batch itself when that is
/// all of it (uncopied: `batch` is left empty).
fn take_rows(
    batch: &mut braid_plan::batch::Batch,
    from: usize,
    end: usize,
) -> braid_plan::batch::Batch {
    if from == 0 && end == batch.len() {
        return std::mem::replace(batch, braid_plan::batch::Batch::new(batch.arity()));
    }
    let mut piece = braid_plan::batch::Batch::with_capacity(batch.arity(), end - from);
    for k in from..end {
        piece.push_row_of(batch, k, batch.key(k));
    }
    piece
}

/// A source's batch handed on as windows (ticks), cut one at a time so that W and the
/// flush timeout may change between two: each window a copy of its rows, except that a
/// batch that needs no cut is handed on itself, uncopied; an empty batch is handed on
/// once, as it is (a heartbeat: time moved).
pub struct Pieces {
    batch: braid_plan::batch::Batch,
    len: usize,
    from: usize,
    gave: bool,
}

impl Pieces {
    /// The pieces of `batch`.
    pub fn new(batch: braid_plan::batch::Batch) -> Pieces {
        Pieces {
            len: batch.len(),
            batch,
            from: 0,
            gave: false,
        }
    }

    /// The next window: at most `w` rows, within `span` (see [`cut`]); None once every
    /// row was handed on.
    pub fn next(
        &mut self,
        w: usize,
        span: Option<(usize, u64)>,
    ) -> Option<braid_plan::batch::Batch> {
        if self.from >= self.len && (self.len > 0 || self.gave) {
            return None;
        }
        self.gave = true;
        let end = cut(&self.batch, self.from, w, span);
        let piece = take_rows(&mut self.batch, self.from, end);
        self.from = end;
        Some(piece)
    }
}

/// Cuts `batch` into windows of at most `w` rows, in order ([`Pieces`] with W fixed and
/// no flush timeout).
pub fn pieces(
    batch: braid_plan::batch::Batch,
    w: usize,
) -> impl Iterator<Item = braid_plan::batch::Batch> {
    let mut p = Pieces::new(batch);
    std::iter::from_fn(move || p.next(w, None))
}

/// Worker 0's side of the controller: every interval, the end-to-end latencies
/// measured since the last, and whether the source fell behind its schedule, make a
/// new W for every reader.
pub(crate) struct Steering {
    ctl: Controller,
    target: Duration,
    seen: Counts,
    last: std::time::Instant,
    interval: Duration,
    lag: Duration,
    /// Rows the source sent in this interval (the fill rate of a window).
    rows: u64,
    /// A paced source: the schedule's times of the first and last windows sent in
    /// this interval (the offered rate, even when the source is behind).
    due: Option<(Duration, Duration)>,
    /// A decision was taken.
    decided: bool,
    /// What the source's buffer had measured at the last decision.
    seen_buffered: Counts,
    /// The operator whose age on arrival is judged, under a constraint on a part of
    /// the plan; else the latency end to end.
    signal: Option<Arc<NodeLatency>>,
    /// Run-time chaining, when the plan has a stage for it.
    chaining: Chaining,
}

/// When the first decision comes.
const FIRST_DECISION: Duration = Duration::from_millis(10);

/// Fewest rows an interval must see written before the controller judges the latency.
const MIN_SAMPLES: u64 = 32;

impl Steering {
    /// Steers toward `target`, up to `window` rows (the plan's W) or more when the
    /// source falls behind. A paced source starts at one row per window: nothing is
    /// known of its rate yet, and a window bigger than what fills in time would hold
    /// its first rows back before the first decision. An unpaced one starts at the
    /// plan's W: its rows are all there, and a window fills at once.
    pub fn new(target: Duration, window: usize, paced: bool, latencies: &Latencies) -> Steering {
        let start = if paced { 1 } else { window.max(1) };
        latencies.window.store(start, Ordering::Relaxed);
        // Aimed at 80% of the constraint: a quantile read from the histogram can be a
        // bucket (up to 25%) high, and the dead band lets p99 sit near the aim.
        let ctl = Controller::new(target.mul_f64(0.8), start, 1, window.max(1 << 16));
        // An unpaced source sends what it has: nothing waits for a window to fill.
        if paced {
            latencies
                .flush_ns
                .store(ctl.flush().as_nanos() as u64, Ordering::Relaxed);
        }
        let signal = latencies.part.get().map(|n| latencies.node(n.clone()));
        let seen = judged(&signal, latencies);
        Steering {
            ctl,
            target,
            seen,
            signal,
            chaining: Chaining::new(),
            last: std::time::Instant::now(),
            interval: (target * 5).max(Duration::from_millis(50)),
            lag: Duration::ZERO,
            rows: 0,
            due: None,
            decided: false,
            seen_buffered: latencies.buffered.read(),
        }
    }

    /// Notes rows the source sent.
    pub fn sent(&mut self, rows: usize) {
        self.rows += rows as u64;
    }

    /// Notes how late the source's last window went against its schedule (`due`).
    pub fn lag(&mut self, late: Duration, due: Duration) {
        self.lag = self.lag.max(late);
        self.due = Some(match self.due {
            None => (due, due),
            Some((first, _)) => (first, due),
        });
    }

    /// Takes a decision when an interval has passed with enough windows measured, or
    /// at once when the source falls behind its schedule with windows smaller than what
    /// fills in time. `started`: when the run started (the trace's clock).
    pub fn poll(&mut self, latencies: &Latencies, started: std::time::Instant) {
        // The first decision comes early: until then W is one row.
        let due = match self.decided {
            true => self.interval,
            false => FIRST_DECISION.min(self.interval),
        };
        let elapsed = self.last.elapsed();
        // A window fills at the source's rate: one that takes more than half the
        // constraint to fill cannot meet it.
        // The offered rate: by the schedule when paced (a source behind it sends
        // slower than it is offered), else as sent.
        let secs = match self.due {
            Some((first, last)) if last > first => (last - first).as_secs_f64(),
            _ => elapsed.as_secs_f64(),
        };
        let fill = (self.rows > 0)
            .then(|| (self.rows as f64 / secs * self.target.as_secs_f64() * 0.5).max(1.0) as usize);
        // A source half a constraint behind its schedule with windows smaller than what
        // fills in time cannot wait for the interval's end (each window costs a round
        // of progress messages, and its backlog's latency grows with every one): W
        // goes up to that fill at once (at most every half constraint).
        let urgent = self.lag > self.target / 2
            && elapsed >= self.target / 2
            && fill.is_some_and(|f| f > self.ctl.window());
        if elapsed < due && !urgent {
            return;
        }
        let now = judged(&self.signal, latencies);
        let counts = now.since(&self.seen);
        let behind = self.lag > self.target;
        let p99 = match counts.total() >= MIN_SAMPLES {
            true => counts.quantile(0.99),
            false => None,
        };
        if p99.is_none() && fill.is_none() && !behind {
            return;
        }
        // Only W raised to the fill between two decisions.
        let between = urgent && elapsed < due;
        let w = match (between, fill) {
            (true, Some(f)) => self.ctl.raise_to(f),
            _ => self.ctl.step(p99, behind, fill),
        };
        // The flush timeout: what the constraint leaves for the source's buffer once
        // the rest of the path has taken its share.
        let buffered_now = latencies.buffered.read();
        let buffered = buffered_now.since(&self.seen_buffered);
        let buffered_p99 = match buffered.total() >= MIN_SAMPLES {
            true => buffered.quantile(0.99),
            false => None,
        };
        let flush = match (p99, buffered_p99) {
            (Some(p), Some(b)) => self.ctl.step_flush(p, b),
            _ => self.ctl.flush(),
        };
        if latencies.flush_ns.load(Ordering::Relaxed) != 0 {
            latencies
                .flush_ns
                .store(flush.as_nanos() as u64, Ordering::Relaxed);
        }
        // Chaining: a trial now and then, split when the reader falls behind.
        if let Some(chain) = latencies.chain.get().filter(|c| !c.forced) {
            if !between {
                let on = self.chaining.step(p99, behind);
                chain.on.store(on, Ordering::Relaxed);
            }
        }
        self.decided = true;
        latencies.window.store(w, Ordering::Relaxed);
        if let Ok(mut t) = latencies.trace.lock() {
            t.push(Decision {
                at: started.elapsed().as_secs_f64(),
                window: w,
                p99: p99.map_or(0.0, |d| d.as_secs_f64()),
                behind: behind || urgent,
                flush: latencies.flush().map_or(0.0, |d| d.as_secs_f64()),
                buffered_p99: buffered_p99.map_or(0.0, |d| d.as_secs_f64()),
                chained: latencies.chain.get().is_some_and(Chain::on),
            });
        }
        if p99.is_some() {
            self.seen = now;
        }
        if buffered_p99.is_some() || p99.is_some() {
            self.seen_buffered = buffered_now;
        }
        self.last = std::time::Instant::now();
        self.lag = Duration::ZERO;
        self.rows = 0;
        self.due = None;
    }
}

/// What the controller judges: the latency of the constrained part of the plan: on
/// arrival at the operator that ends it (`signal`) or at the sinks, from the source or
/// from the operator that begins it (`Latencies::start`).
fn judged(signal: &Option<Arc<NodeLatency>>, latencies: &Latencies) -> Counts {
    let from_start = latencies.start.get().is_some();
    match (signal, from_start) {
        (Some(n), false) => n.reach.read(),
        (Some(n), true) => n.segment.read(),
        (None, false) => latencies.end_to_end.read(),
        (None, true) => latencies.segment_end.read(),
    }
}

/// Sizes W toward the largest that meets a latency constraint (after Nephele's
/// adaptive output buffers). Fed one interval's 99th percentile at a time:
///
/// - above the constraint: W shrinks in proportion (to 70% of what the measured
///   latency would allow, at least by a quarter, at most by 8x);
/// - below half of it: W grows by half, below a quarter it doubles (latency has
///   room: bigger windows cost fewer progress rounds);
/// - in between: W holds (a dead band: no oscillation around the target);
/// - when the source falls behind its schedule, W doubles whatever the latency, at
///   least to what fills in time at the offered rate (throughput first: behind,
///   latency only grows).
///
/// W stays within `[min, max]`.
///
/// Its second output is the flush timeout T (a paced source's window goes once its
/// oldest row has waited T, full or not: a rate that drops between decisions cannot
/// hold rows back for W rows' time): the target less what the rest of the path took
/// (the interval's end-to-end p99 less the p99 of the time rows waited in the
/// source's buffer), moved half way there per decision, within `[target / 20, target /
/// 2]`; it starts at half the target.
#[derive(Clone, Debug)]
pub struct Controller {
    target: Duration,
    window: usize,
    min: usize,
    max: usize,
    flush: Duration,
}

impl Controller {
    /// A controller for `target`, starting at `start` rows per window, within
    /// `[min, max]`.
    pub fn new(target: Duration, start: usize, min: usize, max: usize) -> Controller {
        let min = min.max(1);
        let max = max.max(min);
        Controller {
            target,
            window: start.clamp(min, max),
            min,
            max,
            flush: target / 2,
        }
    }

    /// The flush timeout now.
    pub fn flush(&self) -> Duration {
        self.flush
    }

    /// Takes one interval's end-to-end p99 and the p99 of the time rows waited in the
    /// source's buffer; returns the new flush timeout.
    pub fn step_flush(&mut self, p99: Duration, buffered: Duration) -> Duration {
        let rest = p99.saturating_sub(buffered);
        let (lo, hi) = (self.target / 20, self.target / 2);
        let aim = self.target.saturating_sub(rest).clamp(lo, hi);
        let next = (self.flush + aim) / 2;
        // Within a hundredth of the aim: there (halving never quite arrives).
        let near = next.max(aim) - next.min(aim) <= aim / 100;
        self.flush = if near { aim } else { next }.clamp(lo, hi);
        self.flush
    }

    /// Rows per window now.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Raises W to `fill` (within the bounds; never lowers it): what fills in time at
    /// the offered rate, when the source falls behind between decisions.
    pub fn raise_to(&mut self, fill: usize) -> usize {
        self.window = self.window.max(fill).clamp(self.min, self.max);
        self.window
    }

    /// Takes one interval's 99th percentile (None: too few windows were written),
    /// whether the source fell behind its schedule, and the most rows a window may
    /// take to fill within half the constraint at the source's rate (when known);
    /// returns the new W.
    pub fn step(&mut self, p99: Option<Duration>, behind: bool, fill: Option<usize>) -> usize {
        let w = self.window as f64;
        let next = if behind {
            // At least what fills in time at the offered rate: a source behind its
            // schedule needs the throughput now.
            (w * 2.0).max(fill.unwrap_or(0) as f64)
        } else {
            match p99 {
                // Too few windows to judge: what fills in time, if the rate is known.
                None => fill.map_or(w, |f| f as f64),
                Some(p) if p > self.target => {
                    let allowed = w * 0.7 * self.target.as_secs_f64() / p.as_secs_f64();
                    allowed.clamp(w / 8.0, w * 0.75)
                }
                Some(p) if p.as_secs_f64() < 0.25 * self.target.as_secs_f64() => w * 2.0,
                Some(p) if p.as_secs_f64() < 0.5 * self.target.as_secs_f64() => {
                    (w * 1.5).max(w + 1.0)
                }
                Some(_) => w,
            }
        };
        // Not beyond what fills in time (unless behind: throughput first).
        let next = match fill {
            Some(f) if !behind => next.min(f as f64),
            _ => next,
        };
        self.window = (next.floor() as usize).clamp(self.min, self.max);
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_keep_epochs_and_order() {
        let t = Ticks::ON;
        assert_eq!(t.epoch(t.first(7)), 7);
        assert_eq!(t.epoch(t.end(7)), 7);
        assert!(t.first(8) > t.end(7));
        let mut at = t.first(3);
        for _ in 0..100_000 {
            at = t.next(at);
        }
        assert_eq!(t.epoch(at), 3);
        assert!(at < t.end(3), "sources never reach the end tick");
        let off = Ticks::OFF;
        assert_eq!(
            (off.first(5), off.end(5), off.next(5), off.epoch(5)),
            (5, 5, 5, 5)
        );
        assert_eq!(t.epoch(u64::MAX), u64::MAX);
        assert!(t.end(t.max_epoch()) < u64::MAX);
    }

    #[test]
    fn pieces_keep_every_row_in_order() {
        use braid_plan::batch::{Batch, RowKey};
        let mut b = Batch::new(1);
        for i in 0..10u64 {
            b.push_ints(RowKey { seq: i, lane: 0 }, &[i as i64 * 7]);
        }
        let cut: Vec<Batch> = pieces(b.clone(), 3).collect();
        assert_eq!(
            cut.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        let rows: Vec<(u64, Option<i64>)> = cut
            .iter()
            .flat_map(|p| {
                p.rows()
                    .map(|r| (r.key().seq, r.int(0)))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            rows,
            (0..10).map(|i| (i, Some(i as i64 * 7))).collect::<Vec<_>>()
        );
        assert_eq!(pieces(b.clone(), 10).count(), 1);
        assert_eq!(pieces(b, usize::MAX).next().map(|p| p.len()), Some(10));
        // An empty batch goes once, as it is: a heartbeat.
        let empty: Vec<usize> = pieces(Batch::new(1), 4).map(|p| p.len()).collect();
        assert_eq!(empty, [0]);
    }

    #[test]
    fn the_newest_stamp_ignores_the_unstamped() {
        assert_eq!(newest(UNSTAMPED, UNSTAMPED), UNSTAMPED);
        assert_eq!(newest(UNSTAMPED, 5), 5);
        assert_eq!(newest(7, UNSTAMPED), 7);
        assert_eq!(newest(7, 5), 7);
        assert_eq!(newest(0, 5), 5);
    }

    #[test]
    fn buckets_bound_their_values() {
        for ns in [
            1u64,
            2,
            3,
            5,
            7,
            8,
            100,
            999,
            1000,
            123_456,
            10_000_000,
            1 << 39,
        ] {
            let k = bucket(ns);
            assert!(upper(k) >= ns, "{ns} in bucket {k} up to {}", upper(k));
            assert!(
                upper(k) as f64 <= ns as f64 * 1.25 + 1.0,
                "{ns}: bound {} too loose",
                upper(k)
            );
        }
        let h = Hist::default();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let c = h.read();
        let p50 = c.quantile(0.5).unwrap().as_secs_f64() * 1e3;
        let p99 = c.quantile(0.99).unwrap().as_secs_f64() * 1e3;
        assert!((50.0..=62.5).contains(&p50), "{p50}");
        assert!((99.0..=124.0).contains(&p99), "{p99}");
        let later = {
            h.record(Duration::from_secs(1));
            h.read()
        };
        let d = later.since(&c);
        assert_eq!(d.total(), 1);
        assert!(d.quantile(0.5).unwrap() >= Duration::from_secs(1));
    }

    /// A plant: a window of `w` rows at `rate` rows per ms waits `w / rate` ms to
    /// fill, plus `base` ms, with noise of +-`noise`.
    fn plant(w: usize, rate: f64, base: f64, noise: f64, step: usize) -> Duration {
        let wobble = ((step * 7919) % 100) as f64 / 100.0 * 2.0 - 1.0;
        Duration::from_secs_f64(((w as f64 / rate + base) * (1.0 + noise * wobble)) / 1e3)
    }

    #[test]
    fn raising_to_the_fill_never_lowers_and_keeps_the_bounds() {
        let mut c = Controller::new(Duration::from_millis(8), 1, 1, 1000);
        assert_eq!(c.raise_to(250), 250);
        assert_eq!(c.raise_to(100), 250, "never lowers");
        assert_eq!(c.raise_to(5000), 1000, "within the bounds");
        assert_eq!(c.window(), 1000);
    }

    #[test]
    fn the_controller_converges_below_the_target_and_holds() {
        for &(rate, base, target_ms) in &[
            (1.0, 0.5, 10.0),
            (16.0, 2.0, 10.0),
            (500.0, 1.0, 5.0),
            (0.1, 0.2, 50.0),
        ] {
            let target = Duration::from_secs_f64(target_ms / 1e3);
            let mut c = Controller::new(target, 1024, 1, 65_536);
            let mut ws = Vec::new();
            for step in 0..200 {
                let p = plant(c.window(), rate, base, 0.05, step);
                ws.push(c.step(Some(p), false, None));
            }
            let last = *ws.last().unwrap();
            // Meets the constraint...
            let lat = plant(last, rate, base, 0.05, 0);
            assert!(
                lat <= target.mul_f64(1.06),
                "rate {rate}: W {last} gives {lat:?}"
            );
            // ...with a window not far below the largest that does.
            let best = ((target_ms / 1.05 - base) * rate).max(1.0);
            assert!(
                last as f64 >= (best * 0.33).min(best - 1.0).max(1.0),
                "rate {rate}: W {last}, the best is about {best}"
            );
            // And holds: no change over the last 100 steps (noise within the band).
            let tail = &ws[100..];
            assert!(tail.iter().all(|&w| w == last), "rate {rate}: {tail:?}");
        }
    }

    #[test]
    fn the_controller_respects_bounds_and_puts_throughput_first_when_behind() {
        let target = Duration::from_millis(10);
        let mut c = Controller::new(target, 64, 4, 256);
        for _ in 0..50 {
            c.step(Some(Duration::from_secs(1)), false, None);
        }
        assert_eq!(c.window(), 4, "never below min");
        for _ in 0..50 {
            c.step(Some(Duration::from_micros(1)), false, None);
        }
        assert_eq!(c.window(), 256, "never above max");
        let mut c = Controller::new(target, 8, 1, 1024);
        assert_eq!(c.step(Some(Duration::from_secs(1)), true, Some(2)), 16);
        assert_eq!(
            c.step(None, true, Some(300)),
            300,
            "behind: what fills in time"
        );
        let mut c = Controller::new(target, 16, 1, 1024);
        assert_eq!(c.step(None, false, None), 16, "no samples: hold");
        assert_eq!(c.step(None, false, Some(5)), 5, "what fills in time");
        assert_eq!(
            c.step(None, false, Some(40)),
            40,
            "no samples: what fills in time"
        );
        assert_eq!(c.step(Some(Duration::from_micros(1)), false, Some(5)), 5);
    }

    #[test]
    fn the_flush_timeout_leaves_the_rest_of_the_path_its_share_and_keeps_its_bounds() {
        let target = Duration::from_millis(10);
        let ms = Duration::from_millis;
        let mut c = Controller::new(target, 1, 1, 1024);
        assert_eq!(c.flush(), ms(5), "starts at half the target");
        // The rest of the path takes 7 ms (p99 9 ms, 2 of them in the buffer): T goes
        // to the 3 ms left, half way per decision, and stays there.
        let ts: Vec<Duration> = (0..20).map(|_| c.step_flush(ms(9), ms(2))).collect();
        assert_eq!(ts[0], Duration::from_micros(4000), "half way from 5 to 3");
        assert!(ts.windows(2).all(|w| w[1] <= w[0]), "no overshoot: {ts:?}");
        let last = *ts.last().unwrap();
        assert!(
            last >= ms(3) && last < Duration::from_micros(3010),
            "{last:?}"
        );
        // The rest takes more than the target: the floor, a twentieth.
        for _ in 0..40 {
            c.step_flush(ms(30), ms(1));
        }
        assert_eq!(c.flush(), Duration::from_micros(500));
        // Nothing else on the path: up to half the target, never beyond.
        for _ in 0..40 {
            c.step_flush(ms(1), ms(1));
        }
        assert_eq!(c.flush(), ms(5));
    }

    #[test]
    fn cuts_within_a_span_fall_where_a_row_would_wait_too_long() {
        use braid_plan::batch::{Batch, RowKey};
        let mut b = Batch::new(2);
        // Times: a burst (0..=4), a gap, then rows 10 apart.
        let times = [0i64, 1, 2, 3, 4, 100, 110, 120, 130];
        for (i, t) in times.iter().enumerate() {
            b.push_ints(
                RowKey {
                    seq: i as u64,
                    lane: 0,
                },
                &[*t, i as i64],
            );
        }
        let lens = |w: usize, span: Option<(usize, u64)>| {
            let mut p = Pieces::new(b.clone());
            let (mut out, mut seqs) = (Vec::new(), Vec::new());
            while let Some(piece) = p.next(w, span) {
                seqs.extend(piece.rows().map(|r| r.key().seq));
                out.push(piece.len());
            }
            // Every row once, in order.
            assert_eq!(seqs, (0..9).collect::<Vec<_>>());
            out
        };
        assert_eq!(lens(4, None), [4, 4, 1], "W alone");
        assert_eq!(
            lens(100, Some((0, 15))),
            [5, 2, 2],
            "the burst, then two 10 apart"
        );
        assert_eq!(lens(3, Some((0, 15))), [3, 2, 2, 2], "the smaller cut wins");
        assert_eq!(lens(100, Some((0, 1000))), [9], "nothing to cut");
        // A batch taken whole is the batch itself.
        let mut whole = b.clone();
        let n = whole.len();
        assert_eq!(take_rows(&mut whole, 0, n).len(), 9);
        assert_eq!(whole.len(), 0);
    }

    #[test]
    fn chaining_is_tried_kept_when_better_and_split_when_the_reader_falls_behind() {
        let ms = Duration::from_millis;
        let mut c = Chaining::new();
        assert!(!c.chained(), "starts split");
        // Split, p99 5 ms: the eighth decision starts a trial of chaining.
        let ways: Vec<bool> = (0..TRIAL_EVERY)
            .map(|_| c.step(Some(ms(5)), false))
            .collect();
        assert_eq!(ways.iter().filter(|&&w| w).count(), 1);
        assert!(*ways.last().unwrap(), "{ways:?}");
        // The trial interval, chained: 4.8 ms is not a tenth better: back to split.
        assert!(!c.step(Some(Duration::from_micros(4800)), false));
        // Equal latencies both ways: chained only in one trial interval of every nine.
        let ways: Vec<bool> = (0..90).map(|_| c.step(Some(ms(5)), false)).collect();
        assert_eq!(ways.iter().filter(|&&w| w).count(), 10, "{ways:?}");
        // A trial that is better by more than a tenth is kept.
        let mut c = Chaining::new();
        for _ in 0..TRIAL_EVERY {
            c.step(Some(ms(5)), false);
        }
        assert!(c.chained(), "on trial");
        assert!(c.step(Some(ms(2)), false), "kept: 2 ms against 5");
        for _ in 0..3 {
            assert!(c.step(Some(ms(2)), false));
        }
        // Chained, the source falls behind: split at once...
        assert!(!c.step(Some(ms(2)), true));
        // ...and the next trial of chaining comes after 16 decisions, not 8.
        let ways: Vec<bool> = (0..16).map(|_| c.step(Some(ms(5)), false)).collect();
        assert_eq!(ways.iter().position(|&w| w), Some(15), "{ways:?}");
        // No trial while behind, none without a measurement.
        let mut c = Chaining::new();
        for _ in 0..40 {
            assert!(!c.step(Some(ms(5)), true));
        }
        let mut c = Chaining::new();
        for _ in 0..40 {
            assert!(!c.step(None, false));
        }
    }
}
