//! A worker's source loop: it reads its share of the source, sends windows, advances
//! time (and the checkpoint barriers with it), paces, holds back when the output lags,
//! and stops at a live rescale's epoch.

use super::switch::commit;
use super::RunConfig;
use crate::checkpoint::{Clock, Store};
use crate::render::{Control, Feeder, Place, Window};
use crate::rescale::Rescaled;
use crate::shared::Shared;
use crate::source::par_csv::{Board, CarryMsg};
use crate::source::{self, Counters, Next};
use braid_plan::function::Registry;
use braid_plan::plan::{Pace, Plan};
use std::sync::Arc;
use std::time::Duration;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::{InputHandle, ProbeHandle};

/// How a worker's source loop ended.
pub(super) enum FeedEnd {
    /// The input ended (or the run stopped).
    Done,
    /// A live rescale's barrier closed epoch `c`: this worker handed on its rows up to
    /// `c` and none after; its inputs, held at `c + 1` so that no operator goes past
    /// `c`, are dropped with the dataflow.
    Switch(u64, Box<(Feeder, Option<Control>)>),
}

/// The worker's source loop: sends windows, advances time, paces, and holds back when
/// the output frontier lags too far.
/// What a worker's source loop reads.
pub(super) struct FeedCtx<'a> {
    pub plan: &'a Plan,
    pub registry: &'a Registry,
    pub place: Place,
    pub cfg: &'a RunConfig,
    pub shared: &'a Arc<Shared>,
}

/// A CSV file read in shares ([`source::par_csv`]): the board of its carries and, when
/// other processes read it too, the input that broadcasts this process's carries.
pub(super) struct Shares {
    board: Arc<Board>,
    out: Option<InputHandle<u64, CapacityContainerBuilder<Vec<CarryMsg>>>>,
}

impl Shares {
    /// The shares of the file `plan` reads, for dataflow `key` of this process (None
    /// when it is not read in shares). With other processes, builds the dataflow that
    /// hands each process's carries to every worker: every worker builds it, in the
    /// same place among its dataflows.
    pub(super) fn build(
        worker: &mut timely::worker::Worker,
        plan: &Plan,
        processes: usize,
        shared: &Shared,
        key: (usize, usize),
    ) -> Option<Shares> {
        use timely::dataflow::channels::pact::Pipeline;
        use timely::dataflow::operators::generic::operator::Operator;
        use timely::dataflow::operators::vec::Broadcast;
        use timely::dataflow::operators::Input;
        // Under a latency constraint one worker reads (see `crate::qos`).
        if shared.ticks.on() || !source::reads_in_shares(&plan.leaf_source().spec, worker.peers()) {
            return None;
        }
        let remote = processes > 1;
        let board = shared.board(key, remote);
        let out = remote.then(|| {
            let mut out = InputHandle::new();
            let on = board.clone();
            worker.dataflow::<u64, _, _>(|scope| {
                scope.input_from(&mut out).broadcast().sink(
                    Pipeline,
                    "Carries",
                    move |(input, _)| {
                        input.for_each(|_, carries: &mut Vec<CarryMsg>| {
                            carries.drain(..).for_each(|c| on.receive(c))
                        })
                    },
                );
            });
            out
        });
        Some(Shares { board, out })
    }

    /// Sends the carries this process's readers published to the other processes.
    fn pump(&mut self) {
        if let Some(out) = &mut self.out {
            let carries = self.board.take_outbox();
            if !carries.is_empty() {
                carries.into_iter().for_each(|c| out.send(c));
                out.flush();
            }
        }
    }
}

/// Steps the worker (parked for at most `park`), first sending the carries of a file
/// read in shares: a worker that waits must not hold back the other processes' readers.
fn step(worker: &mut timely::worker::Worker, shares: &mut Option<Shares>, park: Option<Duration>) {
    if let Some(s) = shares {
        s.pump();
    }
    match park {
        Some(d) => {
            worker.step_or_park(Some(d));
        }
        None => {
            worker.step();
        }
    }
}

