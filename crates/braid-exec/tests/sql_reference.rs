//! A from-scratch reference for SQL queries: given a compiled query's logical plan and
//! its input streams, it recomputes the result from the whole input with plain loops
//! over lists (windows, aggregates, joins, lookups, unions), in the style of
//! differential-dataflow's `tests/reduce_reference.rs`. It shares nothing with the
//! operators of `braid_sql::run` (which both the engine and `braid_plan::reference` run),
//! only `Expr::eval` for scalar expressions and the documented rules of time:
//!
//! - a stream's rows come in epochs (`time / epoch`, never going back within a stream),
//!   the streams of a query interleaved by (epoch, event time, stream, order);
//! - a row processed in epoch `e` is refused (late) by a time window that ended at or
//!   before `e * epoch - lateness`, by a session whose `time + gap` is at or before it,
//!   by an interval join when its time is below it; rows an operator makes at the end of
//!   an epoch or of the input are never late, nor rows of epoch 0 (every time below one
//!   epoch's length, negative ones too);
//! - an operator over an interval join judges and closes that much later as the join's
//!   rows may lag the watermark (its upper bound for a pair carrying the left row's time,
//!   `-lo` for the right's), so no window is emitted before its rows have come;
//! - at the end of every epoch `e` of the input, windows ending at or before
//!   `(e + 1) * epoch - lateness` are emitted, and an interval join forgets rows that can
//!   meet no row that is still on time; at the end of the input everything is emitted;
//! - a refused row goes to the late stream as (`aggregate` or `join`, `e * epoch`, its
//!   columns placed by name in the late stream's columns).
//!
//! What each test catches: `sql_engine_matches_the_reference` (the queries of
//! `sql::QUERIES` and the edge cases, 1, 2 and 4 workers, both merges; multisets, and
//! sequences for the transparent merge of a query in one stage) catches operator
//! bugs that `sql_parallel_equals_serial` cannot, since there the engine and the serial
//! run share the operators: a wrong window bound, an aggregate fed the wrong rows, a
//! join condition off by one; `sql_late_streams_match_the_reference` does the same for
//! the late rows and for queries over them.
//!
//! The reference evaluates the query as written (`Job::logical`), uncut: the engine's
//! stages must not change the result, so every query is compared cut as by default,
//! cut at every operator and uncut ([`STAGES`]). Two inputs aim at the cuts where that
//! once failed: a stage after an aggregate, fed windows that closed late
//! ([`CUT_AFTER_AGGREGATE`]), and a stage after an interval join ([`MEETS_THREE`]).
//!
//! Not expressed yet: explicit `PARALLEL(...)` queries (a registered stream function
//! has no logical plan); count-window joins with equality keys (none of the queries has
//! one); the order in which a later stage, or a query over `LATE(...)`, sees an epoch's
//! rows (a hash order, rows made at the end of an epoch last, as here; the hash order
//! matters only to order-sensitive operators there, count windows and float sums,
//! which no query of the lists has): the reference keeps the order the rows were made
//! in.

use crate::sql::{
    calls_strategy, extreme_calls, late_calls, late_script, scratch, script, write_calls,
    write_texts, Call, LATE_QUERIES, QUERIES,
};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::{Batch, RowKey, Scalar, Value};
use braid_plan::expr::Expr;
use braid_plan::types::{DataType, Schema};
use braid_sql::logical::{AggCall, AggFunc, JoinKind, JoinWindow, Logical, WindowSpec};
use braid_sql::{Job, Script};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// When a row is made: while a row of the input is processed, at the end of an epoch,
/// or at the end of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Row,
    End,
    Finish,
}

/// A row in the order operators see it: (epoch, phase, input row, input of the operator).
#[derive(Clone, Debug)]
struct Ev {
    epoch: u64,
    phase: Phase,
    seq: u64,
    kid: usize,
    values: Vec<Scalar>,
}

impl Ev {
    fn at(&self) -> (u64, Phase, u64, usize) {
        (self.epoch, self.phase, self.seq, self.kid)
    }

    /// A row made from `self`'s, at the same time.
    fn with(&self, values: Vec<Scalar>) -> Ev {
        Ev {
            values,
            kid: 0,
            ..*self
        }
    }
}

/// The time rules of a query.
struct Time {
    epoch: u64,
    lateness: i64,
    /// Every epoch of the input, ascending.
    epochs: Vec<u64>,
}

impl Time {
    /// Event times below this are late for a row of `ev` (never for rows made at the end
    /// of an epoch or of the input).
    fn late_below(&self, ev: &Ev) -> i64 {
        match ev.phase {
            // Epoch 0 holds every time below one epoch's length, negative ones too.
            Phase::Row if ev.epoch == 0 => i64::MIN,
            Phase::Row => self.start_of(ev.epoch).saturating_sub(self.lateness),
            _ => i64::MIN,
        }
    }

    /// `e * epoch`, as an event time.
    fn start_of(&self, e: u64) -> i64 {
        e.saturating_mul(self.epoch).min(i64::MAX as u64) as i64
    }

    /// What closes at the end of epoch `e`: windows ending at or before this.
    fn closed_after(&self, e: u64) -> i64 {
        self.start_of(e.saturating_add(1))
            .saturating_sub(self.lateness)
    }
}

/// Where the transparent merge puts a row: epoch, sequence number, lane, event time,
/// then the values.
type MergeOrder = (u64, u64, u64, Option<Scalar>, Vec<Scalar>);

/// What the reference gives for a query: its rows, and the rows it refused with the
/// epoch each was refused in.
pub struct Answer {
    pub rows: Vec<Vec<Scalar>>,
    /// The rows in the transparent merge's order, for a query run in one stage: by
    /// epoch (the end of input last), then the input row that made each (rows made at
    /// the end of an epoch after them), then a hash of the values (rows an input row
    /// made) or the event time, then the values (rows made at an end).
    pub ordered: Vec<Vec<Scalar>>,
    pub late: Vec<(u64, Vec<Scalar>)>,
}

struct Cx<'a> {
    time: &'a Time,
    /// Rows of each input stream (by `Scan::input`), as events.
    scans: &'a [Vec<Ev>],
    /// The late stream's columns (when the query has one).
    late_schema: Option<&'a Schema>,
    late: Vec<(u64, Vec<Scalar>)>,
}

