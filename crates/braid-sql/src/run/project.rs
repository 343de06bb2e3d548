//! The stateless operators: scan (an input stream's columns out of the physical row),
//! filter, project and union. They copy or compute one row at a time into the parent's
//! batch and keep nothing.

use braid_plan::batch::{Batch, Row, RowKey};
use braid_plan::expr::Expr;

/// Copies columns `offset..offset + arity` of the physical row (one input stream's).
pub(super) fn scan(row: &Row<'_>, offset: usize, arity: usize, out: &mut Batch) {
    out.start_row(RowKey::default());
    for c in offset..offset + arity {
        out.push_value(row.get(c));
    }
}

/// Passes the row on if `predicate` is true.
pub(super) fn filter(predicate: &Expr, row: Row<'_>, out: &mut Batch) {
    if predicate.eval(&row).is_true() {
        let (b, i) = row.location();
        out.push_row_of(b, i, RowKey::default());
    }
}

/// Writes one value per expression.
pub(super) fn project(exprs: &[Expr], row: Row<'_>, out: &mut Batch) {
    out.start_row(RowKey::default());
    for e in exprs {
        out.push_value(e.eval(&row));
    }
}

/// Passes the row on (each input of a union feeds the same batch).
pub(super) fn union(row: Row<'_>, out: &mut Batch) {
    let (b, i) = row.location();
    out.push_row_of(b, i, RowKey::default());
}
