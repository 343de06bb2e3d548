//! The reference interpreter: a plain single-threaded execution of a plan, the oracle
//! that parallel execution is tested against.
//!
//! It defines the serial order every strategy must reproduce: rows in source order;
//! a split row goes to its partition, a broadcast row to partitions 0..q in order;
//! each partition's stream function sees its rows in that order, then `end_of_epoch`
//! when the epoch ends (partitions in order), then `finish` once at the end.
//!
//! Row `i` of the input has sequence number `i` and belongs to epoch
//! `max(epoch_of(row i), epoch of row i - 1)`: epochs never go back (a parallel run
//! cannot go back in time either).

use crate::batch::{Batch, Datum, RowKey, Scalar, Value};
use crate::combine::{Groups, KeyedMerge};
use crate::error::{Error, Result};
use crate::expr::{BinOp, Expr};
use crate::function::{Emitter, Registry, RouteFn, StreamFunction};
use crate::plan::{MergeKind, Plan, Route, Source, SourceSpec, Split};
use std::collections::BTreeMap;

/// One row of a result: its epoch, key (serial position) and values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OutRow {
    /// Epoch the row belongs to (`u64::MAX` for rows made at the end of input).
    pub epoch: u64,
    /// Serial position.
    pub key: RowKey,
    /// Values.
    pub values: Vec<Scalar>,
}

/// The epoch of row `seq` of a source, before clamping (see the module doc).
pub fn epoch_of(source: &Source, time: Option<i64>, seq: u64) -> u64 {
    epoch_at(source.epoch, time, seq)
}

/// The epoch of a row with event time `time` (or, without one, sequence number `seq`)
/// for epochs of `epoch_len` (at least 1).
pub fn epoch_at(epoch_len: u64, time: Option<i64>, seq: u64) -> u64 {
    match time {
        Some(t) => t.max(0) as u64 / epoch_len,
        None => seq / epoch_len,
    }
}

/// Runs `plan` on `input`: the source's rows in order (keys are ignored; row `i` gets
/// sequence number `i`).
///
/// For a plan whose leaf source is [`crate::plan::SourceSpec::Interleave`], `input` is
/// the already interleaved stream, [`crate::interleave::rows`] of the children's rows.
pub fn run(plan: &Plan, registry: &Registry, input: &Batch) -> Result<Vec<OutRow>> {
    Ok(run_all(plan, registry, input)?.swap_remove(0))
}

/// Like [`run`], the output of every plan of a [`Plan::Together`] (one for other plans).
pub fn run_all(plan: &Plan, registry: &Registry, input: &Batch) -> Result<Vec<Vec<OutRow>>> {
    plan.schema(registry)?;
    let mut keyed = Batch::with_capacity(input.arity(), input.len());
    for i in 0..input.len() {
        keyed.push_row_of(
            input,
            i,
            RowKey {
                seq: i as u64,
                lane: 0,
            },
        );
    }
    let plans = match plan {
        Plan::Together(plans) => plans.as_slice(),
        one => std::slice::from_ref(one),
    };
    let mut cx = EvalCx::default();
    let mut outputs = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        cx.collect_late = plans
            .iter()
            .any(|r| matches!(r.leaf_source().spec, SourceSpec::Late { of } if of == i));
        outputs.push(eval(p, registry, &keyed, &mut cx)?);
        let late = std::mem::take(&mut cx.late);
        cx.inputs.push(late);
    }
    Ok(outputs)
}

/// What evaluating one plan of a [`Plan::Together`] shares with the others.
#[derive(Default)]
struct EvalCx {
    /// Collect the late rows of the plan being evaluated (a later plan reads them).
    collect_late: bool,
    /// The late rows of the plan being evaluated, in the order refused.
    late: Vec<OutRow>,
    /// The late rows of every plan evaluated so far.
    inputs: Vec<Vec<OutRow>>,
}

/// Routing as one closure: destination partitions of a row, in ascending order.
pub struct Router {
    q: u32,
    modulo: Modulo,
    route: RouteImpl,
    broadcast: Option<Compiled>,
}

/// `v.rem_euclid(q)` for a fixed `q > 0`: a mask when `q` is a power of two (two's
/// complement makes that right for negative `v` too), else a division.
#[derive(Clone, Copy)]
struct Modulo {
    q: i64,
    mask: Option<i64>,
}

