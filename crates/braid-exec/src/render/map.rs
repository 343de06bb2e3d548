//! `Map`: one stream-function instance per logical partition, hosted on the
//! partition's worker; each sees its rows of an epoch in serial order once the epoch
//! is complete.
//!
//! A Map learns of an epoch only when its worker receives rows of it. A stream function
//! that wants `end_of_epoch` for every epoch of the source
//! (`StreamFunctionFactory::every_epoch`) also reads [`ticks`]: one empty window per
//! worker for every epoch in which the source had rows.

use super::stash::EpochStash;
use super::{by_to, Place, Window, WindowBuilder, Windows};
use crate::error::Result;
use crate::runtime::Shared;
use braid_plan::batch::{Batch, RowKey};
use braid_plan::function::{Emitter, Registry, StreamFunction};
use braid_plan::placement::{class_members, Hosts};
use braid_plan::plan::{Map, Plan};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::core::OkErr;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Concat};

/// Epoch of outputs made when the input has ended.
pub(crate) const END_EPOCH: u64 = u64::MAX;

/// For every epoch in which this worker's share of `source` has rows, one empty window
/// to every worker.
pub(crate) fn ticks(source: Windows<'_>, place: Place) -> Windows<'_> {
    let peers = place.peers;
    source.unary::<WindowBuilder, _, _, _>(Pipeline, "EpochTicks", move |_, _| {
        // The source's epochs only grow: this skips repeats within an epoch.
        let mut last: Option<u64> = None;
        move |input, output| {
            input.for_each(|cap, data| {
                let Some(&epoch) = cap.least() else {
                    return;
                };
                if last == Some(epoch) || data.iter().all(|w| w.batch.is_empty()) {
                    return;
                }
                last = Some(epoch);
                let mut session = output.session(&cap);
                for w in 0..peers {
                    session.give(Window {
                        to: w as u64,
                        node: 0,
                        batch: Batch::new(0),
                    });
                }
            });
        }
    })
}

/// Where a Map sits and what it writes.
pub(crate) struct Layout {
    pub place: Place,
    /// The stage (numbered from the source: the Maps below this one, and in the plans
    /// of a `Together` before this one's).
    pub stage: usize,
    /// Columns of the output rows.
    pub out_arity: usize,
    /// Columns of the late rows, when a plan reads them.
    pub late_arity: Option<usize>,
}

/// Tags a window of late rows in the Map's output (split off right after it).
const LATE_NODE: u64 = u64::MAX;

/// Renders `map` over the split's output `input`; `ticks` (from [`ticks`]) when the
/// function wants `end_of_epoch` in every epoch of the source. Returns the output and,
/// when `layout.late_arity` is set, the late rows the function refused.
pub(crate) fn render<'s>(
    input: Windows<'s>,
    ticks: Option<Windows<'s>>,
    map: &Map,
    registry: &Registry,
    layout: Layout,
    shared: Arc<Shared>,
) -> Result<(Windows<'s>, Option<Windows<'s>>)> {
    let Layout {
        place,
        stage,
        out_arity,
        late_arity,
    } = layout;
    let Plan::Split(split) = map.input.as_ref() else {
        return Err(braid_plan::error::Error::Internal(
            "Map over a non-Split passed schema()".into(),
        )
        .into());
    };
    let q = split.q;
    let factory = registry.function(&map.function)?.clone();
    let every_epoch = factory.every_epoch();
    let me = place.index;
    let hosts = Hosts::of(split, place.peers);
    // This worker's partitions, and each partition's index among them (NOT_HERE if
    // another worker hosts it).
    let local: Vec<u32> = hosts.partitions(q, me);
    let mut index = vec![NOT_HERE; q as usize];
    for (k, &p) in local.iter().enumerate() {
        index[p as usize] = k as u32;
    }
    let name = format!("Map({})", map.function);
    let function = map.function.clone();
    // Ticks are empty windows: their only effect is to make the epoch known here.
    let input = match ticks {
        Some(ticks) => input.concat(ticks),
        None => input,
    };
    let out = input.unary_frontier::<WindowBuilder, _, _, _>(by_to(), &name, move |cap, _| {
        let mut end_cap: Option<Capability<u64>> = Some(cap.delayed(&END_EPOCH));
        drop(cap);
        let mut instances: Vec<Option<Box<dyn StreamFunction>>> =
            (0..local.len()).map(|_| None).collect();
        let mut stash: EpochStash<Vec<Batch>> = EpochStash::new();
        // Per local partition: (seq, batch, row) of its rows in the epoch being processed.
        let mut rows: Vec<Vec<(u64, u32, u32)>> = vec![Vec::new(); local.len()];
        let mut out = Batch::new(out_arity);
        let mut late = late_arity.map(Batch::new);
        let mut targets = BroadcastTargets::default();
        // Partitions whose function panicked: their rows are dropped (the run fails).
        let mut failed = vec![false; local.len()];
        // Per local partition: nanoseconds in its stream function, and rows.
        let mut spent: Vec<(u64, u64)> = vec![(0, 0); local.len()];
        move |(input, frontier), output| {
            input.for_each(|cap, data| {
                if let Some(batches) = stash.at(&cap, Vec::new) {
                    batches.extend(data.drain(..).map(|w| w.batch));
                }
            });
            while let Some((epoch, cap, mut batches)) = stash.pop_complete(frontier) {
                // A splitter's batch holds rows of one source window in order, and
                // windows cover disjoint runs of sequence numbers: in the order of
                // their first rows, batches from different splitters usually give
                // every partition's rows already sorted (which the sort below then
                // only checks).
                batches.sort_unstable_by_key(|b| b.keys().first().map_or(0, |k| k.seq));
                let mut misrouted = None;
                for (b, batch) in batches.iter().enumerate() {
                    for (i, key) in batch.keys().iter().enumerate() {
                        let entry = (key.seq, b as u32, i as u32);
                        match RowKey::broadcast_target(key.lane) {
                            None if key.lane == RowKey::OMIT => {}
                            None => match index.get(key.lane as usize) {
                                Some(&k) if k != NOT_HERE => rows[k as usize].push(entry),
                                _ => misrouted = Some(key.lane),
                            },
                            Some(class) => {
                                for &k in targets.of(class, q, &index) {
                                    rows[k as usize].push(entry);
                                }
                            }
                        }
                    }
                }
                if let Some(lane) = misrouted {
                    shared.bug(format!(
                        "a row for partition {lane} of {q} reached worker {me}, which does \
                             not host it"
                    ));
                }
                // One clock reading per partition: each partition's time runs from
                // the previous reading.
                let mut last = Instant::now();
                for (k, list) in rows.iter_mut().enumerate() {
                    // Partitions with rows, and with an every-epoch function, every
                    // partition created so far.
                    if failed[k] {
                        list.clear();
                        continue;
                    }
                    if list.is_empty() && !(every_epoch && instances[k].is_some()) {
                        continue;
                    }
                    list.sort_unstable();
                    let p = local[k];
                    // User code: a panic fails the run with an error naming the
                    // function, instead of taking the worker down (the other workers
                    // would wait for it forever).
                    let ran = catch_unwind(AssertUnwindSafe(|| {
                        let f = instances[k].get_or_insert_with(|| factory.create(p, q));
                        for &(seq, b, i) in list.iter() {
                            f.process(
                                batches[b as usize].row(i as usize),
                                &mut Emitter::new(&mut out, seq, p)
                                    .at_epoch(epoch)
                                    .with_late(late.as_mut()),
                            );
                        }
                        f.end_of_epoch(
                            epoch,
                            &mut Emitter::new(&mut out, RowKey::END_OF_EPOCH, p).at_epoch(epoch),
                        );
                    }));
                    if let Err(payload) = ran {
                        failed[k] = true;
                        instances[k] = None;
                        shared.user_code_panicked(
                            &format!("stream function `{function}` on partition {p}"),
                            payload.as_ref(),
                        );
                    }
                    let now = Instant::now();
                    spent[k].0 += (now - last).as_nanos() as u64;
                    last = now;
                    spent[k].1 += list.len() as u64;
                    list.clear();
                }
                if let Some(w) = take_window(&mut out, me) {
                    output.session(&cap).give(w);
                }
                if let Some(mut w) = late.as_mut().and_then(|l| take_window(l, me)) {
                    w.node = LATE_NODE;
                    output.session(&cap).give(w);
                }
            }
            if frontier.is_empty() {
                if let Some(cap) = end_cap.take() {
                    for (k, f) in instances.iter_mut().enumerate() {
                        if let Some(f) = f {
                            let p = local[k];
                            let ran = catch_unwind(AssertUnwindSafe(|| {
                                f.finish(
                                    &mut Emitter::new(&mut out, RowKey::FINISH, p)
                                        .at_epoch(END_EPOCH),
                                )
                            }));
                            if let Err(payload) = ran {
                                shared.user_code_panicked(
                                    &format!("stream function `{function}` on partition {p}"),
                                    payload.as_ref(),
                                );
                            }
                        }
                    }
                    if let Some(w) = take_window(&mut out, me) {
                        output.session(&cap).give(w);
                    }
                    shared.add_costs(stage, &local, &spent);
                }
            }
        }
    });
    Ok(match late_arity {
        None => (out, None),
        Some(_) => {
            let (out, late) = out.ok_err::<Vec<Window>, _, Vec<Window>, _, _>(|w| {
                if w.node == LATE_NODE {
                    Err(Window { node: 0, ..w })
                } else {
                    Ok(w)
                }
            });
            (out, Some(late))
        }
    })
}

/// Index of a partition another worker hosts.
const NOT_HERE: u32 = u32::MAX;

/// The local partitions a broadcast lane `(modulus, residue)` names, remembered per
/// lane: a broadcast row then costs one push per partition it reaches, not a test of
/// every local partition.
#[derive(Default)]
struct BroadcastTargets(std::collections::HashMap<(u64, u64), Vec<u32>>);

impl BroadcastTargets {
    /// Indexes into this worker's partitions (`index`, by partition) of the partitions
    /// below `q` in `class` that this worker hosts.
    fn of(&mut self, class: (u64, u64), q: u32, index: &[u32]) -> &[u32] {
        self.0.entry(class).or_insert_with(|| {
            class_members(class, q as u64)
                .map(|p| index[p as usize])
                .filter(|&k| k != NOT_HERE)
                .collect()
        })
    }
}

/// Moves the rows in `out` into a window for this worker, if there are any.
fn take_window(out: &mut Batch, me: usize) -> Option<Window> {
    if out.is_empty() {
        return None;
    }
    let batch = std::mem::replace(out, Batch::new(out.arity()));
    Some(Window {
        to: me as u64,
        node: 0,
        batch,
    })
}
