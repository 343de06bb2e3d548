//! The reference interpreter: a plain single-threaded execution of a plan, the oracle
//! that parallel execution is tested against.
//!
//! It defines the serial order every strategy must reproduce: rows in source order;
//! a split row goes to its partition, a broadcast row to partitions 0..q in order;
//! each partition's stream function sees its rows in that order, then `end_of_epoch`
//! when the epoch ends (partitions in order; a function that wants every epoch, in any
//! stage, hears of every epoch of the plan's input), then `finish` once at the end.
//!
//! Row `i` of the input has sequence number `i` and belongs to epoch
//! `max(time of row i / epoch length, epoch of row i - 1)` (without an event time, `i`
//! stands for the time; a negative time is 0): epochs never go back (a parallel run
//! cannot go back in time either).
//!
//! It shares no routing, epoch or operator code with the engine (`braid-exec`): a split
//! evaluates its route, `when` and broadcast expressions row by row with
//! [`crate::expr::Expr::eval`] and lists the target partitions by their definition. It
//! does share the stream functions it runs; the SQL operators are checked against a
//! separate from-scratch reference in `braid-exec/tests/sql_reference.rs`.

use crate::batch::{Batch, Datum, Row, RowKey, Scalar, Value};
use crate::error::{Error, Result};
use crate::expr::{Arena, Fault};
use crate::function::{Emitter, Registry, RouteFn, RowFault, StreamFunction};
use crate::output::OutRow;
use crate::plan::{Agg, Combine, MergeKind, Plan, Route, Source, SourceSpec, Split};
use crate::types::DataType;
use std::collections::BTreeMap;

/// Runs `plan` on `input`: the source's rows in order (keys are ignored; row `i` gets
/// sequence number `i`).
///
/// For a plan whose leaf source is [`crate::plan::SourceSpec::Interleave`], `input` is
/// the already interleaved stream, [`crate::interleave::rows`] of the children's rows;
/// when its rows are numbered by file ([`crate::interleave::numbered_by_file`]), the
/// keys of `input` are its sequence numbers.
pub fn run(plan: &Plan, registry: &Registry, input: &Batch) -> Result<Vec<OutRow>> {
    Ok(run_all(plan, registry, input)?.swap_remove(0))
}

/// Like [`run`], the output of every plan of a [`Plan::Together`] (one for other plans).
pub fn run_all(plan: &Plan, registry: &Registry, input: &Batch) -> Result<Vec<Vec<OutRow>>> {
    Ok(run_with_faults(plan, registry, input)?.0)
}

/// Like [`run_all`], also the runtime faults the stream functions reported (their rows
/// are skipped, as a run that skips faulty rows skips them).
pub fn run_with_faults(
    plan: &Plan,
    registry: &Registry,
    input: &Batch,
) -> Result<(Vec<Vec<OutRow>>, Vec<RowFault>)> {
    plan.schema(registry)?;
    let leaf = plan.leaf_source();
    let by_file = match &leaf.spec {
        SourceSpec::Interleave(kids) => crate::interleave::numbered_by_file(kids, leaf.epoch),
        _ => false,
    };
    let mut keyed = Batch::with_capacity(input.arity(), input.len());
    for i in 0..input.len() {
        let seq = match by_file {
            true => input.key(i).seq,
            false => i as u64,
        };
        keyed.push_row_of(input, i, RowKey { seq, lane: 0 });
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
    Ok((outputs, cx.faults))
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
    /// The runtime faults of stream functions, in the order reported.
    faults: Vec<RowFault>,
}

/// `(epoch, seq, row)` of every input row (its key's sequence number): row `i`'s epoch
/// is its event time (or, without one, `i`) divided by the epoch length, a negative
/// time counting as 0, and never less than the epoch of row `i - 1`.
fn source_rows(source: &Source, input: &Batch) -> Vec<(u64, u64, usize)> {
    let len = source.epoch.max(1);
    let mut last = 0u64;
    (0..input.len())
        .map(|i| {
            let unclamped = match source.schema.event_time.and_then(|c| input.row(i).int(c)) {
                Some(t) if t < 0 => 0,
                Some(t) => t as u64 / len,
                None => i as u64 / len,
            };
            last = last.max(unclamped);
            (last, input.key(i).seq, i)
        })
        .collect()
}

/// A split's routing by its definition, row by row: the broadcast predicate, else the
/// route (`when`, then the expression's int value `rem_euclid(q)`; a registered
/// function's value `% q`; round robin by sequence number; a grid row or column).
struct Routing<'a> {
    split: &'a Split,
    native: Option<RouteFn>,
}