impl Modulo {
    fn new(q: u32) -> Modulo {
        let q = i64::from(q.max(1));
        Modulo {
            q,
            mask: (q.count_ones() == 1).then_some(q - 1),
        }
    }

    #[inline]
    fn of(self, v: i64) -> u32 {
        match self.mask {
            Some(m) => (v & m) as u32,
            None => v.rem_euclid(self.q) as u32,
        }
    }
}

enum RouteImpl {
    Expr(Compiled, Option<Compiled>),
    Native(RouteFn),
    RoundRobin,
    Grid(Compiled, u64, u64),
}

/// A route or broadcast expression with the shapes splits use most (a column; a
/// column compared with an integer) evaluated straight on the row's datums, which
/// gives the same value as [`Expr::eval`] without walking the tree.
enum Compiled {
    Column(usize),
    ColumnCmpInt(usize, BinOp, i64, Expr),
    Expr(Expr),
}

impl Compiled {
    fn new(e: &Expr) -> Compiled {
        match e {
            Expr::Column(c, _) => Compiled::Column(*c),
            Expr::Binary(op, l, r) if op.is_comparison() => match (l.as_ref(), r.as_ref()) {
                (Expr::Column(c, _), Expr::Literal(Scalar::Int(k))) => {
                    Compiled::ColumnCmpInt(*c, *op, *k, e.clone())
                }
                _ => Compiled::Expr(e.clone()),
            },
            e => Compiled::Expr(e.clone()),
        }
    }

    /// The value as a partition number source: an int, or None.
    #[inline]
    fn int(&self, row: &crate::batch::Row<'_>) -> Option<i64> {
        match self {
            Compiled::Column(c) => row.int(*c),
            Compiled::ColumnCmpInt(..) => None,
            Compiled::Expr(e) => e.eval(row).as_int(),
        }
    }

    /// True only when the predicate is true (not null, not false).
    #[inline]
    fn holds(&self, row: &crate::batch::Row<'_>) -> bool {
        match self {
            Compiled::ColumnCmpInt(c, op, k, e) => match row.datum(*c) {
                Datum::Int(v) => op.compare(v.cmp(k)),
                // Floats, nulls and other types compare as the interpreter does.
                _ => e.eval(row).is_true(),
            },
            Compiled::Column(c) => row.get(*c).is_true(),
            Compiled::Expr(e) => e.eval(row).is_true(),
        }
    }
}

/// Where a row goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Nowhere.
    Omit,
    /// One partition.
    Partition(u32),
    /// All partitions.
    Broadcast,
    /// The partitions `p` with `p % modulus == residue` (a grid row or column).
    Class(u64, u64),
}

impl Router {
    /// Resolves a split's routing.
    pub fn new(split: &Split, registry: &Registry) -> Result<Router> {
        let route = match &split.route {
            Route::Expr { expr, when } => {
                RouteImpl::Expr(Compiled::new(expr), when.as_ref().map(Compiled::new))
            }
            Route::Native(name) => RouteImpl::Native(registry.route(name)?.clone()),
            Route::RoundRobin => RouteImpl::RoundRobin,
            Route::Grid { left, rows, cols } => {
                RouteImpl::Grid(Compiled::new(left), *rows as u64, *cols as u64)
            }
        };
        Ok(Router {
            q: split.q,
            modulo: Modulo::new(split.q),
            route,
            broadcast: split.broadcast.as_ref().map(Compiled::new),
        })
    }

    /// Where row `i` of `batch` goes. Round robin reads the row's sequence number from
    /// its key.
    #[inline]
    pub fn dest(&self, batch: &Batch, i: usize) -> Dest {
        let row = batch.row(i);
        if let Some(b) = &self.broadcast {
            if b.holds(&row) {
                return Dest::Broadcast;
            }
        }
        let p = match &self.route {
            RouteImpl::Expr(e, when) => {
                if let Some(w) = when {
                    if !w.holds(&row) {
                        return Dest::Omit;
                    }
                }
                e.int(&row).map(|v| u64::from(self.modulo.of(v)))
            }
            RouteImpl::Native(f) => f(row).map(|v| v % self.q as u64),
            RouteImpl::RoundRobin => Some(batch.key(i).seq % self.q as u64),
            RouteImpl::Grid(left, rows, cols) => {
                let seq = batch.key(i).seq;
                let side = if left.holds(&row) { *rows } else { *cols };
                return Dest::Class(side, seq % side);
            }
        };
        p.map_or(Dest::Omit, |p| Dest::Partition(p as u32))
    }

