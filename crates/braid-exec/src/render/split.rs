//! `Split`: fsplit, splitstream trees (maxtree, exptree) and parasplit.
//!
//! Whatever the shape, a routed row ends at the worker of its partition with
//! `lane = partition`, and a broadcast row reaches each worker hosting a partition it
//! is for once, with a broadcast lane naming those partitions: copies per partition
//! are made by `Map` on the worker, not sent over channels.

use super::route::{Dest, Router};
use super::{by_to, guarded, to_worker, Guard, Place, Window, WindowBuilder, Windows};
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::source::generator::mix64;
use braid_plan::batch::{Batch, RowKey};
use braid_plan::cost::TreeShape;
use braid_plan::function::Registry;
use braid_plan::placement::{
    class_members, intersect, splitter_worker, tree_node_worker, Hosts, FSPLIT_WORKER,
};
use braid_plan::plan::{Split, SplitShape};
use std::sync::Arc;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;

pub(crate) fn render<'s>(
    input: Windows<'s>,
    split: &Split,
    stage: usize,
    registry: &Registry,
    place: Place,
    shared: &Arc<Shared>,
) -> Result<Windows<'s>> {
    // A registered routing function is user code: its panic fails the run as such.
    let guard = match &split.route {
        braid_plan::plan::Route::Native(name) => {
            Some(Guard::new(format!("routing function `{name}`"), shared))
        }
        _ => None,
    };
    let shape = split
        .shape
        .clone()
        .ok_or_else(|| Error::Internal("split rendered before its shape was resolved".into()))?;
    // A later stage's rows are spread over the workers already: split them where they
    // are instead of sending them all to one splitter.
    let local = !matches!(split.input.as_ref(), braid_plan::plan::Plan::Source(_));
    let source = match split.input.as_ref() {
        braid_plan::plan::Plan::Source(s) => Some(s.name.clone()),
        _ => None,
    };
    let site = match &source {
        Some(name) => format!("split of {name}"),
        None => "split between stages".to_string(),
    };
    // `Route::Any`: a splitter on every worker keeps its windows in its worker's first
    // partition; one that serves every worker (fsplit's, a tree's root) deals them in
    // turn to each worker's first partition.
    let any_of = |single: bool| -> Vec<u32> {
        if !matches!(split.route, braid_plan::plan::Route::Any) {
            return Vec::new();
        }
        let hosts = Hosts::of(split, place.peers);
        let first = |w: usize| hosts.partitions(split.q, w).first().copied();
        match (single, first(place.index)) {
            (false, Some(p)) => vec![p],
            _ => (0..place.peers).filter_map(first).collect(),
        }
    };
    // In one process a tree's levels run fused (see below).
    let fused = matches!(shape, SplitShape::Tree(_)) && place.process().len() == place.peers;
    let read_everywhere = !shared.ticks.on()
        && match split.input.as_ref() {
            braid_plan::plan::Plan::Source(s) => {
                braid_plan::placement::read_on_every_worker(s, place.peers)
            }
            _ => false,
        };
    // Rows on every worker (a source read in shares, an earlier stage's output): each
    // worker roots a tree of its own rows, in one process and across processes alike;
    // nothing gathers them on one root first.
    let spread = local || read_everywhere;
    let single = match shape {
        SplitShape::Fsplit => !local,
        SplitShape::Tree(_) => !spread,
        SplitShape::Parasplit { .. } => false,
    };
    let router = || -> Result<Router> {
        Ok(Router::new(split, registry)?
            .reporting(shared, site.clone(), source.clone())
            .any_of(any_of(single)))
    };
    let window_splitter = || -> Result<WindowSplitter> {
        Ok(WindowSplitter {
            router: router()?,
            ..WindowSplitter::new(split, registry, place.peers, place.process())?
        })
    };
    // A stage the controller may chain onto the reader's worker: see `crate::qos::Chain`.
    let chain = shared
        .latencies
        .chain
        .get()
        .and_then(|c| c.stage(stage))
        .map(|stateless| ChainSplit {
            latencies: shared.latencies.clone(),
            ticks: shared.ticks,
            first: stage == 0,
            // Chained, a first stage that keeps no state runs on worker 0's own
            // partitions; any other has all its partitions there.
            mine: (stage == 0 && stateless)
                .then(|| Hosts::of(split, place.peers).partitions(split.q, FSPLIT_WORKER)),
            hosts: Hosts::on_one(FSPLIT_WORKER as u32, split.q, place.peers),
            scratch: Scratch::default(),
            last: None,
        })
        .filter(|c| c.mine.as_ref().is_none_or(|m| !m.is_empty()));
    Ok(match shape {
        SplitShape::Fsplit => splitter(
            input,
            WindowSplitter {
                chain,
                ..window_splitter()?
            },
            match local {
                true => At::Local,
                false => At::Worker(FSPLIT_WORKER),
            },
            match local {
                true => "Fsplit(local)",
                false => "Fsplit",
            },
            guard,
        ),
        // In one process a tree's levels run fused into its root: below the root they
        // only forward rows by the lanes it wrote, so the root routes each row straight
        // to its leaf's worker, as one splitter (see `tree`). A stream read in shares on
        // every worker (or an earlier stage's output, spread over them) is as many
        // streams: each worker roots a tree of its own share where it is read, instead
        // of first gathering every row on one root's worker.
        SplitShape::Tree(t) if fused => splitter(
            input,
            window_splitter()?,
            match spread {
                true => At::Local,
                false => At::Worker(tree_node_worker(
                    &t,
                    1,
                    0,
                    split.q,
                    &Hosts::of(split, place.peers),
                )),
            },
            match spread {
                true => "Tree(fused, rooted where read)",
                false => "Tree(fused)",
            },
            guard,
        ),
        SplitShape::Tree(t) => tree(
            input,
            router()?,
            Hosts::of(split, place.peers),
            t,
            (place, spread),
            guard,
        ),
        SplitShape::Parasplit { p, router_fanout } => {
            let deal_local = match split.input.as_ref() {
                braid_plan::plan::Plan::Source(s) => {
                    braid_plan::placement::deals_locally(s, p, router_fanout, place.peers)
                }
                _ => false,
            };
            let routed = window_router(input, p, router_fanout, deal_local, place);
            splitter(
                routed,
                window_splitter()?,
                At::Addressed,
                "WindowSplitter",
                guard,
            )
        }
    })
}

