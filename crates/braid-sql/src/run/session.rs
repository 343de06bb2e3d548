//! Session windows (`GROUP BY SESSION(time, gap)`): per key, rows closer than `gap`
//! share a window; a row between two sessions merges them.

use super::accumulate::{emit, fresh, update, Acc, Inputs};
use super::Faults;
use crate::logical::AggCall;
use braid_plan::batch::{Batch, Scalar};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One open session of a key.
#[derive(Clone, Serialize, Deserialize)]
struct Session {
    start: i64,
    last: i64,
    accs: Vec<Acc>,
}

/// The open sessions of every key (in the order they were made: merging them in
/// another order would add floats in another order).
#[derive(Clone, Default, Serialize, Deserialize)]
pub(super) struct Sessions(BTreeMap<Vec<Scalar>, Vec<Session>>);

impl Sessions {
    /// Adds the sessions of `from` whose keys have `keep` (see
    /// [`super::route::absorb_keyed`]).
    pub(super) fn absorb(
        &mut self,
        from: Sessions,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<(), String> {
        super::route::absorb_keyed(&mut self.0, from.0, keep, None)
    }

    /// Per open session: the lengths of its key and of its accumulators.
    pub(super) fn shapes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.0
            .iter()
            .flat_map(|(k, list)| list.iter().map(move |s| (k.len(), s.accs.len())))
    }

    /// Adds a row of group `key` at time `t` (not late: `t + gap` is above the watermark).
    pub(super) fn push(
        &mut self,
        key: &[Scalar],
        aggs: &[AggCall],
        gap: i64,
        t: i64,
        inputs: &Inputs<'_>,
    ) {
        match self.0.get_mut(key) {
            Some(list) => add_to_sessions(list, aggs, gap, t, inputs),
            None => {
                let mut list = Vec::new();
                add_to_sessions(&mut list, aggs, gap, t, inputs);
                self.0.insert(key.to_vec(), list);
            }
        }
    }

    /// Emits the sessions that end (last row + gap) at or before `wm`, ordered by end,
    /// start and key.
    pub(super) fn advance(
        &mut self,
        gap: i64,
        wm: i64,
        aggs: &[AggCall],
        out: &mut Batch,
        faults: &mut Faults,
    ) {
        let mut done: Vec<(i64, i64, Vec<Scalar>, Vec<Acc>)> = Vec::new();
        for (key, list) in self.0.iter_mut() {
            let mut i = 0;
            while i < list.len() {
                if list[i].last.saturating_add(gap) <= wm {
                    let s = list.swap_remove(i);
                    done.push((s.last.saturating_add(gap), s.start, key.clone(), s.accs));
                } else {
                    i += 1;
                }
            }
        }
        self.0.retain(|_, l| !l.is_empty());
        done.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
        for (end, start, key, accs) in done {
            if let Err(f) = emit(out, (start, end), &key, aggs, &accs) {
                faults.push(("aggregate", f));
            }
        }
    }
}

/// Adds a row at time `t` to a key's sessions: into the one session it falls in
/// (in place), or as a new session merged with every session it touches.
fn add_to_sessions(
    list: &mut Vec<Session>,
    aggs: &[AggCall],
    gap: i64,
    t: i64,
    inputs: &Inputs<'_>,
) {
    let touches = |s: &Session| t > s.start.saturating_sub(gap) && t < s.last.saturating_add(gap);
    let mut hits = list.iter().enumerate().filter(|(_, s)| touches(s));
    if let (Some((i, _)), None) = (hits.next(), hits.next()) {
        let s = &mut list[i];
        s.start = s.start.min(t);
        s.last = s.last.max(t);
        update(&mut s.accs, inputs);
        return;
    }
    let mut accs = fresh(aggs);
    update(&mut accs, inputs);
    let mut merged = Session {
        start: t,
        last: t,
        accs,
    };
    let mut i = 0;
    while i < list.len() {
        if touches(&list[i]) {
            let s = list.swap_remove(i);
            merged.start = merged.start.min(s.start);
            merged.last = merged.last.max(s.last);
            for (a, b) in merged.accs.iter_mut().zip(s.accs) {
                a.merge(b);
            }
        } else {
            i += 1;
        }
    }
    list.push(merged);
}
