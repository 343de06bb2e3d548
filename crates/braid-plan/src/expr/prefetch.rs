//! Results of batched scalar functions computed ahead of the rows that use them.
//!
//! A function whose every call has a fixed cost worth sharing (a Python function: the
//! interpreter's lock, the call into it) says so with [`ScalarUdf::batched`]. An
//! operator that holds a batch of rows before it runs them (the SQL query function of a
//! stage) then computes the function's arguments for every row, calls it once for all
//! of them ([`ScalarUdf::call_batch`], through [`prefetch`]) and runs the rows as ever,
//! saying which row runs ([`at_row`]): when an expression reaches the call, it takes the
//! result made for that row with those arguments ([`take`]) instead of calling. Nothing
//! else changes: a result is taken only where the row's own evaluation reaches the call
//! (a row a filter drops, or a `CASE` arm not taken, never sees its result or its
//! fault), a call with other arguments (another call of the function in the same row)
//! is made as before, and [`forget`] drops what no row took once the batch is done.
//!
//! Results are kept per thread (a worker runs one partition's batch at a time, from
//! prefetch to forget), by function and row; the buffers are reused from batch to batch.

use super::ScalarUdf;
use crate::batch::{Scalar, Value};
use std::cell::RefCell;
use std::sync::Arc;

/// No result for this row.
const NONE: u32 = u32::MAX;

/// One prefetched call's results.
#[derive(Default)]
struct Made {
    /// The function (see [`id`]).
    f: usize,
    arity: usize,
    /// Per row of the batch: the index of its result, or [`NONE`].
    slot: Vec<u32>,
    /// The arguments of each result, one list after another.
    args: Vec<Scalar>,
    /// The results, `None` once taken.
    results: Vec<Option<std::result::Result<Scalar, String>>>,
}

#[derive(Default)]
struct Batch {
    /// The row being run.
    row: usize,
    /// The calls made for the batch (`made[..live]`; the rest kept for their buffers).
    made: Vec<Made>,
    live: usize,
}

thread_local! {
    static BATCH: RefCell<Batch> = RefCell::new(Batch::default());
}

/// Which function: the address of its value (every `Udf` naming it shares the `Arc`).
fn id(f: &Arc<dyn ScalarUdf>) -> usize {
    Arc::as_ptr(f) as *const () as usize
}

/// Calls `f` once for the argument lists `args` (one after another, of
/// `args.len() / rows.len()` values each) of rows `rows` of a batch of `held` rows, and
/// keeps the results for those rows to take.
pub fn prefetch(f: &Arc<dyn ScalarUdf>, args: &[Value<'_>], rows: &[u32], held: usize) {
    if rows.is_empty() {
        return;
    }
    let arity = args.len() / rows.len();
    let results = f.call_batch(args, rows.len());
    assert_eq!(
        results.len(),
        rows.len(),
        "call_batch gave {} results for {} rows",
        results.len(),
        rows.len()
    );
    BATCH.with(|b| {
        let b = &mut *b.borrow_mut();
        if b.live == b.made.len() {
            b.made.push(Made::default());
        }
        let m = &mut b.made[b.live];
        b.live += 1;
        m.f = id(f);
        m.arity = arity;
        m.slot.clear();
        m.slot.resize(held, NONE);
        m.args.clear();
        m.args.extend(args.iter().map(|v| v.to_scalar()));
        m.results.clear();
        for (i, (&row, r)) in rows.iter().zip(results).enumerate() {
            m.slot[row as usize] = i as u32;
            m.results.push(Some(r));
        }
    });
}

/// Row `row` of the batch runs now.
pub fn at_row(row: usize) {
    BATCH.with(|b| b.borrow_mut().row = row);
}

/// The result [`prefetch`] made for `f` on `args` for the row running, if there is one
/// not taken yet.
pub(super) fn take(
    f: &Arc<dyn ScalarUdf>,
    args: &[Value<'_>],
) -> Option<std::result::Result<Scalar, String>> {
    BATCH.with(|b| {
        let b = &mut *b.borrow_mut();
        let (who, row) = (id(f), b.row);
        for m in &mut b.made[..b.live] {
            if m.f != who || m.arity != args.len() {
                continue;
            }
            let Some(&i) = m.slot.get(row).filter(|&&i| i != NONE) else {
                continue;
            };
            let i = i as usize;
            let made_for = &m.args[i * m.arity..(i + 1) * m.arity];
            if m.results[i].is_some() && made_for.iter().zip(args).all(|(s, v)| s.as_value() == *v)
            {
                return m.results[i].take();
            }
        }
        None
    })
}

/// Drops the results no row took (the batch is done).
pub fn forget() {
    BATCH.with(|b| b.borrow_mut().live = 0);
}
