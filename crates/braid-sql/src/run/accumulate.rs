//! Accumulators of aggregate functions, shared by every window kind.

use crate::logical::{AggCall, AggFunc};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::expr::{Arena, Compiled, Fault};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// An aggregate's running state. Integer sums are kept in 128 bits, so no number of
/// int64 rows makes them wrap; a result that does not fit its type is a [`Fault`] when
/// the window is emitted.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Acc {
    Count(i64),
    Sum {
        int: i128,
        float: f64,
        any: bool,
        is_float: bool,
        /// A float sum of finite values became infinite.
        overflow: bool,
    },
    Avg {
        int: i128,
        float: f64,
        n: i64,
    },
    Min(Option<Scalar>),
    Max(Option<Scalar>),
    Distinct(BTreeSet<Scalar>),
}

/// One row's input to each aggregate: the value it adds, or None where the aggregate
/// skips the row (its FILTER is not true, or its argument is null). `count(*)` adds
/// [`Value::Null`].
pub(super) type Inputs<'r> = SmallVec<[Option<Value<'r>>; 8]>;

/// An aggregate's FILTER and argument, each with its fast path where it has one
/// ([`Compiled`]).
pub(super) struct AggExprs {
    filter: Option<Compiled>,
    arg: Option<Compiled>,
}

impl AggExprs {
    pub(super) fn of(call: &AggCall) -> AggExprs {
        AggExprs {
            filter: call.filter.clone().map(Compiled::new),
            arg: call.arg.clone().map(Compiled::new),
        }
    }

    /// Whether the aggregate has a FILTER.
    pub(super) fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// The aggregate's argument (none for `count(*)`).
    pub(super) fn arg(&self) -> Option<&Compiled> {
        self.arg.as_ref()
    }
}

/// Evaluates every aggregate's FILTER and argument on `row` into `out`, before any
/// accumulator changes: a fault leaves them all as they were (the row is skipped
/// whole). Strings the expressions make go to `arena`.
#[inline]
pub(super) fn inputs<'r>(
    aggs: &'r [AggExprs],
    row: &Row<'r>,
    arena: &'r Arena,
    out: &mut Inputs<'r>,
) -> Result<(), Fault> {
    for call in aggs {
        // FILTER (WHERE c): a row counts only where c is true (not false, not null).
        if let Some(c) = &call.filter {
            if !matches!(c.eval(row, arena)?, Value::Bool(true)) {
                out.push(None);
                continue;
            }
        }
        out.push(match &call.arg {
            None => Some(Value::Null),
            Some(a) => match a.eval(row, arena)? {
                Value::Null => None,
                v => Some(v),
            },
        });
    }
    Ok(())
}

impl Acc {
    fn new(call: &AggCall) -> Acc {
        match call.func {
            AggFunc::CountStar | AggFunc::Count => Acc::Count(0),
            AggFunc::CountDistinct => Acc::Distinct(BTreeSet::new()),
            AggFunc::Sum => Acc::Sum {
                int: 0,
                float: 0.0,
                any: false,
                is_float: call.ty == braid_plan::types::DataType::Float64,
                overflow: false,
            },
            AggFunc::Avg => Acc::Avg {
                int: 0,
                float: 0.0,
                n: 0,
            },
            AggFunc::Min => Acc::Min(None),
            AggFunc::Max => Acc::Max(None),
        }
    }