/// One window splitter's work: what every fsplit and parasplit splitter operator runs
/// on each window, also usable outside a dataflow (`braid-bench split`'s probe of the
/// split cost behind the efficiency eta).
pub struct WindowSplitter {
    router: Router,
    hosts: Hosts,
    /// The workers of this splitter's process (a window is shared only among them).
    local: std::ops::Range<usize>,
    scratch: Scratch,
    /// A stage the controller may chain onto worker 0 ([`crate::qos::Chain`]).
    chain: Option<ChainSplit>,
}

/// How a splitter routes a chained stage's rows.
struct ChainSplit {
    latencies: Arc<crate::qos::Latencies>,
    ticks: crate::qos::Ticks,
    /// The first stage's splitter: it records the way of each epoch.
    first: bool,
    /// A first stage that keeps no state: worker 0's own partitions, which take its rows
    /// chained.
    mine: Option<Vec<u32>>,
    /// Every partition on worker 0: where any other chained stage's rows go.
    hosts: Hosts,
    scratch: Scratch,
    /// The way of the last epoch read (an epoch's way never changes once recorded: the
    /// chain's lock is taken once an epoch, not once a window).
    last: Option<(u64, bool)>,
}

impl WindowSplitter {
    /// The splitter of `split` on a worker of a process whose workers are `local`, of
    /// `workers` in all.
    pub fn new(
        split: &Split,
        registry: &Registry,
        workers: usize,
        local: std::ops::Range<usize>,
    ) -> Result<Self> {
        Ok(WindowSplitter {
            router: Router::new(split, registry)?,
            hosts: Hosts::of(split, workers),
            local,
            scratch: Scratch::default(),
            chain: None,
        })
    }

    /// A splitter measuring `split`'s costs outside a dataflow
    /// ([`crate::tune::measure_split_costs`]): on worker 0 of two, in a process of its
    /// own, so that it copies every row into its destination's batch as a splitter does
    /// for another process; a row the route or broadcast faults on is counted in
    /// `shared` and left out, as in a run.
    pub(crate) fn probe(split: &Split, registry: &Registry, shared: &Arc<Shared>) -> Result<Self> {
        Ok(WindowSplitter {
            router: Router::new(split, registry)?.reporting(shared, "cost probe".into(), None),
            ..WindowSplitter::new(split, registry, 2, 0..0)?
        })
    }

    /// Routes the rows of `batch` only (their lanes are left as they were): how many
    /// the broadcast condition holds for.
    pub(crate) fn route_only(&mut self, batch: &Batch) -> u64 {
        let mut broadcast = 0;
        self.router.each_dest(batch, |_, dest| {
            broadcast += u64::from(matches!(dest, Dest::Broadcast))
        });
        broadcast
    }

    /// Splits one window: every row gets its lane in place; `give` receives the window
    /// itself once for every worker of this process it is shared with, and for every
    /// other worker with rows a batch of copies of them.
    pub fn split(&mut self, w: Window, give: &mut dyn FnMut(Window)) {
        split_window(
            &self.router,
            &self.hosts,
            &self.local,
            &mut self.scratch,
            w,
            give,
        );
    }

    /// [`WindowSplitter::split`] of a window at time `t`: a chained stage's rows go to
    /// worker 0 when the window's epoch runs chained.
    fn split_at(&mut self, t: u64, w: Window, give: &mut dyn FnMut(Window)) {
        if let Some(c) = &mut self.chain {
            if let Some(chain) = c.latencies.chain.get() {
                let epoch = c.ticks.epoch(t);
                let on = match c.last {
                    Some((e, on)) if e == epoch => on,
                    _ => {
                        let on = match c.first {
                            true => chain.record(epoch),
                            false => chain.at(epoch),
                        };
                        c.last = Some((epoch, on));
                        on
                    }
                };
                if on {
                    match &c.mine {
                        Some(mine) => {
                            chain_window(&self.router, mine, &mut c.scratch.lanes, w, give)
                        }
                        None => split_window(
                            &self.router,
                            &c.hosts,
                            &self.local,
                            &mut c.scratch,
                            w,
                            give,
                        ),
                    }
                    return;
                }
            }
        }
        self.split(w, give);
    }
}

/// A splitter's reusable buffers: one batch per destination worker, the rows of the
/// window being split for each worker, their lanes, and the workers of the residue
/// classes met so far.
#[derive(Default)]
struct Scratch {
    outs: Vec<Batch>,
    rows: Vec<Vec<u32>>,
    lanes: Vec<u64>,
    classes: ClassHosts,
}

/// The workers hosting a partition of a residue class (a broadcast lane), remembered
/// per lane.
#[derive(Default)]
struct ClassHosts(rustc_hash::FxHashMap<u64, Vec<usize>>);

