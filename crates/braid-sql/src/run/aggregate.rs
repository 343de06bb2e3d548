//! Grouped aggregation over windows: tumbling and hopping windows and the unbounded
//! window here, session windows in [`super::session`], count windows in
//! [`super::count_window`]. Output rows: `window_start, window_end, keys...,
//! aggregates...`, emitted when the watermark passes the window's end.
//!
//! Hopping windows are sliced: time is cut into slices of `gcd(size, slide)` (every
//! window bound is a multiple of it, so a window covers whole slices), each row updates
//! the accumulators of its one slice, and a window is made by merging the slices it
//! covers when it closes ([`Slices`]). A row costs the same whatever `size / slide` is.

use super::accumulate::{self, emit, fresh, merge_all, update, Acc, AggExprs, Groups, Inputs};
use super::count_window::CountWindows;
use super::late::{Cx, LateOut};
use super::session::Sessions;
use super::Faults;
use crate::logical::{AggCall, AggPhase, WindowSpec};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::expr::{Arena, Compiled, Expr, Fault, IntRows, Scratch};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Windows by (end, start), then groups by key.
type TimeGroups = BTreeMap<(i64, i64), Keyed>;

/// The state of one aggregate in one partition.
pub(super) struct AggState {
    window: WindowSpec,
    /// The group keys, each with its fast path where it has one.
    keys: Vec<Compiled>,
    aggs: Box<[AggCall]>,
    /// The aggregates' FILTERs and arguments, compiled: shared with the [`Inputs`] of
    /// the row being added, which may borrow from them.
    exprs: Rc<[AggExprs]>,
    time: Option<usize>,
    /// Hopping windows: the length of a slice, `gcd(size, slide)`.
    slice: i64,
    /// The current row's key (reused: no allocation per row once a group exists).
    key: Vec<Scalar>,
    late: LateOut,
    /// The windows not yet emitted.
    pub(super) windows: Windows,
    /// Whole, or a phase of a two-phase aggregate (a final one reads partial rows).
    phase: AggPhase,
}

/// The windows of one aggregate not yet emitted: everything rows change, and all a
/// checkpoint saves of it (the rest is rebuilt from the plan).
#[derive(Clone, Default, Serialize, Deserialize)]
pub(super) struct Windows {
    /// Time windows and the unbounded window: (end, start) -> key -> accumulators.
    groups: TimeGroups,
    sessions: Sessions,
    counts: CountWindows,
    /// Hopping windows: the slices of the windows not yet closed.
    slices: Slices,
}

/// Slices of a hopping window's time, by start, then groups by key.
type SliceGroups = BTreeMap<i64, Keyed>;

/// The sliced state of hopping windows. Every window ending at or before `cut` has been
/// taken out of the slices (merged into `Windows::groups`, to be emitted there when the
/// watermark passes its end, as a window of a tumble is); the slices hold the rows of
/// the windows ending after `cut`, and are dropped once no such window covers them.
#[derive(Clone, Serialize, Deserialize)]
struct Slices {
    cut: i64,
    by_start: SliceGroups,
    /// The running merge of the slices of the last window taken out, kept from one
    /// closing to the next (forgotten when a row goes into a slice it has taken in).
    running: Running,
}

