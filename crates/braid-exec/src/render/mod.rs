//! Renders a physical plan onto a timely dataflow, one file per plan node.
//!
//! Every stream between operators is a stream of [`Window`]s: a batch of rows plus the
//! worker (`to`) and logical node (`node`) it is addressed to. Exchange channels route
//! windows by `to`; logical nodes (tree splitters, window splitters, partitions) are
//! placed on workers by `braid_plan::placement`, the same functions EXPLAIN uses.

// Parquet and Arrow files, Kafka: compiled in with their features (on by default);
// without, the `_off` modules refuse them by name.
#[cfg(feature = "parquet")]
mod columnar;
#[cfg(not(feature = "parquet"))]
#[path = "columnar_off.rs"]
mod columnar;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(not(feature = "kafka"))]
#[path = "kafka_off.rs"]
mod kafka;
mod map;
mod merge;
mod route;
mod schedule;
pub(crate) mod sink;
mod split;
mod stash;

pub use columnar::ipc_stream;

pub use split::WindowSplitter;

use crate::error::Result;
use crate::shared::Shared;
use braid_plan::batch::Batch;
use braid_plan::explain::NodeAt;
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, Source, SourceSpec};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::{Concatenate, Input, Probe};
use timely::dataflow::{InputHandle, ProbeHandle, Scope, Stream};

/// A batch of rows addressed to a worker and a logical node on it.
///
/// The rows are immutable once given, and shared: a splitter hands one window to every
/// worker of its process that has enough rows in it, each with the list of its own
/// rows, instead of copying those rows out. Between processes a window is serialized.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Window {
    /// Destination worker (the exchange hash).
    pub to: u64,
    /// Destination logical node (tree node, window splitter); 0 where unused.
    pub node: u64,
    /// The rows.
    pub batch: Arc<Batch>,
    /// The rows of `batch` this window is for, ascending (a window several workers
    /// share); all of them when None.
    pub rows: Option<Vec<u32>>,
    /// For a split tree's leaf: the residue class of its partitions. A broadcast row
    /// of this window is for the partitions of its lane's class within this class.
    pub narrow: Option<(u64, u64)>,
    /// When its oldest row came into Braid, in nanoseconds since the run started
    /// ([`crate::qos::UNSTAMPED`] when the run takes no latency stamps).
    pub born: u64,
    /// When its producer handed it on (as `born`).
    pub sent: u64,
    /// When its oldest row reached the input of the operator where the part of the
    /// plan a latency constraint covers begins (`Sink::latency_from`), as `born`;
    /// [`crate::qos::UNSTAMPED`] before it, or without one. Carried on as `born` is.
    #[serde(default = "unstamped")]
    pub mark: u64,
    /// Its rows' epoch, read where timely's time is a granule of several epochs
    /// ([`crate::shared::Granule::epoch`]); elsewhere the time says it (and this may
    /// be 0).
    #[serde(default)]
    pub epoch: u64,
}

fn unstamped() -> u64 {
    crate::qos::UNSTAMPED
}

/// No stamps: (born, mark) both [`crate::qos::UNSTAMPED`].
pub(crate) const UNSTAMPED2: (u64, u64) = (crate::qos::UNSTAMPED, crate::qos::UNSTAMPED);

/// Notes the windows an operator received at `now`: time in the queue before it and
/// age on arrival, once per row ([`crate::qos`]).
/// The operator where a constrained part of the plan begins marks them.
pub(crate) fn note_arrivals(m: &crate::qos::NodeLatency, now: u64, windows: &mut [Window]) {
    for w in windows
        .iter_mut()
        .filter(|w| w.sent != crate::qos::UNSTAMPED)
    {
        let rows = w.len() as u64;
        m.queue.record_rows(now.saturating_sub(w.sent), rows);
        m.reach.record_rows(now.saturating_sub(w.born), rows);
        if m.starts {
            w.mark = now;
        }
        if w.mark != crate::qos::UNSTAMPED {
            m.segment.record_rows(now.saturating_sub(w.mark), rows);
        }
    }
}

impl Window {
    /// The rows this window is for.
    pub fn len(&self) -> usize {
        self.rows.as_ref().map_or(self.batch.len(), |r| r.len())
    }

    /// Whether the window is for no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A window of all of `batch`, for `node` on worker `to`.
    pub fn new(to: u64, node: u64, batch: Batch) -> Window {
        Window {
            to,
            node,
            batch: Arc::new(batch),
            rows: None,
            narrow: None,
            born: crate::qos::UNSTAMPED,
            sent: crate::qos::UNSTAMPED,
            mark: crate::qos::UNSTAMPED,
            epoch: 0,
        }
    }