impl ClassHosts {
    /// Workers, ascending, with a partition `p < q` in `class`.
    fn of(&mut self, lane: u64, class: (u64, u64), q: u64, hosts: &Hosts) -> &[usize] {
        let peers = hosts.workers();
        self.0.entry(lane).or_insert_with(|| {
            let mut seen = vec![false; peers];
            let mut left = peers;
            for p in class_members(class, q) {
                let w = hosts.worker(p);
                if !seen[w] {
                    seen[w] = true;
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
            (0..peers).filter(|&w| seen[w]).collect()
        })
    }
}

/// The lane of a destination: the partition, [`RowKey::OMIT`], or a broadcast lane
/// naming the residue class of partitions (all of them for a broadcast).
/// A chained stage's window: every row routed to one of this worker's partitions (a
/// stateless function's instances are interchangeable; rows of one planned partition
/// stay together), the whole window given to this worker.
fn chain_window(
    router: &Router,
    mine: &[u32],
    lanes: &mut Vec<u64>,
    mut w: Window,
    give: &mut dyn FnMut(Window),
) {
    let batch = w.batch_mut();
    lanes.clear();
    router.each_dest(batch, |_, dest| lanes.push(lane_of(dest)));
    let n = mine.len() as u64;
    for (key, &lane) in batch.keys_mut().iter_mut().zip(lanes.iter()) {
        key.lane = match lane == RowKey::OMIT || RowKey::broadcast_target(lane).is_some() {
            true => lane,
            false => u64::from(mine[(lane % n) as usize]),
        };
    }
    give(Window {
        to: FSPLIT_WORKER as u64,
        node: 0,
        rows: None,
        ..w
    });
}

fn lane_of(dest: Dest) -> u64 {
    match dest {
        Dest::Omit => RowKey::OMIT,
        Dest::Partition(p) => p as u64,
        Dest::Broadcast => RowKey::broadcast_lane(1, 0),
        Dest::Class(m, r) => RowKey::broadcast_lane(m, r % m.max(1)),
    }
}

/// A worker of the splitter's process shares a window when at least 1 in this many of
/// its rows are for it (else its rows are copied): it then reads its rows where they
/// are, through its list of them, instead of a copy.
const SHARE_AT: usize = 8;

/// Routes one window's rows and hands them on. Every row gets its lane in place. The
/// window itself goes to each worker of this process with enough rows in it, with the
/// list of those rows, so they are never copied; rows for any other worker are copied
/// into one batch per worker.
fn split_window(
    router: &Router,
    hosts: &Hosts,
    local: &std::ops::Range<usize>,
    scratch: &mut Scratch,
    mut w: Window,
    give: &mut dyn FnMut(Window),
) {
    let q = router.q() as u64;
    let peers = hosts.workers();
    let Scratch {
        outs,
        rows,
        lanes,
        classes,
    } = scratch;
    let batch = w.batch_mut();
    let arity = batch.arity();
    if outs.len() != peers || outs.first().is_some_and(|b| b.arity() != arity) {
        *outs = (0..peers).map(|_| Batch::new(arity)).collect();
    }
    rows.resize_with(peers, Vec::new);
    // Every row's lane, and the rows of each worker.
    lanes.clear();
    router.each_dest(batch, |_, dest| lanes.push(lane_of(dest)));
    if peers == 1 {
        // One worker: the whole window is its.
        for (key, &lane) in batch.keys_mut().iter_mut().zip(lanes.iter()) {
            key.lane = lane;
        }
        give(Window {
            to: 0,
            node: 0,
            rows: None,
            ..w
        });
        return;
    }
    for (i, (key, &lane)) in batch.keys_mut().iter_mut().zip(lanes.iter()).enumerate() {
        key.lane = lane;
        match RowKey::broadcast_target(lane) {
            None if lane == RowKey::OMIT => {}
            None => rows[hosts.worker(lane)].push(i as u32),
            Some(class) => {
                for &wk in classes.of(lane, class, q, hosts) {
                    rows[wk].push(i as u32);
                }
            }
        }
    }
    let len = batch.len();
    for (wk, mine) in rows.iter_mut().enumerate() {
        if mine.is_empty() {
            continue;
        }
        if local.contains(&wk) && mine.len() * SHARE_AT >= len {
            let mine = std::mem::replace(mine, Vec::with_capacity(mine.capacity()));
            give(Window {
                to: wk as u64,
                node: 0,
                batch: w.batch.clone(),
                rows: (mine.len() < len).then_some(mine),
                narrow: None,
                born: w.born,
                sent: w.sent,
                mark: w.mark,
                epoch: w.epoch,
            });
        } else {
            let batch = &w.batch;
            for &i in mine.iter() {
                outs[wk].push_row_of(batch, i as usize, batch.key(i as usize));
            }
            mine.clear();
        }
    }
    send_per_worker(outs, arity, (w.born, w.sent, w.mark), give);
}

/// Sends each worker's batch of copied rows, with the stamps of the window they came from.
fn send_per_worker(
    outs: &mut [Batch],
    arity: usize,
    (born, sent, mark): (u64, u64, u64),
    give: &mut dyn FnMut(Window),
) {
    for (w, out) in outs.iter_mut().enumerate() {
        if !out.is_empty() {
            let batch = std::mem::replace(out, Batch::with_capacity(arity, out.len()));
            give(
                Window::new(w as u64, 0, batch)
                    .stamped(born, sent)
                    .marked(mark),
            );
        }
    }
}

/// Where a splitter runs.
enum At {
    /// On one worker (fsplit over a source).
    Worker(usize),
    /// Where each window is addressed (parasplit's window splitters).
    Addressed,
    /// Where each window already is (fsplit over an earlier stage's output; in one process,
    /// a tree rooted on each worker that reads its source or holds its input).
    Local,
}

/// One splitter per window: fsplit (all windows to one worker, or each worker its own
/// windows) or parasplit's window splitters (windows arrive addressed).
fn splitter<'s>(
    input: Windows<'s>,
    mut splitter: WindowSplitter,
    at: At,
    name: &str,
    guard: Option<Guard>,
) -> Windows<'s> {
    macro_rules! split_with {
        ($pact:expr) => {
            input.unary::<WindowBuilder, _, _, _>($pact, name, move |_, _| {
                move |input, output| {
                    input.for_each(|cap, data| {
                        let t = cap.least().copied().unwrap_or(0);
                        let mut session = output.session(&cap);
                        for w in data.drain(..) {
                            // What a window's rows make is of its epoch.
                            let epoch = w.epoch;
                            guarded(guard.as_ref(), || {
                                splitter.split_at(t, w, &mut |x| session.give(x.at(epoch)))
                            });
                        }
                    });
                }
            })
        };
    }
    match at {
        At::Worker(worker) => split_with!(to_worker(worker)),
        At::Addressed => split_with!(by_to()),
        At::Local => split_with!(Pipeline),
    }
}