impl<'a> Routing<'a> {
    fn new(split: &'a Split, registry: &Registry) -> Result<Routing<'a>> {
        let native = match &split.route {
            Route::Native(name) => Some(registry.route(name)?.clone()),
            _ => None,
        };
        Ok(Routing { split, native })
    }

    /// The partitions row `row` (sequence number `seq`) goes to, ascending; none when an
    /// expression of the split faults on it (the engine skips and reports such a row, or
    /// fails the run).
    fn targets(&self, row: Row<'_>, seq: u64) -> Vec<u32> {
        self.try_targets(row, seq).unwrap_or_default()
    }

    fn try_targets(&self, row: Row<'_>, seq: u64) -> std::result::Result<Vec<u32>, Fault> {
        let q = u64::from(self.split.q.max(1));
        // The interpreter is an oracle, not a hot path: a fresh arena per row.
        let arena = Arena::new();
        let all = |class: Option<(u64, u64)>| -> Vec<u32> {
            (0..q)
                .filter(|p| class.is_none_or(|(m, r)| p % m == r))
                .map(|p| p as u32)
                .collect()
        };
        if let Some(b) = &self.split.broadcast {
            if b.eval(&row, &arena)?.is_true() {
                return Ok(all(None));
            }
        }
        let one = |p: Option<u64>| p.map(|p| p as u32).into_iter().collect();
        Ok(match &self.split.route {
            Route::Expr { expr, when } => {
                if let Some(w) = when {
                    if !w.eval(&row, &arena)?.is_true() {
                        return Ok(Vec::new());
                    }
                }
                one(expr
                    .eval(&row, &arena)?
                    .as_int()
                    .map(|v| v.rem_euclid(q as i64) as u64))
            }
            Route::Native(_) => {
                let f = self
                    .native
                    .as_ref()
                    .expect("a native route's function, looked up in new");
                one(f(row).map(|v| v % q))
            }
            // Any partition will do: the reference deals rows as round robin does.
            Route::RoundRobin | Route::Any => one(Some(seq % q)),
            Route::Grid { left, rows, cols } => {
                let side = if left.eval(&row, &arena)?.is_true() {
                    *rows
                } else {
                    *cols
                } as u64;
                all(Some((side, seq % side)))
            }
        })
    }
}

/// The rows a split reads, in serial order: row `i` of `batch` has epoch `rows[i].0`
/// and sequence number `rows[i].1` (its key's seq too).
struct StageInput {
    batch: Batch,
    rows: Vec<(u64, u64)>,
}

/// What a split over `plan` reads: a source's rows, or the output of an earlier stage
/// keyed by a hash of its values (marked when the row was made at the end of an epoch:
/// [`RowKey::stage_seq`]) and ordered by (epoch, that key, values) — as the engine
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
        let h = crate::expr::row_hash(&tmp.row(0));
        keyed.push((r.epoch, RowKey::stage_seq(r.key.seq, h), &r.values));
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

/// The epochs in which `source` (the leaf of the plan being evaluated) has rows,
/// ascending.
fn input_epochs(source: &Source, input: &Batch, cx: &EvalCx) -> Vec<u64> {
    let mut epochs: Vec<u64> = match source.spec {
        SourceSpec::Late { of } => cx
            .inputs
            .get(of)
            .map_or(Vec::new(), |rows| rows.iter().map(|r| r.epoch).collect()),
        _ => source_rows(source, input)
            .into_iter()
            .map(|(e, _, _)| e)
            .collect(),
    };
    epochs.sort_unstable();
    epochs.dedup();
    epochs
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
            let routing = Routing::new(split, registry)?;
            let mut out = Vec::new();
            for (i, &(epoch, seq)) in stage.rows.iter().enumerate() {
                for p in routing.targets(input.row(i), seq) {
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
            let source_epochs = input_epochs(split.input.leaf_source(), input, cx);
            let input = &stage.batch;
            let routing = Routing::new(split, registry)?;
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
                               epochs: &mut Vec<u64>,
                               faults: &mut Vec<RowFault>| {
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
                            &mut Emitter::new(out, RowKey::END_OF_EPOCH, p)
                                .at_epoch(epoch)
                                .with_faults(faults),
                        );
                    }
                    epochs.resize(out.len(), epoch);
                }
                touched.clear();
            };
            // An every-epoch function also ends the epochs of the plan's input in which
            // its stage has no rows (a later stage's, where the stage before made none).
            let mut ticks = match every_epoch {
                true => source_epochs,
                false => Vec::new(),
            }
            .into_iter()
            .peekable();
            for (i, &(epoch, seq)) in stage.rows.iter().enumerate() {
                if current != Some(epoch) {
                    if let Some(e) = current {
                        flush_epoch(
                            e,
                            &mut touched,
                            &mut instances,
                            &mut out,
                            &mut epochs,
                            &mut cx.faults,
                        );
                    }
                    while let Some(t) = ticks.next_if(|&t| t <= epoch) {
                        if t != epoch && current.is_none_or(|c| t > c) {
                            flush_epoch(
                                t,
                                &mut touched,
                                &mut instances,
                                &mut out,
                                &mut epochs,
                                &mut cx.faults,
                            );
                        }
                    }
                    current = Some(epoch);
                }
                for p in routing.targets(input.row(i), seq) {
                    let f = instances
                        .entry(p)
                        .or_insert_with(|| factory.create(p, split.q));
                    f.process(
                        input.row(i),
                        &mut Emitter::new(&mut out, seq, p)
                            .at_epoch(epoch)
                            .with_late(late.as_mut())
                            .with_faults(&mut cx.faults),
                    );
                    epochs.resize(out.len(), epoch);
                    if let Some(l) = &late {
                        late_epochs.resize(l.len(), epoch);
                    }
                    touched.push(p);
                }
            }
            if let Some(e) = current {
                flush_epoch(
                    e,
                    &mut touched,
                    &mut instances,
                    &mut out,
                    &mut epochs,
                    &mut cx.faults,
                );
            }
            for t in ticks {
                if current.is_none_or(|c| t > c) {
                    flush_epoch(
                        t,
                        &mut touched,
                        &mut instances,
                        &mut out,
                        &mut epochs,
                        &mut cx.faults,
                    );
                }
            }
            for (&p, f) in instances.iter_mut() {
                f.finish(
                    &mut Emitter::new(&mut out, RowKey::FINISH, p)
                        .at_epoch(u64::MAX)
                        .with_faults(&mut cx.faults),
                );
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
                MergeKind::TimeOrdered | MergeKind::Sorted(_) => {
                    let time = merge.input.schema(registry)?.event_time;
                    let by = match &merge.kind {
                        MergeKind::Sorted(by) => by.as_slice(),
                        _ => &[],
                    };
                    rows.sort_by(|a, b| {
                        (a.epoch, a.key).cmp(&(b.epoch, b.key)).then_with(|| {
                            crate::output::sorted_order(&a.values, &b.values, by, time)
                        })
                    });
                    Ok(rows)
                }
                MergeKind::Keyed {
                    key,
                    combine,
                    filter,
                    ..
                } => {
                    let schema = merge.input.schema(registry)?;
                    if let Some(f) = schema.fields.iter().find(|f| f.ty == DataType::String) {
                        return Err(Error::NotSupported(format!(
                            "keyed merge over string column `{}`",
                            f.name
                        )));
                    }
                    // Per epoch, the rows to combine by key (keys in first-seen order);
                    // the rows the filter rejects pass as they are.
                    let mut by_epoch: BTreeMap<u64, (RowKey, Vec<Group<'_>>)> = BTreeMap::new();
                    let mut out = Vec::new();
                    let mut tmp = Batch::new(schema.arity());
                    for r in &rows {
                        if let Some(f) = filter {
                            tmp.clear();
                            let vals: Vec<Value<'_>> =
                                r.values.iter().map(|s| s.as_value()).collect();
                            tmp.push(r.key, &vals);
                            match f.eval(&tmp.row(0), &Arena::new()) {
                                Ok(v) if v.is_true() => {}
                                Ok(_) => {
                                    out.push(r.clone());
                                    continue;
                                }
                                // The engine skips (and reports) a row its filter
                                // faults on.
                                Err(_) => continue,
                            }
                        }
                        let k: Vec<Scalar> = key.iter().map(|&c| r.values[c].clone()).collect();
                        let groups = &mut by_epoch.entry(r.epoch).or_insert((r.key, Vec::new())).1;
                        match groups.iter_mut().find(|(g, _)| *g == k) {
                            Some((_, members)) => members.push(r),
                            None => groups.push((k, vec![r])),
                        }
                    }
                    for (epoch, (first, groups)) in by_epoch {
                        for (k, members) in groups {
                            let values = match combine {
                                Combine::Aggregates(aggs) => {
                                    let mut v = k;
                                    // A sum BIGINT cannot hold: the engine skips the
                                    // group's row (and reports it).
                                    match aggs.iter().map(|a| aggregate(a, &members)).collect() {
                                        Some(a) => v.extend::<Vec<Scalar>>(a),
                                        None => continue,
                                    }
                                    v
                                }
                                Combine::Native(name) => {
                                    let c = registry.combiner(name)?;
                                    let mut b = Batch::new(schema.arity());
                                    let mut datums = |r: &OutRow| -> Vec<Datum> {
                                        b.clear();
                                        let vals: Vec<Value<'_>> =
                                            r.values.iter().map(|s| s.as_value()).collect();
                                        b.push(r.key, &vals);
                                        let mut d = Vec::new();
                                        b.row(0).datums_into(&mut d);
                                        d
                                    };
                                    let mut acc = datums(members[0]);
                                    for m in &members[1..] {
                                        c.combine(&mut acc, &datums(m));
                                    }
                                    let mut row = Vec::new();
                                    c.finish(&acc, &mut row);
                                    datums_to_scalars(&row)
                                }
                            };
                            out.push(OutRow {
                                epoch,
                                key: first,
                                values,
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

/// A keyed merge's group: its key and its partial rows, in order.
type Group<'r> = (Vec<Scalar>, Vec<&'r OutRow>);

/// One aggregate of a keyed merge over the partial rows of a group: counts add up (a
/// partial row counts 1); sums add ints exactly (None when the sum overflows BIGINT)
/// or floats; min and max keep the
/// least or greatest; nulls are skipped, and a value of another type than the first
/// one kept is ignored.
fn aggregate(a: &Agg, members: &[&OutRow]) -> Option<Scalar> {
    let col = match *a {
        Agg::Count => return Some(Scalar::Int(members.len() as i64)),
        Agg::Sum(c) | Agg::Min(c) | Agg::Max(c) => c,
    };
    if let Agg::Sum(_) = a {
        if let Some(Scalar::Int(_)) = members
            .iter()
            .map(|m| &m.values[col])
            .find(|v| **v != Scalar::Null)
        {
            let exact: i128 = members
                .iter()
                .filter_map(|m| match m.values[col] {
                    Scalar::Int(i) => Some(i as i128),
                    _ => None,
                })
                .sum();
            return i64::try_from(exact).ok().map(Scalar::Int);
        }
    }
    let mut acc = Scalar::Null;
    for m in members {
        let v = &m.values[col];
        acc = match (&acc, v, a) {
            (_, Scalar::Null, _) => acc,
            (Scalar::Null, v, _) => v.clone(),
            (Scalar::Int(x), Scalar::Int(y), Agg::Sum(_)) => Scalar::Int(x.wrapping_add(*y)),
            (Scalar::Float(x), Scalar::Float(y), Agg::Sum(_)) => Scalar::Float(x + y),
            (Scalar::Int(x), Scalar::Int(y), Agg::Min(_)) => Scalar::Int(*x.min(y)),
            (Scalar::Int(x), Scalar::Int(y), Agg::Max(_)) => Scalar::Int(*x.max(y)),
            (Scalar::Float(x), Scalar::Float(y), Agg::Min(_)) if y.total_cmp(x).is_lt() => {
                v.clone()
            }
            (Scalar::Float(x), Scalar::Float(y), Agg::Max(_)) if y.total_cmp(x).is_gt() => {
                v.clone()
            }
            _ => acc,
        };
    }
    Some(acc)
}

/// Converts string-free datums to scalars.
pub fn datums_to_scalars(d: &[Datum]) -> Vec<Scalar> {
    d.iter()
        .map(|d| match *d {
            Datum::Null | Datum::Str(..) => Scalar::Null,
            Datum::Floats(..) | Datum::Ints(..) => {
                unreachable!("keyed merges refuse array columns")
            }
            Datum::Int(i) => Scalar::Int(i),
            Datum::Float(f) => Scalar::Float(f),
            Datum::Bool(b) => Scalar::Bool(b),
        })
        .collect()
}