    fn update(&mut self, v: Value<'_>) {
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Distinct(s) => {
                s.insert(v.to_scalar());
            }
            Acc::Sum {
                int,
                float,
                any,
                overflow,
                ..
            } => {
                *any = true;
                match v {
                    Value::Int(i) => *int += i as i128,
                    Value::Float(f) => add_float(float, f, overflow),
                    _ => {}
                }
            }
            Acc::Avg { int, float, n } => {
                *n += 1;
                match v {
                    Value::Int(i) => *int += i as i128,
                    Value::Float(f) => *float += f,
                    _ => {}
                }
            }
            Acc::Min(m) => extreme(m, v, Ordering::Less),
            Acc::Max(m) => extreme(m, v, Ordering::Greater),
        }
    }

    pub(super) fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Distinct(a), Acc::Distinct(b)) => a.extend(b),
            (
                Acc::Sum {
                    int,
                    float,
                    any,
                    overflow,
                    ..
                },
                Acc::Sum {
                    int: i2,
                    float: f2,
                    any: a2,
                    overflow: o2,
                    ..
                },
            ) => {
                *int += i2;
                add_float(float, f2, overflow);
                *any |= a2;
                *overflow |= o2;
            }
            (
                Acc::Avg { int, float, n },
                Acc::Avg {
                    int: i2,
                    float: f2,
                    n: n2,
                },
            ) => {
                *int += i2;
                *float += f2;
                *n += n2;
            }
            (Acc::Min(a), Acc::Min(Some(b))) if a.as_ref().is_none_or(|x| b < *x) => *a = Some(b),
            (Acc::Max(a), Acc::Max(Some(b))) if a.as_ref().is_none_or(|x| b > *x) => *a = Some(b),
            _ => {}
        }
    }

    /// The aggregate's result, or why its type cannot hold it.
    fn value(&self) -> Result<Scalar, String> {
        Ok(match self {
            Acc::Count(n) => Scalar::Int(*n),
            Acc::Distinct(s) => Scalar::Int(s.len() as i64),
            Acc::Sum { any: false, .. } => Scalar::Null,
            Acc::Sum { overflow: true, .. } => {
                return Err("the sum overflows double".into());
            }
            Acc::Sum {
                int,
                float,
                is_float,
                ..
            } => {
                if *is_float {
                    Scalar::Float(*float + *int as f64)
                } else {
                    let i = i64::try_from(*int)
                        .map_err(|_| format!("the sum {int} overflows bigint"))?;
                    Scalar::Int(i)
                }
            }
            Acc::Avg { n: 0, .. } => Scalar::Null,
            Acc::Avg { int, float, n } => Scalar::Float((*int as f64 + float) / *n as f64),
            Acc::Min(m) | Acc::Max(m) => m.clone().unwrap_or(Scalar::Null),
        })
    }
}

/// A min (`keep` Less) or max (Greater) taking `v`: `v` replaces `m` when it orders
/// `keep` against it as [`Scalar`]s do. An int, a float or a string is compared where
/// it is, with no copy unless it is taken (the same order: `Scalar::cmp` of two ints,
/// floats or strings is theirs).
#[inline]
fn extreme(m: &mut Option<Scalar>, v: Value<'_>, keep: Ordering) {
    match (m.as_mut(), v) {
        (Some(Scalar::Int(x)), Value::Int(i)) => {
            if i.cmp(x) == keep {
                *x = i;
            }
        }
        (Some(Scalar::Float(x)), Value::Float(f)) => {
            if f.total_cmp(x) == keep {
                *x = f;
            }
        }
        (Some(Scalar::Str(x)), Value::Str(t)) => {
            if t.cmp(x.as_str()) == keep {
                x.clear();
                x.push_str(t);
            }
        }
        _ => {
            let s = v.to_scalar();
            if m.as_ref().is_none_or(|x| s.cmp(x) == keep) {
                *m = Some(s);
            }
        }
    }
}

/// `sum += x`, noting when finite values add up to an infinity.
fn add_float(sum: &mut f64, x: f64, overflow: &mut bool) {
    let before = *sum;
    *sum += x;
    if !sum.is_finite() && before.is_finite() && x.is_finite() {
        *overflow = true;
    }
}

/// New accumulators for `aggs`.
pub(super) fn fresh(aggs: &[AggCall]) -> Vec<Acc> {
    aggs.iter().map(Acc::new).collect()
}

/// Adds a row's [`inputs`] to one accumulator per aggregate.
#[inline]
pub(super) fn update(accs: &mut [Acc], inputs: &[Option<Value<'_>>]) {
    for (a, v) in accs.iter_mut().zip(inputs) {
        if let Some(v) = v {
            a.update(*v);
        }
    }
}

/// Merges the accumulators `from` (of the same aggregates) into `into`.
pub(super) fn merge_all(into: &mut [Acc], from: &[Acc]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.merge(b.clone());
    }
}

/// Groups by key, hashed: a row finds its group with one hash and one comparison,
/// where an ordered map compared its key with a dozen others. Wherever the order
/// shows (rows emitted, a checkpoint) it is the keys' order: [`Groups::sorted`].
#[derive(Clone, Debug)]
pub(super) struct Groups<V>(hashbrown::HashMap<Vec<Scalar>, V, rustc_hash::FxBuildHasher>);

impl<V> Default for Groups<V> {
    fn default() -> Groups<V> {
        Groups(Default::default())
    }
}

impl<V> Groups<V> {
    /// The value of `key`, made by `make` (with a copy of the key) if absent: no
    /// allocation for a key that is already there.
    #[inline]
    pub(super) fn get_or_insert(&mut self, key: &[Scalar], make: impl FnOnce() -> V) -> &mut V {
        self.0.entry_ref(key).or_insert_with(make)
    }

    /// The value of `key`, if there is one.
    pub(super) fn get_mut(&mut self, key: &[Scalar]) -> Option<&mut V> {
        self.0.get_mut(key)
    }