/// Parasplit's window router: deals whole windows uniformly at random (by a hash of the
/// window's first sequence number, so runs are reproducible) to the `p` window
/// splitters, through `router_fanout` sub-routers when set.
///
/// With `local` ([`braid_plan::placement::deals_locally`]), each worker's router deals
/// its windows among the splitters on its own worker.
fn window_router<'s>(
    input: Windows<'s>,
    p: u32,
    router_fanout: Option<u32>,
    local: bool,
    place: Place,
) -> Windows<'s> {
    let (me, peers) = (place.index as u64, place.peers as u64);
    let p = p.max(1) as u64;
    let pick = |w: &Window, salt: u64| mix64(w.batch.keys().first().map_or(0, |k| k.seq) ^ salt);
    // Splitters on this worker: me, me + peers, ... below p.
    let local = local.then(|| (p - me).div_ceil(peers));
    let first = input.unary::<WindowBuilder, _, _, _>(Pipeline, "WindowRouter", move |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for mut w in data.drain(..) {
                    let h = pick(&w, 0x5eed);
                    match router_fanout {
                        Some(f) => {
                            w.node = h % f as u64;
                            w.to = w.node % peers;
                        }
                        None => {
                            w.node = match local {
                                Some(n) => me + peers * (h % n),
                                None => h % p,
                            };
                            w.to = splitter_worker(w.node, peers as usize) as u64;
                        }
                    }
                    session.give(w);
                }
            });
        }
    });
    match router_fanout {
        None => first,
        Some(f) => {
            let f = f as u64;
            first.unary::<WindowBuilder, _, _, _>(by_to(), "SubRouter", move |_, _| {
                move |input, output| {
                    input.for_each(|cap, data| {
                        let mut session = output.session(&cap);
                        for mut w in data.drain(..) {
                            let j = sub_router_splitter(w.node, p, f, pick(&w, 0xfeed));
                            w.node = j;
                            w.to = splitter_worker(j, peers as usize) as u64;
                            session.give(w);
                        }
                    });
                }
            })
        }
    }
}

/// A splitstream tree: one operator per level; level 1 evaluates route and broadcast
/// and writes each row's lane in place, deeper levels forward by the multi-level hash
/// (Paper IV eq. 2). No level copies rows for a node in its own process: a node hands
/// each child the window it read with the list of the child's rows. A broadcast row
/// keeps its whole residue class in its lane; a node's share of it is the class
/// intersected with the node's own partitions, computed where needed, and a leaf tells
/// `Map` its share through [`Window::narrow`]. Rows for a node in another process are
/// copied, so that only they cross.
///
/// A node whose subtree (or a child's) lies in its own process finishes the route: it
/// sends those rows straight to their partitions' workers, marked with the subtree's
/// class as `narrow`, and the levels below pass them on ([`tree_slots`]); levels that
/// would only pass rows on are left out ([`levels_needed`]). With two processes of one
/// worker each (partitions `p % 2`), a row is so routed once where it is read, and a row
/// for the other process crosses once and is routed there once more.
///
/// This level-by-level form runs only across processes, where a level's nodes are in
/// different processes and only the rows for a node elsewhere cross. In one process
/// `render` fuses the levels into the root (one splitter on the root's worker): the
/// levels below it would only read every row's lane again to forward it.
///
/// With `spread` (a source read in shares on every worker, or an earlier stage's
/// output) each worker is the root of the rows it holds, instead of sending them to one
/// root first. A node sits on the worker of the first partition below it
/// ([`tree_node_worker`]), so a row crosses to another process at most where its
/// subtree does. The roots' windows interleave in serial order, so rows are not
/// buffered across windows then: `Map` takes a partition's rows in serial order as
/// they come only while each way into it keeps them so.
///
/// Buffering across windows, with one root: the root gathers its input windows into
/// one batch of about 64 rows per way out before it routes them, and a node holds the
/// rows it copies for another process until they make a window. Without it, a tree of
/// many leaves cut every window into fragments of a row or two, and each fragment cost
/// a window's overheads at every level below and in `Map`. Held rows go on when there
/// are enough, when a message of another time comes, or when the input frontier passes
/// their time (so they wait at most to the end of their epoch, or tick).
fn tree<'s>(
    input: Windows<'s>,
    router: Router,
    hosts: Hosts,
    shape: TreeShape,
    (place, spread): (Place, bool),
    guard: Option<Guard>,
) -> Windows<'s> {
    // The levels below the highest one whose every node lies in one process would
    // only pass on rows sent straight to their workers: they are left out.
    let contained = contained(&shape, router.q(), &hosts, place.threads);
    let depth = levels_needed(&shape, &contained);
    let root = tree_node_worker(&shape, 1, 0, router.q(), &hosts);
    let mut stream = input;
    let router = std::rc::Rc::new(router);
    for level in 1..=depth {
        let ways = tree_slots(&shape, level, &hosts, place, &contained);
        let mut node = TreeLevel {
            level,
            lambda_prev: shape.lambda(level - 1),
            q: router.q() as u64,
            local: place.process(),
            // One root: its windows come in serial order, so it may gather them
            // (with roots where read, a gathered window would hold rows of windows
            // that other roots' rows come between).
            gather: match level == 1 && !spread {
                true => (ways.slots.len() * ROWS_PER_LEAF).clamp(1024, 1 << 16),
                false => 0,
            },
            hold: !spread,
            ways,
            spare: Vec::new(),
            router: router.clone(),
            class_slots: Default::default(),
            lanes: Vec::new(),
            rows: Vec::new(),
            held: Held::default(),
        };
        // Only level 1 calls the routing function.
        let guard = if level == 1 { guard.clone() } else { None };
        let name = format!("TreeLevel{level}");
        let logic = move |_: timely::dataflow::operators::Capability<u64>, _| {
            move |(input, frontier): (
                &mut timely::dataflow::operators::generic::InputHandleCore<u64, Vec<Window>, _>,
                &timely::progress::frontier::MutableAntichain<u64>,
            ),
                  output: &mut Output<'_>| {
                input.for_each(|cap, data| {
                    // Rows held for an earlier time go on before this message's.
                    if node.held.holds_other(&cap) {
                        guarded(guard.as_ref(), || node.flush(output));
                    }
                    let mut session = output.session(&cap);
                    for w in data.drain(..) {
                        guarded(guard.as_ref(), || node.take(w, &mut |x| session.give(x)));
                    }
                    // Rows held now are of this message's time.
                    if node.held.holds_rows() {
                        node.held.hold(&cap);
                    }
                });
                // Rows held for a time the input has passed go on now.
                if node.held.due(frontier) {
                    guarded(guard.as_ref(), || node.flush(output));
                }
            }
        };
        stream = if level == 1 {
            // Spread: each worker's own rows, to itself (the pact's type must be the
            // levels' below, an exchange).
            let at = if spread { place.index } else { root };
            stream.unary_frontier::<WindowBuilder, _, _, _>(to_worker(at), &name, logic)
        } else {
            stream.unary_frontier::<WindowBuilder, _, _, _>(by_to(), &name, logic)
        };
    }
    stream
}

