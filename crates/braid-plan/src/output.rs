//! Result rows: what a plan's sink receives, as tests and collecting sinks see it.

use crate::batch::{RowKey, Scalar};
use crate::plan::SortKey;
use std::cmp::Ordering;

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

/// The order of two rows of an epoch with the same key (the time-ordered merge's tie
/// break; SQL gives every row made at the end of an epoch the same key): by the
/// event-time column `time` when there is one, then by the values in column order.
pub fn same_key_order(a: &[Scalar], b: &[Scalar], time: Option<usize>) -> Ordering {
    let at = |v: &[Scalar]| time.and_then(|t| v.get(t).cloned());
    at(a).cmp(&at(b)).then_with(|| a.cmp(b))
}

/// The order of two rows of an epoch with the same key under a sorted merge: by the
/// sort's columns `by`, then as [`same_key_order`].
pub fn sorted_order(a: &[Scalar], b: &[Scalar], by: &[SortKey], time: Option<usize>) -> Ordering {
    for k in by {
        let (x, y) = (&a[k.column], &b[k.column]);
        let o = match (x, y) {
            (Scalar::Null, Scalar::Null) => Ordering::Equal,
            (Scalar::Null, _) if k.nulls_first => Ordering::Less,
            (Scalar::Null, _) => Ordering::Greater,
            (_, Scalar::Null) if k.nulls_first => Ordering::Greater,
            (_, Scalar::Null) => Ordering::Less,
            _ if k.descending => y.cmp(x),
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    same_key_order(a, b, time)
}