/// Evaluates `e` on a row of values (the queries checked against this reference do not
/// fault: faults have tests of their own, in sql_trust.rs).
fn eval(e: &Expr, values: &[Scalar]) -> Scalar {
    let mut b = Batch::new(values.len());
    let vals: Vec<Value<'_>> = values.iter().map(|s| s.as_value()).collect();
    b.push(RowKey::default(), &vals);
    match e.eval(&b.row(0), &braid_plan::expr::Arena::new()) {
        Ok(v) => v.to_scalar(),
        Err(f) => panic!("the reference met a fault: {f}"),
    }
}

/// The hash of a row's values that orders results of one input row.
fn hash(values: &[Scalar]) -> u64 {
    let mut b = Batch::new(values.len());
    let vals: Vec<Value<'_>> = values.iter().map(|s| s.as_value()).collect();
    b.push(RowKey::default(), &vals);
    braid_plan::expr::row_hash(&b.row(0))
}

fn int_of(s: &Scalar) -> Option<i64> {
    match s {
        Scalar::Int(i) => Some(*i),
        _ => None,
    }
}

/// The rows of each input stream with their epochs, in the serial interleaving:
/// `streams[i]` is the rows of input `i`, `times[i]` its event-time column. When every
/// stream has one, an epoch's rows go by time (each stream's times never going back
/// either: a row earlier than the one before it takes that one's time).
fn interleave(streams: &[Vec<Vec<Scalar>>], times: &[Option<usize>], epoch: u64) -> Vec<Vec<Ev>> {
    let by_time = times.iter().all(Option::is_some);
    let mut all: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (i, rows) in streams.iter().enumerate() {
        let (mut last, mut latest) = (0, 0);
        for (j, r) in rows.iter().enumerate() {
            let t = times[i]
                .and_then(|c| int_of(&r[c]))
                .unwrap_or(j as i64)
                .max(0) as u64;
            last = (t / epoch).max(last);
            latest = t.max(latest);
            all.push((last, if by_time { latest } else { 0 }, i, j));
        }
    }
    all.sort();
    let mut out = vec![Vec::new(); streams.len()];
    for (seq, (e, _, i, j)) in all.into_iter().enumerate() {
        out[i].push(Ev {
            epoch: e,
            phase: Phase::Row,
            seq: seq as u64,
            kid: 0,
            values: streams[i][j].clone(),
        });
    }
    out
}