/// A tree operator's output.
type Output<'a> =
    timely::dataflow::operators::generic::OutputBuilderSession<'a, u64, WindowBuilder>;

/// How many rows the root gathers per destination of its windows before it routes them.
const ROWS_PER_LEAF: usize = 64;

/// How many gathered batches the root keeps to gather into again.
const SPARE_BATCHES: usize = 8;

/// [`Window::node`] of a window whose rows a node sent straight to their partitions'
/// workers: the levels below pass it on as it is.
const FINISHED: u64 = u64::MAX;

/// Where a tree node sends a partition's rows: to a node of the next level, or straight
/// to the partition's worker with the residue class `narrow` of the partitions that
/// way serves (the leaves, and any node whose whole subtree lies in this process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Slot {
    to: u32,
    /// The next level's node, [`FINISHED`], or 0 from a leaf.
    node: u64,
    narrow: Option<(u64, u64)>,
}

/// The process hosting every partition below `q` of the residue class `class` (a tree
/// node's subtree), if they share one; `threads` workers per process.
fn subtree_process(class: (u64, u64), q: u64, hosts: &Hosts, threads: usize) -> Option<usize> {
    let mut procs = class_members(class, q).map(|p| hosts.worker(p) / threads.max(1));
    let first = procs.next()?;
    procs.all(|x| x == first).then_some(first)
}

/// Where a partition's rows are finished ([`contained`]): the first level below the
/// root (the one nearest the root) whose node on the partition's way has its whole
/// subtree in one process, that node's class, and the process.
type Contained = (usize, (u64, u64), usize);

/// For every partition below `q`, where its rows are finished, if a node on its way has
/// its whole subtree in one process.
fn contained(shape: &TreeShape, q: u32, hosts: &Hosts, threads: usize) -> Vec<Option<Contained>> {
    (0..u64::from(q))
        .map(|p| {
            (2..=shape.depth()).find_map(|l| {
                let lambda = shape.lambda(l - 1);
                let class = (lambda, p % lambda);
                subtree_process(class, u64::from(q), hosts, threads).map(|proc| (l, class, proc))
            })
        })
        .collect()
}

/// How many of a tree's levels rows reach unfinished ([`tree_slots`]): down to the
/// deepest of the partitions' first nodes whose subtree lies in one process (where
/// their rows are finished at the latest), else all.
fn levels_needed(shape: &TreeShape, contained: &[Option<Contained>]) -> usize {
    contained
        .iter()
        .map(|c| c.map_or(shape.depth(), |c| c.0))
        .max()
        .unwrap_or(shape.depth())
}

/// The ways out of a node of tree level `level` on this worker, and for every
/// partition below `q` the index of its way.
///
/// Below the root, the first node on a partition's way whose whole subtree lies in one
/// process ([`contained`]) finishes the route: it sends the partition's rows
/// straight to its worker, marked with its class as `narrow`, and the levels below
/// only pass them on. Its parent does so already when it sits in that process too (a
/// root reading there): it serves that child's partitions all, broadcast rows with
/// them, so a window's rows for a partition still travel together (no other node sends
/// the child a copy of them). Without such a node, the leaves send rows to their
/// workers, marked with the leaf's class; any other node sends them to the next
/// level's node.
///
/// So every row of a partition carries one `narrow` whichever root routed it, and
/// `Map` checks serial order per `narrow`.
fn tree_slots(
    shape: &TreeShape,
    level: usize,
    hosts: &Hosts,
    place: Place,
    contained: &[Option<Contained>],
) -> TreeSlots {
    let (lambda_prev, lambda) = (shape.lambda(level - 1), shape.lambda(level));
    let q = contained.len() as u32;
    let here = place.index / place.threads.max(1);
    let mut out = TreeSlots::default();
    let mut index: rustc_hash::FxHashMap<Slot, u32> = Default::default();
    for (p, &finished) in (0u64..).zip(contained) {
        let worker = hosts.worker(p) as u32;
        let slot = match finished {
            Some((l, class, proc)) if l <= level || (l == level + 1 && proc == here) => Slot {
                to: worker,
                node: FINISHED,
                narrow: Some(class),
            },
            _ if level == shape.depth() => Slot {
                to: worker,
                node: 0,
                narrow: Some((lambda_prev, p % lambda_prev)),
            },
            _ => Slot {
                to: tree_node_worker(shape, level + 1, p % lambda, q, hosts) as u32,
                node: p % lambda,
                narrow: None,
            },
        };
        let k = *index.entry(slot).or_insert_with(|| {
            out.slots.push(slot);
            (out.slots.len() - 1) as u32
        });
        out.of.push(k);
    }
    out
}

/// The ways out of one tree level's nodes on one worker ([`tree_slots`]).
#[derive(Default)]
struct TreeSlots {
    slots: Vec<Slot>,
    /// Per partition: the way of its rows.
    of: Vec<u32>,
}

/// The ways out (of `slot_of`, per partition) a node of residue class `node` sends a
/// broadcast row of class `class` to: those of the partitions below `q` in both, once
/// each.
fn broadcast_slots(slot_of: &[u32], class: (u64, u64), node: (u64, u64), q: u64) -> Vec<u32> {
    let mut to: Vec<u32> = intersect(class, node).map_or(Vec::new(), |both| {
        class_members(both, q)
            .map(|p| slot_of[p as usize])
            .collect()
    });
    to.sort_unstable();
    to.dedup();
    to
}

/// One level of a split tree on one worker: the nodes of that level there.
struct TreeLevel {
    level: usize,
    /// Partitions' residues at the level above (this level's nodes).
    lambda_prev: u64,
    q: u64,
    local: std::ops::Range<usize>,
    /// The root: rows gathered before routing (0 below the root).
    gather: usize,
    /// Whether rows copied for another process are held across windows (one root:
    /// its windows come in serial order).
    hold: bool,
    /// The ways out of this level's nodes here.
    ways: TreeSlots,
    /// The root: batches it gathered and routed, oldest first, to gather into again.
    spare: Vec<Arc<Batch>>,
    router: std::rc::Rc<Router>,
    /// Per (broadcast lane, node): the ways out of the partitions in both classes.
    class_slots: rustc_hash::FxHashMap<(u64, u64), Vec<u32>>,
    lanes: Vec<u64>,
    /// Per way out: the rows of the window being routed.
    rows: Vec<Vec<u32>>,
    held: Held,
}

