//! Grouped aggregation over windows: tumbling and hopping windows and the unbounded
//! window here, session windows in [`super::session`], count windows in
//! [`super::count_window`]. Output rows: `window_start, window_end, keys...,
//! aggregates...`, emitted when the watermark passes the window's end.

use super::accumulate::{emit, fresh, get_or_insert, update, Acc};
use super::count_window::CountWindows;
use super::late::{Cx, LateOut};
use super::session::Sessions;
use crate::logical::{AggCall, WindowSpec};
use braid_plan::batch::{Batch, Row, Scalar};
use braid_plan::expr::Expr;
use std::collections::BTreeMap;

/// Windows by (end, start), then groups by key.
type TimeGroups = BTreeMap<(i64, i64), BTreeMap<Vec<Scalar>, Vec<Acc>>>;

/// The state of one aggregate in one partition.
pub(super) struct AggState {
    window: WindowSpec,
    keys: Vec<Expr>,
    aggs: Vec<AggCall>,
    time: Option<usize>,
    /// Time windows and the unbounded window: (end, start) -> key -> accumulators.
    groups: TimeGroups,
    /// The current row's key (reused: no allocation per row once a group exists).
    key: Vec<Scalar>,
    sessions: Sessions,
    counts: CountWindows,
    late: LateOut,
}

impl AggState {
    /// An empty aggregate over `window`, reading event time from input column `time`.
    pub(super) fn new(
        window: WindowSpec,
        keys: Vec<Expr>,
        aggs: Vec<AggCall>,
        time: Option<usize>,
        late: LateOut,
    ) -> AggState {
        AggState {
            window,
            keys,
            aggs,
            time,
            groups: BTreeMap::new(),
            key: Vec::new(),
            sessions: Sessions::default(),
            counts: CountWindows::default(),
            late,
        }
    }

    /// The accumulators of group `key` in window `(end, start)`, created if new.
    fn group<'s>(
        groups: &'s mut TimeGroups,
        aggs: &[AggCall],
        end: i64,
        start: i64,
        key: &[Scalar],
    ) -> &'s mut Vec<Acc> {
        let inner = groups.entry((end, start)).or_default();
        get_or_insert(inner, key, || fresh(aggs))
    }

    /// Adds an input row to its window(s), or refuses it as late.
    pub(super) fn push(&mut self, row: Row<'_>, cx: &Cx, out: &mut Batch) {
        self.key.clear();
        for k in &self.keys {
            self.key.push(k.eval(&row).to_scalar());
        }
        let t = self.time.and_then(|c| row.int(c)).unwrap_or(0);
        match self.window {
            WindowSpec::Tumble { size } => {
                // Saturating: event times are data, and may lie at the ends of i64.
                let start = t.saturating_sub(t.rem_euclid(size));
                let end = start.saturating_add(size);
                if end <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                let accs = Self::group(&mut self.groups, &self.aggs, end, start, &self.key);
                update(&self.aggs, accs, &row);
            }
            WindowSpec::Hop { size, slide } => {
                // Windows [s, s + size) with s = k * slide and s <= t < s + size.
                let last = t.saturating_sub(t.rem_euclid(slide));
                let mut s = last;
                let mut any = false;
                while s > t.saturating_sub(size) {
                    let end = s.saturating_add(size);
                    if end > cx.wm {
                        any = true;
                        let accs = Self::group(&mut self.groups, &self.aggs, end, s, &self.key);
                        update(&self.aggs, accs, &row);
                    }
                    if s == i64::MIN {
                        break;
                    }
                    s = s.saturating_sub(slide);
                }
                if !any {
                    self.late.refuse(&row, cx);
                }
            }
            WindowSpec::Session { gap } => {
                if t.saturating_add(gap) <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                self.sessions.push(&self.key, &self.aggs, gap, t, &row);
            }
            WindowSpec::Count { rows } => self.counts.push(&self.key, &self.aggs, rows, &row, out),
            WindowSpec::Unbounded => {
                let accs = Self::group(&mut self.groups, &self.aggs, i64::MAX, i64::MIN, &self.key);
                update(&self.aggs, accs, &row);
            }
        }
    }

    /// Emits the windows that end at or before `wm` (`i64::MAX`: the input ended).
    pub(super) fn advance(&mut self, wm: i64, out: &mut Batch) {
        while let Some(entry) = self.groups.first_entry() {
            if entry.key().0 > wm {
                break;
            }
            let ((end, start), groups) = entry.remove_entry();
            // The unbounded window shows as (0, 0); a time window whose end saturated
            // at i64::MAX keeps its bounds.
            let (s, e) = if self.window == WindowSpec::Unbounded {
                (0, 0)
            } else {
                (start, end)
            };
            for (key, accs) in groups {
                emit(out, s, e, &key, &accs);
            }
        }
        if let WindowSpec::Session { gap } = self.window {
            self.sessions.advance(gap, wm, out);
        }
        if wm == i64::MAX {
            // End of input: partial count windows too.
            if let WindowSpec::Count { rows } = self.window {
                self.counts.finish(rows, out);
            }
        }
    }
}
