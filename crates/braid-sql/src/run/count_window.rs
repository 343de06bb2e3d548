//! Count windows (`GROUP BY ROWS(n)`): per key, tumbling windows of `n` rows. They never
//! refuse a row; the input's end emits the partial windows.

use super::accumulate::{emit, fresh, get_or_insert, update, Acc, Inputs};
use super::Faults;
use crate::logical::AggCall;
use braid_plan::batch::{Batch, Scalar};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Per key: the window's number, the rows in it so far, and its accumulators.
#[derive(Clone, Default, Serialize, Deserialize)]
pub(super) struct CountWindows(BTreeMap<Vec<Scalar>, (i64, u64, Vec<Acc>)>);

impl CountWindows {
    /// Adds the windows of `from` whose keys have `keep` (see
    /// [`super::route::absorb_keyed`]).
    pub(super) fn absorb(
        &mut self,
        from: CountWindows,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<(), String> {
        super::route::absorb_keyed(&mut self.0, from.0, keep, None)
    }

    /// Per open window: the lengths of its key and of its accumulators.
    pub(super) fn shapes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.0.iter().map(|(k, (_, _, accs))| (k.len(), accs.len()))
    }

    /// Adds a row of group `key`; emits the key's window when it holds `rows` rows
    /// (window bounds count rows: `[w * rows, (w + 1) * rows)`).
    pub(super) fn push(
        &mut self,
        key: &[Scalar],
        aggs: &[AggCall],
        rows: u64,
        inputs: &Inputs<'_>,
        out: &mut Batch,
        faults: &mut Faults,
    ) {
        let e = get_or_insert(&mut self.0, key, || (0, 0, fresh(aggs)));
        update(&mut e.2, inputs);
        e.1 += 1;
        if e.1 == rows {
            let n = rows as i64;
            let accs = std::mem::replace(&mut e.2, fresh(aggs));
            let w = e.0;
            e.0 += 1;
            e.1 = 0;
            if let Err(f) = emit(out, (w * n, (w + 1) * n), key, aggs, &accs) {
                faults.push(("aggregate", f));
            }
        }
    }

    /// At the end of the input: emits every partial window.
    pub(super) fn finish(
        &mut self,
        rows: u64,
        aggs: &[AggCall],
        out: &mut Batch,
        faults: &mut Faults,
    ) {
        for (key, (w, n, accs)) in std::mem::take(&mut self.0) {
            if n > 0 {
                let r = rows as i64;
                if let Err(f) = emit(out, (w * r, w * r + n as i64), &key, aggs, &accs) {
                    faults.push(("aggregate", f));
                }
            }
        }
    }
}
