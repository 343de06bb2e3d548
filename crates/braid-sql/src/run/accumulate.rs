//! Accumulators of aggregate functions, shared by every window kind.

use crate::logical::{AggCall, AggFunc};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use std::collections::{BTreeMap, BTreeSet};

/// An aggregate's running state.
#[derive(Clone, Debug)]
pub(super) enum Acc {
    Count(i64),
    Sum {
        int: i64,
        float: f64,
        any: bool,
        is_float: bool,
    },
    Avg {
        sum: f64,
        n: i64,
    },
    Min(Option<Scalar>),
    Max(Option<Scalar>),
    Distinct(BTreeSet<Scalar>),
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
            },
            AggFunc::Avg => Acc::Avg { sum: 0.0, n: 0 },
            AggFunc::Min => Acc::Min(None),
            AggFunc::Max => Acc::Max(None),
        }
    }

    fn update(&mut self, call: &AggCall, row: &Row<'_>) {
        // FILTER (WHERE c): a row counts only where c is true (not false, not null).
        if let Some(c) = &call.filter {
            if !matches!(c.eval(row), Value::Bool(true)) {
                return;
            }
        }
        let v = call.arg.as_ref().map(|a| a.eval(row));
        if call.func == AggFunc::CountStar {
            if let Acc::Count(n) = self {
                *n += 1;
            }
            return;
        }
        let Some(v) = v else { return };
        if matches!(v, Value::Null) {
            return;
        }
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Distinct(s) => {
                s.insert(v.to_scalar());
            }
            Acc::Sum {
                int, float, any, ..
            } => {
                *any = true;
                match v {
                    Value::Int(i) => *int = int.wrapping_add(i),
                    Value::Float(f) => *float += f,
                    _ => {}
                }
            }
            Acc::Avg { sum, n } => {
                *n += 1;
                *sum += match v {
                    Value::Int(i) => i as f64,
                    Value::Float(f) => f,
                    _ => 0.0,
                };
            }
            Acc::Min(m) => {
                let s = v.to_scalar();
                if m.as_ref().is_none_or(|x| s < *x) {
                    *m = Some(s);
                }
            }
            Acc::Max(m) => {
                let s = v.to_scalar();
                if m.as_ref().is_none_or(|x| s > *x) {
                    *m = Some(s);
                }
            }
        }
    }

    pub(super) fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Distinct(a), Acc::Distinct(b)) => a.extend(b),
            (
                Acc::Sum {
                    int, float, any, ..
                },
                Acc::Sum {
                    int: i2,
                    float: f2,
                    any: a2,
                    ..
                },
            ) => {
                *int = int.wrapping_add(i2);
                *float += f2;
                *any |= a2;
            }
            (Acc::Avg { sum, n }, Acc::Avg { sum: s2, n: n2 }) => {
                *sum += s2;
                *n += n2;
            }
            (Acc::Min(a), Acc::Min(Some(b))) if a.as_ref().is_none_or(|x| b < *x) => *a = Some(b),
            (Acc::Max(a), Acc::Max(Some(b))) if a.as_ref().is_none_or(|x| b > *x) => *a = Some(b),
            _ => {}
        }
    }

    fn value(&self) -> Scalar {
        match self {
            Acc::Count(n) => Scalar::Int(*n),
            Acc::Distinct(s) => Scalar::Int(s.len() as i64),
            Acc::Sum { any: false, .. } => Scalar::Null,
            Acc::Sum {
                int,
                float,
                is_float,
                ..
            } => {
                if *is_float {
                    Scalar::Float(*float + *int as f64)
                } else {
                    Scalar::Int(*int)
                }
            }
            Acc::Avg { n: 0, .. } => Scalar::Null,
            Acc::Avg { sum, n } => Scalar::Float(sum / *n as f64),
            Acc::Min(m) | Acc::Max(m) => m.clone().unwrap_or(Scalar::Null),
        }
    }
}

/// New accumulators for `aggs`.
pub(super) fn fresh(aggs: &[AggCall]) -> Vec<Acc> {
    aggs.iter().map(Acc::new).collect()
}

/// Adds `row` to one accumulator per aggregate.
pub(super) fn update(aggs: &[AggCall], accs: &mut [Acc], row: &Row<'_>) {
    for (a, call) in accs.iter_mut().zip(aggs) {
        a.update(call, row);
    }
}

/// Merges the accumulators `from` (of the same aggregates) into `into`.
pub(super) fn merge_all(into: &mut [Acc], from: &[Acc]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.merge(b.clone());
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

/// Writes one result row: `window_start, window_end, keys..., aggregates...`.
pub(super) fn emit(out: &mut Batch, start: i64, end: i64, key: &[Scalar], accs: &[Acc]) {
    out.start_row(RowKey::default());
    out.push_value(Value::Int(start));
    out.push_value(Value::Int(end));
    for k in key {
        out.push_value(k.as_value());
    }
    for a in accs {
        out.push_value(a.value().as_value());
    }
}
