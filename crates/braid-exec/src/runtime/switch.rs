//! The workers of a process at a live rescale's switch (they wait for the output to
//! pass its epoch, then meet), and at the end of a run (draining, committing).

use crate::checkpoint::{Clock, Store};
use crate::shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use timely::dataflow::ProbeHandle;

/// Waits, stepping, until the output has passed live rescale `c` (every part of its
/// checkpoint written everywhere); worker 0 commits meanwhile. False if the run failed
/// or a worker died first.
pub(super) fn await_switch(
    worker: &mut timely::worker::Worker,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    shared: &Shared,
    c: u64,
) -> bool {
    let store = shared.checkpoints.as_ref().filter(|_| worker.index() == 0);
    while !shared.ticks.passed(probe, c) {
        if shared.worker_died() || shared.failed() {
            abandon(worker);
            return false;
        }
        if let Some(store) = store {
            commit(store, clock, probe, shared);
        }
        worker.step_or_park(Some(Duration::from_millis(1)));
    }
    if let Some(store) = store {
        commit(store, clock, probe, shared);
    }
    true
}

/// A meeting point of the workers of one process (a live rescale's switch): each
/// waits for all; a failure of the run lets them all go.
pub(super) struct Gate {
    workers: usize,
    state: std::sync::Mutex<(usize, u64, bool)>,
    cv: std::sync::Condvar,
}

impl Gate {
    pub(super) fn new(workers: usize) -> Gate {
        Gate {
            workers,
            state: std::sync::Mutex::new((0, 0, false)),
            cv: std::sync::Condvar::new(),
        }
    }

    /// Waits for every worker of the process; false if the run failed meanwhile.
    pub(super) fn wait(&self, shared: &Shared) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.workers {
            (s.0, s.1) = (0, s.1 + 1);
            self.cv.notify_all();
            return !s.2;
        }
        while s.1 == generation && !s.2 {
            if shared.failed() || shared.worker_died() {
                s.2 = true;
                self.cv.notify_all();
                break;
            }
            s = match self.cv.wait_timeout(s, Duration::from_millis(10)) {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
        !s.2
    }

    /// A worker leaves the run: nobody waits for it.
    pub(super) fn abandon(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.2 = true;
            self.cv.notify_all();
        }
    }
}

/// Steps `worker` until its dataflows are done, or until a worker died (it would never
/// let them finish).
pub(super) fn drain(worker: &mut timely::worker::Worker, shared: &Shared) {
    while worker.has_dataflows() {
        if shared.worker_died() {
            abandon(worker);
            return;
        }
        worker.step_or_park(Some(Duration::from_millis(50)));
    }
}

/// [`drain`], committing on worker 0 the checkpoints the output passes meanwhile; a
/// live rescale another worker started ends it at its epoch, once the output has
/// passed that (see [`await_switch`]).
pub(super) fn drain_committing(
    worker: &mut timely::worker::Worker,
    probe: &ProbeHandle<u64>,
    clock: &mut Clock,
    shared: &Shared,
) -> Option<u64> {
    let Some(store) = shared.checkpoints.as_ref() else {
        drain(worker, shared);
        return None;
    };
    let leader = worker.index() == 0;
    while worker.has_dataflows() {
        if shared.worker_died() {
            abandon(worker);
            return None;
        }
        if let Some(c) = shared.switching() {
            return await_switch(worker, probe, clock, shared, c).then_some(c);
        }
        if leader {
            commit(store, clock, probe, shared);
        }
        worker.step_or_park(Some(Duration::from_millis(if leader { 50 } else { 5 })));
    }
    // The dataflow is done, so the output has passed every checkpoint whose barrier went
    // out: the last ones commit now rather than stay in the store, uncommitted, beside
    // an older LATEST.
    if leader {
        commit(store, clock, probe, shared);
    }
    None
}

/// Commits the checkpoints the output frontier has passed (worker 0; the live engine's
/// worker that reads a query's source).
pub(crate) fn commit(
    store: &Arc<Store>,
    clock: &mut Clock,
    probe: &ProbeHandle<u64>,
    shared: &Shared,
) {
    // A failed or cancelled run's sinks stop writing: what they skipped would be in
    // the state of any later checkpoint, so none commits. (A sink skips a row only
    // after the flag is set, which comes before the output passes that row's epoch.)
    if shared.failed() || shared.cancel.is_cancelled() {
        return;
    }
    if let Err(e) = clock.commit_passed(store, |c| shared.ticks.passed(probe, c)) {
        shared.fatal(e);
    }
}

/// Drops the worker's dataflows unfinished: timely steps a worker's dataflows until
/// they are done after its closure returns, which after a panic would run the failed
/// operator again or wait forever for a dead peer.
pub(super) fn abandon(worker: &mut timely::worker::Worker) {
    for id in worker.installed_dataflows() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.drop_dataflow(id)));
    }
}
