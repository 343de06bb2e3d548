//! Window top-N: the rows of a windowed aggregate, made when their windows close, are
//! kept until the end of the epoch (or of the input) in which they came; then per
//! value of the PARTITION BY columns (the window's bounds among them) the first
//! `limit` by the ORDER BY columns, ties broken by every column in order (so the
//! answer does not depend on the order rows came in), come out numbered from 1.
//! Every row of a window comes in the same epoch: windows close by epochs, the same in
//! every partition and stage.

use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use std::cmp::Ordering;

/// One window top-N in one partition.
pub(super) struct TopN {
    partition: Vec<usize>,
    order: Vec<(usize, bool)>,
    limit: u64,
    /// Rows since the last end of an epoch (none between epochs, when checkpoints are
    /// taken, but saved all the same).
    pub(super) rows: Vec<Vec<Scalar>>,
}

impl TopN {
    pub(super) fn new(partition: Vec<usize>, order: Vec<(usize, bool)>, limit: u64) -> TopN {
        TopN {
            partition,
            order,
            limit,
            rows: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, row: Row<'_>) {
        self.rows.push(row.to_scalars());
    }

    /// The order of rows within a partition: ORDER BY, then every column.
    fn cmp(&self, a: &[Scalar], b: &[Scalar]) -> Ordering {
        for &(c, desc) in &self.order {
            let o = a[c].cmp(&b[c]);
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.cmp(b)
    }

    /// Emits the top rows of every partition of the rows kept, with their numbers.
    pub(super) fn advance(&mut self, out: &mut Batch) {
        let mut rows = std::mem::take(&mut self.rows);
        let part = |r: &[Scalar]| -> Vec<Scalar> {
            self.partition.iter().map(|&c| r[c].clone()).collect()
        };
        rows.sort_by(|a, b| part(a).cmp(&part(b)).then_with(|| self.cmp(a, b)));
        let mut n = 0u64;
        for i in 0..rows.len() {
            n = if i > 0 && part(&rows[i - 1]) == part(&rows[i]) {
                n + 1
            } else {
                1
            };
            if n <= self.limit {
                out.start_row(RowKey::default());
                for v in &rows[i] {
                    out.push_value(v.as_value());
                }
                out.push_value(Value::Int(n as i64));
            }
        }
    }
}