    /// This window as one of epoch `epoch` (see [`Window::epoch`]).
    pub fn at(mut self, epoch: u64) -> Window {
        self.epoch = epoch;
        self
    }

    /// This window with mark `mark` (see [`Window::mark`]).
    pub fn marked(mut self, mark: u64) -> Window {
        self.mark = mark;
        self
    }

    /// This window with stamps `born` and `sent`.
    pub fn stamped(mut self, born: u64, sent: u64) -> Window {
        self.born = born;
        self.sent = sent;
        self
    }

    /// Calls `f` with the index and key of every row this window is for, in order.
    #[inline]
    pub fn for_each_row(&self, mut f: impl FnMut(usize, &braid_plan::batch::RowKey)) {
        let keys = self.batch.keys();
        match &self.rows {
            None => keys.iter().enumerate().for_each(|(i, k)| f(i, k)),
            Some(rows) => rows.iter().for_each(|&i| f(i as usize, &keys[i as usize])),
        }
    }

    /// The rows, to change: in place when no one else holds them, else a copy.
    pub fn batch_mut(&mut self) -> &mut Batch {
        Arc::make_mut(&mut self.batch)
    }
}

/// The container builder of every Braid stream.
pub type WindowBuilder = CapacityContainerBuilder<Vec<Window>>;

/// A stream of windows.
pub type Windows<'s> = Stream<'s, u64, Vec<Window>>;

/// The input handle sources feed.
pub type Feeder = InputHandle<u64, WindowBuilder>;

pub use crate::checkpoint::{Barrier, Control};

/// Checkpoint barriers, broadcast to every worker.
pub(crate) type Barriers<'s> = Stream<'s, u64, Vec<Barrier>>;

/// Exchange pact routing a window to worker `to`.
pub(crate) fn by_to(
) -> timely::dataflow::channels::pact::Exchange<Window, impl FnMut(&Window) -> u64 + 'static> {
    timely::dataflow::channels::pact::Exchange::new(|w: &Window| w.to)
}

/// Exchange pact sending every window to one worker.
pub(crate) fn to_worker(
    w: usize,
) -> timely::dataflow::channels::pact::Exchange<Window, impl FnMut(&Window) -> u64 + 'static> {
    timely::dataflow::channels::pact::Exchange::new(move |_: &Window| w as u64)
}

/// Catches a panic of user code an operator runs (a registered routing function or
/// combiner) and fails the run with an error naming it.
#[derive(Clone)]
pub(crate) struct Guard {
    what: String,
    shared: std::sync::Arc<Shared>,
}

impl Guard {
    /// A guard for user code described as `what` (e.g. "routing function `f`").
    pub(crate) fn new(what: String, shared: &std::sync::Arc<Shared>) -> Guard {
        Guard {
            what,
            shared: shared.clone(),
        }
    }
}

/// Runs `f`, under `guard` when there is one.
pub(crate) fn guarded(guard: Option<&Guard>, f: impl FnOnce()) {
    match guard {
        None => f(),
        Some(g) => {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            if let Err(payload) = ran {
                g.shared.user_code_panicked(&g.what, payload.as_ref());
            }
        }
    }
}

/// What rendering needs to know about the worker.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    pub index: usize,
    pub peers: usize,
    /// Workers per process.
    pub threads: usize,
}

impl Place {
    /// The workers of this worker's process.
    pub fn process(&self) -> std::ops::Range<usize> {
        let first = self.index - self.index % self.threads.max(1);
        first..(first + self.threads.max(1)).min(self.peers)
    }
}

/// Builds the dataflow of `plan` in `scope`, fed by `input`, observed by `probe`.
pub(crate) fn render<'s>(
    scope: Scope<'s, u64>,
    plan: &Plan,
    registry: &Registry,
    (input, control): (&mut Feeder, Option<&mut Control>),
    probe: &ProbeHandle<u64>,
    place: Place,
    shared: &std::sync::Arc<Shared>,
) -> Result<()> {
    use timely::dataflow::operators::vec::Broadcast;
    use timely::dataflow::operators::ToStream;
    let barriers = match control {
        Some(c) => scope.input_from(c).broadcast(),
        None => Vec::<Barrier>::new().to_stream(scope),
    };
    let plans = match plan {
        Plan::Together(plans) => plans.as_slice(),
        one => std::slice::from_ref(one),
    };
    let mut cx = Cx {
        scope,
        registry,
        input,
        place,
        shared,
        plan: 0,
        late_read: false,
        stage_base: 0,
        lates: Vec::new(),
        leaf: None,
        ticks: None,
        barriers,
    };
    let mut outs = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        cx.plan = i;
        cx.late_read = plans
            .iter()
            .any(|r| matches!(r.leaf_source().spec, SourceSpec::Late { of } if of == i));
        cx.lates.push(Vec::new());
        (cx.leaf, cx.ticks) = (None, None);
        outs.push(node(&mut cx, p, 0)?);
        cx.stage_base += p.maps();
    }
    match outs.len() {
        1 => outs.remove(0).probe_with(probe),
        _ => scope.concatenate(outs).probe_with(probe),
    };
    Ok(())
}

