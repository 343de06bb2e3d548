//! Per-epoch state that an operator holds until its input frontier passes the epoch:
//! the pattern behind `Map` and the merges (timely 0.32 has no notificator); and the
//! checkpoint barriers an operator holds until it has written its part of them.

use std::collections::BTreeMap;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::progress::frontier::MutableAntichain;

/// Checkpoint barriers (see [`crate::checkpoint`]) an operator holds, by epoch, each
/// with a capability at its epoch's last time (the epoch itself, or its last tick
/// under a latency constraint: [`crate::qos::Ticks::end`]): the output frontier cannot
/// pass a barrier before the operator has written its part and dropped the
/// capability.
#[derive(Default)]
pub(crate) struct HeldBarriers(BTreeMap<u64, Capability<u64>>);

impl HeldBarriers {
    /// Holds the barriers of a message (stamped `cap`); a live rescale's tells the
    /// workers of this process (see [`crate::shared::Shared::switch_at`]).
    pub fn hold(
        &mut self,
        cap: &InputCapability<u64>,
        barriers: &[super::Barrier],
        shared: &crate::shared::Shared,
    ) {
        for (c, r) in barriers {
            if let Some(held) = cap.retain_least(0) {
                self.0.insert(*c, held.delayed(&shared.ticks.end(*c)));
            }
            if let Some(r) = r {
                shared.switch_at(*c, r.clone());
            }
        }
    }

    /// The oldest barrier for whose time (its epoch's last, where it is held) `due`
    /// holds, with its capability: drop it once the part is written.
    pub fn pop(&mut self, due: impl Fn(u64) -> bool) -> Option<(u64, Capability<u64>)> {
        self.0
            .first_key_value()
            .filter(|(_, cap)| due(*cap.time()))?;
        self.0.pop_first()
    }
}

/// State per epoch, each with a capability to emit at that epoch.
pub(crate) struct EpochStash<D> {
    epochs: BTreeMap<u64, (Capability<u64>, D)>,
}

impl<D> EpochStash<D> {
    /// No epochs.
    pub fn new() -> EpochStash<D> {
        EpochStash {
            epochs: BTreeMap::new(),
        }
    }

    /// The state of the message's epoch, made by `init` the first time; None for a
    /// message with an empty stamp (it makes no claim on any epoch).
    pub fn at(&mut self, cap: &InputCapability<u64>, init: impl FnOnce() -> D) -> Option<&mut D> {
        self.at_time(cap, |t| t, init)
    }

    /// As [`EpochStash::at`], the state kept at time `key(t)` (not before `t`) for a
    /// message at time `t`: under ticks ([`crate::qos`]), an operator that waits for the
    /// whole epoch keeps it at the epoch's last tick.
    pub fn at_time(
        &mut self,
        cap: &InputCapability<u64>,
        key: impl Fn(u64) -> u64,
        init: impl FnOnce() -> D,
    ) -> Option<&mut D> {
        let &t = cap.least()?;
        let k = key(t);
        debug_assert!(k >= t);
        let entry = self.epochs.entry(k).or_insert_with(|| {
            let held = cap
                .retain_least(0)
                .expect("a stamp with a least time gives a capability");
            let held = if k == t { held } else { held.delayed(&k) };
            (held, init())
        });
        Some(&mut entry.1)
    }

    /// The oldest epoch for which `done` holds, with its capability and state (`done`
    /// must hold for every epoch before one it holds for: a frontier test).
    pub fn pop_done(&mut self, done: impl Fn(u64) -> bool) -> Option<(u64, Capability<u64>, D)> {
        let (&epoch, _) = self.epochs.iter().next()?;
        if !done(epoch) {
            return None;
        }
        let (cap, state) = self.epochs.remove(&epoch)?;
        Some((epoch, cap, state))
    }

    /// Whether no epoch is held.
    pub fn is_empty(&self) -> bool {
        self.epochs.is_empty()
    }

    /// Whether [`EpochStash::pop_done`] would give an epoch now.
    pub fn any_done(&self, done: impl Fn(u64) -> bool) -> bool {
        self.epochs.keys().next().is_some_and(|&e| done(e))
    }

    /// The oldest epoch the frontier has passed, with its capability and state.
    pub fn pop_complete(
        &mut self,
        frontier: &MutableAntichain<u64>,
    ) -> Option<(u64, Capability<u64>, D)> {
        let (&epoch, _) = self.epochs.iter().next()?;
        if frontier.less_equal(&epoch) {
            return None;
        }
        let (cap, state) = self.epochs.remove(&epoch)?;
        Some((epoch, cap, state))
    }
}
