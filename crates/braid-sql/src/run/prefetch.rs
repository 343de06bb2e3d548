//! Batched scalar functions (Python's, say: [`ScalarUdf::batched`]) called once for a
//! batch of a stage's rows instead of once per row.
//!
//! The calls whose arguments can be computed from the stage's input row alone (in a
//! filter, projection, aggregate, lookup or join key over a chain of filters and
//! projections from a scan) are found when the factory is made, their arguments
//! rewritten over the physical row ([`Prefetch::of`]). The query function then holds a
//! batch of rows, computes each call's arguments for all of them and calls once
//! ([`braid_plan::expr::prefetch`]), and runs the rows one by one as ever; see that
//! module for why the results and faults are exactly those of calls made row by row.
//! A call inside another batched call's arguments, or over a join's or an aggregate's
//! output, is made row by row, as before.
//!
//! [`ScalarUdf::batched`]: braid_plan::expr::ScalarUdf::batched

use super::Layout;
use crate::logical::{AggPhase, Logical};
use braid_plan::batch::{Batch, Value};
use braid_plan::expr::{prefetch, Arena, Expr, Udf};

/// A batched call to make ahead: on rows of input `input`, arguments `args` over the
/// physical row.
struct Call {
    input: usize,
    udf: Udf,
    args: Vec<Expr>,
}

/// The batched calls of one stage's plan.
#[derive(Default)]
pub(super) struct Prefetch {
    calls: Vec<Call>,
}

impl Prefetch {
    /// The calls of `root` whose arguments follow from the physical row (laid out as
    /// `layout`).
    pub(super) fn of(root: &Logical, layout: &Layout) -> Prefetch {
        let mut p = Prefetch::default();
        p.walk(root, layout);
        p
    }

    /// Whether there is any (the query function then holds rows).
    pub(super) fn any(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Calls every function once for the rows of `held` it applies to.
    pub(super) fn run(&self, held: &Batch, layout: &Layout) {
        for c in &self.calls {
            // The strings the arguments make live until the call is made.
            let arena = Arena::new();
            let mut args: Vec<Value<'_>> = Vec::new();
            let mut rows: Vec<u32> = Vec::new();
            'row: for (i, row) in held.rows().enumerate() {
                if layout.input_of(&row) != Some(c.input) {
                    continue;
                }
                let at = args.len();
                for a in &c.args {
                    match a.eval(&row, &arena) {
                        Ok(v) => args.push(v),
                        // The row's own evaluation meets the fault (or never gets here).
                        Err(_) => {
                            args.truncate(at);
                            continue 'row;
                        }
                    }
                }
                rows.push(i as u32);
            }
            prefetch::prefetch(&c.udf.f, &args, &rows, held.len());
        }
    }

    /// Finds the calls in `l` and below; the columns of `l` over the physical row, when
    /// they follow from it through filters and projections.
    fn walk(&mut self, l: &Logical, layout: &Layout) -> Option<(usize, Vec<Expr>)> {
        match l {
            Logical::Scan { input, schema, .. } => {
                let offset = layout.inputs.get(*input).map_or(0, |i| i.1);
                let cols = schema
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(j, f)| Expr::Column(offset + j, f.name.clone()))
                    .collect();
                Some((*input, cols))
            }
            // Lowered onto the physical plan: their rows pass as they are here.
            Logical::Sort { input, .. } | Logical::Limit { input, .. } => self.walk(input, layout),
            Logical::Filter { input, predicate } => {
                let below = self.walk(input, layout)?;
                self.find(predicate, &below);
                Some(below)
            }
            Logical::Project { input, exprs, .. } => {
                let (input, cols) = self.walk(input, layout)?;
                let exprs: Vec<Expr> = exprs
                    .iter()
                    .map(|e| over(e, &cols))
                    .collect::<Option<_>>()?;
                for e in exprs.iter().filter(|e| e.calls_batched()) {
                    self.find_over(e, input);
                }
                Some((input, exprs))
            }
            Logical::Aggregate {
                input,
                keys,
                aggs,
                phase,
                ..
            } => {
                let below = self.walk(input, layout);
                // A final aggregate combines partial rows: its `aggs` (those of the
                // whole aggregate, for their functions) are not evaluated on them.
                if let Some(below) = below.filter(|_| *phase != AggPhase::Final) {
                    keys.iter().for_each(|k| self.find(k, &below));
                    for a in aggs {
                        a.arg.iter().for_each(|e| self.find(e, &below));
                        a.filter.iter().for_each(|e| self.find(e, &below));
                    }
                }
                None
            }
            Logical::Lookup { input, keys, .. } => {
                if let Some(below) = self.walk(input, layout) {
                    keys.iter().for_each(|(k, _)| self.find(k, &below));
                }
                None
            }
            Logical::Join {
                left, right, equi, ..
            } => {
                let l = self.walk(left, layout);
                let r = self.walk(right, layout);
                for (a, b) in equi {
                    if let Some(l) = &l {
                        self.find(a, l);
                    }
                    if let Some(r) = &r {
                        self.find(b, r);
                    }
                }
                None
            }
            Logical::TopN { input, .. } => {
                self.walk(input, layout);
                None
            }
            Logical::Union { inputs, .. } => {
                for i in inputs {
                    self.walk(i, layout);
                }
                None
            }
        }
    }

    /// The batched calls of `e`, an expression over columns `cols` of input `input`.
    fn find(&mut self, e: &Expr, (input, cols): &(usize, Vec<Expr>)) {
        if let Some(e) = over(e, cols).filter(Expr::calls_batched) {
            self.find_over(&e, *input);
        }
    }

    /// The batched calls of `e`, an expression over the physical row of input `input`,
    /// but for those with a batched call in their arguments.
    fn find_over(&mut self, e: &Expr, input: usize) {
        e.walk(&mut |x| {
            let Expr::Udf(u, args) = x else {
                return;
            };
            let known = |c: &Call| c.input == input && c.udf == *u && c.args == *args;
            if u.f.batched()
                && !args.iter().any(Expr::calls_batched)
                && !self.calls.iter().any(known)
            {
                self.calls.push(Call {
                    input,
                    udf: u.clone(),
                    args: args.clone(),
                });
            }
        });
    }
}

/// `e`, over columns `cols`, rewritten over what the columns are (none if it reads a
/// column beyond them: it is not evaluated on these rows).
fn over(e: &Expr, cols: &[Expr]) -> Option<Expr> {
    if e.columns().iter().any(|&i| i >= cols.len()) {
        return None;
    }
    Some(e.map_columns(&|i, _| cols[i].clone()))
}