impl TreeLevel {
    /// Routes a window: below the root at once; at the root, once enough rows are
    /// gathered (a window as large as that is routed as it is). A window a node above
    /// sent straight to its worker goes on.
    fn take(&mut self, w: Window, give: &mut dyn FnMut(Window)) {
        if w.node == FINISHED {
            give(w);
            return;
        }
        // A gathered window holds rows of one epoch.
        if self
            .held
            .gathered
            .as_ref()
            .is_some_and(|g| g.epoch != w.epoch)
        {
            let g = self.held.gathered.take().expect("checked");
            self.route_gathered(g, give);
        }
        if self.gather == 0 || (self.held.gathered.is_none() && w.len() >= self.gather) {
            self.route(w, give);
        } else if let Some(g) = self.gather(w) {
            self.route_gathered(g, give);
        }
    }

    /// The root: takes `w` into the rows gathered, which come out as one window once
    /// there are enough.
    fn gather(&mut self, w: Window) -> Option<Window> {
        let (gather, spare) = (self.gather, &mut self.spare);
        let g = self.held.gathered.get_or_insert_with(|| {
            // A batch gathered before whose windows are all done, if there is one:
            // its memory is warm, where a fresh one would be faulted in anew.
            let batch = match spare.iter().position(|b| Arc::strong_count(b) == 1) {
                Some(k) => {
                    let mut b = spare.swap_remove(k);
                    Arc::get_mut(&mut b).expect("the only reference").clear();
                    b
                }
                None => Arc::new(Batch::with_capacity(w.batch.arity(), gather)),
            };
            Window {
                batch,
                epoch: w.epoch,
                ..Window::new(0, 0, Batch::new(0))
            }
        });
        let batch = Arc::make_mut(&mut g.batch);
        match &w.rows {
            None => batch.append(&w.batch),
            Some(rows) => {
                for &i in rows {
                    batch.push_row_of(&w.batch, i as usize, w.batch.key(i as usize));
                }
            }
        }
        g.born = g.born.min(w.born);
        g.sent = g.sent.min(w.sent);
        g.mark = g.mark.min(w.mark);
        (g.batch.len() >= self.gather)
            .then(|| self.held.gathered.take())
            .flatten()
    }

    /// Routes the held rows (the root's gathered window first) and hands on every
    /// destination's held rows, at their time; then lets go of it.
    fn flush(&mut self, output: &mut Output<'_>) {
        let Some(cap) = self.held.cap.take() else {
            return;
        };
        let mut session = output.session(&cap);
        if let Some(w) = self.held.gathered.take() {
            self.route_gathered(w, &mut |x| session.give(x));
        }
        for (&dest, rows) in self.held.rows.iter_mut() {
            if !rows.batch.is_empty() {
                session.give(rows.take(dest));
            }
        }
    }

    /// Routes the root's gathered window, keeping its batch to gather into again once
    /// its windows are done.
    fn route_gathered(&mut self, w: Window, give: &mut dyn FnMut(Window)) {
        let batch = self.route(w, give);
        if self.spare.len() == SPARE_BATCHES {
            self.spare.remove(0);
        }
        self.spare.push(batch);
    }

    /// Routes one window by its ways out ([`tree_slots`]); returns its batch.
    fn route(&mut self, mut w: Window, give: &mut dyn FnMut(Window)) -> Arc<Batch> {
        let (lambda_prev, q) = (self.lambda_prev, self.q);
        let node = w.node;
        if self.level == 1 {
            // Every row's lane, in place.
            let batch = w.batch_mut();
            let lanes = &mut self.lanes;
            lanes.clear();
            self.router
                .each_dest(batch, |_, dest| lanes.push(lane_of(dest)));
            for (key, &lane) in batch.keys_mut().iter_mut().zip(lanes.iter()) {
                key.lane = lane;
            }
        }
        let rows = &mut self.rows;
        rows.resize_with(self.ways.slots.len(), Vec::new);
        let keys = w.batch.keys();
        let (ways, class_slots) = (&self.ways, &mut self.class_slots);
        let mut route_row = |i: usize| {
            let lane = keys[i].lane;
            let i = i as u32;
            match RowKey::broadcast_target(lane) {
                None if lane == RowKey::OMIT => {}
                None => rows[ways.of[lane as usize] as usize].push(i),
                // A class of partitions: once to each way out of this node's partitions
                // in it.
                Some(class) => {
                    let to = class_slots.entry((lane, node)).or_insert_with(|| {
                        broadcast_slots(&ways.of, class, (lambda_prev, node), q)
                    });
                    for &c in to.iter() {
                        rows[c as usize].push(i);
                    }
                }
            }
        };
        match &w.rows {
            None => (0..keys.len()).for_each(&mut route_row),
            Some(mine) => mine.iter().for_each(|&i| route_row(i as usize)),
        }
        for (slot, mine) in self.ways.slots.iter().zip(rows.iter_mut()) {
            if mine.is_empty() {
                continue;
            }
            let to = slot.to as usize;
            if self.local.contains(&to) {
                let all = mine.len() == keys.len();
                give(Window {
                    to: to as u64,
                    node: slot.node,
                    batch: w.batch.clone(),
                    rows: (!all).then(|| mine.clone()),
                    narrow: slot.narrow,
                    born: w.born,
                    sent: w.sent,
                    mark: w.mark,
                    epoch: w.epoch,
                });
            } else {
                let dest = (to as u64, slot.node, slot.narrow, w.epoch);
                let full = self.held.push(dest, &w, mine);
                match full {
                    Some(full) => give(full),
                    // Rows of several roots' windows interleave in serial order: held
                    // across windows, a partition's rows would reach `Map` out of it.
                    None if !self.hold => give(self.held.take(dest)),
                    None => {}
                }
            }
            mine.clear();
        }
        w.batch
    }
}