pub(super) fn feed(
    worker: &mut timely::worker::Worker,
    mut input: Feeder,
    mut control: Option<Control>,
    mut shares: Option<Shares>,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    ctx: &FeedCtx<'_>,
) -> FeedEnd {
    let FeedCtx {
        plan,
        registry,
        place,
        cfg,
        shared,
    } = *ctx;
    let source = plan.leaf_source();
    // Resuming, a feed that said where to start again (a CSV file) starts there; any
    // other reads from its start and the windows up to the checkpoint are dropped.
    let resume_from = source::resumes_from(&source.spec, place.index, place.peers);
    let resume_at = match shared
        .checkpoints
        .as_ref()
        .map(|s| s.read_source(resume_from))
    {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            shared.fatal(e);
            return FeedEnd::Done;
        }
        None => None,
    };
    // Under a latency constraint worker 0 reads every source alone: ticks then hold
    // runs of sequence numbers in order (see `crate::qos`).
    let (index, peers) = match shared.ticks.on() {
        true if place.index > 0 => return FeedEnd::Done,
        true => (0, 1),
        false => (place.index, place.peers),
    };
    let read = source::ReadOptions {
        reader_threads: Some(cfg.read.reader_threads_for(cfg.workers)),
        ..cfg.read.clone()
    };
    let mut feed = match source::open_at(
        source,
        index,
        peers,
        &read,
        shared.counters.clone(),
        registry,
        resume_at.as_deref(),
        shares.as_ref().map(|s| &s.board),
    ) {
        Ok(Some(f)) => f,
        Ok(None) => return FeedEnd::Done, // this worker reads nothing: dropping `input` closes it
        Err(e) => {
            shared.fatal(e);
            return FeedEnd::Done;
        }
    };
    let counts_rows_itself = source::counts_rows_itself(&source.spec);
    // A paced source's schedule starts when the first source loop of the run does (a
    // cluster's processes connect first), and goes on across live rescales.
    let start = *shared.schedule.get_or_init(std::time::Instant::now);
    let schedule_base = shared.clock_base + start.duration_since(shared.start).as_nanos() as u64;
    // Pacing: event-time units per second of the schedule, and when event time `t` may
    // be released.
    let units_per_sec = match source.pace {
        Pace::EventTime {
            units_per_second,
            speed,
        } => Some(units_per_second * speed.max(1e-9)),
        Pace::Max => None,
    };
    let release = units_per_sec.map(|r| move |t: u64| Duration::from_secs_f64(t as f64 / r));
    // Under a constraint a paced source's window also ends where its oldest row would
    // wait the flush timeout for the rest, in event-time units of this column.
    let flushed = units_per_sec
        .zip(source.schema.event_time)
        .filter(|_| shared.ticks.on());
    let wait_until =
        |worker: &mut timely::worker::Worker, shares: &mut Option<Shares>, at: Duration| {
            while start.elapsed() < at && !shared.stopping() {
                let left = at.saturating_sub(start.elapsed());
                step(worker, shares, Some(left.min(Duration::from_millis(1))));
            }
        };
    if let Some(at) = release {
        let epoch = at(source.epoch).as_secs_f64();
        let _ = shared.counters.pacing.set((start, epoch));
    }
    // Rows sent since the worker last stepped: it steps every four full windows' worth,
    // however many windows (epochs) they came in, so a stream of small epochs does not
    // pay a round of the dataflow (and of progress tracking) every few dozen rows.
    let mut unstepped = 0usize;
    // Under a latency constraint: timely's time counts ticks within epochs, and worker
    // 0 steers W (see `crate::qos`).
    let ticks = shared.ticks;
    // Epochs per time (see `Granule`): the epoch open, where the time is a granule's.
    let granule = shared.granule;
    let mut open_epoch = 0u64;
    let stamps = shared.stamps;
    let constraint = plan
        .latency_constraint()
        .filter(|_| place.index == 0 && ticks.on());
    let mut steer = match (constraint, cfg.fixed_window) {
        (Some(_), Some(w)) => {
            shared
                .latencies
                .window
                .store(w.max(1), std::sync::atomic::Ordering::Relaxed);
            None
        }
        (Some(target), None) => Some(crate::qos::Steering::new(
            target,
            source.window,
            source.pace != Pace::Max,
            &shared.latencies,
        )),
        (None, _) => None,
    };
    // Rows this worker sent per epoch not yet completed at the output, oldest first.
    let mut in_flight: std::collections::VecDeque<(u64, u64)> = Default::default();
    let mut in_flight_rows = 0u64;
    // Checkpoints: the store, and (worker 0) who decides them; resuming, the epochs
    // already in the checkpoint are read again but not handed on.
    let store = shared.checkpoints.as_ref();
    let leader = place.index == 0;
    let resumed = store.and_then(|s| s.restored_epoch());
    'read: loop {
        // Failed, cancelled, or every sink has its LIMIT: end the input here.
        if shared.stopping() {
            break;
        }
        if let (Some(store), true) = (store, leader) {
            commit(store, clock, probe, shared);
        }
        match feed.next() {
            Ok(Next::Window(epoch, batch)) => {
                if epoch > ticks.max_epoch() {
                    shared.fatal(crate::error::Error::Plan(braid_plan::error::Error::NotSupported(format!(
                        "source {}: epoch {epoch} under a latency constraint (epochs must stay below 2^{}: \
                         give the stream a longer epoch)",
                        source.name,
                        64 - crate::qos::TICK_BITS
                    ))));
                    break;
                }
                // Input time cannot go back: a window of an earlier epoch than the
                // current one joins the current epoch (the reference clamps alike).
                let now_epoch = match granule.on() {
                    true => open_epoch,
                    false => ticks.epoch(*input.time()),
                };
                let epoch = epoch.max(now_epoch);
                if resumed.is_some_and(|r| epoch <= r) {
                    if epoch > now_epoch {
                        input.advance_to(ticks.first(epoch));
                        if let Some(c) = control.as_mut() {
                            c.advance_to(ticks.first(epoch));
                        }
                    }
                    if !counts_rows_itself {
                        Counters::add(&shared.counters.rows_in, batch.len() as u64);
                    }
                    continue;
                }
                // A live rescale under way at `c`: rows up to `c` go on, and this
                // worker stops at its first later window (which it reads again after
                // the switch).
                if let Some(c) = shared.switching().filter(|&c| epoch > c) {
                    end_reading(feed, &mut shares);
                    return fence(input, control, c, ticks);
                }
                if epoch > now_epoch {
                    // The epoch closing may be a checkpoint (worker 0 decides), and a
                    // live rescale's.
                    if let (Some(store), Some(c), true) = (store, control.as_mut(), leader) {
                        let closing = now_epoch;
                        let asked = rescale_asked(ctx, store, closing);
                        match clock.barrier(
                            store,
                            closing,
                            asked.is_some(),
                            place.index,
                            &*feed,
                            c,
                            asked.as_ref().map(|(shape, _)| shape.clone()),
                        ) {
                            Err(e) => {
                                shared.fatal(e);
                                break;
                            }
                            Ok(Some(_)) => {
                                if let Some((shape, request)) = asked {
                                    shared.switch_at(closing, shape);
                                    if let Ok(mut p) = shared.pause.lock() {
                                        *p = Some((std::time::Instant::now(), request));
                                    }
                                    end_reading(feed, &mut shares);
                                    return fence(input, control, closing, ticks);
                                }
                            }
                            Ok(None) => {}
                        }
                        c.advance_to(ticks.first(epoch));
                        c.flush();
                    } else if let Some(c) = control.as_mut() {
                        c.advance_to(ticks.first(epoch));
                    }
                    // Before opening a new epoch, wait while too many rows of older
                    // epochs are still in the dataflow.
                    loop {
                        while let Some(&(e, n)) = in_flight.front() {
                            if probe.less_equal(&e) {
                                break;
                            }
                            in_flight.pop_front();
                            in_flight_rows -= n;
                        }
                        if in_flight_rows <= cfg.max_rows_in_flight
                            || in_flight.len() <= 1
                            || shared.worker_died()
                            || shared.stopping()
                            || shared.switching().is_some()
                        {
                            break;
                        }
                        input.flush();
                        step(worker, &mut shares, Some(Duration::from_millis(1)));
                    }
                    // When pacing, the current epoch is complete once the clock has passed
                    // the last event time it can hold; close it then (never earlier: that
                    // would read ahead of the clock).
                    if let Some(at) = release {
                        let last = (now_epoch.saturating_add(1))
                            .saturating_mul(source.epoch)
                            .saturating_sub(1);
                        input.flush();
                        wait_until(worker, &mut shares, at(last));
                    }
                    input.advance_to(ticks.first(granule.start(epoch)));
                    open_epoch = epoch;
                    shared
                        .counters
                        .epoch_in
                        .fetch_max(epoch, std::sync::atomic::Ordering::Relaxed);
                }
                // Under a latency constraint, a window of more than W rows goes as
                // several ticks, and a paced source's also once its oldest row would
                // wait the flush timeout for the rest. Cut one at a time: the controller
                // may decide between them.
                let mut pieces = crate::qos::Pieces::new(batch);
                loop {
                    let w = match ticks.on() {
                        true => shared.latencies.window(),
                        false => usize::MAX,
                    };
                    let span = flushed.and_then(|(r, col)| {
                        let t = shared.latencies.flush()?;
                        Some((col, (t.as_secs_f64() * r) as u64))
                    });
                    let Some(batch) = pieces.next(w, span) else {
                        break;
                    };
                    // A row is released when the clock reaches its event time: the window
                    // goes when its latest row may.
                    let mut born = crate::qos::UNSTAMPED;
                    if let Some(at) = release {
                        let b = &batch;
                        let times = || {
                            source.schema.event_time.into_iter().flat_map(move |c| {
                                (0..b.len()).filter_map(move |i| b.row(i).int(c))
                            })
                        };
                        let floor = epoch * source.epoch;
                        let latest = times().max().map_or(floor, |t| t.max(0) as u64);
                        input.flush();
                        let due = at(latest);
                        wait_until(worker, &mut shares, due);
                        let late = start.elapsed().saturating_sub(due);
                        if let Some(s) = steer.as_mut() {
                            s.lag(late, due);
                        }
                        // Load shedding: a window this far behind its schedule is
                        // dropped, and counted by the second of the schedule it was due.
                        if source.shed.is_some_and(|bound| late > bound) {
                            shared.shed(&source.name, due.as_secs(), batch.len() as u64);
                            continue;
                        }
                        if stamps {
                            let earliest = times().min().map_or(floor, |t| t.max(0) as u64);
                            born = schedule_base + at(earliest).as_nanos() as u64;
                        }
                    } else if stamps {
                        born = shared.now_ns();
                    }
                    if let Some(c) = shared.switching().filter(|&c| epoch > c) {
                        end_reading(feed, &mut shares);
                        return fence(input, control, c, ticks);
                    }
                    if leader {
                        // The first window after a live rescale: the pause ends.
                        if let Some(at) = shared.pause.lock().ok().and_then(|mut p| p.take()) {
                            record_rescale(ctx, at);
                        }
                    }
                    if !counts_rows_itself {
                        Counters::add(&shared.counters.rows_in, batch.len() as u64);
                    }
                    let rows = batch.len() as u64;
                    let t = *input.time();
                    match in_flight.back_mut() {
                        Some((e, n)) if *e == t => *n += rows,
                        _ => in_flight.push_back((t, rows)),
                    }
                    in_flight_rows += rows;
                    if let Some(s) = steer.as_mut() {
                        s.sent(rows as usize);
                    }
                    shared
                        .counters
                        .queued_peak
                        .fetch_max(in_flight_rows, std::sync::atomic::Ordering::Relaxed);
                    let sent_at = if stamps { shared.now_ns() } else { born };
                    if ticks.on() && born != crate::qos::UNSTAMPED {
                        shared
                            .latencies
                            .buffered
                            .record_rows(sent_at.saturating_sub(born), rows);
                    }
                    input.send(
                        Window::new(place.index as u64, 0, batch)
                            .stamped(born, sent_at)
                            .at(epoch),
                    );
                    if ticks.on() {
                        // Each window its own tick: the operators below may take it as
                        // soon as it is complete.
                        let next = ticks.next(t);
                        if next > t {
                            input.advance_to(next);
                        }
                        input.flush();
                        step(worker, &mut shares, None);
                    } else {
                        unstepped += rows as usize;
                        if unstepped >= 4 * source.window.max(1) {
                            unstepped = 0;
                            input.flush();
                            step(worker, &mut shares, None);
                        }
                    }
                    if let Some(n) = cfg.max_rows {
                        if shared
                            .counters
                            .rows_in
                            .load(std::sync::atomic::Ordering::Relaxed)
                            >= n
                        {
                            break 'read;
                        }
                    }
                    if let Some(s) = steer.as_mut() {
                        s.poll(&shared.latencies, shared.start);
                    }
                }
                // A run that can rescale live takes a request when worker 0 closes
                // an epoch, so its feeds keep to the common horizon: a request waits
                // for at most that many epochs, not a chunk's span of them.
                let ahead = match cfg.rescale {
                    Some(_) => cfg.max_epochs_ahead,
                    None => cfg.max_epochs_ahead.saturating_add(feed.ahead()),
                };
                let horizon = ticks.first(granule.start(epoch).saturating_sub(ahead));
                while probe.less_than(&horizon)
                    && !shared.worker_died()
                    && !shared.stopping()
                    && shared.switching().is_none()
                {
                    step(worker, &mut shares, Some(Duration::from_millis(1)));
                }
            }
            Ok(Next::Wait) => {
                if let Some(s) = steer.as_mut() {
                    s.poll(&shared.latencies, shared.start);
                }
                input.flush();
                step(worker, &mut shares, Some(Duration::from_millis(1)));
            }
            Ok(Next::Done) => break,
            Err(e) => {
                shared.fatal(e);
                break;
            }
        }
    }
    if let Ok(mut r) = shared.rejects.lock() {
        r.push(feed.rejects());
    }
    // The last carries this process's readers published (its input closes here).
    end_reading(feed, &mut shares);
    if let (Some(linger), Some(_)) = (cfg.barriers_linger, &control) {
        drop(input);
        let until = std::time::Instant::now() + linger;
        while std::time::Instant::now() < until && !shared.stopping() {
            step(worker, &mut shares, Some(Duration::from_millis(1)));
        }
    }
    if leader {
        // A live rescale after which the input had nothing more: its pause ends here.
        if let Some(at) = shared.pause.lock().ok().and_then(|mut p| p.take()) {
            record_rescale(ctx, at);
        }
        if let Some(r) = cfg.rescale.as_ref().and_then(|r| r.take().map(|q| (r, q))) {
            r.0.refuse(format!("{:?}: the input ended first", r.1));
        }
    }
    FeedEnd::Done
}

