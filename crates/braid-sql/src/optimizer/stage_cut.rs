//! Rule: **cut into stages** (`SET stages = ...`, after StreamCloud's strategies). A
//! query whose stateful operators need different partitionings is cut where they meet:
//! the part below becomes a stage of its own, whose output the next stage reads through
//! a scan of [`stage_stream`]`(k)`, repartitioned for its own keys.

use super::partitioning::partitioning;
use crate::catalog::Cut;
use crate::logical::Logical;
use crate::physical::Partitioning;
use crate::run::Layout;
use braid_plan::batch::Scalar;
use braid_plan::expr::Expr;
use braid_plan::types::Schema;

/// The name of the stream stage `k` (from 1) reads: the previous stage's output.
pub(crate) fn stage_stream(k: usize) -> String {
    format!("stage{k}")
}

fn stage_scan(k: usize, schema: &Schema) -> Logical {
    Logical::Scan {
        stream: stage_stream(k),
        input: 0,
        schema: schema.clone(),
    }
}

fn contains_stateful(l: &Logical) -> bool {
    l.is_stateful() || l.children().iter().any(|c| contains_stateful(c))
}

/// Cuts `root` into stages, lowest first. Stage `k + 1` reads stage `k`'s output through
/// a scan of [`stage_stream`]`(k)`; only single-input operators are cut below (a join
/// keeps both inputs in its stage).
pub(crate) fn cut(root: Logical, how: Cut, layout: &Layout, phys: &Schema) -> Vec<Logical> {
    let mut stages = Vec::new();
    let top = match how {
        Cut::Query => root,
        Cut::Operator => cut_every(root, &mut stages),
        Cut::Subquery => {
            let conflict = root.stateful().len() > 1
                && matches!(partitioning(&root, layout, phys), Partitioning::Single(_));
            if conflict {
                cut_stateful(root, &mut stages, layout, phys)
            } else {
                root
            }
        }
    };
    stages.push(top);
    stages
}

/// At each aggregate with state below it, the part below becomes a stage of its own.
/// A join with state in its inputs whose keys cannot share their partitioning (a join
/// of two aggregates on their counts) gets its inputs computed in a stage of their own
/// ([`wide_union`]), then joins them in the next. `layout` and `phys` describe the
/// source (the first stage's input).
fn cut_stateful(l: Logical, stages: &mut Vec<Logical>, layout: &Layout, phys: &Schema) -> Logical {
    match l {
        Logical::Aggregate {
            phase,
            input,
            window,
            keys,
            aggs,
            schema,
        } if contains_stateful(&input) => {
            let below = cut_stateful(*input, stages, layout, phys);
            let s = below.schema().clone();
            stages.push(below);
            Logical::Aggregate {
                phase,
                input: Box::new(stage_scan(stages.len(), &s)),
                window,
                keys,
                aggs,
                schema,
            }
        }
        // A top-N after an aggregate keyed otherwise: the aggregate is a stage.
        Logical::TopN {
            input,
            partition,
            window,
            order,
            limit,
            schema,
        } if contains_stateful(&input) => {
            let below = cut_stateful(*input, stages, layout, phys);
            let s = below.schema().clone();
            stages.push(below);
            Logical::TopN {
                input: Box::new(stage_scan(stages.len(), &s)),
                partition,
                window,
                order,
                limit,
                schema,
            }
        }
        Logical::Join { .. } if stages.is_empty() => match cut_join(&l, layout, phys) {
            Some((below, join)) => {
                stages.push(below);
                join(stages.len())
            }
            None => l,
        },
        // Any other join keeps both its inputs in its stage.
        other if other.has_single_input() => {
            other.map_inputs(&mut |i| cut_stateful(i, stages, layout, phys))
        }
        other => other,
    }
}

/// A join stage over the two stage inputs, given the stage number it reads.
type JoinOver = Box<dyn FnOnce(usize) -> Logical>;

/// For a join whose inputs hold state its keys cannot share a partitioning with: the
/// stage computing both inputs ([`wide_union`]) and the join over that stage's output.
/// None when the join needs no cut (its subtree partitions as one stage), has no keys,
/// an input has no event time, or the inputs cannot be one stage either.
fn cut_join(l: &Logical, layout: &Layout, phys: &Schema) -> Option<(Logical, JoinOver)> {
    let fits = |x: &Logical| !matches!(partitioning(x, layout, phys), Partitioning::Single(_));
    let Logical::Join {
        left,
        right,
        equi,
        residual,
        window,
        kind,
        schema,
    } = l
    else {
        return None;
    };
    if equi.is_empty() || !(contains_stateful(left) || contains_stateful(right)) || fits(l) {
        return None;
    }
    let below = wide_union(left, right).filter(|b| fits(b))?;
    let (ls, rs) = (left.schema().clone(), right.schema().clone());
    let (equi, residual, window, kind, schema) = (
        equi.clone(),
        residual.clone(),
        window.clone(),
        *kind,
        schema.clone(),
    );
    let join: JoinOver = Box::new(move |k| {
        let scan = |input, schema: &Schema| {
            Box::new(Logical::Scan {
                stream: stage_stream(k),
                input,
                schema: schema.clone(),
            })
        };
        Logical::Join {
            left: scan(0, &ls),
            right: scan(1, &rs),
            equi,
            residual,
            window,
            kind,
            schema,
        }
    });
    Some((below, join))
}