/// What a tree operator holds back, all at one time: the root's gathered window, and
/// the rows copied for another process's nodes (or workers, at the leaves) until they
/// make a window of [`HELD_ROWS`].
#[derive(Default)]
struct Held {
    /// The time of everything held.
    cap: Option<timely::dataflow::operators::Capability<u64>>,
    /// The root's input windows so far, as one.
    gathered: Option<Window>,
    /// Per destination (worker, node, leaf's residue class): its rows.
    rows: rustc_hash::FxHashMap<HeldFor, HeldRows>,
}

/// Where held rows go: worker, node, the residue class of the partitions they are
/// for (from a leaf, or a node finishing the route), and their epoch.
type HeldFor = (u64, u64, Option<(u64, u64)>, u64);

/// Rows held for one destination, with the oldest stamps among the windows they came
/// from.
struct HeldRows {
    batch: Batch,
    /// How many rows went on last time.
    last: usize,
    born: u64,
    sent: u64,
    mark: u64,
}

/// How many rows a tree node holds for a node in another process before it hands them
/// on.
const HELD_ROWS: usize = 1024;

impl Held {
    /// Whether it holds rows of a time other than `cap`'s.
    fn holds_other(&self, cap: &timely::dataflow::operators::InputCapability<u64>) -> bool {
        self.cap
            .as_ref()
            .is_some_and(|c| Some(c.time()) != cap.least())
    }

    /// Whether it holds any rows.
    fn holds_rows(&self) -> bool {
        self.gathered.is_some() || self.rows.values().any(|r| !r.batch.is_empty())
    }

    /// Holds `cap`'s time, for rows of its message.
    fn hold(&mut self, cap: &timely::dataflow::operators::InputCapability<u64>) {
        if self.cap.is_none() {
            self.cap = cap.retain_least(0);
        }
    }

    /// Copies `rows` of `w` into those held for `dest`; returns them as a window once
    /// there are [`HELD_ROWS`].
    fn push(&mut self, dest: HeldFor, w: &Window, rows: &[u32]) -> Option<Window> {
        let held = self.rows.entry(dest).or_insert_with(|| HeldRows {
            batch: Batch::new(w.batch.arity()),
            last: 0,
            born: crate::qos::UNSTAMPED,
            sent: crate::qos::UNSTAMPED,
            mark: crate::qos::UNSTAMPED,
        });
        if held.batch.is_empty() {
            // Room for as many rows as last time: no growing copies.
            let rows = (held.last + rows.len()).min(HELD_ROWS);
            held.batch = Batch::with_capacity(w.batch.arity(), rows);
        }
        let keys = w.batch.keys();
        for &i in rows {
            held.batch
                .push_row_of(&w.batch, i as usize, keys[i as usize]);
        }
        held.born = held.born.min(w.born);
        held.sent = held.sent.min(w.sent);
        held.mark = held.mark.min(w.mark);
        (held.batch.len() >= HELD_ROWS).then(|| held.take(dest))
    }

    /// The rows held for `dest` as a window, leaving none.
    fn take(&mut self, dest: HeldFor) -> Window {
        self.rows
            .get_mut(&dest)
            .expect("rows held for dest")
            .take(dest)
    }

    /// Whether it holds a time the input frontier has passed.
    fn due(&self, frontier: &timely::progress::frontier::MutableAntichain<u64>) -> bool {
        self.cap
            .as_ref()
            .is_some_and(|c| !frontier.less_equal(c.time()))
    }
}

impl HeldRows {
    /// The held rows as a window for `dest`, leaving none.
    fn take(&mut self, (to, node, narrow, epoch): HeldFor) -> Window {
        let arity = self.batch.arity();
        let batch = std::mem::replace(&mut self.batch, Batch::new(arity));
        self.last = batch.len();
        let w = Window {
            narrow,
            epoch,
            ..Window::new(to, node, batch)
                .stamped(self.born, self.sent)
                .marked(self.mark)
        };
        self.born = crate::qos::UNSTAMPED;
        self.sent = crate::qos::UNSTAMPED;
        self.mark = crate::qos::UNSTAMPED;
        w
    }
}