/// Drops a worker's reading and sends on what its readers published last (a reading
/// stopped before its end stops its board as it drops): the other processes' readers
/// may be waiting for it, and the worker sends nothing more once its feed has ended.
fn end_reading(feed: Box<dyn source::Feed>, shares: &mut Option<Shares>) {
    drop(feed);
    if let Some(s) = shares {
        s.pump();
    }
}

/// Ends a worker's source loop for live rescale `c`: its inputs are held at the first
/// time after epoch `c` (no operator goes past `c`) until the dataflow is dropped.
fn fence(
    mut input: Feeder,
    mut control: Option<Control>,
    c: u64,
    ticks: crate::qos::Ticks,
) -> FeedEnd {
    let at = (*input.time()).max(ticks.first(c + 1));
    input.advance_to(at);
    input.flush();
    if let Some(k) = control.as_mut() {
        if *k.time() < at {
            k.advance_to(at);
        }
        k.flush();
    }
    FeedEnd::Switch(c, Box::new((input, control)))
}

/// The shape a live rescale request asks for, and the request, taken up at the closing
/// of epoch `closing` (worker 0); a request that cannot be had is refused, with why.
fn rescale_asked(
    ctx: &FeedCtx<'_>,
    store: &Store,
    closing: u64,
) -> Option<(crate::rescale::Rescale, crate::rescale::Request)> {
    let r = ctx.cfg.rescale.as_ref()?;
    let request = r.take()?;
    if store.restored_epoch() >= Some(closing) {
        // The epoch is in the checkpoint resumed from: at a later one.
        r.request(request);
        return None;
    }
    if let crate::rescale::Request::Workers(_) = request {
        if ctx.cfg.auto_rescale.is_some() {
            let why = "the automatic rescaler watches the workers the run started with";
            r.refuse(format!("{request:?}: {why}"));
            return None;
        }
    }
    match crate::rescale::spec(
        ctx.plan,
        ctx.registry,
        (ctx.place.peers, ctx.place.threads),
        &request,
    ) {
        Ok(shape) => Some((shape, request)),
        Err(why) => {
            r.refuse(format!("{request:?}: {why}"));
            None
        }
    }
}

/// Notes a live rescale done, `at` its barrier, asked by `request` (worker 0, at the
/// new dataflow's first window).
fn record_rescale(ctx: &FeedCtx<'_>, (at, request): (std::time::Instant, crate::rescale::Request)) {
    let (Some(r), Some(store)) = (&ctx.cfg.rescale, &ctx.shared.checkpoints) else {
        return;
    };
    r.record(Rescaled {
        request,
        epoch: store.restored_epoch().unwrap_or(0),
        partitions: store.partitions(),
        workers: ctx.place.peers,
        pause: at.elapsed(),
    });
}