    /// Calls `f(i, dest)` for every row `i` of `batch` in order, with what
    /// [`Router::dest`] gives. The common shapes (route by a column, broadcast when a
    /// column compares with an integer) are matched once per batch, not per row.
    #[inline]
    pub fn each_dest(&self, batch: &Batch, mut f: impl FnMut(usize, Dest)) {
        let modulo = self.modulo;
        match &self.route {
            RouteImpl::Expr(Compiled::Column(c), None) => {
                let c = *c;
                self.each_broadcast_or(batch, &mut f, |row| match row.datum(c) {
                    Datum::Int(v) => Dest::Partition(modulo.of(v)),
                    _ => Dest::Omit,
                })
            }
            _ => {
                for i in 0..batch.len() {
                    f(i, self.dest(batch, i));
                }
            }
        }
    }

    /// [`Router::each_dest`] for a route given by `route`, with the broadcast test
    /// matched once per batch.
    #[inline]
    fn each_broadcast_or(
        &self,
        batch: &Batch,
        f: &mut impl FnMut(usize, Dest),
        route: impl Fn(&crate::batch::Row<'_>) -> Dest,
    ) {
        match &self.broadcast {
            None => {
                for i in 0..batch.len() {
                    f(i, route(&batch.row(i)));
                }
            }
            // One loop per comparison: the test per row is then one instruction.
            Some(Compiled::ColumnCmpInt(c, op, k, e)) => {
                let (c, k) = (*c, *k);
                match op {
                    BinOp::Eq => each_compared(batch, f, &route, c, e, |v| v == k),
                    BinOp::NotEq => each_compared(batch, f, &route, c, e, |v| v != k),
                    BinOp::Lt => each_compared(batch, f, &route, c, e, |v| v < k),
                    BinOp::LtEq => each_compared(batch, f, &route, c, e, |v| v <= k),
                    BinOp::Gt => each_compared(batch, f, &route, c, e, |v| v > k),
                    BinOp::GtEq => each_compared(batch, f, &route, c, e, |v| v >= k),
                    op => each_compared(batch, f, &route, c, e, |v| op.compare(v.cmp(&k))),
                }
            }
            Some(b) => {
                for i in 0..batch.len() {
                    let row = batch.row(i);
                    f(
                        i,
                        if b.holds(&row) {
                            Dest::Broadcast
                        } else {
                            route(&row)
                        },
                    );
                }
            }
        }
    }

    /// Number of partitions.
    #[inline]
    pub fn q(&self) -> u32 {
        self.q
    }
}

/// [`Router::each_dest`] with the broadcast test `test` on an int in column `c` (other
/// values: `e` evaluated).
#[inline]
fn each_compared(
    batch: &Batch,
    f: &mut impl FnMut(usize, Dest),
    route: &impl Fn(&crate::batch::Row<'_>) -> Dest,
    c: usize,
    e: &Expr,
    test: impl Fn(i64) -> bool,
) {
    for i in 0..batch.len() {
        let row = batch.row(i);
        let all = match row.datum(c) {
            Datum::Int(v) => test(v),
            _ => e.eval(&row).is_true(),
        };
        f(i, if all { Dest::Broadcast } else { route(&row) });
    }
}

/// `(epoch, seq, row)` of every input row: epochs clamped so they never go back.
fn source_rows(source: &Source, input: &Batch) -> Vec<(u64, u64, usize)> {
    let tcol = source.schema.event_time;
    let mut last = 0u64;
    (0..input.len())
        .map(|i| {
            let t = tcol.and_then(|c| input.row(i).int(c));
            last = last.max(epoch_of(source, t, i as u64));
            (last, i as u64, i)
        })
        .collect()
}

/// The rows a split reads, in serial order: row `i` of `batch` has epoch `rows[i].0`
/// and sequence number `rows[i].1` (its key's seq too).
struct StageInput {
    batch: Batch,
    rows: Vec<(u64, u64)>,
}

/// What a split over `plan` reads: a source's rows, or the output of an earlier stage
/// keyed by a hash of its values and ordered by (epoch, hash, values) — as the engine
/// does when a split reads a merge (no row's position depends on the worker that made
/// it, so no worker has to put them in order).
fn stage_input(
    plan: &Plan,
    registry: &Registry,
    input: &Batch,
    cx: &mut EvalCx,
) -> Result<StageInput> {
    if let Plan::Source(s) = plan {
        if !matches!(s.spec, SourceSpec::Late { .. }) {
            let rows = source_rows(s, input)
                .into_iter()
                .map(|(e, seq, _)| (e, seq))
                .collect();
            return Ok(StageInput {
                batch: input.clone(),
                rows,
            });
        }
    }
    // Late rows are keyed like an earlier stage's output: where they are made.
    let (out, arity) = match plan {
        Plan::Source(s) => (eval(plan, registry, input, cx)?, s.schema.arity()),
        _ => (
            eval(plan, registry, input, cx)?,
            plan.schema(registry)?.arity(),
        ),
    };
    let mut tmp = Batch::new(arity);
    let mut keyed: Vec<(u64, u64, &[Scalar])> = Vec::with_capacity(out.len());
    for r in &out {
        tmp.clear();
        let vals: Vec<Value<'_>> = r.values.iter().map(|s| s.as_value()).collect();
        tmp.push(RowKey::default(), &vals);
        keyed.push((r.epoch, crate::expr::row_hash(&tmp.row(0)), &r.values));
    }
    keyed.sort();
    let mut batch = Batch::with_capacity(arity, keyed.len());
    let mut rows = Vec::with_capacity(keyed.len());
    for (epoch, h, values) in keyed {
        let vals: Vec<Value<'_>> = values.iter().map(|s| s.as_value()).collect();
        batch.push(RowKey { seq: h, lane: 0 }, &vals);
        rows.push((epoch, h));
    }
    Ok(StageInput { batch, rows })
}

fn eval(plan: &Plan, registry: &Registry, input: &Batch, cx: &mut EvalCx) -> Result<Vec<OutRow>> {
    match plan {
        Plan::Together(_) => Err(Error::Internal("a Together below the root".into())),
        Plan::Source(Source {
            spec: SourceSpec::Late { of },
            ..
        }) => {
            cx.inputs.get(*of).cloned().ok_or_else(|| {
                Error::Internal(format!("late rows of plan {of} read before it ran"))
            })
        }
        Plan::Source(s) => Ok(source_rows(s, input)
            .into_iter()
            .map(|(epoch, seq, i)| OutRow {
                epoch,
                key: RowKey { seq, lane: 0 },
                values: input.row(i).to_scalars(),
            })
            .collect()),
        Plan::Split(split) => {
            let stage = stage_input(&split.input, registry, input, cx)?;
            let input = &stage.batch;
            let router = Router::new(split, registry)?;
            let mut out = Vec::new();
            for (i, &(epoch, seq)) in stage.rows.iter().enumerate() {
                for p in targets(router.dest(input, i), split.q) {
                    out.push(OutRow {
                        epoch,
                        key: RowKey {
                            seq,
                            lane: p as u64,
                        },
                        values: input.row(i).to_scalars(),
                    });
                }
            }
            Ok(out)
        }
        Plan::Map(map) => {
            let Plan::Split(split) = map.input.as_ref() else {
                return Err(Error::Internal(
                    "Map over a non-Split passed schema()".into(),
                ));
            };
            let stage = stage_input(&split.input, registry, input, cx)?;
            let input = &stage.batch;
            let router = Router::new(split, registry)?;
            let factory = registry.function(&map.function)?.clone();
            let every_epoch = factory.every_epoch();
            let out_arity = plan.schema(registry)?.arity();
            let mut instances: BTreeMap<u32, Box<dyn StreamFunction>> = BTreeMap::new();
            let mut out = Batch::new(out_arity);
            // Late rows, when a later plan reads them, with the epoch of each.
            let late_schema = factory.late_schema().filter(|_| cx.collect_late);
            let mut late = late_schema.as_ref().map(|s| Batch::new(s.arity()));
            let mut late_epochs: Vec<u64> = Vec::new();
            let mut epochs: Vec<u64> = Vec::new(); // epoch of each output row
            let mut touched: Vec<u32> = Vec::new();
            let mut current: Option<u64> = None;
            let flush_epoch = |epoch: u64,
                               touched: &mut Vec<u32>,
                               instances: &mut BTreeMap<u32, Box<dyn StreamFunction>>,
                               out: &mut Batch,
                               epochs: &mut Vec<u64>| {
                if every_epoch {
                    touched.clear();
                    touched.extend(instances.keys());
                } else {
                    touched.sort_unstable();
                    touched.dedup();
                }
                for &p in touched.iter() {
                    if let Some(f) = instances.get_mut(&p) {
                        f.end_of_epoch(
                            epoch,
                            &mut Emitter::new(out, RowKey::END_OF_EPOCH, p).at_epoch(epoch),
                        );
                    }
                    epochs.resize(out.len(), epoch);
                }
                touched.clear();
            };
            for (i, &(epoch, seq)) in stage.rows.iter().enumerate() {
                if current != Some(epoch) {
                    if let Some(e) = current {
                        flush_epoch(e, &mut touched, &mut instances, &mut out, &mut epochs);
                    }
                    current = Some(epoch);
                }
                for p in targets(router.dest(input, i), split.q) {
                    let f = instances
                        .entry(p)
                        .or_insert_with(|| factory.create(p, split.q));
                    f.process(
                        input.row(i),
                        &mut Emitter::new(&mut out, seq, p)
                            .at_epoch(epoch)
                            .with_late(late.as_mut()),
                    );
                    epochs.resize(out.len(), epoch);
                    if let Some(l) = &late {
                        late_epochs.resize(l.len(), epoch);
                    }
                    touched.push(p);
                }
            }
            if let Some(e) = current {
                flush_epoch(e, &mut touched, &mut instances, &mut out, &mut epochs);
            }
            for (&p, f) in instances.iter_mut() {
                f.finish(&mut Emitter::new(&mut out, RowKey::FINISH, p).at_epoch(u64::MAX));
            }
            epochs.resize(out.len(), u64::MAX);
            if let Some(l) = &late {
                cx.late.extend((0..l.len()).map(|i| OutRow {
                    epoch: late_epochs[i],
                    key: l.key(i),
                    values: l.row(i).to_scalars(),
                }));
            }
            Ok((0..out.len())
                .map(|i| OutRow {
                    epoch: epochs[i],
                    key: out.key(i),
                    values: out.row(i).to_scalars(),
                })
                .collect())
        }
        Plan::Merge(merge) => {
            let mut rows = eval(&merge.input, registry, input, cx)?;
            match &merge.kind {
                MergeKind::Union => Ok(rows),
                MergeKind::TimeOrdered => {
                    rows.sort_by_key(|r| (r.epoch, r.key));
                    Ok(rows)
                }
                MergeKind::Keyed {
                    key,
                    combine,
                    filter,
                    ..
                } => {
                    let schema = merge.input.schema(registry)?;
                    let km = KeyedMerge::new(key, combine, &schema, registry)?;
                    let mut by_epoch: BTreeMap<u64, (RowKey, Groups)> = BTreeMap::new();
                    let mut tmp = Batch::new(schema.arity());
                    let mut out = Vec::new();
                    for r in &rows {
                        tmp.clear();
                        let vals: Vec<Value<'_>> = r.values.iter().map(|s| s.as_value()).collect();
                        tmp.push(r.key, &vals);
                        if let Some(f) = filter {
                            if !f.eval(&tmp.row(0)).is_true() {
                                out.push(r.clone());
                                continue;
                            }
                        }
                        let acc = km.lift(&tmp.row(0));
                        let e = by_epoch
                            .entry(r.epoch)
                            .or_insert_with(|| (r.key, Groups::default()));
                        e.1.add(&km, acc);
                    }
                    let mut row: Vec<Datum> = Vec::new();
                    for (epoch, (key, mut groups)) in by_epoch {
                        for acc in groups.drain() {
                            km.finish(&acc, &mut row);
                            out.push(OutRow {
                                epoch,
                                key,
                                values: datums_to_scalars(&row),
                            });
                        }
                    }
                    Ok(out)
                }
            }
        }
        Plan::Sink(s) => eval(&s.input, registry, input, cx),
    }
}

/// Converts string-free datums to scalars.
pub fn datums_to_scalars(d: &[Datum]) -> Vec<Scalar> {
    d.iter()
        .map(|d| match *d {
            Datum::Null | Datum::Str(..) => Scalar::Null,
            Datum::Int(i) => Scalar::Int(i),
            Datum::Float(f) => Scalar::Float(f),
            Datum::Bool(b) => Scalar::Bool(b),
        })
        .collect()
}

fn targets(dest: Dest, q: u32) -> impl Iterator<Item = u32> {
    let class = match dest {
        Dest::Omit => (1, q as u64),
        Dest::Partition(p) => (q as u64 + 1, p as u64),
        Dest::Broadcast => (1, 0),
        Dest::Class(m, r) => (m, r),
    };
    crate::classes::class_members(class, q as u64).map(|p| p as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::BinOp;

    /// The compiled shapes give what the interpreter gives, for every datum type.
    #[test]
    fn compiled_routes_equal_the_interpreter() {
        let mut b = Batch::new(2);
        let rows = [
            [Value::Int(2), Value::Int(-7)],
            [Value::Int(3), Value::Null],
            [Value::Float(2.0), Value::Float(1.5)],
            [Value::Null, Value::Int(9)],
            [Value::Str("2"), Value::Bool(true)],
            [Value::Bool(true), Value::Int(i64::MIN)],
        ];
        for (i, r) in rows.iter().enumerate() {
            b.push(
                RowKey {
                    seq: i as u64,
                    lane: 0,
                },
                r,
            );
        }
        let col = |c: usize| Expr::Column(c, format!("c{c}"));
        for i in 0..b.len() {
            let row = b.row(i);
            for c in 0..2 {
                for op in BinOp::COMPARISONS {
                    for k in [-7, 2, 3] {
                        let e = col(c).bin(op, Expr::int(k));
                        let compiled = Compiled::new(&e);
                        assert!(matches!(compiled, Compiled::ColumnCmpInt(..)));
                        assert_eq!(compiled.holds(&row), e.eval(&row).is_true(), "{e} row {i}");
                    }
                }
                let compiled = Compiled::new(&col(c));
                assert_eq!(compiled.int(&row), col(c).eval(&row).as_int());
                assert_eq!(compiled.holds(&row), col(c).eval(&row).is_true());
            }
        }
    }

    /// Routing a whole batch gives, row by row, what `dest` gives (and `dest` routes by
    /// `rem_euclid`), for every route and broadcast shape, powers of two and others.
    #[test]
    fn each_dest_equals_dest() {
        use crate::plan::{Route, Strategy};
        use crate::types::Schema;
        let mut b = Batch::new(2);
        let values = [
            Value::Int(2),
            Value::Int(-7),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Null,
            Value::Float(2.0),
            Value::Int(513),
        ];
        for (i, x) in values.iter().enumerate() {
            for (j, y) in values.iter().enumerate() {
                b.push(
                    RowKey {
                        seq: (i * values.len() + j) as u64,
                        lane: 0,
                    },
                    &[*x, *y],
                );
            }
        }
        let col = |c: usize| Expr::Column(c, format!("c{c}"));
        let routes = [
            Route::Expr {
                expr: col(0),
                when: None,
            },
            Route::Expr {
                expr: col(1),
                when: Some(col(0).bin(BinOp::Gt, Expr::int(0))),
            },
            Route::Expr {
                expr: col(0).bin(BinOp::Add, col(1)),
                when: None,
            },
            Route::RoundRobin,
        ];
        let broadcasts = [
            None,
            Some(col(1).bin(BinOp::Eq, Expr::int(2))),
            Some(col(0).bin(BinOp::Lt, col(1))),
        ];
        let schema = Schema::ints(&["c0", "c1"]);
        let registry = Registry::new();
        for q in [1, 3, 7, 8, 512, 1000] {
            for route in &routes {
                for broadcast in &broadcasts {
                    let Plan::Split(split) =
                        Plan::source("s", crate::plan::SourceSpec::Stdin, schema.clone()).split(
                            q,
                            route.clone(),
                            broadcast.clone(),
                            Strategy::Fsplit,
                        )
                    else {
                        panic!("split() makes a Split");
                    };
                    let router = Router::new(&split, &registry).expect("router");
                    let mut got = Vec::new();
                    router.each_dest(&b, |i, d| got.push((i, d)));
                    let want: Vec<_> = (0..b.len()).map(|i| (i, router.dest(&b, i))).collect();
                    assert_eq!(got, want, "q = {q}, {route:?}, {broadcast:?}");
                    for (i, d) in want {
                        if let (Route::Expr { expr, when: None }, None, Dest::Partition(p)) =
                            (route, broadcast, d)
                        {
                            let v = expr.eval(&b.row(i)).as_int().expect("an int routes");
                            assert_eq!(i64::from(p), v.rem_euclid(i64::from(q)));
                        }
                    }
                }
            }
        }
    }
}
