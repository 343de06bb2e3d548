//! Rule: **push filters down**. A filter moves below a projection (rewritten over the
//! projection's input) and below a table lookup when it reads only stream columns, so
//! that it reaches the scan; a filter right above the scan then moves into the balancer
//! ([`pull_scan_filter`]): rows it rejects never leave the splitter.

use super::partitioning::trace;
use crate::expr::{and_all, conjuncts};
use crate::logical::Logical;
use crate::run::Layout;
use braid_plan::expr::Expr;
use braid_plan::types::Schema;

/// Moves filters down towards the scans: below a projection (rewritten over its input)
/// and below a table lookup when they read only stream columns. A filter that reaches a
/// scan can then move into the balancer ([`pull_scan_filter`]).
pub(crate) fn push_filters_down(l: Logical) -> Logical {
    match l {
        Logical::Filter { input, predicate } => match *input {
            Logical::Project {
                input: inner,
                exprs,
                schema,
            } => {
                let p = predicate.map_columns(&|i, _| exprs[i].clone());
                Logical::Project {
                    input: Box::new(push_filters_down(Logical::Filter {
                        input: inner,
                        predicate: p,
                    })),
                    exprs,
                    schema,
                }
            }
            Logical::Lookup {
                input: inner,
                table,
                keys,
                residual,
                kind,
                schema,
            } => {
                // Conditions on stream columns go below the lookup (the stream is the
                // preserved side of an outer lookup); the rest stay above.
                let arity = inner.schema().arity();
                let (below, above): (Vec<Expr>, Vec<Expr>) = conjuncts(predicate)
                    .into_iter()
                    .partition(|c| c.columns().iter().all(|&i| i < arity));
                let inner = match and_all(below) {
                    Some(p) => push_filters_down(Logical::Filter {
                        input: inner,
                        predicate: p,
                    }),
                    None => push_filters_down(*inner),
                };
                let lookup = Logical::Lookup {
                    input: Box::new(inner),
                    table,
                    keys,
                    residual,
                    kind,
                    schema,
                };
                match and_all(above) {
                    Some(p) => Logical::Filter {
                        input: Box::new(lookup),
                        predicate: p,
                    },
                    None => lookup,
                }
            }
            other => Logical::Filter {
                input: Box::new(push_filters_down(other)),
                predicate,
            },
        },
        other => other.map_inputs(&mut push_filters_down),
    }
}

/// Moves a filter that sits right above the (only) scan into the balancer: returns the
/// predicate over the physical row and removes the filter from the plan. A predicate
/// calling a batched function (Python's) stays, where its calls are made a batch of rows
/// at a time (the balancer evaluates a row at a time).
pub(crate) fn pull_scan_filter(l: &mut Logical, layout: &Layout, phys: &Schema) -> Option<Expr> {
    match l {
        Logical::Filter { input, predicate } => {
            if let Logical::Scan { .. } = input.as_ref() {
                if predicate.calls_batched() {
                    return None;
                }
                let traced = trace(input, predicate, layout, phys)?;
                let [(_, pred)] = traced.as_slice() else {
                    return None;
                };
                let pred = pred.clone();
                let scan = std::mem::replace(input.as_mut(), placeholder());
                *l = scan;
                return Some(pred);
            }
            pull_scan_filter(input, layout, phys)
        }
        Logical::Project { input, .. }
        | Logical::Aggregate { input, .. }
        | Logical::Lookup { input, .. } => pull_scan_filter(input, layout, phys),
        _ => None,
    }
}

fn placeholder() -> Logical {
    Logical::Union {
        inputs: vec![],
        schema: Schema::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TableDef;
    use crate::optimizer::test_plans::{col, filter, project, scan};
    use braid_plan::batch::Batch;
    use std::sync::Arc;

    #[test]
    fn a_filter_moves_below_a_projection() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let p = project(
            s.clone(),
            vec![
                (
                    col(&s, "a").bin(braid_plan::expr::BinOp::Add, col(&s, "b")),
                    "ab",
                ),
                (col(&s, "t"), "t"),
            ],
        );
        let plan = filter(p.clone(), col(&p, "ab").eq(Expr::int(3)));
        assert_eq!(
            plan.to_string(),
            "Filter (ab = 3)\n  Project (a + b) AS ab, t\n    Scan s (a int64, b int64, t int64 EVENT TIME)\n"
        );
        assert_eq!(
            push_filters_down(plan).to_string(),
            "Project (a + b) AS ab, t\n  Filter ((a + b) = 3)\n    Scan s (a int64, b int64, t int64 EVENT TIME)\n"
        );
    }

    #[test]
    fn only_stream_conditions_move_below_a_lookup() {
        let s = scan("s", 0, &["a", "t"]);
        let table = Arc::new(TableDef {
            name: "w".into(),
            schema: Schema::ints(&["k", "v"]),
            rows: Arc::new(Batch::new(2)),
        });
        let mut schema = s.schema().clone();
        schema.fields.extend(table.schema.fields.iter().cloned());
        let lookup = Logical::Lookup {
            input: Box::new(s.clone()),
            table,
            keys: vec![(col(&s, "a"), 0)],
            residual: None,
            kind: crate::logical::JoinKind::Inner,
            schema,
        };
        let on_stream = col(&lookup, "t").bin(braid_plan::expr::BinOp::Gt, Expr::int(5));
        let on_table = col(&lookup, "v").eq(Expr::int(1));
        let plan = filter(
            lookup,
            on_stream.bin(braid_plan::expr::BinOp::And, on_table),
        );
        assert_eq!(
            push_filters_down(plan).to_string(),
            "Filter (v = 1)\n  Lookup table w (0 rows) on [a = w.k]\n    Filter (t > 5)\n      Scan s (a int64, t int64 EVENT TIME)\n"
        );
    }

    #[test]
    fn a_filter_on_the_scan_moves_into_the_balancer() {
        let s = scan("s", 0, &["a", "t"]);
        let f = filter(s.clone(), col(&s, "a").eq(Expr::int(7)));
        let mut plan = project(f, vec![(col(&s, "t"), "t")]);
        let phys = s.schema().clone();
        let when = pull_scan_filter(&mut plan, &Layout::single(), &phys);
        assert_eq!(when.map(|e| e.to_string()).as_deref(), Some("(a = 7)"));
        assert_eq!(
            plan.to_string(),
            "Project t\n  Scan s (a int64, t int64 EVENT TIME)\n"
        );
    }
}