impl Default for Slices {
    fn default() -> Slices {
        Slices {
            cut: i64::MIN,
            by_start: BTreeMap::new(),
            running: Running::default(),
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The smallest multiple of `m` (> 0) greater than `x`.
fn next_multiple(x: i128, m: i128) -> i128 {
    x - x.rem_euclid(m) + m
}

impl Slices {
    /// Takes the windows ending in `(cut, to]` out of the slices (of length `len`) into
    /// `groups` (those covering at least one slice), then drops the slices no later
    /// window covers.
    fn close(
        &mut self,
        to: i64,
        (size, slide, len): (i64, i64, i64),
        aggs: &[AggCall],
        groups: &mut TimeGroups,
    ) {
        if to <= self.cut {
            return;
        }
        let (size128, slide128) = (size as i128, slide as i128);
        let (Some((&first, _)), Some((&last, _))) = (
            self.by_start.first_key_value(),
            self.by_start.last_key_value(),
        ) else {
            self.cut = to;
            return;
        };
        // Window starts s (multiples of slide) with cut < s + size <= to, covering a
        // slice: s + size > first, s <= last.
        let mut s = next_multiple((self.cut as i128).max(first as i128) - size128, slide128);
        let top = (to as i128 - size128).min(last as i128);
        let window = &mut self.running;
        while s <= top {
            // Slices exist only for rows whose windows all lie within i64.
            let (start, end) = (s as i64, (s + size128) as i64);
            let mut covered = self.by_start.range(start..end).peekable();
            if covered.peek().is_none() {
                // No slice in this window: on to the first window covering the next one.
                match self.by_start.range(end..).next() {
                    Some((&a, _)) => s = next_multiple(a as i128 - size128, slide128),
                    None => break,
                }
                continue;
            }
            drop(covered);
            window.slide_to(start, end, &self.by_start, aggs);
            let inner = groups.entry((end, start)).or_default();
            window.combine(inner, aggs);
            s += slide128;
        }
        self.cut = to;
        // Windows ending after `to` start after `to - size`: slices ending at or before
        // that are covered by none.
        let keep = to as i128 - size128 + 1;
        while let Some(entry) = self.by_start.first_entry() {
            if (*entry.key() as i128) + (len as i128) > keep {
                break;
            }
            entry.remove();
        }
    }
}

/// The columns of a window of all-int rows an aggregate computes at once
/// ([`AggState::push_window`]), reused from window to window.
#[derive(Default)]
pub(super) struct IntWindow {
    scratch: Scratch,
    keys: Vec<Vec<i64>>,
    args: Vec<Vec<i64>>,
    times: Vec<i64>,
}

/// Groups by key (a slice's, or a merge of slices).
type Keyed = Groups<Vec<Acc>>;

/// Merges `from` into `into`, key by key.
fn merge_keyed(into: &mut Keyed, from: &Keyed, aggs: &[AggCall]) {
    // Each key's accumulators merge on their own: the keys' order does not matter.
    for (key, accs) in from.iter() {
        let to: &mut Vec<Acc> = into.get_or_insert(key, || fresh(aggs));
        merge_all(to, accs);
    }
}

/// The running merge of the slices of consecutive windows, as [`Slices::close`] takes
/// them in order (starts and ends never go back): two stacks, so each window costs a
/// merge of two maps, and each slice is merged in about twice, whatever `size / slide`.
/// `back` holds the newest slices, merged into `back_all`; `front` the oldest, each with
/// the merge of itself and every newer slice of `front` (the oldest last).
#[derive(Clone, Default, Serialize, Deserialize)]
struct Running {
    front: Vec<(i64, Keyed)>,
    back: Vec<i64>,
    back_all: Keyed,
    /// Slices starting before this have been taken in.
    next: Option<i64>,
}

impl Running {
    /// Makes the merge hold the slices of `[start, end)`.
    fn slide_to(&mut self, start: i64, end: i64, slices: &SliceGroups, aggs: &[AggCall]) {
        // Out: the slices starting before `start`.
        loop {
            if self.front.is_empty() {
                if self.back.first().is_none_or(|&a| a >= start) {
                    break;
                }
                // Flip: the back slices become the front, merged from the newest (those
                // starting before `start` would leave at once, and may be dropped).
                for &a in self.back.iter().rev().take_while(|&&a| a >= start) {
                    let mut all = slices[&a].clone();
                    if let Some((_, newer)) = self.front.last() {
                        merge_keyed(&mut all, newer, aggs);
                    }
                    self.front.push((a, all));
                }
                self.back.clear();
                self.back_all.clear();
            }
            match self.front.last() {
                Some(&(a, _)) if a < start => {
                    self.front.pop();
                }
                _ => break,
            }
        }
        // In: the slices starting before `end`.
        let from = self.next.map_or(start, |n| n.max(start));
        for (&a, keyed) in slices.range(from..end) {
            merge_keyed(&mut self.back_all, keyed, aggs);
            self.back.push(a);
        }
        self.next = Some(end);
    }

    /// Merges the merge of the current slices into `into`.
    fn combine(&self, into: &mut Keyed, aggs: &[AggCall]) {
        if let Some((_, oldest)) = self.front.last() {
            merge_keyed(into, oldest, aggs);
        }
        merge_keyed(into, &self.back_all, aggs);
    }
}

impl Windows {
    /// Per group of every window and slice: the lengths of its key and of its
    /// accumulators.
    fn shapes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        fn keyed(m: &Keyed) -> impl Iterator<Item = (usize, usize)> + '_ {
            m.iter().map(|(k, accs)| (k.len(), accs.len()))
        }
        let s = &self.slices;
        let front = s.running.front.iter().map(|(_, m)| m);
        (self.groups.values().chain(s.by_start.values()).chain(front))
            .chain([&s.running.back_all])
            .flat_map(keyed)
            .chain(self.sessions.shapes())
            .chain(self.counts.shapes())
    }
}

impl AggState {
    /// Takes `windows` read from a checkpoint, or says why they cannot be this
    /// aggregate's.
    pub(super) fn restore(&mut self, windows: Windows) -> Result<(), String> {
        self.fits(&windows)?;
        self.windows = windows;
        Ok(())
    }

