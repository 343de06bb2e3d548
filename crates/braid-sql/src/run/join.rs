//! Stream-stream joins: an interval join (rows meet when `right.time - left.time` lies in
//! `lo..=hi`; state older than the watermark allows is dropped) and a join of count
//! windows (`LAST(a, n) JOIN LAST(b, m)`: each row meets the other side's last rows).
//! Rows are indexed by the equality keys when there are any.
//!
//! An outer interval join (LEFT, RIGHT, FULL) marks each kept row of a preserved side
//! when it meets a partner; a row dropped unmarked (when the watermark passes the last
//! time a partner could come, see [`JoinState::advance`]) comes out then, once, with
//! nulls for the other side's columns, as Flink's interval outer join does. A row whose
//! key is null can meet nothing and comes out padded at once.

use super::late::{Cx, LateBuild, LateOut};
use super::Faults;
use crate::logical::{JoinKind, JoinWindow, Logical};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::expr::{Arena, Expr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Rows kept by one side of a join: all a checkpoint saves of a join (the rest is
/// rebuilt from the plan).
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct Side {
    rows: Batch,
    times: Vec<i64>,
    index: BTreeMap<Vec<Scalar>, Vec<u32>>,
    /// Per row: it has met a partner (read by outer joins only).
    matched: Vec<bool>,
    /// First live row (count windows drop from the front).
    start: usize,
}

impl Side {
    fn new(arity: usize) -> Side {
        Side {
            rows: Batch::new(arity),
            times: Vec::new(),
            index: BTreeMap::new(),
            matched: Vec::new(),
            start: 0,
        }
    }

    fn insert(&mut self, row: &Row<'_>, t: i64, key: Vec<Scalar>, keyed: bool, matched: bool) {
        let (b, i) = row.location();
        let at = self.rows.len() as u32;
        self.rows.push_row_of(b, i, RowKey::default());
        self.times.push(t);
        self.matched.push(matched);
        if keyed {
            self.index.entry(key).or_default().push(at);
        }
    }

    /// Why a side read from a checkpoint cannot be this join's side of `arity` columns
    /// (its parts of different lengths would make the join index out of bounds).
    fn misfit(&self, arity: usize) -> Option<String> {
        let n = self.rows.len();
        if self.rows.arity() != arity {
            return Some(format!(
                "rows of {} columns, not {arity}",
                self.rows.arity()
            ));
        }
        let index_ok = self.index.values().flatten().all(|&i| (i as usize) < n);
        if self.times.len() != n || self.matched.len() != n || self.start > n || !index_ok {
            return Some(format!(
                "a side of {n} rows whose times, marks or index disagree"
            ));
        }
        None
    }

    /// Appends the live rows of `from` (another partition's side) whose route value
    /// (`route` on the row) has `keep`, indexed by `keys`.
    fn absorb(
        &mut self,
        from: &Side,
        route: &Expr,
        keys: &[Expr],
        keep: &dyn Fn(i64) -> bool,
        arena: &mut Arena,
    ) -> Result<(), String> {
        for i in from.start..from.rows.len() {
            let r = from.rows.row(i);
            let v = match route.eval(&r, arena) {
                Ok(Value::Int(v)) => v,
                other => {
                    return Err(format!(
                        "a kept row whose route cannot be computed ({:?})",
                        other.map(|v| v.to_scalar())
                    ))
                }
            };
            arena.reset();
            if !keep(v) {
                continue;
            }
            let at = self.rows.len() as u32;
            self.rows.push_row_of(&from.rows, i, RowKey::default());
            self.times.push(from.times[i]);
            self.matched.push(from.matched[i]);
            if !keys.is_empty() {
                let key: Vec<Scalar> = keys
                    .iter()
                    .map(|k| k.eval(&r, arena).map_or(Scalar::Null, |v| v.to_scalar()))
                    .collect();
                arena.reset();
                self.index.entry(key).or_default().push(at);
            }
        }
        Ok(())
    }

    /// Keeps rows `i >= from` with `keep(time)`; rebuilds the index.
    fn retain(
        &mut self,
        from: usize,
        keep: impl Fn(i64) -> bool,
        keys: &[Expr],
        arena: &mut Arena,
    ) {
        let live = (from..self.rows.len())
            .filter(|&i| keep(self.times[i]))
            .count();
        if live == self.rows.len() {
            return;
        }
        let mut rows = Batch::new(self.rows.arity());
        let mut times = Vec::with_capacity(live);
        let mut matched = Vec::with_capacity(live);
        for i in from..self.rows.len() {
            if keep(self.times[i]) {
                rows.push_row_of(&self.rows, i, RowKey::default());
                times.push(self.times[i]);
                matched.push(self.matched[i]);
            }
        }
        self.rows = rows;
        self.times = times;
        self.matched = matched;
        self.start = 0;
        self.index.clear();
        if !keys.is_empty() {
            for i in 0..self.rows.len() {
                let r = self.rows.row(i);
                // The keys evaluated without a fault when the row was kept.
                let key: Vec<Scalar> = keys
                    .iter()
                    .map(|k| k.eval(&r, arena).map_or(Scalar::Null, |v| v.to_scalar()))
                    .collect();
                arena.reset();
                self.index.entry(key).or_default().push(i as u32);
            }
        }
    }
}

/// The state of one join in one partition.
pub(super) struct JoinState {
    keys: [Vec<Expr>; 2],
    residual: Option<Expr>,
    window: JoinWindow,
    kind: JoinKind,
    time: [Option<usize>; 2],
    /// The rows kept, left and right.
    pub(super) sides: [Side; 2],
    /// Per side, the route value of its rows under the hash partitioning by the
    /// equality keys (`hash(keys...)`, a key hashed as a float when either side's is
    /// one), as the split computes it; None without keys.
    route: Option<[Expr; 2]>,
    /// The other side's rows the current row met (reused).
    hits: Vec<usize>,
    /// Per side.
    late: [LateOut; 2],
}

impl JoinState {
    /// An empty join of `left` and `right` (the logical inputs give the sides' event
    /// times and widths). Only an interval join refuses late rows.
    pub(super) fn new(
        left: &Logical,
        right: &Logical,
        equi: &[(Expr, Expr)],
        residual: Option<Expr>,
        window: JoinWindow,
        kind: JoinKind,
        late: &mut LateBuild<'_>,
    ) -> JoinState {
        let late = match window {
            JoinWindow::Interval { .. } => [late.out("join"), late.out("join")],
            _ => [
                LateOut::count_only(late.rows),
                LateOut::count_only(late.rows),
            ],
        };
        use super::route::{equi_floats, key_hash};
        let keys: [Vec<Expr>; 2] = [
            equi.iter().map(|e| e.0.clone()).collect(),
            equi.iter().map(|e| e.1.clone()).collect(),
        ];
        let float = equi_floats(left.schema(), right.schema(), equi);
        let route =
            (!equi.is_empty()).then(|| [key_hash(&keys[0], &float), key_hash(&keys[1], &float)]);
        JoinState {
            route,
            keys,
            residual,
            window,
            kind,
            time: [left.schema().event_time, right.schema().event_time],
            sides: [
                Side::new(left.schema().arity()),
                Side::new(right.schema().arity()),
            ],
            hits: Vec::new(),
            late,
        }
    }

    /// Adds a row of input `side` (0 left, 1 right): emits its matches with the other
    /// side's rows, then keeps it. A row whose keys fault is skipped, and a pair whose
    /// residual condition faults is not emitted, with the fault.
    pub(super) fn push(
        &mut self,
        side: usize,
        row: Row<'_>,
        cx: &Cx,
        out: &mut Batch,
        faults: &mut Faults,
        arena: &Arena,
    ) {
        let t = self.time[side].and_then(|c| row.int(c)).unwrap_or(0);
        let keyed = !self.keys[side].is_empty();
        let mut key: Vec<Scalar> = Vec::with_capacity(self.keys[side].len());
        for k in &self.keys[side] {
            match k.eval(&row, arena) {
                Ok(v) => key.push(v.to_scalar()),
                Err(f) => return faults.push(("join", f)),
            }
        }
        if let JoinWindow::Interval { .. } = self.window {
            if t < cx.wm {
                self.late[side].refuse(&row, cx);
                return;
            }
        }
        let other = &self.sides[1 - side];
        let null_key = key.iter().any(|k| matches!(k, Scalar::Null));
        let hits = &mut self.hits;
        hits.clear();
        let mut matches = |j: usize| {
            let ot = other.times[j];
            if let JoinWindow::Interval { lo, hi } = self.window {
                let d = if side == 0 {
                    i128::from(ot) - i128::from(t)
                } else {
                    i128::from(t) - i128::from(ot)
                };
                if d < i128::from(lo) || d > i128::from(hi) {
                    return;
                }
            }
            let orow = other.rows.row(j);
            let (l, r) = if side == 0 { (row, orow) } else { (orow, row) };
            out.start_row(RowKey::default());
            for c in 0..l.arity() {
                out.push_value(l.get(c));
            }
            for c in 0..r.arity() {
                out.push_value(r.get(c));
            }
            if let Some(p) = &self.residual {
                match p.eval(&out.row(out.len() - 1), arena) {
                    Ok(v) if v.is_true() => {}
                    Ok(_) => return out.abandon_row(),
                    Err(f) => {
                        // Counted as met: a pair skipped on a fault pads neither row.
                        out.abandon_row();
                        faults.push(("join", f));
                    }
                }
            }
            hits.push(j);
        };
        if keyed {
            if !null_key {
                if let Some(hits) = other.index.get(&key) {
                    for &j in hits {
                        matches(j as usize);
                    }
                }
            }
        } else {
            for j in other.start..other.rows.len() {
                matches(j);
            }
        }
        let met = !self.hits.is_empty();
        for &j in &self.hits {
            self.sides[1 - side].matched[j] = true;
        }
        if keyed && null_key {
            if self.kind.keeps(side) {
                self.pad(side, &row, out);
            }
            return;
        }
        self.sides[side].insert(&row, t, key, keyed, met);
        if let JoinWindow::Count { left, right } = self.window {
            let n = if side == 0 { left } else { right } as usize;
            let s = &mut self.sides[side];
            if s.rows.len() - s.start > n {
                s.start = s.rows.len() - n;
            }
            if s.start > n.max(1024) {
                let from = s.start;
                s.retain(from, |_| true, &[], &mut Arena::new());
            }
        }
    }

    /// Drops the rows no future row can meet (all of them at the end of the input,
    /// `wm == i64::MAX`); an outer join first emits those of a preserved side that met
    /// no partner, padded with nulls.
    pub(super) fn advance(&mut self, wm: i64, out: &mut Batch, arena: &mut Arena) {
        if let JoinWindow::Interval { lo, hi } = self.window {
            // A left row can still meet right rows with time >= wm if t + hi >= wm; a
            // right row can meet left rows with time >= wm if t - lo >= wm.
            let end = wm == i64::MAX;
            let keep = |side: usize, t: i64| {
                !end && match side {
                    0 => t.saturating_add(hi) >= wm,
                    _ => t.saturating_sub(lo) >= wm,
                }
            };
            for side in 0..2 {
                if self.kind.keeps(side) {
                    let s = &self.sides[side];
                    for i in 0..s.rows.len() {
                        if !s.matched[i] && !keep(side, s.times[i]) {
                            self.pad(side, &s.rows.row(i), out);
                        }
                    }
                }
                self.sides[side].retain(0, |t| keep(side, t), &self.keys[side], arena);
            }
        }
    }

    /// Takes `sides` read from a checkpoint, or says why they cannot be this join's.
    pub(super) fn restore(&mut self, sides: [Side; 2]) -> Result<(), String> {
        for (name, (new, old)) in ["left", "right"].iter().zip(sides.iter().zip(&self.sides)) {
            if let Some(why) = new.misfit(old.rows.arity()) {
                return Err(format!("the join's {name} side: {why}"));
            }
        }
        self.sides = sides;
        Ok(())
    }

    /// Adds the rows of `sides` (another partition's) that route here: `keep` of their
    /// route value. A join without keys (partitioned over a grid) cannot tell.
    pub(super) fn absorb(
        &mut self,
        sides: [Side; 2],
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<(), String> {
        for (name, (new, old)) in ["left", "right"].iter().zip(sides.iter().zip(&self.sides)) {
            if let Some(why) = new.misfit(old.rows.arity()) {
                return Err(format!("the join's {name} side: {why}"));
            }
        }
        let Some(route) = &self.route else {
            return Err("a join without equality keys cannot be split by key".into());
        };
        let mut arena = Arena::new();
        for (s, from) in sides.iter().enumerate() {
            self.sides[s].absorb(from, &route[s], &self.keys[s], keep, &mut arena)?;
        }
        Ok(())
    }

    /// Emits `row` of input `side` with nulls for the other side's columns.
    fn pad(&self, side: usize, row: &Row<'_>, out: &mut Batch) {
        let nulls = self.sides[1 - side].rows.arity();
        out.start_row(RowKey::default());
        if side == 1 {
            (0..nulls).for_each(|_| out.push_value(Value::Null));
        }
        for c in 0..row.arity() {
            out.push_value(row.get(c));
        }
        if side == 0 {
            (0..nulls).for_each(|_| out.push_value(Value::Null));
        }
    }
}
