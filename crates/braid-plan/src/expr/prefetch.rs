//! Results of batched scalar functions computed ahead of the rows that use them.
//!
//! A function whose every call has a fixed cost worth sharing (a Python function: the
//! interpreter's lock, the call into it) says so with [`ScalarUdf::batched`]. An
//! operator that holds a batch of rows before it runs them (the SQL query function of a
//! stage) then computes the function's arguments for every row, calls it once for all
//! of them ([`ScalarUdf::call_batch`], through [`prefetch`]) and runs the rows as ever:
//! when an expression reaches the call, it takes the result made for its arguments
//! ([`take`]) instead of calling. Nothing else changes: a result is taken only where
//! the row's own evaluation reaches the call (a row a filter drops, or a `CASE` arm not
//! taken, never sees its result or its fault), a call with arguments nobody prefetched
//! is made as before, and [`forget`] drops what no row took once the batch is done.
//!
//! Results are kept per thread (a worker runs one partition's batch at a time, from
//! prefetch to forget) and by the function and its argument values, one per row in the
//! order of the rows: a row takes the oldest result made for its arguments, which is its
//! own unless a row before it with the same arguments did not reach the call (then it
//! is that row's: a result for the same arguments).

use super::ScalarUdf;
use crate::batch::{Scalar, Value};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

type Results = VecDeque<std::result::Result<Scalar, String>>;

thread_local! {
    static MADE: RefCell<HashMap<(usize, Vec<Scalar>), Results>> = RefCell::new(HashMap::new());
}

/// Which function: the address of its value (every `Udf` naming it shares the `Arc`).
fn id(f: &Arc<dyn ScalarUdf>) -> usize {
    Arc::as_ptr(f) as *const () as usize
}

/// Calls `f` once for `rows` argument lists (`args`: one after another, of
/// `args.len() / rows` values each) and keeps the results for the rows to take.
pub fn prefetch(f: &Arc<dyn ScalarUdf>, args: &[Value<'_>], rows: usize) {
    if rows == 0 {
        return;
    }
    let arity = args.len() / rows;
    let results = f.call_batch(args, rows);
    assert_eq!(
        results.len(),
        rows,
        "call_batch gave {} results for {rows} rows",
        results.len()
    );
    let who = id(f);
    MADE.with(|m| {
        let mut m = m.borrow_mut();
        for (i, r) in results.into_iter().enumerate() {
            let key: Vec<Scalar> = args[i * arity..(i + 1) * arity]
                .iter()
                .map(|v| v.to_scalar())
                .collect();
            m.entry((who, key)).or_default().push_back(r);
        }
    });
}

/// The result [`prefetch`] made for `f` on `args`, if one is left.
pub(super) fn take(
    f: &Arc<dyn ScalarUdf>,
    args: &[Value<'_>],
) -> Option<std::result::Result<Scalar, String>> {
    MADE.with(|m| {
        let mut m = m.borrow_mut();
        if m.is_empty() {
            return None;
        }
        let key = (id(f), args.iter().map(|v| v.to_scalar()).collect());
        let q = m.get_mut(&key)?;
        let r = q.pop_front();
        if q.is_empty() {
            m.remove(&key);
        }
        r
    })
}

/// Drops the results no row took (the batch is done).
pub fn forget() {
    MADE.with(|m| m.borrow_mut().clear());
}
