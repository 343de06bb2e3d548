//! `Merge`: union, time-ordered (serial order) and keyed (partial results combined by
//! key, pre-combined per worker or through a tree of fan-in k).

use super::stash::EpochStash;
use super::{by_to, guarded, to_worker, Guard, Place, Window, WindowBuilder, Windows};
use crate::error::Result;
use crate::shared::Shared;
use braid_plan::batch::{Batch, Datum, RowKey, Scalar};
use braid_plan::combine::{Groups, KeyedMerge};
use braid_plan::expr::{Arena, Expr};
use braid_plan::function::Registry;
use braid_plan::output::sorted_order;
use braid_plan::plan::{Merge, MergeKind, SortKey};
use braid_plan::types::Schema;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Concat;

/// An epoch's accumulators by partition group, its least sequence number, and the
/// newest latency stamps (born, mark) of its windows (a combined row is made when the epoch closes).
type EpochGroups = (HashMap<u64, Groups>, u64, (u64, u64));

/// An epoch's batches (each with its epoch, where a time holds several: see
/// [`crate::shared::Granule`]) and their oldest stamps (born, mark).
type EpochBatches = (Vec<(u64, Arc<Batch>)>, (u64, u64));

/// The worker where ordered output is assembled.
pub(crate) const MERGE_WORKER: usize = 0;

pub(crate) fn render<'s>(
    input: Windows<'s>,
    merge: &Merge,
    in_schema: &Schema,
    registry: &Registry,
    place: Place,
    shared: &std::sync::Arc<crate::shared::Shared>,
) -> Result<Windows<'s>> {
    Ok(match &merge.kind {
        MergeKind::Union => input,
        MergeKind::TimeOrdered => time_ordered(input, in_schema.event_time, Vec::new(), shared),
        MergeKind::Sorted(by) => time_ordered(input, in_schema.event_time, by.clone(), shared),
        MergeKind::Keyed {
            key,
            combine,
            fanin,
            filter,
        } => {
            let km = Rc::new(KeyedMerge::new(key, combine, in_schema, registry)?);
            // A registered combiner is user code: its panic fails the run as such.
            let guard = match combine {
                braid_plan::plan::Combine::Native(name) => {
                    Some(Guard::new(format!("combiner `{name}`"), shared))
                }
                _ => None,
            };
            let q = match merge.input.as_ref() {
                braid_plan::plan::Plan::Map(m) => match m.input.as_ref() {
                    braid_plan::plan::Plan::Split(s) => s.q as u64,
                    _ => 1,
                },
                _ => 1,
            };
            match filter {
                None => keyed(input, km, *fanin, q, place, guard, shared),
                Some(f) => {
                    // The keyed side reports the rows the filter faults on (both skip them).
                    let combined = select(
                        input.clone(),
                        f.clone(),
                        Some(shared.clone()),
                        "Merge(keyed rows)",
                    );
                    let others = select(input, f.clone(), None, "Merge(union rows)");
                    keyed(combined, km, *fanin, q, place, guard, shared).concat(others)
                }
            }
        }
    })
}

/// Keeps the rows of each window where `filter` is true (`report`: the keyed side, which
/// reports the faults to it) or is not true; a row the filter faults on goes to
/// neither.
fn select<'s>(
    input: Windows<'s>,
    filter: Expr,
    report: Option<Arc<Shared>>,
    name: &str,
) -> Windows<'s> {
    let keep = report.is_some();
    input.unary::<WindowBuilder, _, _, _>(Pipeline, name, move |_, _| {
        // The strings the filter makes for one row (see `Arena`), reset after each.
        let mut arena = Arena::new();
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for w in data.drain(..) {
                    let b = &w.batch;
                    let mut out = Batch::new(b.arity());
                    for i in 0..b.len() {
                        arena.reset();
                        match filter.eval(&b.row(i), &arena) {
                            Ok(v) if v.is_true() == keep => out.push_row_of(b, i, b.key(i)),
                            Ok(_) => {}
                            Err(f) => {
                                if let Some(shared) = &report {
                                    let seq = b.key(i).seq;
                                    shared.fault("merge", "merge_filter", seq, None, &f);
                                }
                            }
                        }
                    }
                    if !out.is_empty() {
                        session.give(
                            Window::new(w.to, w.node, out)
                                .stamped(w.born, w.sent)
                                .marked(w.mark)
                                .at(w.epoch),
                        );
                    }
                }
            });
        }
    })
}