    /// Why `windows` cannot be this aggregate's.
    fn fits(&self, windows: &Windows) -> Result<(), String> {
        let want = (self.keys.len(), self.aggs.len());
        match windows.shapes().find(|&s| s != want) {
            Some((k, a)) => Err(format!(
                "a group of {k} keys and {a} aggregates, not {} and {}",
                want.0, want.1
            )),
            None => Ok(()),
        }
    }

    /// Adds the groups of `windows` (another partition's) whose keys route here:
    /// `keep(hash(keys...))`, the route value of a hash partitioning by the group keys
    /// (a float key is hashed as the float it is).
    pub(super) fn absorb(
        &mut self,
        windows: Windows,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<(), String> {
        self.fits(&windows)?;
        // A partial aggregate's groups may be in every partition: equal ones combine.
        let merge = |into: &mut Vec<Acc>, from: Vec<Acc>| merge_all(into, &from);
        let combine: super::route::Combine<'_, Vec<Acc>> = match self.phase {
            AggPhase::Partial => Some(&merge),
            _ => None,
        };
        let Windows {
            groups,
            sessions,
            counts,
            slices,
        } = windows;
        let mine = &mut self.windows;
        for (window, keyed) in groups {
            let mut kept = Groups::default();
            super::route::absorb_keyed(&mut kept, keyed, keep, combine)?;
            if !kept.is_empty() {
                let into = mine.groups.entry(window).or_default();
                super::route::absorb_keyed(into, kept, &|_| true, combine)?;
            }
        }
        mine.sessions.absorb(sessions, keep)?;
        mine.counts.absorb(counts, keep)?;
        // Hopping windows: every partition closes its windows at the same epochs, so
        // the shares agree on how far windows were taken out of the slices. The running
        // merge is a cache of the slices: rebuilt from them at the next closing.
        let theirs = slices.by_start.values().any(|m| !m.is_empty());
        let ours = mine.slices.by_start.values().any(|m| !m.is_empty());
        if theirs && ours && slices.cut != mine.slices.cut {
            return Err(format!(
                "hopping windows taken out up to {} in one partition and {} in another",
                slices.cut, mine.slices.cut
            ));
        }
        mine.slices.cut = mine.slices.cut.max(slices.cut);
        mine.slices.running = Running::default();
        for (start, keyed) in slices.by_start {
            let mut kept = Groups::default();
            super::route::absorb_keyed(&mut kept, keyed, keep, combine)?;
            if !kept.is_empty() {
                let into = mine.slices.by_start.entry(start).or_default();
                super::route::absorb_keyed(into, kept, &|_| true, combine)?;
            }
        }
        Ok(())
    }

    /// An empty aggregate over `window`, reading event time from input column `time`.
    pub(super) fn new(
        window: WindowSpec,
        keys: Vec<Expr>,
        aggs: Vec<AggCall>,
        time: Option<usize>,
        late: LateOut,
        phase: AggPhase,
    ) -> AggState {
        let slice = match window {
            WindowSpec::Hop { size, slide } => gcd(size, slide),
            _ => 1,
        };
        AggState {
            window,
            keys: keys.into_iter().map(Compiled::new).collect(),
            exprs: aggs.iter().map(AggExprs::of).collect(),
            aggs: aggs.into(),
            time,
            slice,
            key: Vec::new(),
            late,
            windows: Windows::default(),
            phase,
        }
    }