/// Both inputs of a join as one stream, tagged like an interleave of two sources (see
/// `braid_plan::interleave`): `_stream` (0 left, 1 right), `_time` (the row's event time),
/// the left columns, then the right columns, the other side's null. The next stage
/// reads it with [`crate::physical::stage_layout`]. None if an input has no event time.
fn wide_union(left: &Logical, right: &Logical) -> Option<Logical> {
    let (ls, rs) = (left.schema(), right.schema());
    let (lt, rt) = (ls.event_time?, rs.event_time?);
    let wide = braid_plan::interleave::wide(&[("left", ls), ("right", rs)]);
    let null = |ty| Expr::Cast(Box::new(Expr::Literal(Scalar::Null)), ty);
    let side = |input: &Logical, tag: i64, time: usize, before: &Schema, after: &Schema| {
        let own = input.schema();
        let mut exprs = vec![
            Expr::int(tag),
            Expr::Column(time, own.fields[time].name.clone()),
        ];
        exprs.extend(before.fields.iter().map(|f| null(f.ty)));
        exprs.extend(
            own.fields
                .iter()
                .enumerate()
                .map(|(i, f)| Expr::Column(i, f.name.clone())),
        );
        exprs.extend(after.fields.iter().map(|f| null(f.ty)));
        Logical::Project {
            input: Box::new(input.clone()),
            exprs,
            schema: wide.clone(),
        }
    };
    let empty = Schema::new(Vec::new());
    Some(Logical::Union {
        inputs: vec![
            side(left, 0, lt, &empty, rs),
            side(right, 1, rt, ls, &empty),
        ],
        schema: wide.clone(),
    })
}

/// Every single-input operator becomes a stage of its own.
fn cut_every(l: Logical, stages: &mut Vec<Logical>) -> Logical {
    if !l.has_single_input() {
        return l;
    }
    l.map_inputs(&mut |input| {
        let inner = cut_every(input, stages);
        if matches!(inner, Logical::Scan { .. }) {
            return inner;
        }
        let s = inner.schema().clone();
        stages.push(inner);
        stage_scan(stages.len(), &s)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::test_plans::{col, count_by, filter, project, scan};

    fn stages(l: Logical, how: Cut) -> String {
        let phys = scan("s", 0, &["a", "b", "t"]).schema().clone();
        cut(l, how, &Layout::single(), &phys)
            .iter()
            .enumerate()
            .map(|(k, s)| format!("stage {}:\n{s}", k + 1))
            .collect()
    }

    #[test]
    fn conflicting_aggregates_are_cut_into_two_stages() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let plan = count_by(count_by(s, &["a", "b"]), &["b"]);
        assert_eq!(
            stages(plan, Cut::Subquery),
            "stage 1:\n\
             Aggregate window=TUMBLE(10) keys=[a, b] aggs=[count(*)]\n  \
             Scan s (a int64, b int64, t int64 EVENT TIME)\n\
             stage 2:\n\
             Aggregate window=TUMBLE(10) keys=[b] aggs=[count(*)]\n  \
             Scan stage1 (window_start int64, window_end int64 EVENT TIME, a int64?, b int64?, n int64?)\n"
        );
    }

    #[test]
    fn aggregates_that_share_keys_stay_in_one_stage() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let plan = count_by(count_by(s, &["b"]), &["b"]);
        assert_eq!(
            stages(plan.clone(), Cut::Subquery),
            format!("stage 1:\n{plan}")
        );
    }

    #[test]
    fn every_operator_its_own_stage() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let f = filter(s.clone(), col(&s, "a").eq(Expr::int(1)));
        let plan = project(f, vec![(col(&s, "b"), "b")]);
        assert_eq!(
            stages(plan, Cut::Operator),
            "stage 1:\n\
             Filter (a = 1)\n  Scan s (a int64, b int64, t int64 EVENT TIME)\n\
             stage 2:\n\
             Project b\n  Scan stage1 (a int64, b int64, t int64 EVENT TIME)\n"
        );
    }
}
