//! Route values of keyed state, as hash partitioning computes them: the split routes a
//! row by `hash(keys...)` of the keys its stage is partitioned by, and a checkpoint
//! restored at another partition count sends each entry of a stateful operator's state
//! where that value now routes it (see [`super::checkpoint::restore_share`]).

use braid_plan::batch::Scalar;
use braid_plan::expr::{Expr, Func};
use braid_plan::types::{DataType, Schema};

/// Which equality keys of a join are hashed as floats: those where either side's is
/// one (an int64 key meets a float64 one as the same number).
pub(crate) fn equi_floats(left: &Schema, right: &Schema, equi: &[(Expr, Expr)]) -> Vec<bool> {
    equi.iter()
        .map(|(a, b)| {
            a.data_type(left) == Ok(DataType::Float64)
                || b.data_type(right) == Ok(DataType::Float64)
        })
        .collect()
}

/// The route value of rows keyed by `ks`: `hash(k...)`, each key flagged in `float`
/// cast to a float first. The split routes by it, and a rescaled join recomputes it
/// for the rows it keeps (`super::join`), so the two agree.
pub(crate) fn key_hash(ks: &[Expr], float: &[bool]) -> Expr {
    let args = ks
        .iter()
        .zip(float)
        .map(|(k, &f)| match f {
            true => Expr::Cast(Box::new(k.clone()), DataType::Float64),
            false => k.clone(),
        })
        .collect();
    Expr::Call(Func::Hash, args)
}

/// A map by group key: an ordered map, or [`super::accumulate::Groups`].
pub(super) trait Keyed<V> {
    /// Every entry, taken out, in the keys' order.
    fn entries(self) -> Vec<(Vec<Scalar>, V)>;
    fn get_mut(&mut self, key: &[Scalar]) -> Option<&mut V>;
    fn insert(&mut self, key: Vec<Scalar>, v: V);
}

impl<V> Keyed<V> for std::collections::BTreeMap<Vec<Scalar>, V> {
    fn entries(self) -> Vec<(Vec<Scalar>, V)> {
        self.into_iter().collect()
    }
    fn get_mut(&mut self, key: &[Scalar]) -> Option<&mut V> {
        std::collections::BTreeMap::get_mut(self, key)
    }
    fn insert(&mut self, key: Vec<Scalar>, v: V) {
        std::collections::BTreeMap::insert(self, key, v);
    }
}

impl<V> Keyed<V> for super::accumulate::Groups<V> {
    fn entries(self) -> Vec<(Vec<Scalar>, V)> {
        self.sorted()
    }
    fn get_mut(&mut self, key: &[Scalar]) -> Option<&mut V> {
        super::accumulate::Groups::get_mut(self, key)
    }
    fn insert(&mut self, key: Vec<Scalar>, v: V) {
        super::accumulate::Groups::insert(self, key, v);
    }
}

/// How two entries of one key combine when their partitions' states are merged.
pub(super) type Combine<'c, V> = Option<&'c dyn Fn(&mut V, V)>;

/// Moves the entries of `from` whose key's route value (`hash(key...)`, as hash
/// partitioning computes it) has `keep` into `into`. A key already there is an error
/// (each key lives in one partition), unless `combine` merges the two entries
/// (partial aggregates, whose groups may be in every partition).
pub(super) fn absorb_keyed<V>(
    into: &mut impl Keyed<V>,
    from: impl Keyed<V>,
    keep: &dyn Fn(i64) -> bool,
    combine: Combine<'_, V>,
) -> std::result::Result<(), String> {
    for (key, v) in from.entries() {
        let route = braid_plan::expr::hash_values(key.iter().map(Scalar::as_value));
        if !keep(route) {
            continue;
        }
        match (into.get_mut(&key), combine) {
            (Some(there), Some(combine)) => combine(there, v),
            (Some(_), None) => {
                return Err(format!("the group {key:?} is in two partitions' states"));
            }
            (None, _) => {
                into.insert(key, v);
            }
        }
    }
    Ok(())
}
