//! Routing functions with state: partitioners that learn from the stream they split
//! (the adaptive spatial partitioners of thesis Paper III recompute their boundaries
//! from a recent history of requests).
//!
//! A stateful router must see every row of the stream, in serial order, to decide the
//! same partitions on any number of workers. Braid gives it that by running it as a
//! stage of its own: [`assigned`] builds `Split(q = 1) -> Map(assign) -> Merge(union)
//! -> Split(route = the assigned partition)`. The one `assign` partition sees the rows
//! in serial order, as every stream function does, and appends the partition it chose
//! as a last column `_part`; the split after it routes by that column. A row is
//! assigned once and never moved (a later change of the router's boundaries applies to
//! later rows only), which is what SCSQ's partition process does with `pqstat` and the
//! `pq` postfilter.

use crate::batch::{Row, Value};
use crate::error::{Error, Result};
use crate::expr::{Arena, Expr, Fault};
use crate::function::{Emitter, StreamFunction, StreamFunctionFactory};
pub use crate::function::{Router, RouterFactory};
use crate::plan::{MergeKind, Plan, Route, Strategy};
use crate::types::{DataType, Field, Schema};
use std::sync::Arc;

/// The name of the column the assigning stage appends.
pub const PART_COLUMN: &str = "_part";

/// Arguments a router takes at most.
pub const MAX_ARGS: usize = 8;

/// The stream function of the assigning stage: each row, with the partition `router`
/// chose for it from `args` appended as column [`PART_COLUMN`].
pub struct Assign {
    /// The router's name (for faults and EXPLAIN).
    pub name: String,
    /// The router.
    pub router: Arc<dyn RouterFactory>,
    /// Its argument expressions over the input row.
    pub args: Vec<Expr>,
    /// The partitions of the split that routes by the assigned column.
    pub partitions: u32,
}

impl Assign {
    /// The assigning function, checked against the input schema.
    pub fn new(
        name: &str,
        router: Arc<dyn RouterFactory>,
        args: Vec<Expr>,
        partitions: u32,
        input: &Schema,
    ) -> Result<Assign> {
        let a = Assign {
            name: name.to_ascii_lowercase(),
            router,
            args,
            partitions,
        };
        a.output_schema(input)?;
        Ok(a)
    }
}

impl StreamFunctionFactory for Assign {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        if self.args.len() > MAX_ARGS {
            return Err(Error::Plan(format!(
                "router `{}` is given {} arguments; a router takes at most {MAX_ARGS}",
                self.name,
                self.args.len()
            )));
        }
        let types = self
            .args
            .iter()
            .map(|e| e.data_type(input))
            .collect::<Result<Vec<_>>>()?;
        self.router.check_args(&types).map_err(|e| {
            let why = match e {
                Error::Plan(m) => m,
                other => other.to_string(),
            };
            Error::Plan(format!("router `{}`: {why}", self.name))
        })?;
        if input.fields.iter().any(|f| f.name == PART_COLUMN) {
            return Err(Error::Plan(format!(
                "router `{}`: the input already has a column `{PART_COLUMN}`",
                self.name
            )));
        }
        let mut out = input.clone();
        out.fields.push(Field::new(PART_COLUMN, DataType::Int64));
        Ok(out)
    }

    fn create(&self, _: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(Assigning {
            router: self.router.create(self.partitions),
            args: self.args.clone(),
            arena: Arena::new(),
        })
    }

    fn checkpoints(&self) -> bool {
        self.router.checkpoints()
    }
}

struct Assigning {
    router: Box<dyn Router>,
    args: Vec<Expr>,
    arena: Arena,
}

impl StreamFunction for Assigning {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let part = {
            let mut vals = [Value::Null; MAX_ARGS];
            let mut fault = None;
            for (v, e) in vals.iter_mut().zip(&self.args) {
                match e.eval(&row, &self.arena) {
                    Ok(x) => *v = x,
                    Err(f) => {
                        fault = Some(f);
                        break;
                    }
                }
            }
            match fault {
                Some(f) => Err(f),
                None => self
                    .router
                    .route(&vals[..self.args.len()])
                    .map_err(Fault::new),
            }
        };
        self.arena.reset();
        match part {
            Ok(Some(p)) => {
                // A partition beyond int64 cannot be a column value; the split takes
                // it modulo q anyway.
                let p = (p % (i64::MAX as u64)) as i64;
                out.emit_row_and(row, &[Value::Int(p)]);
            }
            Ok(None) => {}
            Err(f) => out.fault("route", f),
        }
    }

    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        self.router.save(out)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.router.restore(bytes)
    }
}

/// `input` split into `partitions` by a stateful router: the assigning stage (one
/// partition, function `function`, which must be registered as an [`Assign`] of the
/// router), then a split by its column [`PART_COLUMN`] with `strategy`.
pub fn assigned(
    input: Plan,
    function: &str,
    assigned_schema: &Schema,
    partitions: u32,
    broadcast: Option<Expr>,
    strategy: Strategy,
) -> Result<Plan> {
    let part = Expr::col(assigned_schema, PART_COLUMN)?;
    Ok(input
        .split(1, Route::RoundRobin, None, Strategy::Fsplit)
        .map(function)
        .merge(MergeKind::Union)
        .split(
            partitions,
            Route::Expr {
                expr: part,
                when: None,
            },
            broadcast,
            strategy,
        ))
}
