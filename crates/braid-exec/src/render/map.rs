//! `Map`: one stream-function instance per logical partition, hosted on the
//! partition's worker; each sees its rows of an epoch in serial order once the epoch
//! is complete.
//!
//! A Map learns of an epoch only when its worker receives rows of it. A stream function
//! that wants `end_of_epoch` for every epoch of the source
//! (`StreamFunctionFactory::every_epoch`) also reads [`ticks`]: one empty window per
//! worker for every epoch in which the source had rows.

use super::stash::{EpochStash, HeldBarriers};
use super::{by_to, schedule, Barriers, Place, Window, WindowBuilder, Windows};
use crate::checkpoint::Store;
use crate::error::Result;
use crate::shared::Shared;
use braid_plan::batch::{Batch, Row, RowKey};
use braid_plan::function::{Emitter, Registry, RowFault, StreamFunction};
use braid_plan::placement::{class_members, intersect, Hosts, FSPLIT_WORKER};
use braid_plan::plan::{Map, Plan, Scheduler};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::core::OkErr;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Concat};

/// Epoch of outputs made when the input has ended.
pub(crate) const END_EPOCH: u64 = u64::MAX;

/// For every epoch in which this worker's share of `source` sent a window (rows, or an
/// empty one: a live source's heartbeat), one empty window to every worker.
pub(crate) fn ticks(
    source: Windows<'_>,
    place: Place,
    tk: crate::qos::Ticks,
    granule: crate::shared::Granule,
) -> Windows<'_> {
    let peers = place.peers;
    source.unary::<WindowBuilder, _, _, _>(Pipeline, "EpochTicks", move |_, _| {
        // The source's epochs only grow: this skips repeats within an epoch.
        let mut last: Option<u64> = None;
        move |input, output| {
            input.for_each(|cap, data| {
                let Some(&t) = cap.least() else {
                    return;
                };
                let mut session = output.session(&cap);
                let mut tick = |epoch: u64| {
                    // An empty window counts: a live source sends one when time moves
                    // without data (a heartbeat), and windows must close then.
                    if last == Some(epoch) {
                        return;
                    }
                    last = Some(epoch);
                    for w in 0..peers {
                        session.give(Window::new(w as u64, 0, Batch::new(0)).at(epoch));
                    }
                };
                // Where a time holds several epochs, each window says its own.
                data.iter()
                    .for_each(|w| tick(granule.epoch(tk.epoch(t), w.epoch)));
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
    barriers: Barriers<'s>,
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
    // Its instances keep rows to run them together: each batch handed over ends with
    // `end_of_batch`.
    let holds_rows = factory.holds_rows();
    let me = place.index;
    let hosts = Hosts::of(split, place.peers);
    // A stage the controller may chain ([`crate::qos::Chain`]) has all its partitions
    // on worker 0 while chained (a first stage that keeps no state is chained by its
    // splitter instead: its rows go to worker 0's own partitions).
    let store = shared.checkpoints.clone();
    let moves = shared
        .latencies
        .chain
        .get()
        .and_then(|c| Some((c, c.stage(stage)?)))
        .filter(|&(_, stateless)| !(stage == 0 && stateless))
        .map(|(chain, stateless)| {
            // A run restored from checkpoint `c` resumes at epoch `c + 1`.
            let start = store
                .as_ref()
                .and_then(|s| s.restored_epoch())
                .map_or(0, |c| c + 1);
            let (chained, next) = chain.settled(start);
            Moves {
                latencies: shared.latencies.clone(),
                ticks: shared.ticks,
                stateless,
                chained,
                next,
            }
        });
    // The partitions the plan places here; and those this worker can host (while
    // chained, worker 0 hosts them all).
    let planned: Vec<u32> = hosts.partitions(q, me);
    let local: Vec<u32> = match &moves {
        Some(_) if me == FSPLIT_WORKER => (0..q).collect(),
        _ => planned.clone(),
    };
    // Per local partition: whether the plan places it here, and whether it is here now.
    let planned: Vec<bool> = local.iter().map(|p| planned.contains(p)).collect();
    let chained_now = moves.as_ref().is_some_and(|m| m.chained);
    let here = hosted(&planned, chained_now, me == FSPLIT_WORKER);
    let name = braid_plan::plan::map_name(&map.function);
    let function = map.function.clone();
    let timed = shared.measure_costs;
    // The source whose rows its rows' sequence numbers count, if any.
    let source = match split.input.as_ref() {
        Plan::Source(s) => Some(s.name.clone()),
        _ => None,
    };
    // Under a latency constraint ([`crate::qos`]) the first stage runs each tick as soon
    // as it is complete (its rows come in serial order by sequence number in the
    // source, read by one worker); any other Map waits for the whole epoch.
    let tk = shared.ticks;
    let granule = shared.granule;
    let eager = tk.on()
        && matches!(split.input.as_ref(), Plan::Source(s) if !matches!(s.spec, braid_plan::plan::SourceSpec::Late { .. }));
    let meter = shared.stamps.then(|| shared.latencies.node(name.clone()));
    // Ticks are empty windows: their only effect is to make the epoch known here.
    let input = match ticks {
        Some(ticks) => input.concat(ticks),
        None => input,
    };
    let policy = map.scheduler;
    let quantum = shared
        .quantum
        .or_else(|| schedule::quantum(policy, shared.constraint));
    let flush_after = schedule::flush_after(shared.constraint);
    // Without a quantum (FIFO, no constraint) nothing yields: the lists (when rows do
    // not come in serial order, or costs are measured) run whole, in partition order.
    let scheduled = quantum.is_some();
    let slice = schedule::slice(quantum);
    let clocked =
        timed || (scheduled && matches!(policy, Scheduler::Chain | Scheduler::ChainFlush));
    let scope = input.scope();
    let out = input.binary_frontier::<_, WindowBuilder, _, _, _, _>(
        barriers,
        by_to(),
        Pipeline,
        &name,
        move |cap, info| {
            let activator = scope.activator_for(info.address.clone());
            let mut end_cap: Option<Capability<u64>> = Some(cap.delayed(&END_EPOCH));
            drop(cap);
            let mut parts = Partitions {
                slots: local
                    .iter()
                    .zip(&here)
                    .map(|(&partition, &here)| Slot {
                        f: None,
                        partition,
                        here,
                        failed: false,
                        touched: false,
                        in_epoch: false,
                    })
                    .collect(),
                factory,
                q,
                stage,
                function: function.clone(),
                shared: shared.clone(),
            };
            // Each hosted partition's index among this worker's (NOT_HERE if another
            // worker hosts it now).
            let mut index = parts.index();
            let mut moves = moves;
            if let Some(store) = &store {
                if let Err(e) = parts.restore(store, stage) {
                    shared.fatal(e);
                }
            }
            // Checkpoint barriers, each held until this Map's part of it is written.
            let mut held = HeldBarriers::default();
            let mut stash: EpochStash<Vec<Window>> = EpochStash::new();
            // Where a time holds several epochs ([`crate::shared::Granule`]): the
            // epochs of the time taken from the stash not run yet, in order.
            let mut epochs: std::collections::VecDeque<(u64, Capability<u64>, Vec<Window>)> =
                Default::default();
            // Per local partition: (seq, batch, row) of its rows in the epoch being processed.
            let mut rows: Vec<Vec<(u64, u32, u32)>> = vec![Vec::new(); local.len()];
            let mut out = Batch::new(out_arity);
            let mut late = late_arity.map(Batch::new);
            let mut faults: Vec<RowFault> = Vec::new();
            let mut targets = BroadcastTargets::default();
            let mut run_rows: Vec<u32> = Vec::new();
            // Per local partition: nanoseconds in its stream function, and rows.
            let mut spent: Vec<(u64, u64)> = vec![(0, 0); local.len()];
            // Eager (ticks): the epoch open, with a capability at its last tick, where
            // its end-of-epoch results go, and the newest stamp of its windows.
            let mut open: Option<(u64, Capability<u64>, (u64, u64))> = None;
            // The time being run, when a quantum ended before its work did.
            let mut running: Option<Running> = None;
            // Chain's measured rates, and round robin's next partition.
            let mut rates = schedule::Rates::new(local.len());
            let mut turn = 0usize;
            // Rows come in and not run yet (a broadcast row once per partition once its
            // time is taken): the Map's queue.
            let mut waiting_rows = 0u64;
            move |(input, frontier), (barrier_in, barrier_frontier), output| {
                input.for_each(|cap, data| {
                    if let Some(m) = &meter {
                        super::note_arrivals(m, shared.now_ns(), data);
                    }
                    let key = |t: u64| match tk.on() && !eager {
                        true => tk.end(tk.epoch(t)),
                        false => t,
                    };
                    if let Some(windows) = stash.at_time(&cap, key, Vec::new) {
                        waiting_rows += data.iter().map(|w| w.len() as u64).sum::<u64>();
                        windows.append(data);
                    }
                });
                shared
                    .counters
                    .waiting_peak
                    .fetch_max(waiting_rows, std::sync::atomic::Ordering::Relaxed);
                barrier_in.for_each(|cap, data| held.hold(&cap, data, &shared));
                // An epoch is done once neither rows nor a barrier can still come for it.
                let done = |t: u64| !frontier.less_equal(&t) && !barrier_frontier.less_equal(&t);
                let began = Instant::now();
                // The first time of the next switch of the stage's way, if one is due.
                let mut bound = moves.as_ref().and_then(Moves::bound);
                let before = |t: u64, bound: Option<u64>| bound.is_none_or(|b| t < b);
                // Waiting for partitions handed over to this worker.
                let mut taking = false;
                loop {
                    if running.is_none() {
                        let next = epochs.pop_front().or_else(|| {
                            let (t, cap, batches) =
                                stash.pop_done(|t| done(t) && before(t, bound))?;
                            if !granule.on() {
                                return Some((tk.epoch(t), cap, batches));
                            }
                            by_epoch(cap, batches, &mut epochs);
                            epochs.pop_front()
                        });
                        let Some((epoch, cap, mut batches)) = next else {
                            // Every epoch before the switch done and run here: the
                            // partitions change hands.
                            if let Some(b) = bound.filter(|&b| done(b - 1)) {
                                let m = moves.as_mut().expect("a bound comes from moves");
                                let ends = (every_epoch, me);
                                let closed = close_open(
                                    &mut parts,
                                    open.take(),
                                    ends,
                                    &mut out,
                                    &mut faults,
                                    source.as_deref(),
                                );
                                if let Some((end, w)) = closed {
                                    output.session(&end).give(w);
                                }
                                let store = store.as_deref();
                                save_due(&mut held, |t| t < b, &parts, store, stage, &shared);
                                match parts.switch(m, &planned, me == FSPLIT_WORKER) {
                                    Ok(true) => {
                                        index = parts.index();
                                        targets = BroadcastTargets::default();
                                        bound = m.bound();
                                        continue;
                                    }
                                    Ok(false) => taking = true,
                                    Err(e) => shared.fatal(e),
                                }
                            }
                            break;
                        };
                        let born = batches
                            .iter()
                            .fold(super::UNSTAMPED2, |s, w| (s.0.min(w.born), s.1.min(w.mark)));
                        if eager {
                            // A tick of a later epoch: the epoch before is complete (its
                            // ticks all came out of the stash before this one).
                            let ends = (every_epoch, me);
                            let closed = close_open(
                                &mut parts,
                                open.take_if(|o| o.0 != epoch),
                                ends,
                                &mut out,
                                &mut faults,
                                source.as_deref(),
                            );
                            if let Some((end, w)) = closed {
                                output.session(&end).give(w);
                            }
                            let o = open.get_or_insert_with(|| {
                                (epoch, cap.delayed(&tk.end(epoch)), super::UNSTAMPED2)
                            });
                            o.2 = batches.iter().fold(o.2, |s, w| {
                                (
                                    crate::qos::newest(s.0, w.born),
                                    crate::qos::newest(s.1, w.mark),
                                )
                            });
                        }
                        // Checkpoints before this epoch: the state holds exactly their epochs.
                        let first = tk.first(epoch);
                        save_due(
                            &mut held,
                            |t| t < first,
                            &parts,
                            store.as_deref(),
                            stage,
                            &shared,
                        );
                        // A splitter's batch holds rows of one source window in order, and
                        // windows cover disjoint runs of sequence numbers: in the order of
                        // their first rows, batches from different splitters usually give
                        // every partition's rows already sorted (which the sort below then
                        // only checks).
                        batches
                            .sort_unstable_by_key(|w| w.batch.keys().first().map_or(0, |k| k.seq));
                        // Usually the rows now come in serial order, and then every
                        // partition's rows do: unless costs are measured per partition or
                        // another policy orders them, each row goes to its partition's
                        // function as it comes, in one pass, window by window, instead of
                        // through per-partition lists.
                        let plain = !timed && policy == Scheduler::Fifo;
                        let direct = plain && in_serial_order(&batches);
                        if plain && !direct {
                            crate::source::Counters::add(&shared.counters.sorted_epochs, 1);
                        }
                        let mut misrouted = None;
                        if !direct {
                            each_row(
                                &batches,
                                &index,
                                &mut targets,
                                q,
                                &mut misrouted,
                                |k, seq, _, b, i| rows[k as usize].push((seq, b as u32, i as u32)),
                            );
                        }
                        report_misrouted(&shared, misrouted, q, me);
                        if !direct {
                            // Counted from now on per partition's copy.
                            let came: u64 = batches.iter().map(|w| w.len() as u64).sum();
                            let copies: u64 = rows.iter().map(|l| l.len() as u64).sum();
                            waiting_rows = (waiting_rows + copies).saturating_sub(came);
                        }
                        running = Some(Running {
                            epoch,
                            cap,
                            batches,
                            born,
                            direct: direct.then_some(0),
                            waiting: None,
                        });
                    }
                    let r = running.as_mut().expect("set above");
                    let epoch = r.epoch;
                    let over = || quantum.is_some_and(|q| began.elapsed() >= q);
                    // Rows in serial order: window by window, each row to its partition.
                    while let Some(b) = r.direct.filter(|&b| b < r.batches.len()) {
                        let mut misrouted = None;
                        // Held rows run once the time's windows are all in (or the
                        // pass yields), so they make batches across windows.
                        let hand_on = holds_rows && (b + 1 == r.batches.len() || over());
                        let mut emit = Emitter::new(&mut out, 0, 0)
                            .at_epoch(epoch)
                            .with_late(late.as_mut())
                            .with_faults(&mut faults);
                        let ran = catch_unwind(AssertUnwindSafe(|| {
                            each_run(
                                &r.batches[b],
                                &index,
                                &mut targets,
                                q,
                                &mut misrouted,
                                &mut run_rows,
                                |k, batch, rows| {
                                    let (f, p) = parts.live(k as usize);
                                    emit.restart(0, p);
                                    f.process_rows(batch, rows, &mut emit);
                                },
                            );
                            if hand_on {
                                parts.end_of_batch(&mut emit);
                            }
                        }));
                        if let Err(payload) = ran {
                            // The emitter was last restarted for the failing call.
                            let k = index[emit.partition() as usize];
                            parts.fail(k as usize, payload.as_ref());
                        }
                        report_misrouted(&shared, misrouted, q, me);
                        r.direct = Some(b + 1);
                        waiting_rows = waiting_rows.saturating_sub(r.batches[b].len() as u64);
                        if over() && b + 1 < r.batches.len() {
                            break;
                        }
                    }
                    if r.direct.is_none_or(|b| b >= r.batches.len()) {
                        // The partitions' lists (empty after the direct pass), and the end
                        // of the epoch, slice by slice in the policy's order.
                        let waiting = r.waiting.get_or_insert_with(|| {
                            (0..rows.len())
                                .map(|k| {
                                    // Partitions with rows, and with an every-epoch
                                    // function, every partition created so far.
                                    let touched = std::mem::take(&mut parts.slots[k].touched);
                                    let list = &mut rows[k];
                                    if parts.slots[k].failed {
                                        waiting_rows =
                                            waiting_rows.saturating_sub(list.len() as u64);
                                        list.clear();
                                        return None;
                                    }
                                    if eager {
                                        // A tick: rows only; the end of the epoch comes
                                        // when it does.
                                        parts.slots[k].in_epoch |= touched || !list.is_empty();
                                        if list.is_empty() {
                                            return None;
                                        }
                                    } else if list.is_empty()
                                        && !touched
                                        && !(every_epoch && parts.created(k))
                                    {
                                        return None;
                                    }
                                    list.sort_unstable();
                                    Some(0)
                                })
                                .collect()
                        });
                        // What the policy sees of each partition's work left (without
                        // a quantum there is no policy: partitions in order, lists whole).
                        let mut view: Vec<Option<schedule::Waiting>> = match scheduled {
                            true => waiting
                                .iter()
                                .enumerate()
                                .map(|(k, &at)| seen(&rows[k], &r.batches, at))
                                .collect(),
                            false => Vec::new(),
                        };
                        let mut cursor = 0;
                        loop {
                            let next = match scheduled {
                                true => schedule::pick(
                                    policy,
                                    slice,
                                    &view,
                                    &mut turn,
                                    &rates,
                                    shared.now_ns(),
                                    flush_after,
                                ),
                                false => {
                                    while waiting.get(cursor).is_some_and(Option::is_none) {
                                        cursor += 1;
                                    }
                                    waiting
                                        .get(cursor)
                                        .and_then(|&at| Some((cursor, rows[cursor].len() - at?)))
                                }
                            };
                            let Some((k, n)) = next else {
                                break;
                            };
                            let bound = match scheduled {
                                true => schedule::fifo_bound(policy, &view, k),
                                false => u64::MAX,
                            };
                            let from = waiting[k].expect("picked");
                            let list = &rows[k];
                            let mut to = from + n;
                            if bound != u64::MAX {
                                // FIFO: only rows no later than another partition's next
                                // (the first always is: its partition has the oldest).
                                to = from
                                    + list[from..to].iter().take_while(|r| r.0 <= bound).count();
                            }
                            let last = to >= list.len();
                            let p = local[k];
                            let made = out.len();
                            // One clock reading a slice, only when something reads
                            // it (costs measured, or Chain's rates).
                            let clock = clocked.then(Instant::now);
                            let ran = catch_unwind(AssertUnwindSafe(|| {
                                let f = parts.get(k);
                                let mut emit = Emitter::new(&mut out, 0, p)
                                    .at_epoch(epoch)
                                    .with_late(late.as_mut())
                                    .with_faults(&mut faults);
                                for &(seq, b, i) in &list[from..to] {
                                    emit.restart(seq, p);
                                    f.process(
                                        r.batches[b as usize].batch.row(i as usize),
                                        &mut emit,
                                    );
                                }
                                if holds_rows {
                                    f.end_of_batch(&mut emit);
                                }
                                if eager || !last {
                                    return;
                                }
                                f.end_of_epoch(
                                    epoch,
                                    &mut Emitter::new(&mut out, RowKey::END_OF_EPOCH, p)
                                        .at_epoch(epoch)
                                        .with_faults(&mut faults),
                                );
                            }));
                            let ns = clock.map_or(0, |c| c.elapsed().as_nanos() as u64);
                            if clocked {
                                rates.note(k, to - from, out.len().saturating_sub(made), ns);
                            }
                            if timed {
                                spent[k].0 += ns;
                                spent[k].1 += (to - from) as u64;
                            }
                            waiting[k] = Some(to);
                            waiting_rows = waiting_rows.saturating_sub((to - from) as u64);
                            if ran.is_err() || last {
                                // A failed partition's rows are dropped.
                                waiting_rows =
                                    waiting_rows.saturating_sub((rows[k].len() - to) as u64);
                                if let Err(payload) = ran {
                                    parts.fail(k, payload.as_ref());
                                }
                                waiting[k] = None;
                                rows[k].clear();
                            }
                            if scheduled {
                                view[k] = seen(&rows[k], &r.batches, waiting[k]);
                            }
                            if over() && waiting.iter().any(Option::is_some) {
                                break;
                            }
                        }
                    }
                    let finished = r.direct.is_none_or(|b| b >= r.batches.len())
                        && r.waiting
                            .as_ref()
                            .is_some_and(|w| w.iter().all(Option::is_none));
                    report_faults(&mut faults, &shared, &function, source.as_deref());
                    if timed {
                        // Live: a profile read during the run sees each epoch's costs.
                        shared.add_costs(stage, &local, &spent);
                        spent.iter_mut().for_each(|s| *s = (0, 0));
                    }
                    // What the time made so far goes on now (all of it, when it is done).
                    if let Some(w) = take_window(&mut out, me) {
                        output
                            .session(&r.cap)
                            .give(stamp(w, r.born, &shared).at(epoch));
                    }
                    if let Some(mut w) = late.as_mut().and_then(|l| take_window(l, me)) {
                        w.node = LATE_NODE;
                        output
                            .session(&r.cap)
                            .give(stamp(w, r.born, &shared).at(epoch));
                    }
                    if finished {
                        running = None;
                    }
                    if over() {
                        // Yield: the operators after this one run, then this one goes on.
                        if running.is_some() || !epochs.is_empty() || stash.any_done(done) {
                            activator.activate();
                            return;
                        }
                    }
                }
                // Eager: the open epoch is complete once nothing can still come for its
                // last tick (checked once the stash holds no complete tick: a tick of
                // the epoch still in it must be run first).
                let ends = (every_epoch, me);
                let closed = close_open(
                    &mut parts,
                    open.take_if(|o| done(tk.end(o.0))),
                    ends,
                    &mut out,
                    &mut faults,
                    source.as_deref(),
                );
                if let Some((end, w)) = closed {
                    output.session(&end).give(w);
                }
                let due = |t| done(t) && before(t, bound);
                save_due(&mut held, due, &parts, store.as_deref(), stage, &shared);
                if taking {
                    // The workers handing partitions over run on their own threads:
                    // look again soon.
                    activator.activate();
                    return;
                }
                // The input has ended once neither rows nor a barrier can still come
                // (the barriers' frontier may trail the rows': epochs then wait in the
                // stash, and finishing before them closed their windows at the end).
                if frontier.is_empty()
                    && barrier_frontier.is_empty()
                    && bound.is_none()
                    && running.is_none()
                    && epochs.is_empty()
                    && stash.is_empty()
                {
                    if let Some(cap) = end_cap.take() {
                        for (k, &p) in local.iter().enumerate() {
                            if !parts.created(k) {
                                continue;
                            }
                            let ran = catch_unwind(AssertUnwindSafe(|| {
                                parts.get(k).finish(
                                    &mut Emitter::new(&mut out, RowKey::FINISH, p)
                                        .at_epoch(END_EPOCH)
                                        .with_faults(&mut faults),
                                )
                            }));
                            if let Err(payload) = ran {
                                parts.fail(k, payload.as_ref());
                            }
                        }
                        report_faults(&mut faults, &shared, &function, source.as_deref());
                        if let Some(w) = take_window(&mut out, me) {
                            output.session(&cap).give(w.at(END_EPOCH));
                        }
                    }
                }
            }
        },
    );
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

/// Eager (ticks): ends `open`, the epoch open (if one is: its number, the capability at
/// its last tick, the newest stamp of its windows): each partition it touched, or every
/// one created when the function runs every epoch, runs its end of epoch; the faults
/// are reported; what it made is returned, stamped, with that capability. `me`: this
/// worker.
fn close_open(
    parts: &mut Partitions,
    open: Option<(u64, Capability<u64>, (u64, u64))>,
    (every_epoch, me): (bool, usize),
    out: &mut Batch,
    faults: &mut Vec<RowFault>,
    source: Option<&str>,
) -> Option<(Capability<u64>, Window)> {
    let (e, end, newest) = open?;
    end_epoch(parts, e, every_epoch, out, faults);
    report_faults(faults, &parts.shared, &parts.function, source);
    take_window(out, me).map(|w| (end, stamp(w, newest, &parts.shared)))
}

/// A row reached a worker that does not host its partition (`lane`): a bug, reported.
fn report_misrouted(shared: &Shared, misrouted: Option<u64>, q: u32, me: usize) {
    if let Some(lane) = misrouted {
        shared.bug(format!(
            "a row for partition {lane} of {q} reached worker {me}, which does not host it"
        ));
    }
}

/// Hands the stream functions' runtime faults to the run (a counted skip, or the error
/// it fails with).
fn report_faults(
    faults: &mut Vec<RowFault>,
    shared: &Shared,
    function: &str,
    source: Option<&str>,
) {
    for f in faults.drain(..) {
        shared.fault(function, f.operator, f.seq, source, &f.fault);
    }
}

/// The time a Map is running: its rows, where it is, and what is left.
struct Running {
    epoch: u64,
    cap: Capability<u64>,
    batches: Vec<Window>,
    /// The oldest stamps (born, mark) of its windows.
    born: (u64, u64),
    /// Rows in serial order go window by window: the next window.
    direct: Option<usize>,
    /// Once the rows' pass is over, per local partition: where its next row is in its
    /// list, None when it has nothing (left) to do.
    waiting: Option<Vec<Option<usize>>>,
}

/// What a scheduling policy sees of a partition whose list is `list` and whose next
/// row is at `at` (None: nothing left to do).
fn seen(
    list: &[(u64, u32, u32)],
    batches: &[Window],
    at: Option<usize>,
) -> Option<schedule::Waiting> {
    at.map(|at| match list.get(at) {
        Some(&(seq, b, _)) => schedule::Waiting {
            next_seq: seq,
            next_born: batches[b as usize].born,
            rows: list.len() - at,
        },
        None => schedule::Waiting {
            next_seq: u64::MAX,
            next_born: crate::qos::UNSTAMPED,
            rows: 0,
        },
    })
}

/// Index of a partition another worker hosts.
const NOT_HERE: u32 = u32::MAX;

/// Per local partition of a chained stage, whether this worker hosts it: chained,
/// worker 0 (`me_first`) hosts them all; split, as `planned` places them.
fn hosted(planned: &[bool], chained: bool, me_first: bool) -> Vec<bool> {
    planned
        .iter()
        .map(|&p| if chained { me_first } else { p })
        .collect()
}

/// Writes this Map's part of every held checkpoint barrier `due` says has come (its
/// partitions then hold exactly that checkpoint's epochs), and lets the barrier go.
fn save_due(
    held: &mut HeldBarriers,
    due: impl Fn(u64) -> bool,
    parts: &Partitions,
    store: Option<&Store>,
    stage: usize,
    shared: &Shared,
) {
    while let Some((c, _held)) = held.pop(&due) {
        if let Some(store) = store {
            if let Err(e) = parts.save(store, stage, c) {
                shared.fatal(e);
            }
        }
    }
}

/// A chained stage's `Map` ([`crate::qos::Chain`]): the way it runs now, and the next.
struct Moves {
    latencies: Arc<crate::qos::Latencies>,
    ticks: crate::qos::Ticks,
    /// The stage's function keeps no state: nothing to hand over.
    stateless: bool,
    /// The way taken now.
    chained: bool,
    /// The index of the next way to take ([`crate::qos::Chain::switch`]).
    next: usize,
}

impl Moves {
    fn chain(&self) -> &crate::qos::Chain {
        self.latencies
            .chain
            .get()
            .expect("a chained stage's run has a chain")
    }

    /// The next way, with the epoch it begins at.
    fn next(&self) -> Option<(u64, bool)> {
        self.chain().switch(self.next)
    }

    /// The first time of the next way's first epoch, if there is one: nothing at or
    /// after it runs before the switch.
    fn bound(&self) -> Option<u64> {
        self.next().map(|(e, _)| self.ticks.first(e))
    }
}

/// The stream-function instances of a worker's partitions (indexed by their place among
/// the worker's partitions), made on first use.
struct Partitions {
    slots: Vec<Slot>,
    factory: Arc<dyn braid_plan::function::StreamFunctionFactory>,
    q: u32,
    stage: usize,
    function: String,
    shared: Arc<Shared>,
}

/// One partition of a worker.
struct Slot {
    f: Option<Box<dyn StreamFunction>>,
    partition: u32,
    /// This worker hosts it now (a chained stage's partitions move: see [`Moves`]).
    here: bool,
    /// Its function panicked: its rows are dropped (the run fails).
    failed: bool,
    /// It had rows in the epoch being processed row by row.
    touched: bool,
    /// Eager (ticks): it had rows in the open epoch.
    in_epoch: bool,
}

impl Partitions {
    /// The instance of local partition `k`, made now if need be.
    #[inline]
    fn get(&mut self, k: usize) -> &mut Box<dyn StreamFunction> {
        let (factory, q) = (&self.factory, self.q);
        let slot = &mut self.slots[k];
        let p = slot.partition;
        slot.f.get_or_insert_with(|| factory.create(p, q))
    }

    /// The instance and partition of local partition `k` for a row of the epoch being
    /// processed row by row (noted as touched; a failed partition's instance drops its
    /// rows).
    #[inline]
    fn live(&mut self, k: usize) -> (&mut Box<dyn StreamFunction>, u32) {
        self.slots[k].touched = true;
        let p = self.slots[k].partition;
        (self.get(k), p)
    }

    /// `end_of_batch` of every partition that had rows in the epoch being processed row
    /// by row (the window just handed over is in it).
    fn end_of_batch(&mut self, emit: &mut Emitter<'_>) {
        for k in 0..self.slots.len() {
            if self.slots[k].touched && !self.slots[k].failed {
                let p = self.slots[k].partition;
                emit.restart(0, p);
                self.get(k).end_of_batch(emit);
            }
        }
    }

    /// Writes every made instance's state for checkpoint `epoch` (a partition not made
    /// yet has none: recovery makes it fresh, as this run would).
    fn save(&self, store: &Store, stage: usize, epoch: u64) -> Result<()> {
        let mut buf = Vec::new();
        for slot in &self.slots {
            let Some(f) = slot.f.as_ref().filter(|_| !slot.failed && slot.here) else {
                continue;
            };
            buf.clear();
            f.save(&mut buf).map_err(|e| {
                braid_plan::error::Error::Internal(format!(
                    "saving partition {} of `{}`: {e}",
                    slot.partition, self.function
                ))
            })?;
            store.write_part(epoch, stage, slot.partition, &buf)?;
        }
        Ok(())
    }

    /// Makes the instances the checkpoint being resumed from holds, from their state.
    fn restore(&mut self, store: &Store, stage: usize) -> Result<()> {
        match store.restored_partitions(stage) {
            Some(was) if was != self.q => return self.restore_rescaled(store, stage, was),
            _ => {}
        }
        for slot in self.slots.iter_mut().filter(|s| s.here) {
            let Some(bytes) = store.read_part(stage, slot.partition)? else {
                continue;
            };
            let mut f = self.factory.create(slot.partition, self.q);
            f.restore(&bytes).map_err(|e| {
                braid_plan::error::Error::Plan(format!(
                    "restoring partition {} of `{}` (stage {stage}) from the checkpoint: {e}",
                    slot.partition, self.function
                ))
            })?;
            slot.f = Some(f);
        }
        Ok(())
    }

    /// [`Partitions::restore`] from a checkpoint taken with `was` partitions: each
    /// local partition `p` of `q` takes, from every old partition that can hold keys
    /// routed to it (`p' ≡ p mod gcd(was, q)`), the entries whose route value `v` has
    /// `v mod q = p` ([`StreamFunction::restore_share`]).
    fn restore_rescaled(&mut self, store: &Store, stage: usize, was: u32) -> Result<()> {
        // State anywhere: any old partition may hold entries routed to any new one.
        let g = match self.factory.state_anywhere() {
            true => 1,
            false => gcd(was, self.q).max(1),
        };
        let modulo = super::route::Modulo::new(self.q);
        for slot in self.slots.iter_mut().filter(|s| s.here) {
            let p = slot.partition;
            let mut f: Option<Box<dyn StreamFunction>> = None;
            for old in (p % g..was).step_by(g as usize) {
                let Some(bytes) = store.read_part(stage, old)? else {
                    continue;
                };
                let f = f.get_or_insert_with(|| self.factory.create(p, self.q));
                f.restore_share(&bytes, &|v| modulo.of(v) == p)
                    .map_err(|e| {
                        braid_plan::error::Error::Plan(format!(
                            "restoring partition {p} of {} of `{}` (stage {stage}) from partition {old} of {was} in the checkpoint: {e}",
                            self.q, self.function
                        ))
                    })?;
            }
            slot.f = f;
        }
        Ok(())
    }

    fn created(&self, k: usize) -> bool {
        self.slots[k].here && self.slots[k].f.is_some()
    }

    /// Each partition's index among the slots, for those hosted here now (NOT_HERE for
    /// the others).
    fn index(&self) -> Vec<u32> {
        let mut index = vec![NOT_HERE; self.q as usize];
        for (k, slot) in self.slots.iter().enumerate() {
            if slot.here {
                index[slot.partition as usize] = k as u32;
            }
        }
        index
    }

    /// Takes the stage's next way ([`Moves::next`]), every epoch before it done and run
    /// here: hands over the partitions this worker stops hosting and takes those it
    /// starts to (`planned`: per slot, whether the plan places it here). False, having
    /// changed nothing, while a partition to take has not been handed over yet.
    fn switch(&mut self, moves: &mut Moves, planned: &[bool], me_first: bool) -> Result<bool> {
        let (e, chained) = moves.next().expect("a switch is due");
        let wanted = hosted(planned, chained, me_first);
        let chain = moves.chain();
        if !moves.stateless {
            let take: Vec<u32> = self
                .slots
                .iter()
                .zip(&wanted)
                .filter(|(s, &w)| w && !s.here)
                .map(|(s, _)| s.partition)
                .collect();
            let states = match take.is_empty() {
                true => Vec::new(),
                false => match chain.take(self.stage, &take, e) {
                    Some(states) => states,
                    None => return Ok(false),
                },
            };
            for (p, state) in states {
                let slot = self
                    .slots
                    .iter_mut()
                    .find(|s| s.partition == p)
                    .expect("taken from the slots");
                slot.f = match state {
                    None => None,
                    Some(bytes) => {
                        let mut f = self.factory.create(p, self.q);
                        f.take_over(&bytes).map_err(|err| {
                            braid_plan::error::Error::Internal(format!(
                                "taking over partition {p} of `{}` (stage {}) at epoch {e}: {err}",
                                self.function, self.stage
                            ))
                        })?;
                        Some(f)
                    }
                };
            }
        }
        let mut buf = Vec::new();
        for (slot, &w) in self.slots.iter_mut().zip(&wanted) {
            if slot.here && !w && !moves.stateless {
                let state = match slot.f.as_ref().filter(|_| !slot.failed) {
                    None => None,
                    Some(f) => {
                        buf.clear();
                        f.save(&mut buf).map_err(|err| {
                            braid_plan::error::Error::Internal(format!(
                                "handing over partition {} of `{}` (stage {}) at epoch {e}: {err}",
                                slot.partition, self.function, self.stage
                            ))
                        })?;
                        Some(buf.clone())
                    }
                };
                chain.give(self.stage, slot.partition, e, state);
            }
            if slot.here != w {
                slot.f = slot.f.take().filter(|_| w);
                slot.here = w;
            }
        }
        moves.next += 1;
        moves.chained = chained;
        Ok(true)
    }

    /// Local partition `k`'s function panicked: it is dropped and the run fails with an
    /// error naming it.
    fn fail(&mut self, k: usize, payload: &(dyn std::any::Any + Send)) {
        let slot = &mut self.slots[k];
        slot.failed = true;
        // Its rows are dropped from now on, without a test per row.
        slot.f = Some(Box::new(Dropped));
        let p = slot.partition;
        self.shared.user_code_panicked(
            &format!("stream function `{}` on partition {p}", self.function),
            payload,
        );
    }
}

/// What a partition whose function panicked runs instead: nothing.
struct Dropped;

impl StreamFunction for Dropped {
    fn process(&mut self, _: Row<'_>, _: &mut Emitter<'_>) {}
    fn end_of_epoch(&mut self, _: u64, _: &mut Emitter<'_>) {}
    fn finish(&mut self, _: &mut Emitter<'_>) {}
}

/// Calls `at(k, seq, row, window, row index)` for every row of `windows` in order, once
/// for each of this worker's partitions it is for (`k` its index among them, by
/// `index`); a row for a partition this worker does not host is noted in `misrouted`.
#[inline]
fn each_row<'w>(
    windows: &'w [Window],
    index: &[u32],
    targets: &mut BroadcastTargets,
    q: u32,
    misrouted: &mut Option<u64>,
    mut at: impl FnMut(u32, u64, Row<'w>, usize, usize),
) {
    for (b, window) in windows.iter().enumerate() {
        let batch: &'w Batch = &window.batch;
        window.for_each_row(|i, key| match RowKey::broadcast_target(key.lane) {
            None if key.lane == RowKey::OMIT => {}
            None => match index.get(key.lane as usize) {
                Some(&k) if k != NOT_HERE => at(k, key.seq, batch.row(i), b, i),
                _ => *misrouted = Some(key.lane),
            },
            Some(class) => {
                let row = batch.row(i);
                for &k in targets.of_window(window, class, q, index) {
                    at(k, key.seq, row, b, i);
                }
            }
        });
    }
}

/// [`each_row`] of one window, a run of consecutive rows of one partition at a time
/// (in `run`, reused): a whole window when it goes to one partition, as when no
/// operator keeps state. A broadcast row is a run of its own for each partition it
/// reaches.
fn each_run<'w>(
    window: &'w Window,
    index: &[u32],
    targets: &mut BroadcastTargets,
    q: u32,
    misrouted: &mut Option<u64>,
    run: &mut Vec<u32>,
    mut at: impl FnMut(u32, &'w Batch, &[u32]),
) {
    let batch: &'w Batch = &window.batch;
    let mut open: Option<u32> = None;
    run.clear();
    window.for_each_row(|i, key| match RowKey::broadcast_target(key.lane) {
        None if key.lane == RowKey::OMIT => {}
        None => match index.get(key.lane as usize) {
            Some(&k) if k != NOT_HERE => {
                if open != Some(k) {
                    if let Some(o) = open.replace(k) {
                        at(o, batch, run);
                        run.clear();
                    }
                }
                run.push(i as u32);
            }
            _ => *misrouted = Some(key.lane),
        },
        Some(class) => {
            if let Some(o) = open.take() {
                at(o, batch, run);
                run.clear();
            }
            for &k in targets.of_window(window, class, q, index) {
                at(k, batch, &[i as u32]);
            }
        }
    });
    if let Some(o) = open {
        at(o, batch, run);
    }
}

/// Whether every partition's rows come in serial order when `windows` are read in this
/// order: the rows of windows with the same [`Window::narrow`] come in serial order.
/// (A split tree's leaves serve disjoint sets of partitions, so windows of different
/// leaves, which often share a batch, need not be in order among each other.)
fn in_serial_order(windows: &[Window]) -> bool {
    let mut last: std::collections::HashMap<Option<(u64, u64)>, u64> = Default::default();
    windows.iter().all(|w| {
        let last = last.entry(w.narrow).or_insert(0);
        let mut sorted = true;
        w.for_each_row(|_, key| {
            sorted &= key.seq >= *last;
            *last = key.seq;
        });
        sorted
    })
}

/// The local partitions a broadcast lane `(modulus, residue)` names, remembered per
/// lane: a broadcast row then costs one push per partition it reaches, not a test of
/// every local partition.
#[derive(Default)]
struct BroadcastTargets(rustc_hash::FxHashMap<(u64, u64), Vec<u32>>);

impl BroadcastTargets {
    /// [`BroadcastTargets::of`] a broadcast row of `window` with lane class `class`: a
    /// tree leaf's window carries broadcast rows for its partitions only.
    fn of_window(&mut self, window: &Window, class: (u64, u64), q: u32, index: &[u32]) -> &[u32] {
        let class = match window.narrow {
            None => Some(class),
            Some(share) => intersect(class, share).filter(|&(_, r)| r < u64::from(q)),
        };
        class.map_or(&[][..], |c| self.of(c, q, index))
    }

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

/// Eager (ticks): the end of epoch `epoch` for the partitions that had rows in it (with
/// an every-epoch function, every partition made so far).
fn end_epoch(
    parts: &mut Partitions,
    epoch: u64,
    every_epoch: bool,
    out: &mut Batch,
    faults: &mut Vec<RowFault>,
) {
    for k in 0..parts.slots.len() {
        let had = std::mem::take(&mut parts.slots[k].in_epoch);
        if parts.slots[k].failed || !(had || (every_epoch && parts.created(k))) {
            continue;
        }
        let p = parts.slots[k].partition;
        let ran = catch_unwind(AssertUnwindSafe(|| {
            parts.get(k).end_of_epoch(
                epoch,
                &mut Emitter::new(out, RowKey::END_OF_EPOCH, p)
                    .at_epoch(epoch)
                    .with_faults(faults),
            )
        }));
        if let Err(payload) = ran {
            parts.fail(k, payload.as_ref());
        }
    }
}

/// A window made now from windows whose stamps (born, mark) are `born` (when the run
/// stamps).
pub(crate) fn stamp(w: Window, (born, mark): (u64, u64), shared: &Shared) -> Window {
    match shared.stamps && born != crate::qos::UNSTAMPED {
        true => w.stamped(born, shared.now_ns()).marked(mark),
        false => w,
    }
}

/// A time's windows as its epochs' (each window says its epoch), in epoch order, onto
/// `epochs`: where a time holds several epochs (see [`crate::shared::Granule`]).
fn by_epoch(
    cap: Capability<u64>,
    mut batches: Vec<Window>,
    epochs: &mut std::collections::VecDeque<(u64, Capability<u64>, Vec<Window>)>,
) {
    // Stable: an epoch's windows keep the order they came in.
    batches.sort_by_key(|w| w.epoch);
    while let Some(last) = batches.last().map(|w| w.epoch) {
        let from = batches.partition_point(|w| w.epoch < last);
        let rest = batches.split_off(from);
        epochs.push_front((last, cap.clone(), rest));
    }
}

/// Moves the rows in `out` into a window for this worker, if there are any.
fn take_window(out: &mut Batch, me: usize) -> Option<Window> {
    if out.is_empty() {
        return None;
    }
    let batch = std::mem::replace(out, Batch::new(out.arity()));
    Some(Window::new(me as u64, 0, batch))
}

fn gcd(a: u32, b: u32) -> u32 {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}