    /// Sets the value of `key`.
    pub(super) fn insert(&mut self, key: Vec<Scalar>, v: V) {
        self.0.insert(key, v);
    }

    /// Every group, in no particular order (for what the order cannot change).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Vec<Scalar>, &V)> + '_ {
        self.0.iter()
    }

    /// Every group, taken out, in the keys' order.
    pub(super) fn sorted(self) -> Vec<(Vec<Scalar>, V)> {
        let mut all: Vec<(Vec<Scalar>, V)> = self.0.into_iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

/// As a map in the keys' order (the encoding of the ordered map it replaced).
impl<V: Serialize> Serialize for Groups<V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut all: Vec<(&Vec<Scalar>, &V)> = self.0.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        s.collect_map(all)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Groups<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<Vec<Scalar>, V>::deserialize(d)?;
        Ok(Groups(m.into_iter().collect()))
    }
}

impl<V> FromIterator<(Vec<Scalar>, V)> for Groups<V> {
    fn from_iter<I: IntoIterator<Item = (Vec<Scalar>, V)>>(it: I) -> Groups<V> {
        Groups(it.into_iter().collect())
    }
}

/// The value of `key` in `map`, made by `make` (with a copy of the key) if absent: no
/// allocation for a key that is already there.
pub(super) fn get_or_insert<'m, V>(
    map: &'m mut BTreeMap<Vec<Scalar>, V>,
    key: &[Scalar],
    make: impl FnOnce() -> V,
) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_vec(), make());
    }
    map.get_mut(key).expect("key just inserted")
}

/// Writes one result row: `window_start, window_end, keys..., aggregates...`; or, when
/// an aggregate's result does not fit its type, no row and the fault (naming the
/// aggregate, the window and the key).
pub(super) fn emit(
    out: &mut Batch,
    (start, end): (i64, i64),
    key: &[Scalar],
    aggs: &[AggCall],
    accs: &[Acc],
) -> Result<(), Fault> {
    let mut values: SmallVec<[Scalar; 8]> = SmallVec::new();
    for (a, call) in accs.iter().zip(aggs) {
        match a.value() {
            Ok(v) => values.push(v),
            Err(why) => {
                let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
                return Err(Fault::new(format!(
                    "{why} in `{call}` (window [{start}, {end}), key ({}))",
                    key.join(", ")
                )));
            }
        }
    }
    out.start_row(RowKey::default());
    out.push_value(Value::Int(start));
    out.push_value(Value::Int(end));
    for k in key.iter().chain(&values) {
        out.push_value(k.as_value());
    }
    Ok(())
}

/// Writes one partial row of a two-phase aggregate ([`crate::logical::AggPhase::Partial`]):
/// `window_start, window_end, keys...`, then each accumulator's partial columns
/// ([`crate::optimizer::two_phase::partial_columns`]).
pub(super) fn emit_partial(
    out: &mut Batch,
    (start, end): (i64, i64),
    key: &[Scalar],
    accs: &[Acc],
) {
    out.start_row(RowKey::default());
    out.push_value(Value::Int(start));
    out.push_value(Value::Int(end));
    for k in key {
        out.push_value(k.as_value());
    }
    let halves = |out: &mut Batch, int: i128| {
        out.push_value(Value::Int((int >> 64) as i64));
        out.push_value(Value::Int(int as i64));
    };
    for a in accs {
        match a {
            Acc::Count(n) => out.push_value(Value::Int(*n)),
            Acc::Sum { any: false, .. } => {
                out.push_value(Value::Null);
                out.push_value(Value::Null);
            }
            Acc::Sum { int, .. } => halves(out, *int),
            Acc::Avg { int, n, .. } => {
                halves(out, *int);
                out.push_value(Value::Int(*n));
            }
            Acc::Min(m) | Acc::Max(m) => match m {
                Some(s) => out.push_value(s.as_value()),
                None => out.push_value(Value::Null),
            },
            // Not split in two phases (`two_phase::combines_exactly`).
            Acc::Distinct(s) => out.push_value(Value::Int(s.len() as i64)),
        }
    }
}