/// What rendering one plan of a dataflow needs.
struct Cx<'a, 's> {
    scope: Scope<'s, u64>,
    registry: &'a Registry,
    input: &'a mut Feeder,
    place: Place,
    shared: &'a std::sync::Arc<Shared>,
    /// Which plan of a [`Plan::Together`] is being rendered (0 for other plans).
    plan: usize,
    /// A later plan reads this plan's late rows.
    late_read: bool,
    /// Maps in the plans rendered before this one (stage numbers count on from them).
    stage_base: usize,
    /// Per plan rendered so far, the late rows of its Maps.
    lates: Vec<Vec<Windows<'s>>>,
    /// The plan's input as its first split reads it (once rendered).
    leaf: Option<Windows<'s>>,
    /// The epochs of the plan's input (see [`map::ticks`]), made for the first Map that
    /// wants them and shared by every stage's.
    ticks: Option<Windows<'s>>,
    /// Checkpoint barriers (none without checkpoints).
    barriers: Barriers<'s>,
}

impl<'s> Cx<'_, 's> {
    /// Runs `make` and, when profiling, notes the operators it made as `node`'s (the
    /// operators of the nodes it renders below are theirs: the narrowest note wins).
    fn owned<R>(&mut self, node: Option<NodeAt>, make: impl FnOnce(&mut Self) -> R) -> R {
        let from = self.scope.worker().peek_identifier();
        let made = make(self);
        if let Some(p) = self.shared.profiling() {
            let to = self.scope.worker().peek_identifier();
            p.made(self.place.index, from, to, node);
        }
        made
    }

    /// `out`, with its rows counted as `node`'s when profiling.
    fn counted(&mut self, node: NodeAt, out: Windows<'s>) -> Windows<'s> {
        match self.shared.profiling().cloned() {
            None => out,
            Some(p) => {
                let rows = p.rows_of(node, self.place.index);
                let worker = self.place.index;
                let moved = move |f: u64| p.passed(node, worker, f, std::time::Instant::now());
                self.owned(None, |_| count_rows(out, rows, moved))
            }
        }
    }

    /// Ticks for every epoch of the plan's input: every stage of a plan hears of every
    /// epoch of its input, as one stage would, not only of those in which the stage
    /// before it made rows.
    fn ticks(&mut self) -> Result<Windows<'s>> {
        if let Some(t) = &self.ticks {
            return Ok(t.clone());
        }
        let Some(leaf) = self.leaf.clone() else {
            return Err(braid_plan::error::Error::Internal(
                "a Map wants epoch ticks before its plan's input was rendered".into(),
            )
            .into());
        };
        let t = map::ticks(leaf, self.place, self.shared.ticks, self.shared.granule);
        self.ticks = Some(t.clone());
        Ok(t)
    }
}

/// Renders `plan`, `depth` nodes below the root of its plan; when profiling, notes the
/// operators it made and counts the rows it puts out.
fn node<'s>(cx: &mut Cx<'_, 's>, plan: &Plan, depth: usize) -> Result<Windows<'s>> {
    let at = NodeAt {
        plan: cx.plan,
        depth,
    };
    let out = cx.owned(Some(at), |cx| node_ops(cx, plan, depth))?;
    Ok(match plan {
        // What a sink is given is what its input put out.
        Plan::Sink(_) => out,
        _ => cx.counted(at, out),
    })
}

