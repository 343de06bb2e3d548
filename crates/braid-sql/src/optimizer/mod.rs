//! Rewrites of a query's [`Logical`](crate::logical::Logical) plan before it runs, one
//! rule per file, applied in this order:
//!
//! 1. [`filter_pushdown`]: filters move down to the scans (and, per stage, into the
//!    balancer);
//! 1. [`two_phase`](mod@two_phase): an aggregate whose accumulators combine exactly
//!    becomes a partial aggregate where the rows are and a final one by group (with
//!    `SET aggregate = 'two_phase'`, the default, in a parallel query cut by subquery);
//! 2. [`stage_cut`]: a query whose stateful operators need different partitionings is
//!    cut into stages;
//! 3. [`partitioning`](mod@partitioning): each stage's input is spread over partitions by what its
//!    stateful operators need.
//!
//! Each rule's tests compare the indented plan text before and after.

pub(crate) mod filter_pushdown;
pub(crate) mod partitioning;
pub(crate) mod stage_cut;
pub(crate) mod two_phase;

pub(crate) use filter_pushdown::{pull_scan_filter, push_filters_down};
pub(crate) use partitioning::partitioning;
pub(crate) use stage_cut::cut;
pub(crate) use two_phase::two_phase;

/// Small plans for the rules' tests, built by hand over streams of int64 columns.
#[cfg(test)]
mod test_plans {
    use crate::logical::{aggregate_schema, AggCall, AggFunc, Logical, WindowSpec};
    use braid_plan::expr::Expr;
    use braid_plan::types::{DataType, Field, Schema};

    /// `Scan stream` of input `input`, event time `t` when it has one.
    pub fn scan(stream: &str, input: usize, cols: &[&str]) -> Logical {
        let mut schema = Schema::ints(cols);
        if cols.contains(&"t") {
            schema = schema.with_event_time("t").expect("t is an int64 column");
        }
        Logical::Scan {
            stream: stream.into(),
            input,
            schema,
        }
    }

    /// Column `name` of `l`'s output.
    pub fn col(l: &Logical, name: &str) -> Expr {
        Expr::col(l.schema(), name).expect("column exists")
    }

    pub fn filter(input: Logical, predicate: Expr) -> Logical {
        Logical::Filter {
            input: Box::new(input),
            predicate,
        }
    }

    /// A projection of `(expression, name)` pairs, all int64.
    pub fn project(input: Logical, cols: Vec<(Expr, &str)>) -> Logical {
        let fields = cols
            .iter()
            .map(|(_, n)| Field::nullable(n, DataType::Int64))
            .collect();
        let t = input.schema().event_time;
        let exprs: Vec<Expr> = cols.into_iter().map(|(e, _)| e).collect();
        let event_time = exprs
            .iter()
            .position(|e| matches!(e, Expr::Column(i, _) if Some(*i) == t));
        Logical::Project {
            input: Box::new(input),
            exprs,
            schema: Schema { fields, event_time },
        }
    }

    /// `count(*)` per key column over tumbling windows of 10.
    pub fn count_by(input: Logical, keys: &[&str]) -> Logical {
        let key_exprs: Vec<Expr> = keys.iter().map(|k| col(&input, k)).collect();
        let names: Vec<(String, DataType)> = keys
            .iter()
            .map(|k| (k.to_string(), DataType::Int64))
            .collect();
        Logical::Aggregate {
            phase: crate::logical::AggPhase::Whole,
            input: Box::new(input),
            window: WindowSpec::Tumble { size: 10 },
            keys: key_exprs,
            aggs: vec![AggCall {
                func: AggFunc::CountStar,
                arg: None,
                filter: None,
                ty: DataType::Int64,
            }],
            schema: aggregate_schema(&names, &[("n".into(), DataType::Int64)]),
        }
    }
}