/// Combines the partial columns of `row` from column `at` on (one aggregate's each,
/// as [`emit_partial`] wrote them) into `accs`; returns why a column is not what a
/// partial row holds there.
pub(super) fn combine_partial(
    accs: &mut [Acc],
    row: &Row<'_>,
    mut at: usize,
) -> Result<(), String> {
    let int = |c: usize| match row.get(c) {
        Value::Int(i) => Ok(Some(i)),
        Value::Null => Ok(None),
        v => Err(format!(
            "column {c} of a partial row holds {v:?}, not an int64"
        )),
    };
    let whole = |hi: i64, lo: i64| (i128::from(hi) << 64) | i128::from(lo as u64);
    for acc in accs.iter_mut() {
        let part = match acc {
            Acc::Count(_) => {
                at += 1;
                Acc::Count(int(at - 1)?.unwrap_or(0))
            }
            Acc::Sum { is_float, .. } => {
                at += 2;
                match (int(at - 2)?, int(at - 1)?) {
                    (Some(hi), Some(lo)) => Acc::Sum {
                        int: whole(hi, lo),
                        float: 0.0,
                        any: true,
                        is_float: *is_float,
                        overflow: false,
                    },
                    _ => continue,
                }
            }
            Acc::Avg { .. } => {
                at += 3;
                let (hi, lo, n) = (int(at - 3)?, int(at - 2)?, int(at - 1)?);
                Acc::Avg {
                    int: whole(hi.unwrap_or(0), lo.unwrap_or(0)),
                    float: 0.0,
                    n: n.unwrap_or(0),
                }
            }
            Acc::Min(_) | Acc::Max(_) => {
                at += 1;
                let v = match row.get(at - 1) {
                    Value::Null => continue,
                    v => v.to_scalar(),
                };
                match acc {
                    Acc::Min(_) => Acc::Min(Some(v)),
                    _ => Acc::Max(Some(v)),
                }
            }
            Acc::Distinct(_) => return Err("count(DISTINCT) has no partial".into()),
        };
        acc.merge(part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::types::DataType;

    fn call(func: AggFunc, ty: DataType) -> AggCall {
        AggCall {
            func,
            arg: None,
            filter: None,
            ty,
        }
    }

    /// Partial accumulators written as a partial row and combined give what one
    /// accumulator over all the rows gives: a sum whose parts pass bigint but whose
    /// whole fits (the 128-bit halves), one that does not fit (a fault, as serially),
    /// counts, averages, min and max, and a part that summed nothing.
    #[test]
    fn partial_rows_combine_into_the_whole() {
        let aggs = [
            call(AggFunc::Sum, DataType::Int64),
            call(AggFunc::CountStar, DataType::Int64),
            call(AggFunc::Avg, DataType::Float64),
            call(AggFunc::Min, DataType::Int64),
            call(AggFunc::Max, DataType::Int64),
        ];
        // A partial row: window bounds, one key, then 2 + 1 + 3 + 1 + 1 partial columns.
        const ARITY: usize = 11;
        let parts: [&[i64]; 3] = [&[i64::MAX, i64::MAX, 3], &[i64::MIN, i64::MIN + 1, -1], &[]];
        let mut whole = fresh(&aggs);
        let mut combined = fresh(&aggs);
        for rows in parts {
            let mut part = fresh(&aggs);
            for &v in rows {
                let v = Some(Value::Int(v));
                update(&mut part, &[v, Some(Value::Null), v, v, v]);
                update(&mut whole, &[v, Some(Value::Null), v, v, v]);
            }
            let mut b = Batch::new(ARITY);
            emit_partial(&mut b, (0, 10), &[Scalar::Int(7)], &part);
            combine_partial(&mut combined, &b.row(0), 3).expect("a partial row");
        }
        let values = |accs: &[Acc]| accs.iter().map(|a| a.value()).collect::<Vec<_>>();
        assert_eq!(values(&combined), values(&whole));
        // (MAX + MAX + 3) + (MIN + MIN + 1 - 1) = 1: each part beyond bigint, the whole not.
        assert_eq!(values(&combined)[0], Ok(Scalar::Int(1)));
        // One part alone does not fit: a fault, as one accumulator over it gives.
        let mut alone = fresh(&aggs);
        let mut part = fresh(&aggs);
        update(&mut part, &[Some(Value::Int(i64::MAX)); 5]);
        update(&mut part, &[Some(Value::Int(1)); 5]);
        let mut b = Batch::new(ARITY);
        emit_partial(&mut b, (0, 10), &[Scalar::Int(7)], &part);
        combine_partial(&mut alone, &b.row(0), 3).expect("a partial row");
        assert!(alone[0].value().is_err(), "{:?}", alone[0].value());
        // A sum (and an average) of no value is null, and stays null combined.
        let mut none = fresh(&aggs);
        let mut b = Batch::new(ARITY);
        emit_partial(&mut b, (0, 10), &[Scalar::Int(7)], &fresh(&aggs));
        combine_partial(&mut none, &b.row(0), 3).expect("a partial row");
        assert_eq!(none[0].value(), Ok(Scalar::Null));
        assert_eq!(none[2].value(), Ok(Scalar::Null));
    }
}