/// The window splitter sub-router `r` of a parasplit with `p` splitters and router
/// fanout `f` gives a window to: one of its splitters `r, r + f, r + 2f, ...` below `p`
/// chosen by `pick` (splitter `p - 1` for a sub-router with none).
fn sub_router_splitter(r: u64, p: u64, f: u64, pick: u64) -> u64 {
    let count = if r < p { (p - r).div_ceil(f) } else { 1 };
    (r + f * (pick % count)).min(p - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows a tree's ways out from a root on every worker, as `tree` renders them
    /// across processes: every partition's rows end on its worker, the levels left out
    /// are never needed, each partition's rows carry one `narrow` (one class holding
    /// it) whichever root routed them, a row crosses processes at most once per level
    /// it passes unfinished, and a broadcast row of any class reaches each
    /// partition of it exactly once (as `Map` reads `narrow`).
    #[test]
    fn tree_ways_out_reach_every_partition_once() {
        use braid_plan::cost::exptree;
        let mut finished_early = 0;
        for (peers, threads) in [(2, 1), (4, 2), (4, 1), (6, 2), (3, 1)] {
            for q in [2u32, 5, 16, 64, 100] {
                let split = |q| {
                    use braid_plan::plan::{Plan, Route, SourceSpec, Strategy};
                    let schema = braid_plan::types::Schema::ints(&["c0"]);
                    let Plan::Split(s) = Plan::source("s", SourceSpec::Stdin, schema).split(
                        q,
                        Route::Any,
                        None,
                        Strategy::Exptree,
                    ) else {
                        unreachable!()
                    };
                    s
                };
                let hosts = Hosts::of(&split(q), peers);
                for shape in [
                    exptree(q),
                    TreeShape {
                        fanouts: vec![2, q.div_ceil(2)],
                    },
                ] {
                    if shape.depth() < 2 {
                        continue;
                    }
                    let contained = contained(&shape, q, &hosts, threads);
                    let depth = levels_needed(&shape, &contained);
                    let place = |index| Place {
                        index,
                        peers,
                        threads,
                    };
                    let at = |level, worker| {
                        tree_slots(&shape, level, &hosts, place(worker), &contained)
                    };
                    let proc = |w: usize| w / threads;
                    let case = format!("{peers} workers by {threads}, q {q}, {shape:?}");
                    // One way: (level, worker, node) to the end; the last slot.
                    let follow = |root: usize, p: u64| -> (Slot, usize) {
                        let (mut level, mut worker, mut crossings) = (1, root, 0);
                        loop {
                            let ways = at(level, worker);
                            let slot = ways.slots[ways.of[p as usize] as usize];
                            if proc(slot.to as usize) != proc(worker) {
                                crossings += 1;
                            }
                            if slot.node == FINISHED || level == shape.depth() {
                                return (slot, crossings);
                            }
                            assert!(
                                level < depth,
                                "{case}: partition {p} needs level {}",
                                level + 1
                            );
                            (level, worker) = (level + 1, slot.to as usize);
                        }
                    };
                    for p in 0..u64::from(q) {
                        let ends: Vec<(Slot, usize)> = (0..peers).map(|r| follow(r, p)).collect();
                        for (root, (slot, crossings)) in ends.iter().enumerate() {
                            assert_eq!(
                                slot.to as usize,
                                hosts.worker(p),
                                "{case}: partition {p} from root {root}"
                            );
                            let narrow = slot.narrow.expect("a class");
                            assert_eq!(
                                p % narrow.0,
                                narrow.1,
                                "{case}: partition {p} in {narrow:?}"
                            );
                            assert_eq!(
                                slot.narrow, ends[0].0.narrow,
                                "{case}: partition {p}, root {root}"
                            );
                            // A row crosses processes at most once per node it
                            // reaches below the root before its route is finished (so
                            // once, when its level-2 node has its subtree in one
                            // process), or, without such a node, once per level.
                            let most = contained[p as usize].map_or(shape.depth(), |c| c.0 - 1);
                            assert!(
                                *crossings <= most,
                                "{case}: partition {p} from root {root} crossed {crossings} times"
                            );
                            if slot.node == FINISHED && depth < shape.depth() {
                                finished_early += 1;
                            }
                        }
                    }
                    // Broadcast classes: every member below q once, from every root.
                    for class in [(1, 0), (2, 1), (3, 2), (5, 3), (7, 0), (9, 4)] {
                        for root in 0..peers {
                            let mut reached = Vec::new();
                            let mut todo = vec![(1usize, root, 0u64)];
                            while let Some((level, worker, node)) = todo.pop() {
                                let ways = at(level, worker);
                                let lambda_prev = shape.lambda(level - 1);
                                for k in broadcast_slots(
                                    &ways.of,
                                    class,
                                    (lambda_prev, node),
                                    u64::from(q),
                                ) {
                                    let slot = ways.slots[k as usize];
                                    if slot.node == FINISHED || level == shape.depth() {
                                        let share = intersect(class, slot.narrow.expect("a class"));
                                        reached.extend(
                                            share
                                                .map_or(Vec::new(), |s| {
                                                    class_members(s, u64::from(q)).collect()
                                                })
                                                .into_iter()
                                                .filter(|&p| hosts.worker(p) == slot.to as usize),
                                        );
                                    } else {
                                        todo.push((level + 1, slot.to as usize, slot.node));
                                    }
                                }
                            }
                            reached.sort_unstable();
                            let want: Vec<u64> = class_members(class, u64::from(q)).collect();
                            assert_eq!(reached, want, "{case}: class {class:?} from root {root}");
                        }
                    }
                }
            }
        }
        assert!(finished_early > 0, "no case left a level out");
    }

    /// A sub-router gives each window to one of its own splitters, all of them in turn
    /// as `pick` varies, and never to a splitter that does not exist.
    #[test]
    fn sub_routers_deal_to_their_own_splitters() {
        for p in 1..24u64 {
            for f in 1..6u64 {
                for r in 0..f {
                    let mut got: Vec<u64> =
                        (0..64).map(|k| sub_router_splitter(r, p, f, k)).collect();
                    got.sort_unstable();
                    got.dedup();
                    let want: Vec<u64> = match r < p {
                        true => (r..p).step_by(f as usize).collect(),
                        false => vec![p - 1],
                    };
                    assert_eq!(got, want, "sub-router {r} of fanout {f}, p = {p}");
                }
            }
        }
    }

    /// A window whose rows all go to one worker of the splitter's process goes to it
    /// whole: the same batch, with no row list; a window with rows for two local workers
    /// goes to each with its list.
    #[test]
    fn a_window_for_one_local_worker_goes_whole() {
        use braid_plan::plan::{Plan, Route, SourceSpec, Strategy};
        use braid_plan::types::Schema;
        let schema = Schema::ints(&["c0"]);
        let Plan::Split(split) = Plan::source("s", SourceSpec::Stdin, schema.clone()).split(
            4,
            Route::Expr {
                expr: braid_plan::expr::Expr::Column(0, "c0".into()),
                when: None,
            },
            None,
            Strategy::Fsplit,
        ) else {
            panic!("split() makes a Split");
        };
        let router = Router::new(&split, &Registry::new()).expect("router");
        let hosts = Hosts::of(&split, 2);
        let mut scratch = Scratch::default();
        let window = |values: &[i64]| {
            let mut b = Batch::new(1);
            for (i, v) in values.iter().enumerate() {
                b.push_ints(
                    RowKey {
                        seq: i as u64,
                        lane: 0,
                    },
                    &[*v],
                );
            }
            Window::new(0, 0, b)
        };
        let mut given = Vec::new();
        // Partitions 0 and 2: both on worker 0.
        let w = window(&[0, 2, 4, 6, 2, 0, 8, 10]);
        let batch = Arc::as_ptr(&w.batch);
        split_window(&router, &hosts, &(0..2), &mut scratch, w, &mut |w| {
            given.push(w)
        });
        assert_eq!(given.len(), 1);
        assert_eq!((given[0].to, given[0].rows.clone()), (0, None));
        assert_eq!(
            Arc::as_ptr(&given[0].batch),
            batch,
            "the window is not copied"
        );
        given.clear();
        // Half the rows for each worker.
        split_window(
            &router,
            &hosts,
            &(0..2),
            &mut scratch,
            window(&[0, 1, 2, 3]),
            &mut |w| given.push(w),
        );
        let lists: Vec<(u64, Option<Vec<u32>>)> =
            given.iter().map(|w| (w.to, w.rows.clone())).collect();
        assert_eq!(lists, vec![(0, Some(vec![0, 2])), (1, Some(vec![1, 3]))]);
    }
}