/// The rows of a node, in the order it makes them.
fn node(l: &Logical, cx: &mut Cx<'_>) -> Vec<Ev> {
    match l {
        Logical::Scan { input, .. } => cx.scans[*input].clone(),
        Logical::Filter { input, predicate } => node(input, cx)
            .into_iter()
            .filter(|ev| eval(predicate, &ev.values) == Scalar::Bool(true))
            .collect(),
        Logical::Project { input, exprs, .. } => node(input, cx)
            .into_iter()
            .map(|ev| {
                let v = exprs.iter().map(|e| eval(e, &ev.values)).collect();
                ev.with(v)
            })
            .collect(),
        // Each epoch's rows (the windows closed together) sorted by the keys, in order.
        Logical::Sort { input, keys } => {
            let mut rows = node(input, cx);
            rows.sort_by(|a, b| {
                (a.epoch, a.phase).cmp(&(b.epoch, b.phase)).then_with(|| {
                    keys.iter()
                        .map(|k| {
                            let (x, y) = (&a.values[k.column], &b.values[k.column]);
                            match (x == &Scalar::Null, y == &Scalar::Null) {
                                (true, true) => std::cmp::Ordering::Equal,
                                (true, false) if k.nulls_first => std::cmp::Ordering::Less,
                                (true, false) => std::cmp::Ordering::Greater,
                                (false, true) if k.nulls_first => std::cmp::Ordering::Greater,
                                (false, true) => std::cmp::Ordering::Less,
                                _ if k.descending => x.cmp(y).reverse(),
                                _ => x.cmp(y),
                            }
                        })
                        .find(|o| o.is_ne())
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
            });
            rows
        }
        Logical::Limit { input, n } => node(input, cx).into_iter().take(*n as usize).collect(),
        Logical::Union { inputs, .. } => {
            let kids: Vec<Vec<Ev>> = inputs.iter().map(|i| node(i, cx)).collect();
            merged(kids)
                .into_iter()
                .map(|ev| ev.with(ev.values.clone()))
                .collect()
        }
        Logical::Lookup {
            input,
            table,
            keys,
            residual,
            kind,
            ..
        } => {
            let mut out = Vec::new();
            for ev in node(input, cx) {
                let key: Vec<Scalar> = keys.iter().map(|(e, _)| eval(e, &ev.values)).collect();
                let before = out.len();
                for j in 0..table.rows.len() {
                    if key.contains(&Scalar::Null) {
                        break;
                    }
                    let t = table.rows.row(j).to_scalars();
                    if keys.iter().zip(&key).all(|((_, c), k)| t[*c] == *k) {
                        let mut v = ev.values.clone();
                        v.extend(t);
                        if residual
                            .as_ref()
                            .is_none_or(|r| eval(r, &v) == Scalar::Bool(true))
                        {
                            out.push(ev.with(v));
                        }
                    }
                }
                // A left outer lookup: a row that met no table row, with nulls.
                if *kind == JoinKind::Left && out.len() == before {
                    let mut v = ev.values.clone();
                    v.resize(v.len() + table.schema.arity(), Scalar::Null);
                    out.push(ev.with(v));
                }
            }
            out
        }
        Logical::TopN {
            input,
            partition,
            order,
            limit,
            ..
        } => top_n(node(input, cx), partition, order, *limit),
        Logical::Aggregate {
            input,
            window,
            keys,
            aggs,
            ..
        } => {
            let rows = node(input, cx);
            held(hold(input), cx, |cx| {
                aggregate(input.schema(), window, keys, aggs, rows, cx)
            })
        }
        Logical::Join {
            left,
            right,
            equi,
            residual,
            window,
            kind,
            ..
        } => {
            let l = node(left, cx);
            let r = node(right, cx);
            held(hold(left).max(hold(right)), cx, |cx| {
                join(
                    [left.schema(), right.schema()],
                    equi,
                    residual.as_ref(),
                    (window, *kind),
                    merged(vec![l, r]),
                    cx,
                )
            })
        }
    }
}

/// How far below the watermark the event times of `l`'s rows may lie: a pair of an
/// interval join whose time is the left row's comes when its right row does, up to `hi`
/// later (a padded left row when `hi` has passed); the right row's time (RIGHT), up to
/// `-lo` later; FULL, either. Whatever reads such rows inherits it.
fn hold(l: &Logical) -> i64 {
    let below = l.children().into_iter().map(hold).max().unwrap_or(0);
    let own = match l {
        Logical::Join {
            window: JoinWindow::Interval { lo, hi },
            kind,
            ..
        } => match kind {
            JoinKind::Inner | JoinKind::Left => (*hi).max(0),
            JoinKind::Right => (-*lo).max(0),
            JoinKind::Full => (*hi).max(-*lo).max(0),
        },
        _ => 0,
    };
    below + own
}

/// `f` under the time rules of an operator whose input rows are `by` behind the
/// watermark: it judges lateness and closes windows and join state that much later.
fn held<T>(by: i64, cx: &mut Cx<'_>, f: impl FnOnce(&mut Cx<'_>) -> T) -> T {
    let time = Time {
        epoch: cx.time.epoch,
        lateness: cx.time.lateness + by,
        epochs: cx.time.epochs.clone(),
    };
    let mut inner = Cx {
        time: &time,
        scans: cx.scans,
        late_schema: cx.late_schema,
        late: std::mem::take(&mut cx.late),
    };
    let out = f(&mut inner);
    cx.late = inner.late;
    out
}

/// The rows of several inputs in the order an operator reading them sees them, each
/// tagged with its input.
fn merged(kids: Vec<Vec<Ev>>) -> Vec<Ev> {
    let mut all: Vec<Ev> = kids
        .into_iter()
        .enumerate()
        .flat_map(|(k, evs)| evs.into_iter().map(move |ev| Ev { kid: k, ..ev }))
        .collect();
    // Stable: rows of one input made at the same time keep their order.
    all.sort_by_key(|ev| ev.at());
    all
}

/// Refuses `ev` (a row of an operator's input with columns `schema`): it goes to the
/// late stream.
fn refuse(what: &str, schema: &Schema, ev: &Ev, cx: &mut Cx<'_>) {
    let Some(late) = cx.late_schema else {
        cx.late.push((ev.epoch, Vec::new()));
        return;
    };
    let mut v = vec![Scalar::Null; late.arity()];
    v[0] = Scalar::Str(what.into());
    v[1] = Scalar::Int(cx.time.start_of(ev.epoch));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (c, f) in schema.fields.iter().enumerate() {
        let n = seen.entry(f.name.as_str()).or_default();
        *n += 1;
        let base = match *n {
            1 => f.name.clone(),
            n => format!("{}_{n}", f.name),
        };
        let typed = format!("{base}_{}", f.ty);
        let j = (2..late.arity())
            .find(|&j| {
                let g = &late.fields[j];
                (g.name == base || g.name == typed) && g.ty == f.ty
            })
            .unwrap_or_else(|| panic!("late stream has no column for `{base}`: {late:?}"));
        v[j] = ev.values[c].clone();
    }
    cx.late.push((ev.epoch, v));
}

/// One aggregate over the rows of a group, in arrival order.
fn agg_value(call: &AggCall, rows: &[Vec<Scalar>]) -> Scalar {
    // FILTER (WHERE c): the rows where c is true, the others as if absent.
    let mut kept: Vec<Vec<Scalar>> = Vec::new();
    let rows = match &call.filter {
        None => rows,
        Some(c) => {
            for r in rows {
                if eval(c, r) == Scalar::Bool(true) {
                    kept.push(r.clone());
                }
            }
            &kept[..]
        }
    };
    if call.func == AggFunc::CountStar {
        return Scalar::Int(rows.len() as i64);
    }
    let arg = call
        .arg
        .as_ref()
        .expect("an aggregate other than count(*) has an argument");
    let vals: Vec<Scalar> = rows
        .iter()
        .map(|r| eval(arg, r))
        .filter(|v| *v != Scalar::Null)
        .collect();
    let as_f64 = |v: &Scalar| match v {
        Scalar::Int(i) => *i as f64,
        Scalar::Float(f) => *f,
        _ => 0.0,
    };
    match call.func {
        AggFunc::CountStar | AggFunc::Count => Scalar::Int(vals.len() as i64),
        AggFunc::CountDistinct => {
            let mut d = vals.clone();
            d.sort();
            d.dedup();
            Scalar::Int(d.len() as i64)
        }
        _ if vals.is_empty() => Scalar::Null,
        AggFunc::Sum if call.ty == DataType::Float64 => {
            Scalar::Float(vals.iter().map(as_f64).sum())
        }
        AggFunc::Sum => Scalar::Int(
            vals.iter()
                .filter_map(int_of)
                .fold(0i64, |a, b| a.wrapping_add(b)),
        ),
        AggFunc::Avg => Scalar::Float(vals.iter().map(as_f64).sum::<f64>() / vals.len() as f64),
        AggFunc::Min => vals.iter().min().cloned().unwrap_or(Scalar::Null),
        AggFunc::Max => vals.iter().max().cloned().unwrap_or(Scalar::Null),
    }
}

/// An output row of an aggregate: `window_start, window_end, keys..., aggregates...`.
fn agg_row(
    start: i64,
    end: i64,
    key: &[Scalar],
    aggs: &[AggCall],
    rows: &[Vec<Scalar>],
) -> Vec<Scalar> {
    let mut v = vec![Scalar::Int(start), Scalar::Int(end)];
    v.extend(key.iter().cloned());
    v.extend(aggs.iter().map(|a| agg_value(a, rows)));
    v
}

/// An open window of one group: start, end (or the last row's time, for sessions), key,
/// rows.
struct Open {
    start: i64,
    end: i64,
    key: Vec<Scalar>,
    rows: Vec<Vec<Scalar>>,
}

/// A grouped aggregate over `rows` (its input, in order), as events.
fn aggregate(
    schema: &Schema,
    window: &WindowSpec,
    keys: &[Expr],
    aggs: &[AggCall],
    rows: Vec<Ev>,
    cx: &mut Cx<'_>,
) -> Vec<Ev> {
    let time_of = |ev: &Ev| {
        schema
            .event_time
            .and_then(|c| int_of(&ev.values[c]))
            .unwrap_or(0)
    };
    let mut out: Vec<Ev> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    // Count windows: per key, the number of the window being filled.
    let mut numbers: Vec<(Vec<Scalar>, i64)> = Vec::new();
    // Emits (in order of end, start, key) and forgets the windows `done` picks.
    fn close(
        open: &mut Vec<Open>,
        done: impl Fn(&Open) -> bool,
        session_gap: Option<i64>,
        aggs: &[AggCall],
        at: &Ev,
        out: &mut Vec<Ev>,
    ) {
        let (mut closed, rest): (Vec<Open>, Vec<Open>) = open.drain(..).partition(|w| done(w));
        *open = rest;
        let end_of = |w: &Open| session_gap.map_or(w.end, |g| w.end.saturating_add(g));
        closed.sort_by(|a, b| (end_of(a), a.start, &a.key).cmp(&(end_of(b), b.start, &b.key)));
        for w in closed {
            out.push(at.with(agg_row(w.start, end_of(&w), &w.key, aggs, &w.rows)));
        }
    }
    let mut i = 0;
    let epochs = cx.time.epochs.clone();
    for e in epochs.iter().copied().chain([u64::MAX]) {
        while i < rows.len() && rows[i].epoch == e {
            let ev = &rows[i];
            i += 1;
            let key: Vec<Scalar> = keys.iter().map(|k| eval(k, &ev.values)).collect();
            let t = time_of(ev);
            let wm = cx.time.late_below(ev);
            match *window {
                WindowSpec::Tumble { size } => {
                    let start = t.saturating_sub(t.rem_euclid(size));
                    let end = start.saturating_add(size);
                    if end <= wm {
                        refuse("aggregate", schema, ev, cx);
                        continue;
                    }
                    add(&mut open, start, end, &key, &ev.values);
                }
                WindowSpec::Hop { size, slide } => {
                    // Every window [s, s + size), s a multiple of slide, holding t.
                    let mut any = false;
                    let mut s = t.saturating_sub(t.rem_euclid(slide));
                    while s > t.saturating_sub(size) {
                        let end = s.saturating_add(size);
                        if end > wm {
                            any = true;
                            add(&mut open, s, end, &key, &ev.values);
                        }
                        if s == i64::MIN {
                            break;
                        }
                        s = s.saturating_sub(slide);
                    }
                    if !any {
                        refuse("aggregate", schema, ev, cx);
                    }
                }
                WindowSpec::Cumulate { step, size } => {
                    // Every window [s, s + k*step), s the multiple of size at or below
                    // t, k = 1..=size/step, holding t (saturated ends are one window).
                    let s = t.saturating_sub(t.rem_euclid(size));
                    let mut ends: Vec<i64> = (1..=size / step)
                        .map(|k| s.saturating_add(k * step))
                        .filter(|&end| end > t)
                        .collect();
                    ends.dedup();
                    let open_ends: Vec<i64> = ends.into_iter().filter(|&end| end > wm).collect();
                    if open_ends.is_empty() {
                        refuse("aggregate", schema, ev, cx);
                    }
                    for end in open_ends {
                        add(&mut open, s, end, &key, &ev.values);
                    }
                }
                WindowSpec::Session { gap } => {
                    if t.saturating_add(gap) <= wm {
                        refuse("aggregate", schema, ev, cx);
                        continue;
                    }
                    // The new session, and every open one of its key it comes within
                    // `gap` of, become one.
                    let mut s = Open {
                        start: t,
                        end: t,
                        key: key.clone(),
                        rows: Vec::new(),
                    };
                    let mut k = 0;
                    while k < open.len() {
                        let o = &open[k];
                        if o.key == key
                            && t > o.start.saturating_sub(gap)
                            && t < o.end.saturating_add(gap)
                        {
                            let o = open.remove(k);
                            s.start = s.start.min(o.start);
                            s.end = s.end.max(o.end);
                            s.rows.extend(o.rows);
                        } else {
                            k += 1;
                        }
                    }
                    s.rows.push(ev.values.clone());
                    open.push(s);
                }
                WindowSpec::Count { rows: n } => {
                    let w = match numbers.iter().position(|(k, _)| *k == key) {
                        Some(p) => numbers[p].1,
                        None => {
                            numbers.push((key.clone(), 0));
                            0
                        }
                    };
                    let n = n as i64;
                    add(&mut open, w * n, w, &key, &ev.values);
                    let p = open
                        .iter()
                        .position(|o| o.key == key)
                        .expect("the window just added to");
                    if open[p].rows.len() as i64 == n {
                        let o = open.remove(p);
                        out.push(ev.with(agg_row(w * n, (w + 1) * n, &key, aggs, &o.rows)));
                        let q = numbers
                            .iter()
                            .position(|(k, _)| *k == key)
                            .expect("numbered");
                        numbers[q].1 += 1;
                    }
                }
                WindowSpec::Unbounded => add(&mut open, 0, 0, &key, &ev.values),
            }
        }
        // The end of epoch e (or of the input).
        let at = Ev {
            epoch: e,
            phase: if e == u64::MAX {
                Phase::Finish
            } else {
                Phase::End
            },
            seq: 0,
            kid: 0,
            values: Vec::new(),
        };
        if e == u64::MAX {
            match *window {
                WindowSpec::Count { rows: n } => {
                    open.sort_by(|a, b| a.key.cmp(&b.key));
                    for o in open.drain(..) {
                        let len = o.rows.len() as i64;
                        debug_assert!(len < n as i64);
                        out.push(at.with(agg_row(o.start, o.start + len, &o.key, aggs, &o.rows)));
                    }
                }
                WindowSpec::Session { gap } => {
                    close(&mut open, |_| true, Some(gap), aggs, &at, &mut out)
                }
                _ => close(&mut open, |_| true, None, aggs, &at, &mut out),
            }
            continue;
        }
        let wm = cx.time.closed_after(e);
        match *window {
            WindowSpec::Tumble { .. } | WindowSpec::Hop { .. } | WindowSpec::Cumulate { .. } => {
                close(&mut open, |w| w.end <= wm, None, aggs, &at, &mut out)
            }
            WindowSpec::Session { gap } => close(
                &mut open,
                |w| w.end.saturating_add(gap) <= wm,
                Some(gap),
                aggs,
                &at,
                &mut out,
            ),
            _ => {}
        }
    }
    assert_eq!(i, rows.len(), "rows at an epoch the input does not have");
    out
}

/// Adds a row to the window (start, end) of `key`, opened if new.
fn add(open: &mut Vec<Open>, start: i64, end: i64, key: &[Scalar], row: &[Scalar]) {
    match open
        .iter_mut()
        .find(|o| o.start == start && o.end == end && o.key == key)
    {
        Some(o) => o.rows.push(row.to_vec()),
        None => open.push(Open {
            start,
            end,
            key: key.to_vec(),
            rows: vec![row.to_vec()],
        }),
    }
}

/// A row kept by one side of a join.
struct Kept {
    time: i64,
    key: Vec<Scalar>,
    values: Vec<Scalar>,
    /// It has met a partner.
    met: bool,
}

/// A join of two streams over `rows` (both inputs, in the order the join sees them).
fn join(
    schemas: [&Schema; 2],
    equi: &[(Expr, Expr)],
    residual: Option<&Expr>,
    (window, kind): (&JoinWindow, JoinKind),
    rows: Vec<Ev>,
    cx: &mut Cx<'_>,
) -> Vec<Ev> {
    let mut kept: [Vec<Kept>; 2] = [Vec::new(), Vec::new()];
    let mut out = Vec::new();
    // A row of `side` without a partner, with nulls for the other side's columns.
    let padded = |side: usize, values: &[Scalar]| {
        let nulls = vec![Scalar::Null; schemas[1 - side].arity()];
        match side {
            0 => [values, &nulls].concat(),
            _ => [&nulls, values].concat(),
        }
    };
    let mut i = 0;
    let epochs = cx.time.epochs.clone();
    for e in epochs.iter().copied().chain([u64::MAX]) {
        while i < rows.len() && rows[i].epoch == e {
            let ev = &rows[i];
            i += 1;
            let side = ev.kid;
            let t = schemas[side]
                .event_time
                .and_then(|c| int_of(&ev.values[c]))
                .unwrap_or(0);
            let key: Vec<Scalar> = equi
                .iter()
                .map(|(l, r)| eval(if side == 0 { l } else { r }, &ev.values))
                .collect();
            if let JoinWindow::Interval { .. } = window {
                if t < cx.time.late_below(ev) {
                    refuse("join", schemas[side], ev, cx);
                    continue;
                }
            }
            if key.contains(&Scalar::Null) {
                if kind.keeps(side) {
                    out.push(ev.with(padded(side, &ev.values)));
                }
                continue;
            }
            let all = kept[1 - side].len();
            let others = match *window {
                JoinWindow::Interval { .. } => 0..all,
                // The other side's last rows.
                JoinWindow::Count { left, right } => {
                    let n = if side == 0 { right } else { left } as usize;
                    all.saturating_sub(n)..all
                }
            };
            let mut met = false;
            for j in others {
                let o = &mut kept[1 - side][j];
                if o.key != key {
                    continue;
                }
                if let JoinWindow::Interval { lo, hi } = *window {
                    // right time - left time
                    let d = if side == 0 {
                        i128::from(o.time) - i128::from(t)
                    } else {
                        i128::from(t) - i128::from(o.time)
                    };
                    if d < i128::from(lo) || d > i128::from(hi) {
                        continue;
                    }
                }
                let v = match side {
                    0 => [&ev.values[..], &o.values].concat(),
                    _ => [&o.values[..], &ev.values].concat(),
                };
                if residual.is_none_or(|r| eval(r, &v) == Scalar::Bool(true)) {
                    o.met = true;
                    met = true;
                    out.push(ev.with(v));
                }
            }
            kept[side].push(Kept {
                time: t,
                key,
                values: ev.values.clone(),
                met,
            });
        }
        // At the end of epoch e, a kept row that no row still on time can meet goes,
        // and a row of an outer join's preserved side that met none comes out padded;
        // at the end of the input, every row goes.
        if let JoinWindow::Interval { lo, hi } = *window {
            let wm = cx.time.closed_after(e);
            let at = Ev {
                epoch: e,
                phase: if e == u64::MAX {
                    Phase::Finish
                } else {
                    Phase::End
                },
                seq: 0,
                kid: 0,
                values: Vec::new(),
            };
            for (side, rows) in kept.iter_mut().enumerate() {
                let stays = |k: &Kept| {
                    e != u64::MAX
                        && match side {
                            0 => k.time.saturating_add(hi) >= wm,
                            _ => k.time.saturating_sub(lo) >= wm,
                        }
                };
                for k in rows.iter() {
                    if !stays(k) && !k.met && kind.keeps(side) {
                        out.push(at.with(padded(side, &k.values)));
                    }
                }
                rows.retain(stays);
            }
        }
    }
    assert_eq!(i, rows.len(), "rows at an epoch the input does not have");
    out
}

/// A window top-N: the rows made at one end of an epoch (or of the input), per value of
/// the `partition` columns, ranked by `order` then all columns; the first `limit` of
/// each, numbered from 1, come out at that end.
fn top_n(rows: Vec<Ev>, partition: &[usize], order: &[(usize, bool)], limit: u64) -> Vec<Ev> {
    type Groups = BTreeMap<(u64, Phase), BTreeMap<Vec<Scalar>, Vec<Vec<Scalar>>>>;
    let mut ends: Groups = BTreeMap::new();
    for ev in rows {
        let part: Vec<Scalar> = partition.iter().map(|&c| ev.values[c].clone()).collect();
        let phase = ev.phase.max(Phase::End);
        ends.entry((ev.epoch, phase))
            .or_default()
            .entry(part)
            .or_default()
            .push(ev.values);
    }
    let mut out = Vec::new();
    for ((epoch, phase), parts) in ends {
        for (_, mut rows) in parts {
            // Sort keys: each ORDER BY column (negated order for DESC), then the row.
            rows.sort_by(|a, b| {
                let by = |r: &Vec<Scalar>, c: usize| r[c].clone();
                order
                    .iter()
                    .map(|&(c, desc)| {
                        let o = by(a, c).cmp(&by(b, c));
                        if desc {
                            o.reverse()
                        } else {
                            o
                        }
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| a.cmp(b))
            });
            for (k, mut v) in rows.into_iter().take(limit as usize).enumerate() {
                v.push(Scalar::Int(k as i64 + 1));
                out.push(Ev {
                    epoch,
                    phase,
                    seq: 0,
                    kid: 0,
                    values: v,
                });
            }
        }
    }
    out
}

/// Runs `job` of `script` on `streams` (the rows of each stream the query reads, by
/// name), naively.
pub fn answer(script: &Script, job: &Job, streams: &BTreeMap<String, Vec<Vec<Scalar>>>) -> Answer {
    let logical = job
        .logical
        .as_ref()
        .expect("a query written in SQL has a logical plan");
    // The query's input streams, by input index.
    let mut inputs: BTreeMap<usize, (String, Option<usize>)> = BTreeMap::new();
    fn scans(l: &Logical, out: &mut BTreeMap<usize, (String, Option<usize>)>) {
        if let Logical::Scan {
            stream,
            input,
            schema,
        } = l
        {
            out.insert(*input, (stream.to_ascii_lowercase(), schema.event_time));
        }
        for c in l.children() {
            scans(c, out);
        }
    }
    scans(logical, &mut inputs);
    let defs: Vec<_> = inputs
        .values()
        .map(|(name, _)| script.catalog.stream(name).expect("a declared stream"))
        .collect();
    let epoch = defs[0].source.epoch.max(1);
    let lateness = defs.iter().map(|d| d.lateness).max().unwrap_or(0);
    let rows: Vec<Vec<Vec<Scalar>>> = inputs
        .values()
        .map(|(name, _)| streams.get(name).cloned().unwrap_or_default())
        .collect();
    let times: Vec<Option<usize>> = inputs.values().map(|(_, t)| *t).collect();
    // A late stream's rows come in the epoch they were refused in: `_refused_at / epoch`.
    let scans_ev = interleave(&rows, &times, epoch);
    let mut epochs: Vec<u64> = scans_ev.iter().flatten().map(|ev| ev.epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    let time = Time {
        epoch,
        lateness,
        epochs,
    };
    let late_schema = job.late_source.as_ref().map(|s| &s.schema);
    let mut cx = Cx {
        time: &time,
        scans: &scans_ev,
        late_schema,
        late: Vec::new(),
    };
    let out = node(logical, &mut cx);
    // Rows an input row made: by a hash of their values; rows made at the end of an
    // epoch or of the input: by event time, then values.
    let time = logical.schema().event_time;
    let mut keyed: Vec<MergeOrder> = out
        .iter()
        .map(|ev| {
            let (seq, lane) = match ev.phase {
                Phase::Row => (ev.seq, hash(&ev.values)),
                Phase::End | Phase::Finish => (RowKey::END_OF_EPOCH, 0),
            };
            let t = time.map(|t| ev.values[t].clone());
            (ev.epoch, seq, lane, t, ev.values.clone())
        })
        .collect();
    keyed.sort();
    Answer {
        rows: out.into_iter().map(|ev| ev.values).collect(),
        ordered: keyed.into_iter().map(|k| k.4).collect(),
        late: cx.late,
    }
}

/// The rows of a call stream as scalars.
fn scalars(calls: &[Call]) -> Vec<Vec<Scalar>> {
    calls
        .iter()
        .map(|&(a, b, t, d)| {
            vec![
                Scalar::Int(a),
                Scalar::Int(b),
                Scalar::Int(t),
                Scalar::Int(d),
            ]
        })
        .collect()
}

/// With more than one worker, the input files are read in shares of about 97 bytes
/// (a few lines each: chunk boundaries fall inside lines).
fn chunks() -> braid_exec::source::ReadOptions {
    braid_exec::source::ReadOptions {
        chunk_bytes: 97,
        ..RunConfig::default().read
    }
}

fn sorted(mut v: Vec<Vec<Scalar>>) -> Vec<Vec<Scalar>> {
    v.sort();
    v
}

fn write_inputs(dir: &std::path::Path, calls: &[Call], texts: &[Call], watch: &[(i64, i64)]) {
    write_calls(&dir.join("calls.csv"), calls);
    write_texts(&dir.join("texts.csv"), texts);
    let mut w = String::from("number,risk\n");
    for (n, r) in watch {
        w += &format!("{n},{r}\n");
    }
    std::fs::write(dir.join("watch.csv"), w).expect("watch");
}

fn streams_of(calls: &[Call], texts: &[Call]) -> BTreeMap<String, Vec<Vec<Scalar>>> {
    [
        ("calls".to_string(), scalars(calls)),
        ("texts".to_string(), scalars(texts)),
    ]
    .into_iter()
    .collect()
}

/// The cuts into stages every query is compared with the reference under: as by
/// default (at stateful operators keyed differently), at every operator, and none.
pub const STAGES: &[&str] = &["subquery", "operator", "query"];

/// Queries whose default cut gives a later stage rows an aggregate made at the end of
/// an epoch. In one stage such rows are never late; a later stage must not refuse them
/// either, even a window that closes only when the input skips epochs (its epoch `e` is
/// the first one with `(e + 1) * epoch - lateness >= end`, and the epochs before had no
/// rows), which comes out older than the epoch's start less the lateness.
pub const CUT_AFTER_AGGREGATE: &[&str] =
    &["aggregate_then_aggregate", "join_of_aggregates_on_counts"];

/// Every query of [`QUERIES`], parallelized over 8 partitions (cut into stages as each
/// of [`STAGES`] says) on 1, 2 and 4 workers, with both merges, gives the multiset the
/// naive reference computes from the whole input; uncut with the transparent merge, the
/// same sequence (the reference orders its rows as that merge defines).
pub fn check_reference(
    calls: &[Call],
    texts: &[Call],
    watch: &[(i64, i64)],
) -> Result<(), TestCaseError> {
    check_reference_of(calls, texts, watch, None, STAGES, PLAIN)
}

/// How the oracle runs a query: as planned, or under a latency constraint (its
/// source cut into windows of at most 2 rows: every epoch comes in several ticks, see
/// `braid_exec::qos`), and with a scheduler other than the default, each `Map`
/// yielding after every slice of rows (a zero quantum), and with the stages that can
/// be chained onto the reader's worker chained (`RunConfig::chain`: a first stage that
/// keeps no state runs on worker 0's partitions, the other stages have all their
/// partitions on worker 0), or chained and split in turn every epoch, the partitions'
/// state handed over at each switch (`RunConfig::chain_alternate`).
#[derive(Clone, Copy, Debug)]
struct Mode {
    ticks: bool,
    scheduler: Option<braid_plan::plan::Scheduler>,
    chain: Option<bool>,
    alternate: Option<u64>,
    /// Epochs per timely time (`RunConfig::granule`); None: as the run chooses.
    granule: Option<u64>,
}

const PLAIN: Mode = Mode {
    ticks: false,
    scheduler: None,
    chain: None,
    alternate: None,
    granule: None,
};
const TICKS: Mode = Mode {
    ticks: true,
    scheduler: None,
    chain: None,
    alternate: None,
    granule: None,
};
const CHAINED: Mode = Mode {
    ticks: true,
    scheduler: None,
    chain: Some(true),
    alternate: None,
    granule: None,
};
const ALTERNATING: Mode = Mode {
    ticks: true,
    scheduler: None,
    chain: None,
    alternate: Some(1),
    granule: None,
};

impl Mode {
    fn plan(self, plan: &braid_plan::plan::Plan) -> braid_plan::plan::Plan {
        let mut plan = plan.clone();
        if self.ticks {
            plan = plan.max_latency(std::time::Duration::from_millis(1));
            plan.leaf_source_mut().window = 2;
        }
        if let Some(s) = self.scheduler {
            plan.set_scheduler(s);
        }
        plan
    }

    fn config(self, workers: usize) -> RunConfig {
        RunConfig {
            workers,
            read: chunks(),
            quantum: self.scheduler.map(|_| std::time::Duration::ZERO),
            chain: self.chain,
            chain_alternate: self.alternate,
            granule: self.granule,
            ..RunConfig::default()
        }
    }
}

/// [`check_reference`] for the queries named in `only` (all when None), cut as each of
/// `stage_settings` says.
fn check_reference_of(
    calls: &[Call],
    texts: &[Call],
    watch: &[(i64, i64)],
    only: Option<&[&str]>,
    stage_settings: &[&str],
    mode: Mode,
) -> Result<(), TestCaseError> {
    let dir = scratch("reference");
    write_inputs(&dir.0, calls, texts, watch);
    let streams = streams_of(calls, texts);
    for (name, q) in QUERIES {
        if only.is_some_and(|o| !o.contains(name)) {
            continue;
        }
        for stages in stage_settings {
            for merge in ["transparent", "best_effort"] {
                let par = script(
                    &dir.0,
                    &format!("SET partitions = 8; SET merge = '{merge}'; SET stages = '{stages}';"),
                    q,
                );
                let answer = answer(&par, &par.jobs[0], &streams);
                // One stage, transparent: the sequence too.
                let ordered = *stages == "query" && merge == "transparent";
                let want = match ordered {
                    true => answer.ordered,
                    false => sorted(answer.rows),
                };
                for workers in [1, 2, 4] {
                    let cfg = mode.config(workers);
                    let plan = mode.plan(&par.jobs[0].plan);
                    let report = run(&plan, &par.registry, &cfg)
                        .unwrap_or_else(|e| panic!("{name}: run: {e}"));
                    let got: Vec<Vec<Scalar>> =
                        report.collected.iter().map(|r| r.values.clone()).collect();
                    let got = if ordered { got } else { sorted(got) };
                    prop_assert_eq!(
                        &got,
                        &want,
                        "{}, {}, {} stages, {} workers, {:?} ({})",
                        name,
                        merge,
                        stages,
                        workers,
                        mode,
                        par.jobs[0].partitioning
                    );
                }
            }
        }
    }
    Ok(())
}

/// Every query of [`LATE_QUERIES`] with two queries over its late rows (all of them;
/// counts per window of refusal time), cut as each of [`STAGES`] says, on 1, 2 and 4
/// workers: the output, the late rows and the counts are what the naive reference
/// computes.
pub fn check_late_reference(calls: &[Call], texts: &[Call]) -> Result<(), TestCaseError> {
    check_late_reference_of(calls, texts, STAGES, PLAIN)
}

/// [`check_late_reference`] with the queries cut into stages as each of
/// `stage_settings` says.
fn check_late_reference_of(
    calls: &[Call],
    texts: &[Call],
    stage_settings: &[&str],
    mode: Mode,
) -> Result<(), TestCaseError> {
    let dir = scratch("late-reference");
    write_inputs(&dir.0, calls, texts, &[]);
    let streams = streams_of(calls, texts);
    for name in LATE_QUERIES {
        let q = QUERIES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, q)| *q)
            .expect("a query of QUERIES");
        for stages in stage_settings {
            let par = late_script(
                &dir.0,
                &format!("SET partitions = 8; SET stages = '{stages}';"),
                q,
            );
            let owner = answer(&par, &par.jobs[0], &streams);
            // The late stream, as the queries over it read it: each row in the epoch it was
            // refused in.
            let mut late_streams = streams.clone();
            let key = "late(out)".to_string();
            late_streams.insert(
                key.clone(),
                owner.late.iter().map(|(_, v)| v.clone()).collect(),
            );
            let want = [
                sorted(owner.rows.clone()),
                sorted(answer(&par, &par.jobs[1], &late_streams).rows),
                sorted(answer(&par, &par.jobs[2], &late_streams).rows),
            ];
            for workers in [1, 2, 4] {
                let cfg = mode.config(workers);
                let plan = mode.plan(&par.jobs[0].plan);
                let report =
                    run(&plan, &par.registry, &cfg).unwrap_or_else(|e| panic!("{name}: run: {e}"));
                let values = |rows: &[braid_plan::output::OutRow]| {
                    sorted(rows.iter().map(|r| r.values.clone()).collect())
                };
                let got = [
                    values(&report.collected),
                    values(&report.collected_late[0]),
                    values(&report.collected_late[1]),
                ];
                for (k, what) in ["output", "late rows", "late counts"].iter().enumerate() {
                    prop_assert_eq!(
                        &got[k],
                        &want[k],
                        "{}: {}, {} stages, {} workers, {:?}",
                        name,
                        what,
                        stages,
                        workers,
                        mode
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_engine_matches_the_reference(
        calls in calls_strategy(),
        texts in calls_strategy(),
        watch in prop::collection::vec((0i64..12, 1i64..5), 0..6),
    ) {
        check_reference(&calls, &texts, &watch)?;
    }

    #[test]
    fn sql_late_streams_match_the_reference(
        calls in calls_strategy(),
        texts in calls_strategy(),
    ) {
        check_late_reference(&calls, &texts)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2, ..ProptestConfig::default() })]

    /// Under a latency constraint (ticks of at most 2 rows within every epoch, the first
    /// stage running each as it completes) every query gives what the reference gives.
    #[test]
    fn sql_under_a_latency_constraint_matches_the_reference(
        calls in calls_strategy(),
        texts in calls_strategy(),
        watch in prop::collection::vec((0i64..12, 1i64..5), 0..6),
    ) {
        check_reference_of(&calls, &texts, &watch, None, STAGES, TICKS)?;
        check_late_reference_of(&calls, &texts, STAGES, TICKS)?;
        check_reference_of(&calls, &texts, &watch, None, STAGES, CHAINED)?;
        check_reference_of(&calls, &texts, &watch, None, STAGES, ALTERNATING)?;
    }
}

/// Calls and texts where one text, in epoch 7, meets three calls of the window [0, 50),
/// closed at 70 - 20 = 50: `join_then_aggregate` refuses the three joined rows, uncut.
const MEETS_THREE: ([Call; 4], [Call; 2]) = (
    [
        (1, 0, 45, 100),
        (1, 0, 46, 100),
        (1, 0, 47, 100),
        (2, 0, 80, 5),
    ],
    [(2, 0, 70, 5), (1, 0, 52, 7)],
);

/// [`MEETS_THREE`] with `join_then_aggregate` cut into stages (after the join), against
/// the reference: the stage after the join counts the three joined rows, as the query
/// as written does (the join holds back what is above it by its upper bound).
#[test]
fn sql_cut_after_an_interval_join_matches_the_reference() {
    check_late_reference_of(
        &MEETS_THREE.0,
        &MEETS_THREE.1,
        &["subquery", "operator"],
        PLAIN,
    )
    .expect("cut after an interval join");
}

/// The queries of [`CUT_AFTER_AGGREGATE`] cut into stages, on an input that skips
/// epochs, against the reference: the stage after the aggregates keeps the windows that
/// closed late, as the query as written does (see there).
#[test]
fn sql_cut_after_an_aggregate_matches_the_reference() {
    let calls: Vec<Call> = (0..120)
        .map(|i| (i % 4, i % 3, (i / 6) * 35, i % 50))
        .collect();
    check_reference_of(
        &calls,
        &calls[10..],
        &[],
        Some(CUT_AFTER_AGGREGATE),
        &["subquery", "operator"],
        PLAIN,
    )
    .expect("cut after an aggregate");
}

/// The edge cases of `sql_edge_cases` (empty streams, one row, everything late), and
/// a dense input where every query has plenty of rows, against the reference.
#[test]
fn sql_engine_matches_the_reference_on_edge_cases() {
    check_reference(&[], &[], &[]).expect("empty");
    check_reference(&[(1, 2, 100, 5)], &[(1, 2, 100, 500)], &[(1, 3)]).expect("one row");
    let late = late_calls();
    check_reference(&late, &late, &[(0, 1), (1, 2)]).expect("late rows");
    check_late_reference(&late, &late).expect("late rows as a stream");
    // Uncut, the aggregate over the join refuses three rows while processing one text
    // (the late stream must hold all three, each whole).
    check_late_reference_of(&MEETS_THREE.0, &MEETS_THREE.1, &["query"], PLAIN)
        .expect("several rows refused at once");
    let extreme = extreme_calls();
    check_reference(&extreme, &extreme, &[(0, 1)]).expect("extreme times");
    let dense: Vec<Call> = (0..300)
        .map(|i| (i % 6, i % 11, i * 2 - (i % 7) * 3, (i * 37) % 600))
        .collect();
    check_reference(&dense, &dense[50..], &[(1, 2), (3, 4)]).expect("dense");
    check_late_reference(&dense, &dense[50..]).expect("dense, late rows");
    // Under a latency constraint: ticks within epochs.
    let all = STAGES;
    check_reference_of(&late, &late, &[(0, 1), (1, 2)], None, all, TICKS).expect("late, ticks");
    check_reference_of(&dense, &dense[50..], &[(1, 2), (3, 4)], None, all, TICKS)
        .expect("dense, ticks");
    check_late_reference_of(&dense, &dense[50..], all, TICKS).expect("dense, late rows, ticks");
    check_reference_of(&dense, &dense[50..], &[(1, 2), (3, 4)], None, all, CHAINED)
        .expect("dense, chained");
    check_reference_of(
        &dense,
        &dense[50..],
        &[(1, 2), (3, 4)],
        None,
        all,
        ALTERNATING,
    )
    .expect("dense, chained and split in turn every epoch");
    check_late_reference_of(&dense, &dense[50..], all, ALTERNATING)
        .expect("dense, late rows, chained and split in turn every epoch");
    // Each scheduler, each Map yielding after every slice, with and without ticks.
    use braid_plan::plan::Scheduler::{Chain, ChainFlush, Fifo, RoundRobin};
    for (scheduler, ticks) in [
        (Fifo, false),
        (RoundRobin, false),
        (Chain, true),
        (ChainFlush, false),
        (ChainFlush, true),
    ] {
        let mode = Mode {
            ticks,
            scheduler: Some(scheduler),
            chain: None,
            alternate: None,
            granule: None,
        };
        check_reference_of(&dense, &dense[50..], &[(1, 2), (3, 4)], None, all, mode)
            .unwrap_or_else(|e| panic!("dense, {mode:?}: {e}"));
        check_late_reference_of(&dense, &dense[50..], all, mode)
            .unwrap_or_else(|e| panic!("dense, late rows, {mode:?}: {e}"));
    }
    // One epoch per timely time, and times of 3 epochs (30 event-time units, which
    // most of the queries' windows and slides do not line up with), where the run would
    // choose its own (for these inputs, several epochs a time: see `granule_is_chosen`).
    for granule in [1, 3] {
        let mode = Mode {
            granule: Some(granule),
            ..PLAIN
        };
        check_reference_of(&dense, &dense[50..], &[(1, 2), (3, 4)], None, all, mode)
            .unwrap_or_else(|e| panic!("dense, {mode:?}: {e}"));
        check_late_reference_of(&dense, &dense[50..], all, mode)
            .unwrap_or_else(|e| panic!("dense, late rows, {mode:?}: {e}"));
    }
}
