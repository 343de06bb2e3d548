//! Keyed merge of partial results, as the execution layer combines them (the reference
//! interpreter recomputes keyed merges on its own, group by group).
//!
//! A partial row is *lifted* into an accumulator, accumulators with the same key are
//! *merged* (associatively, so merging can happen per worker and then globally, or in
//! a tree of any fan-in), and a final accumulator is *finished* into an output row.

use crate::batch::{Datum, Row};
use crate::error::{Error, Result};
use crate::expr::Fault;
use crate::function::{Combiner, Registry};
use crate::plan::{Agg, Combine};
use crate::types::{DataType, Schema};
use std::collections::HashMap;
use std::sync::Arc;

/// A hashable key made of non-string datums.
pub type Key = Vec<(u8, u64)>;

fn key_part(d: &Datum) -> (u8, u64) {
    match *d {
        Datum::Null => (0, 0),
        Datum::Int(i) => (1, i as u64),
        Datum::Float(f) => (2, crate::batch::float_key(f).to_bits()),
        Datum::Bool(b) => (3, b as u64),
        Datum::Str(o, l) => (4, ((o as u64) << 32) | l as u64),
        // Refused by `KeyedMerge::new`: a datum's place in its batch is no key.
        Datum::Floats(..) | Datum::Ints(..) => unreachable!("array columns are refused"),
    }
}

/// A resolved keyed merge.
#[derive(Clone)]
pub struct KeyedMerge {
    key: Vec<usize>,
    how: How,
}

#[derive(Clone)]
enum How {
    Aggregates(Vec<Agg>),
    Native(Arc<dyn Combiner>),
}

impl KeyedMerge {
    /// Resolves a keyed merge over partial rows of `input`. String columns are not
    /// supported in keyed merges.
    pub fn new(
        key: &[usize],
        combine: &Combine,
        input: &Schema,
        registry: &Registry,
    ) -> Result<KeyedMerge> {
        if let Some(f) = input
            .fields
            .iter()
            .find(|f| f.ty == DataType::String || f.ty.is_array())
        {
            return Err(Error::NotSupported(format!(
                "keyed merge over {} column `{}`; keyed merges combine numeric and bool columns",
                match f.ty.is_array() {
                    true => "array",
                    false => "string",
                },
                f.name
            )));
        }
        let how = match combine {
            Combine::Aggregates(a) => How::Aggregates(a.clone()),
            Combine::Native(name) => How::Native(registry.combiner(name)?.clone()),
        };
        Ok(KeyedMerge {
            key: key.to_vec(),
            how,
        })
    }

    /// The key of a partial row.
    pub fn key_of(&self, row: &Row<'_>) -> Key {
        self.key.iter().map(|&k| key_part(&row.datum(k))).collect()
    }

    /// The key of an accumulator.
    pub fn key_of_acc(&self, acc: &[Datum]) -> Key {
        match &self.how {
            How::Aggregates(_) => acc[..self.key.len()].iter().map(key_part).collect(),
            How::Native(_) => self.key.iter().map(|&k| key_part(&acc[k])).collect(),
        }
    }

    /// Turns a partial row into an accumulator.
    pub fn lift(&self, row: &Row<'_>) -> Vec<Datum> {
        match &self.how {
            How::Native(_) => {
                let mut acc = Vec::with_capacity(row.arity());
                row.datums_into(&mut acc);
                acc
            }
            How::Aggregates(aggs) => {
                let mut acc: Vec<Datum> = self.key.iter().map(|&k| row.datum(k)).collect();
                for a in aggs {
                    match *a {
                        Agg::Count => acc.push(Datum::Int(1)),
                        // A sum carries the high word of its exact (128-bit) value.
                        Agg::Sum(c) => acc.extend([row.datum(c), Datum::Int(0)]),
                        Agg::Min(c) | Agg::Max(c) => acc.push(row.datum(c)),
                    }
                }
                acc
            }
        }
    }

    /// Folds accumulator `b` into `a`.
    pub fn merge(&self, a: &mut [Datum], b: &[Datum]) {
        match &self.how {
            How::Native(c) => c.combine(a, b),
            How::Aggregates(aggs) => {
                let mut j = self.key.len();
                for agg in aggs {
                    let (x, y) = (a[j], b[j]);
                    match agg {
                        Agg::Count => a[j] = add(x, y),
                        Agg::Sum(_) => {
                            let (lo, hi) = add_exact((x, a[j + 1]), (y, b[j + 1]));
                            (a[j], a[j + 1]) = (lo, hi);
                            j += 1;
                        }
                        Agg::Min(_) => a[j] = pick(x, y, true),
                        Agg::Max(_) => a[j] = pick(x, y, false),
                    }
                    j += 1;
                }
            }
        }
    }