fn node_ops<'s>(cx: &mut Cx<'_, 's>, plan: &Plan, depth: usize) -> Result<Windows<'s>> {
    let (registry, place, shared) = (cx.registry, cx.place, cx.shared);
    let below = depth + 1;
    Ok(match plan {
        Plan::Together(_) => {
            return Err(braid_plan::error::Error::Plan("a Together below the root".into()).into())
        }
        Plan::Source(Source {
            spec: SourceSpec::Late { of },
            ..
        }) => {
            let Some(streams) = cx.lates.get(*of).filter(|l| !l.is_empty()) else {
                return Err(braid_plan::error::Error::Plan(format!(
                    "a Late source reads plan {of}, which has no late rows to read"
                ))
                .into());
            };
            // Late rows are keyed where they are made, like an earlier stage's output.
            let late = rekey(cx.scope.concatenate(streams.clone()));
            cx.leaf = Some(late.clone());
            late
        }
        Plan::Source(_) => {
            let input = cx.scope.input_from(cx.input);
            cx.leaf = Some(input.clone());
            input
        }
        Plan::Split(s) => {
            let upstream = split_input(cx, &s.input, below)?;
            let stage = cx.stage_base + s.input.maps();
            split::render(upstream, s, stage, registry, place, shared)?
        }
        Plan::Map(m) => {
            let out_schema = plan.schema(registry)?;
            let every_epoch = registry.function(&m.function)?.every_epoch();
            let (upstream, ticks) = match m.input.as_ref() {
                // The function wants every epoch of the plan's input (a later stage's
                // too: see `Cx::ticks`).
                Plan::Split(s) if every_epoch => {
                    let split_at = NodeAt {
                        plan: cx.plan,
                        depth: below,
                    };
                    let split = cx.owned(Some(split_at), |cx| {
                        let source = split_input(cx, &s.input, below + 1)?;
                        let stage = cx.stage_base + s.input.maps();
                        split::render(source, s, stage, registry, place, shared)
                    })?;
                    (cx.counted(split_at, split), Some(cx.ticks()?))
                }
                _ => (node(cx, &m.input, below)?, None),
            };
            let late = match cx.late_read {
                true => registry.function(&m.function)?.late_schema(),
                false => None,
            };
            let (out, late) = map::render(
                upstream,
                ticks,
                cx.barriers.clone(),
                m,
                registry,
                map::Layout {
                    place,
                    stage: cx.stage_base + m.input.maps(),
                    out_arity: out_schema.arity(),
                    late_arity: late.map(|s| s.arity()),
                },
                shared.clone(),
            )?;
            if let Some(late) = late {
                cx.lates[cx.plan].push(late);
            }
            out
        }
        Plan::Merge(m) => {
            let upstream = node(cx, &m.input, below)?;
            let in_schema = m.input.schema(registry)?;
            merge::render(upstream, m, &in_schema, registry, place, shared)?
        }
        Plan::Sink(s) => {
            let upstream = node(cx, &s.input, below)?;
            let barriers = cx.barriers.clone();
            sink::render(
                upstream,
                barriers,
                s,
                registry,
                place,
                cx.plan,
                shared.clone(),
            )?
        }
    })
}

/// Counts the rows of every window into `rows` (profiling).
fn count_rows(
    input: Windows<'_>,
    rows: Arc<AtomicU64>,
    moved: impl Fn(u64) + 'static,
) -> Windows<'_> {
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::generic::Operator;
    // The node's output frontier, as this operator's input sees it: each move is noted
    // (the node is done with the epochs before it), for latencies.
    let mut last = 0u64;
    input.unary_frontier::<WindowBuilder, _, _, _>(Pipeline, "RowCount", move |_, _| {
        move |(input, frontier), output| {
            let f = frontier.frontier().first().copied().unwrap_or(u64::MAX);
            if f > last {
                last = f;
                moved(f);
            }
            input.for_each(|cap, data| {
                let n: usize = data
                    .iter()
                    .map(|w| w.rows.as_ref().map_or(w.batch.len(), Vec::len))
                    .sum();
                rows.fetch_add(n as u64, Ordering::Relaxed);
                output.session(&cap).give_container(data);
            });
        }
    })
}

/// What a split reads: the source, or an earlier stage's merged output with each row
/// keyed by a hash of its values (see [`rekey`]).
fn split_input<'s>(cx: &mut Cx<'_, 's>, plan: &Plan, depth: usize) -> Result<Windows<'s>> {
    let upstream = node(cx, plan, depth)?;
    Ok(match plan {
        Plan::Source(_) => upstream,
        _ => rekey(upstream),
    })
}

/// Keys every row of an earlier stage's output by a hash of its values, where it is
/// ([`RowKey::stage_seq`]: a row made at the end of an epoch stays marked so):
/// the next stage then processes an epoch's rows in hash order, those made at the end
/// of the epoch last, the same whatever worker made them, so no worker has to collect
/// and order them (the reference interpreter keys them alike).
///
/// [`RowKey::stage_seq`]: braid_plan::batch::RowKey::stage_seq
fn rekey(input: Windows<'_>) -> Windows<'_> {
    use braid_plan::batch::RowKey;
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::generic::Operator;
    input.unary::<WindowBuilder, _, _, _>(Pipeline, "Rekey", |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for mut w in data.drain(..) {
                    let batch = w.batch_mut();
                    for i in 0..batch.len() {
                        let h = braid_plan::expr::row_hash(&batch.row(i));
                        let seq = RowKey::stage_seq(batch.key(i).seq, h);
                        batch.keys_mut()[i] = RowKey { seq, lane: 0 };
                    }
                    session.give(w);
                }
            });
        }
    })
}
