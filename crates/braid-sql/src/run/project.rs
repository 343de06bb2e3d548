//! The stateless operators: scan (an input stream's columns out of the physical row),
//! filter, project and union. They copy or compute one row at a time into the parent's
//! batch and keep nothing.

use super::Faults;
use braid_plan::batch::{Batch, Row, RowKey};
use braid_plan::expr::{Arena, Compiled};

/// Copies columns `offset..offset + arity` of the physical row (one input stream's).
pub(super) fn scan(row: &Row<'_>, offset: usize, arity: usize, out: &mut Batch) {
    out.start_row(RowKey::default());
    for c in offset..offset + arity {
        out.push_value(row.get(c));
    }
}

/// Passes the row on if `predicate` is true; a fault skips it.
pub(super) fn filter(
    predicate: &Compiled,
    row: Row<'_>,
    out: &mut Batch,
    faults: &mut Faults,
    arena: &Arena,
) {
    match predicate.eval(&row, arena) {
        Ok(v) if v.is_true() => {
            let (b, i) = row.location();
            out.push_row_of(b, i, RowKey::default());
        }
        Ok(_) => {}
        Err(f) => faults.push(("filter", f)),
    }
}

/// Writes one value per expression; a fault skips the row.
pub(super) fn project(
    exprs: &[Compiled],
    row: Row<'_>,
    out: &mut Batch,
    faults: &mut Faults,
    arena: &Arena,
) {
    out.start_row(RowKey::default());
    for e in exprs {
        match e.eval(&row, arena) {
            Ok(v) => out.push_value(v),
            Err(f) => {
                out.abandon_row();
                return faults.push(("project", f));
            }
        }
    }
}

/// Passes the row on (each input of a union feeds the same batch).
pub(super) fn union(row: Row<'_>, out: &mut Batch) {
    let (b, i) = row.location();
    out.push_row_of(b, i, RowKey::default());
}
