//! Result rows: what a plan's sink receives, as tests and collecting sinks see it.

use crate::batch::{RowKey, Scalar};

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