/// Collects every epoch's rows on one worker and emits them sorted by serial position;
/// rows with the same position (SQL's rows made at the end of an epoch) by the
/// columns `by` (a sorted merge; none for the time-ordered one), then their event-time
/// column `time`, then their values ([`sorted_order`]).
fn time_ordered<'s>(
    input: Windows<'s>,
    time: Option<usize>,
    by: Vec<SortKey>,
    shared: &Arc<Shared>,
) -> Windows<'s> {
    let shared = shared.clone();
    let (tk, granule) = (shared.ticks, shared.granule);
    let meter = shared
        .stamps
        .then(|| shared.latencies.node(braid_plan::plan::MERGE_NAME.into()));
    input.unary_frontier::<WindowBuilder, _, _, _>(
        to_worker(MERGE_WORKER),
        "Merge(time-ordered)",
        |_, _| {
            // Per epoch (per tick under a latency constraint: ticks hold runs of
            // sequence numbers in order) its batches, and their oldest stamp.
            let mut stash: EpochStash<EpochBatches> = EpochStash::new();
            let mut order: Vec<(RowKey, u32, u32)> = Vec::new();
            move |(input, frontier), output| {
                input.for_each(|cap, data| {
                    if let Some(m) = &meter {
                        super::note_arrivals(m, shared.now_ns(), data);
                    }
                    if let Some((batches, (born, mark))) = stash.at(&cap, || {
                        (Vec::new(), (crate::qos::UNSTAMPED, crate::qos::UNSTAMPED))
                    }) {
                        let at = tk.epoch(cap.least().copied().unwrap_or(0));
                        for w in data.drain(..) {
                            *born = (*born).min(w.born);
                            *mark = (*mark).min(w.mark);
                            batches.push((granule.epoch(at, w.epoch), w.batch));
                        }
                    }
                });
                while let Some((_, cap, (mut batches, (born, mark)))) = stash.pop_complete(frontier)
                {
                    // Each epoch of the time in order, as a time of its own (one, unless
                    // the time is a granule of several).
                    batches.sort_by_key(|b| b.0);
                    let mut from = 0;
                    while from < batches.len() {
                        let epoch = batches[from].0;
                        let to = from + batches[from..].iter().take_while(|b| b.0 == epoch).count();
                        let these = &batches[from..to];
                        from = to;
                        let arity = these[0].1.arity();
                        order.clear();
                        for (b, (_, batch)) in these.iter().enumerate() {
                            order.extend(
                                batch
                                    .keys()
                                    .iter()
                                    .enumerate()
                                    .map(|(i, k)| (*k, b as u32, i as u32)),
                            );
                        }
                        order.sort_unstable();
                        // Runs of equal keys (SQL's rows made at an epoch's end), by value.
                        let mut start = 0;
                        while start < order.len() {
                            let key = order[start].0;
                            let end =
                                start + order[start..].iter().take_while(|x| x.0 == key).count();
                            if end - start > 1 {
                                let mut run: Vec<(Vec<Scalar>, (RowKey, u32, u32))> = order
                                    [start..end]
                                    .iter()
                                    .map(|&x| {
                                        (these[x.1 as usize].1.row(x.2 as usize).to_scalars(), x)
                                    })
                                    .collect();
                                run.sort_by(|a, b| sorted_order(&a.0, &b.0, &by, time));
                                for (slot, (_, x)) in order[start..end].iter_mut().zip(run) {
                                    *slot = x;
                                }
                            }
                            start = end;
                        }
                        let mut out = Batch::with_capacity(arity, order.len());
                        for &(key, b, i) in &order {
                            out.push_row_of(&these[b as usize].1, i as usize, key);
                        }
                        output.session(&cap).give(
                            super::map::stamp(
                                Window::new(MERGE_WORKER as u64, 0, out),
                                (born, mark),
                                &shared,
                            )
                            .at(epoch),
                        );
                    }
                }
            }
        },
    )
}

fn key_hash(key: &[(u8, u64)], group: u64) -> u64 {
    let mut h = crate::source::generator::mix64(group ^ 0x9e37_79b9);
    for (t, v) in key {
        h = crate::source::generator::mix64(h ^ (*t as u64) ^ v.rotate_left(17));
    }
    h
}