    /// A final aggregate's input row: a partial row (`window_start, window_end,
    /// keys..., partials...`) combined into its window's group. Partial rows are never
    /// late: their window closed in this epoch, where it closes here too.
    fn push_partial(&mut self, row: Row<'_>, faults: &mut Faults) {
        let k = self.keys.len();
        self.key.clear();
        self.key.extend((0..k).map(|j| row.get(2 + j).to_scalar()));
        let (start, end) = match (&self.window, row.int(0), row.int(1)) {
            (WindowSpec::Unbounded, _, _) => (i64::MIN, i64::MAX),
            (_, Some(s), Some(e)) => (s, e),
            _ => {
                let f = Fault::new("a partial aggregate's row without its window bounds");
                return faults.push(("aggregate", f));
            }
        };
        let accs = Self::group(&mut self.windows.groups, &self.aggs, end, start, &self.key);
        if let Err(why) = accumulate::combine_partial(accs, &row, 2 + k) {
            faults.push(("aggregate", Fault::new(why)));
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
        inner.get_or_insert(key, || fresh(aggs))
    }

    /// Adds an input row to its window(s), or refuses it as late; a row whose keys or
    /// aggregate inputs fault is skipped with the fault.
    pub(super) fn push(
        &mut self,
        row: Row<'_>,
        cx: &Cx,
        out: &mut Batch,
        faults: &mut Faults,
        arena: &Arena,
    ) {
        if self.phase == AggPhase::Final {
            return self.push_partial(row, faults);
        }
        self.key.clear();
        for k in &self.keys {
            match k.eval(&row, arena) {
                Ok(v) => self.key.push(v.to_scalar()),
                Err(f) => return faults.push(("aggregate", f)),
            }
        }
        let exprs = Rc::clone(&self.exprs);
        let mut inputs = Inputs::new();
        if let Err(f) = accumulate::inputs(&exprs, &row, arena, &mut inputs) {
            return faults.push(("aggregate", f));
        }
        let t = self.time.and_then(|c| row.int(c)).unwrap_or(0);
        self.add(row, t, &inputs, cx, out, faults);
    }

    /// The window-at-a-time path of a tumbling or hopping aggregate of int keys and
    /// arguments (no FILTER) over rows `rows` of an all-int batch: keys, arguments and
    /// event times are computed for all rows first ([`Compiled::eval_ints`]), then each
    /// row goes into its windows as [`AggState::push`] puts it. False (nothing changed)
    /// where it does not apply or an expression has no value for some row: the rows
    /// then go one by one, faults and all.
    pub(super) fn push_window(
        &mut self,
        batch: &Batch,
        at: IntRows<'_>,
        cx: &Cx,
        w: &mut IntWindow,
    ) -> bool {
        let windowed = matches!(
            self.window,
            WindowSpec::Tumble { .. } | WindowSpec::Hop { .. }
        );
        let Some(time) = self.time.filter(|&c| c < at.arity && windowed) else {
            return false;
        };
        if self.phase == AggPhase::Final || self.exprs.iter().any(|e| e.has_filter()) {
            return false;
        }
        w.keys.resize_with(self.keys.len(), Vec::new);
        for (k, column) in self.keys.iter().zip(&mut w.keys) {
            if !k.eval_ints(at, column, &mut w.scratch) {
                return false;
            }
        }
        w.args.resize_with(self.exprs.len(), Vec::new);
        for (e, column) in self.exprs.iter().zip(&mut w.args) {
            match e.arg() {
                // count(*): a null for each row, as `accumulate::inputs` gives.
                None => column.clear(),
                Some(a) if a.eval_ints(at, column, &mut w.scratch) => {}
                Some(_) => return false,
            }
        }
        at.column(time, &mut w.times);
        let mut inputs = Inputs::new();
        let (mut none, mut no_faults) = (Batch::new(0), Vec::new());
        for (j, &i) in at.rows.iter().enumerate() {
            self.key.clear();
            self.key.extend(w.keys.iter().map(|c| Scalar::Int(c[j])));
            inputs.clear();
            inputs.extend(w.args.iter().map(|c| {
                Some(match c.is_empty() {
                    true => Value::Null,
                    false => Value::Int(c[j]),
                })
            }));
            let row = batch.row(i as usize);
            // The row's own sequence number (see `Cx::seq`), for a late row's sender.
            let cx = &Cx {
                seq: match RowKey::made_at_end(cx.seq) {
                    true => cx.seq,
                    false => batch.key(i as usize).seq,
                },
                ..*cx
            };
            self.add(row, w.times[j], &inputs, cx, &mut none, &mut no_faults);
        }
        true
    }

    /// Adds input row `row`, at event time `t`, with its group's key in `self.key` and
    /// its aggregates' inputs, to its window(s), or refuses it as late.
    fn add(
        &mut self,
        row: Row<'_>,
        t: i64,
        inputs: &Inputs<'_>,
        cx: &Cx,
        out: &mut Batch,
        faults: &mut Faults,
    ) {
        match self.window {
            WindowSpec::Tumble { size } => {
                // Saturating: event times are data, and may lie at the ends of i64.
                let start = t.saturating_sub(t.rem_euclid(size));
                let end = start.saturating_add(size);
                if end <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                let w = &mut self.windows;
                let accs = Self::group(&mut w.groups, &self.aggs, end, start, &self.key);
                update(accs, inputs);
            }
            WindowSpec::Hop { size, slide } => {
                // Windows [s, s + size) with s = k * slide and s <= t < s + size: the
                // row goes into those ending after the watermark, and is late if none do.
                let inside = t.checked_sub(size).is_some() && t.checked_add(size).is_some();
                if !inside {
                    // Windows reaching past the ends of i64 (their bounds saturate): one
                    // by one, straight into the windows, which close late or never.
                    if !self.hop_windows(t, size, slide, cx.wm, i64::MAX, inputs) {
                        self.late.refuse(&row, cx);
                    }
                    return;
                }
                let last = t - t.rem_euclid(slide);
                if last + size <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                // Windows that closed at a watermark above this row's own still take it.
                let w = &mut self.windows;
                let hop = (size, slide, self.slice);
                w.slices.close(cx.wm, hop, &self.aggs, &mut w.groups);
                let cut = w.slices.cut;
                if cx.wm < cut {
                    self.hop_windows(t, size, slide, cx.wm, cut, inputs);
                }
                if last + size > cut {
                    let slices = &mut self.windows.slices;
                    let slice = t - t.rem_euclid(self.slice);
                    if slices.running.next.is_some_and(|n| slice < n) {
                        slices.running = Running::default();
                    }
                    let keyed = slices.by_start.entry(slice).or_default();
                    let accs = keyed.get_or_insert(&self.key, || fresh(&self.aggs));
                    update(accs, inputs);
                }
            }
            WindowSpec::Cumulate { step, size } => {
                // Windows [s, s + k*step) holding t, s = t's multiple of size: the row
                // goes into those ending after the watermark, and is late if none do.
                let s = t.saturating_sub(t.rem_euclid(size));
                let mut any = false;
                let mut last = None;
                for k in (1..=size / step).rev() {
                    let end = s.saturating_add(k * step);
                    if end <= t || end <= cx.wm {
                        break;
                    }
                    any = true;
                    // Ends that saturate at i64::MAX are one window.
                    if last != Some(end) {
                        let g = &mut self.windows.groups;
                        let accs = Self::group(g, &self.aggs, end, s, &self.key);
                        update(accs, inputs);
                    }
                    last = Some(end);
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
                let sessions = &mut self.windows.sessions;
                sessions.push(&self.key, &self.aggs, gap, t, inputs);
            }
            WindowSpec::Count { rows } => self
                .windows
                .counts
                .push(&self.key, &self.aggs, rows, inputs, out, faults),
            WindowSpec::Unbounded => {
                let g = &mut self.windows.groups;
                let accs = Self::group(g, &self.aggs, i64::MAX, i64::MIN, &self.key);
                update(accs, inputs);
            }
        }
    }

    /// Adds `row` (at `t`) to each hopping window holding it whose end is in `(wm, to]`,
    /// one by one; whether it ends after `wm`.
    fn hop_windows(
        &mut self,
        t: i64,
        size: i64,
        slide: i64,
        wm: i64,
        to: i64,
        inputs: &Inputs<'_>,
    ) -> bool {
        let last = t.saturating_sub(t.rem_euclid(slide));
        let mut s = last;
        let mut any = false;
        while s > t.saturating_sub(size) {
            let end = s.saturating_add(size);
            if end <= wm {
                break;
            }
            any = true;
            if end <= to {
                let g = &mut self.windows.groups;
                let accs = Self::group(g, &self.aggs, end, s, &self.key);
                update(accs, inputs);
            }
            if s == i64::MIN {
                break;
            }
            s = s.saturating_sub(slide);
        }
        any
    }

    /// Emits the windows that end at or before `wm` (`i64::MAX`: the input ended).
    pub(super) fn advance(&mut self, wm: i64, out: &mut Batch, faults: &mut Faults) {
        let w = &mut self.windows;
        if let WindowSpec::Hop { size, slide } = self.window {
            let hop = (size, slide, self.slice);
            w.slices.close(wm, hop, &self.aggs, &mut w.groups);
        }
        while let Some(entry) = w.groups.first_entry() {
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
            for (key, accs) in groups.sorted() {
                if self.phase == AggPhase::Partial {
                    accumulate::emit_partial(out, (s, e), &key, &accs);
                } else if let Err(f) = emit(out, (s, e), &key, &self.aggs, &accs) {
                    faults.push(("aggregate", f));
                }
            }
        }
        if let WindowSpec::Session { gap } = self.window {
            w.sessions.advance(gap, wm, &self.aggs, out, faults);
        }
        if wm == i64::MAX {
            // End of input: partial count windows too.
            if let WindowSpec::Count { rows } = self.window {
                w.counts.finish(rows, &self.aggs, out, faults);
            }
        }
    }
}
