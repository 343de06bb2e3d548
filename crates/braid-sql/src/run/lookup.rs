//! A stream joined with a table held in memory: each stream row meets the table rows
//! with its key (a row with a null key meets none). A left outer lookup emits a row
//! that meets none with nulls for the table's columns (the table never changes, so
//! that is known at once), unless the condition faulted on one of its table rows.

use super::Faults;
use crate::catalog::TableDef;
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::expr::{Arena, Expr};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A table's rows indexed by key columns (built once per query, shared by partitions).
pub(super) struct TableIndex {
    table: Arc<TableDef>,
    index: BTreeMap<Vec<Scalar>, Vec<u32>>,
    /// With one key column: the rows of each int64 key, hashed (a stream row with an
    /// int key looks here; any other key looks in `index`).
    ints: rustc_hash::FxHashMap<i64, Vec<u32>>,
}

impl TableIndex {
    /// Indexes `table` by columns `cols`.
    pub(super) fn new(table: Arc<TableDef>, cols: Vec<usize>) -> TableIndex {
        let mut index: BTreeMap<Vec<Scalar>, Vec<u32>> = BTreeMap::new();
        for j in 0..table.rows.len() {
            let r = table.rows.row(j);
            let key: Vec<Scalar> = cols.iter().map(|&c| r.get(c).to_scalar()).collect();
            index.entry(key).or_default().push(j as u32);
        }
        let ints = match cols.len() {
            1 => index
                .iter()
                .filter_map(|(k, rows)| match k.as_slice() {
                    [Scalar::Int(i)] => Some((*i, rows.clone())),
                    _ => None,
                })
                .collect(),
            _ => Default::default(),
        };
        TableIndex { table, index, ints }
    }
}

/// One lookup in one partition.
pub(super) struct Lookup {
    table: Arc<TableIndex>,
    /// Key expressions over the stream row.
    keys: Vec<Expr>,
    /// Other conditions, over the output row.
    residual: Option<Expr>,
    /// The current row's key (reused).
    key: Vec<Scalar>,
    /// A left outer join: a row that meets no table row comes out with nulls.
    outer: bool,
}

impl Lookup {
    /// A lookup in `table` by `keys`.
    pub(super) fn new(
        table: Arc<TableIndex>,
        keys: Vec<Expr>,
        residual: Option<Expr>,
        outer: bool,
    ) -> Lookup {
        Lookup {
            table,
            keys,
            residual,
            key: Vec::new(),
            outer,
        }
    }

    /// Emits `row` joined with each table row of its key that passes the residual.
    /// A row whose keys fault is skipped, and a pair whose residual faults is not
    /// emitted, with the fault.
    pub(super) fn push(
        &mut self,
        row: Row<'_>,
        out: &mut Batch,
        faults: &mut Faults,
        arena: &Arena,
    ) {
        let t = &self.table;
        self.key.clear();
        for k in &self.keys {
            match k.eval(&row, arena) {
                Ok(v) => self.key.push(v.to_scalar()),
                Err(f) => return faults.push(("lookup", f)),
            }
        }
        let hits = match self.key.as_slice() {
            // One int64 key: hashed.
            [Scalar::Int(i)] => t.ints.get(i),
            key if key.iter().any(|k| matches!(k, Scalar::Null)) => None,
            key => t.index.get(key),
        };
        let (before, faulted) = (out.len(), faults.len());
        for &j in hits.into_iter().flatten() {
            out.start_row(RowKey::default());
            for c in 0..row.arity() {
                out.push_value(row.get(c));
            }
            let tr = t.table.rows.row(j as usize);
            for c in 0..tr.arity() {
                out.push_value(tr.get(c));
            }
            if let Some(r) = &self.residual {
                match r.eval(&out.row(out.len() - 1), arena) {
                    Ok(v) if v.is_true() => {}
                    Ok(_) => out.abandon_row(),
                    Err(f) => {
                        out.abandon_row();
                        faults.push(("lookup", f));
                    }
                }
            }
        }
        if self.outer && out.len() == before && faults.len() == faulted {
            out.start_row(RowKey::default());
            for c in 0..row.arity() {
                out.push_value(row.get(c));
            }
            for _ in 0..t.table.rows.arity() {
                out.push_value(Value::Null);
            }
        }
    }
}