/// Keyed merge. Stage 1 (on each worker) lifts partial rows into accumulators and
/// combines those of equal key and partition group; later stages exchange by
/// (key, group) and combine further; the last stage (group 0) finishes the rows.
/// Without a fan-in there are two stages: per worker, then global.
fn keyed<'s>(
    input: Windows<'s>,
    km: Rc<KeyedMerge>,
    fanin: Option<u32>,
    q: u64,
    place: Place,
    guard: Option<Guard>,
    shared: &std::sync::Arc<crate::shared::Shared>,
) -> Windows<'s> {
    // Group divisor per stage: stage i groups partitions p by p / divisor[i].
    let divisors: Vec<u64> = match fanin {
        None => vec![q.max(1) * 2, u64::MAX],
        Some(k) => {
            // Stage i combines partitions p / k^i; the last stage (all) is always
            // exchanged by key, since stage 1 runs where the partitions are.
            let k = k.max(2) as u64;
            let mut d = vec![k];
            while d.last().is_some_and(|&x| x.saturating_mul(k) < q) {
                let next = d.last().copied().unwrap_or(k).saturating_mul(k);
                d.push(next);
            }
            d.push(u64::MAX);
            d
        }
    };
    let stages = divisors.len();
    let mut stream = input;
    for (s, &div) in divisors.iter().enumerate() {
        let last = s + 1 == stages;
        let first = s == 0;
        let km = km.clone();
        let name = format!("Merge(keyed, stage {})", s + 1);
        let peers = place.peers as u64;
        let next_div = divisors.get(s + 1).copied().unwrap_or(u64::MAX);
        stream = if first {
            keyed_stage(
                stream,
                Pipeline,
                &name,
                km,
                (div, next_div),
                first,
                last,
                peers,
                guard.clone(),
                shared.clone(),
            )
        } else {
            keyed_stage(
                stream,
                by_to(),
                &name,
                km,
                (div, next_div),
                first,
                last,
                peers,
                guard.clone(),
                shared.clone(),
            )
        };
    }
    stream
}

#[allow(clippy::too_many_arguments)]
fn keyed_stage<'s, P>(
    stream: Windows<'s>,
    pact: P,
    name: &str,
    km: Rc<KeyedMerge>,
    (div, next_div): (u64, u64),
    first: bool,
    last: bool,
    peers: u64,
    guard: Option<Guard>,
    shared: std::sync::Arc<crate::shared::Shared>,
) -> Windows<'s>
where
    P: timely::dataflow::channels::pact::ParallelizationContract<u64, Vec<Window>>,
{
    let tk = shared.ticks;
    stream.unary_frontier::<WindowBuilder, _, _, _>(pact, name, move |_, _| {
        let mut stash: EpochStash<EpochGroups> = EpochStash::new();
        let mut row: Vec<Datum> = Vec::new();
        move |(input, frontier), output| {
            input.for_each(|cap, data| {
                // An epoch's groups combine whole: under ticks, at its last tick.
                let Some(entry) = stash.at_time(
                    &cap,
                    |t| tk.end(tk.epoch(t)),
                    || {
                        (
                            HashMap::new(),
                            u64::MAX,
                            (crate::qos::UNSTAMPED, crate::qos::UNSTAMPED),
                        )
                    },
                ) else {
                    return;
                };
                for w in data.drain(..) {
                    entry.2 = (
                        crate::qos::newest(entry.2 .0, w.born),
                        crate::qos::newest(entry.2 .1, w.mark),
                    );
                    guarded(guard.as_ref(), || {
                        let b = &w.batch;
                        for i in 0..b.len() {
                            let key = b.key(i);
                            entry.1 = entry.1.min(key.seq);
                            let part = key.lane >> 32;
                            let group = if div == u64::MAX { 0 } else { part / div };
                            let acc = if first {
                                km.lift(&b.row(i))
                            } else {
                                let mut acc = Vec::with_capacity(b.arity());
                                b.row(i).datums_into(&mut acc);
                                acc
                            };
                            entry.0.entry(group).or_default().add(&km, acc);
                        }
                    });
                }
            });
            while let Some((_, cap, (mut groups, min_seq, (newest, mark)))) =
                stash.pop_complete(frontier)
            {
                let mut session = output.session(&cap);
                let mut by_dest: HashMap<u64, Batch> = HashMap::new();
                guarded(guard.as_ref(), || {
                    for (group, mut g) in groups.drain() {
                        for acc in g.drain() {
                            if last {
                                // A sum BIGINT cannot hold: the group's row is a fault
                                // (skipped and reported, or the run's error).
                                if let Err(f) = km.finish(&acc, &mut row) {
                                    shared.fault("merge", "keyed merge", min_seq, None, &f);
                                    continue;
                                }
                                let b = by_dest
                                    .entry(MERGE_WORKER as u64)
                                    .or_insert_with(|| Batch::new(row.len()));
                                b.push_datums(
                                    RowKey {
                                        seq: min_seq,
                                        lane: 0,
                                    },
                                    &row,
                                );
                            } else {
                                // The next stage's worker: by key and the next group.
                                let next_group = if next_div == u64::MAX {
                                    0
                                } else {
                                    group * div / next_div
                                };
                                let h = key_hash(&km.key_of_acc(&acc), next_group);
                                let dest = h % peers;
                                let b =
                                    by_dest.entry(dest).or_insert_with(|| Batch::new(acc.len()));
                                b.push_datums(
                                    RowKey {
                                        seq: min_seq,
                                        lane: (group * div) << 32,
                                    },
                                    &acc,
                                );
                            }
                        }
                    }
                });
                for (to, batch) in by_dest {
                    session.give(
                        Window::new(to, 0, batch)
                            .stamped(newest, newest)
                            .marked(mark),
                    );
                }
            }
        }
    })
}