    /// The output row of a final accumulator, or the fault of a sum that BIGINT
    /// cannot hold (never a wrapped number).
    pub fn finish(&self, acc: &[Datum], out: &mut Vec<Datum>) -> Result<(), Fault> {
        out.clear();
        match &self.how {
            How::Native(c) => c.finish(acc, out),
            How::Aggregates(aggs) => {
                let mut j = self.key.len();
                out.extend_from_slice(&acc[..j]);
                for agg in aggs {
                    match (agg, acc[j]) {
                        (Agg::Sum(c), Datum::Int(lo)) => {
                            let sum = exact(lo, acc[j + 1]);
                            let v = i64::try_from(sum).map_err(|_| {
                                Fault::new(format!(
                                    "the keyed merge's sum of column {c} is {sum}, \
                                     which overflows BIGINT"
                                ))
                            })?;
                            out.push(Datum::Int(v));
                            j += 1;
                        }
                        (Agg::Sum(_), d) => {
                            out.push(d);
                            j += 1;
                        }
                        (_, d) => out.push(d),
                    }
                    j += 1;
                }
            }
        }
        Ok(())
    }
}

/// Adds counts; a count of `i64::MAX` rows is out of reach.
fn add(x: Datum, y: Datum) -> Datum {
    match (x, y) {
        (Datum::Int(a), Datum::Int(b)) => Datum::Int(a.saturating_add(b)),
        (Datum::Null, o) | (o, Datum::Null) => o,
        (a, _) => a,
    }
}

/// Adds two sums, each a value and the high word of its exact value: integers exactly
/// in 128 bits (kept as the low word, wrapped, and the high word), floats as floats.
fn add_exact((x, xh): (Datum, Datum), (y, yh): (Datum, Datum)) -> (Datum, Datum) {
    match (x, y) {
        (Datum::Int(a), Datum::Int(b)) => {
            let exact = exact(a, xh) + exact(b, yh);
            let lo = exact as i64;
            let hi = ((exact - lo as i128) >> 64) as i64;
            (Datum::Int(lo), Datum::Int(hi))
        }
        (Datum::Float(a), Datum::Float(b)) => (Datum::Float(a + b), Datum::Int(0)),
        (Datum::Null, _) => (y, yh),
        (_, Datum::Null) => (x, xh),
        _ => (x, xh),
    }
}

/// A sum's exact value from its low word and its carried high word.
fn exact(lo: i64, hi: Datum) -> i128 {
    let hi = match hi {
        Datum::Int(h) => h,
        _ => 0,
    };
    ((hi as i128) << 64) + lo as i128
}

fn pick(x: Datum, y: Datum, min: bool) -> Datum {
    let less = match (x, y) {
        (Datum::Int(a), Datum::Int(b)) => b < a,
        (Datum::Float(a), Datum::Float(b)) => b.total_cmp(&a).is_lt(),
        (Datum::Null, _) => return y,
        _ => return x,
    };
    if less == min {
        y
    } else {
        x
    }
}

/// Accumulators by key, in first-seen order.
#[derive(Default)]
pub struct Groups {
    index: HashMap<Key, usize>,
    /// Accumulators in first-seen order.
    pub accs: Vec<Vec<Datum>>,
}

impl Groups {
    /// Folds an accumulator in.
    pub fn add(&mut self, merge: &KeyedMerge, acc: Vec<Datum>) {
        let key = merge.key_of_acc(&acc);
        match self.index.get(&key) {
            Some(&i) => merge.merge(&mut self.accs[i], &acc),
            None => {
                self.index.insert(key, self.accs.len());
                self.accs.push(acc);
            }
        }
    }

    /// Takes the accumulators out, leaving the groups empty.
    pub fn drain(&mut self) -> Vec<Vec<Datum>> {
        self.index.clear();
        std::mem::take(&mut self.accs)
    }

    /// No groups.
    pub fn is_empty(&self) -> bool {
        self.accs.is_empty()
    }
}
