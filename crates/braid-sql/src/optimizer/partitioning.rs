//! Rule: **choose the partitioning**. How a stage's input is spread over partitions
//! follows its stateful operators: any partition when there is none (each window stays
//! whole on the worker that splits it), a hash of the group-by keys for an aggregate, a
//! hash of the equi-join keys for a keyed stream join, and a sqrt(N) x sqrt(N) grid for
//! a join without keys. Every key is traced down to the physical row ([`trace`]);
//! operators whose keys trace to the same input columns share one partitioning. State
//! that cannot be partitioned (an aggregate without keys, count windows, conflicting
//! keys) runs in one partition, and EXPLAIN says why.

use crate::logical::{AggPhase, JoinKind, JoinWindow, Logical};
use crate::physical::Partitioning;
use crate::run::route::{equi_floats, key_hash};
use crate::run::Layout;
use braid_plan::expr::{Expr, Func};
use braid_plan::types::{DataType, Schema};

/// Where expression `e` over the output of `l` comes from in the physical row, per
/// input stream; None if it depends on state (an aggregate or join) or a table.
pub(super) fn trace(
    l: &Logical,
    e: &Expr,
    layout: &Layout,
    phys: &Schema,
) -> Option<Vec<(usize, Expr)>> {
    match l {
        Logical::Scan { input, .. } => {
            let off = layout.inputs.get(*input)?.1;
            Some(vec![(
                *input,
                e.map_columns(&|i, _| Expr::Column(off + i, phys.fields[off + i].name.clone())),
            )])
        }
        Logical::Filter { input, .. }
        | Logical::Sort { input, .. }
        | Logical::Limit { input, .. } => trace(input, e, layout, phys),
        // A top-N keeps its input's rows where they are; its row number traces nowhere.
        Logical::TopN { input, .. } => {
            match e.columns().iter().all(|&c| c < input.schema().arity()) {
                true => trace(input, e, layout, phys),
                false => None,
            }
        }
        Logical::Project { input, exprs, .. } => {
            let sub = e.map_columns(&|i, _| exprs[i].clone());
            trace(input, &sub, layout, phys)
        }
        Logical::Union { inputs, .. } => {
            let mut all = Vec::new();
            for c in inputs {
                all.extend(trace(c, e, layout, phys)?);
            }
            Some(all)
        }
        Logical::Lookup { input, .. } => {
            let arity = input.schema().arity();
            if e.columns().iter().all(|&c| c < arity) {
                trace(input, e, layout, phys)
            } else {
                None
            }
        }
        // A partial aggregate's rows of a group are in every partition.
        Logical::Aggregate {
            phase: AggPhase::Partial,
            ..
        } => None,
        // Rows of one group stay in one partition, and so do the aggregate's rows for
        // it: an expression over group-key columns traces to the keys' inputs.
        Logical::Aggregate { input, keys, .. } => {
            let cols = e.columns();
            if cols.is_empty() || !cols.iter().all(|&c| (2..2 + keys.len()).contains(&c)) {
                return None;
            }
            trace(
                input,
                &e.map_columns(&|c, _| keys[c - 2].clone()),
                layout,
                phys,
            )
        }
        // A keyed join's output rows live where their left (and right) rows do: an
        // expression over one side's columns traces into that side. (A join without
        // keys copies rows over a grid, so nothing traces through it; `partitioning`
        // never combines a grid with another operator.)
        // An outer join's padded rows have nulls where the other side's key was, and
        // live where their own row does: only a preserved side's columns trace.
        Logical::Join {
            left,
            right,
            equi,
            kind,
            ..
        } if !equi.is_empty() => {
            let cols = e.columns();
            let la = left.schema().arity();
            if cols.is_empty() {
                None
            } else if cols.iter().all(|&c| c < la) && !kind.keeps(1) {
                trace(left, e, layout, phys)
            } else if cols.iter().all(|&c| c >= la) && !kind.keeps(0) {
                let shifted = e.map_columns(&|c, _| {
                    Expr::Column(c - la, right.schema().fields[c - la].name.clone())
                });
                trace(right, &shifted, layout, phys)
            } else {
                None
            }
        }
        Logical::Join { .. } => None,
    }
}

/// Key expressions an input's rows must be hashed by, with which of them are floats.
type Keys = (usize, Vec<Expr>, Vec<bool>);

/// Per input, the one key requirement of all of `needs`; None if an input has two.
fn merge_keys(needs: Vec<Keys>) -> Option<Vec<Keys>> {
    let mut merged: Vec<Keys> = Vec::new();
    for (i, ks, fl) in needs {
        match merged.iter().find(|(j, _, _)| *j == i) {
            Some((_, prev, pf)) if *prev != ks || *pf != fl => return None,
            Some(_) => {}
            None => merged.push((i, ks, fl)),
        }
    }
    Some(merged)
}

/// One route expression from per-input key requirements: `hash(k...)`, or a CASE on
/// the input tag when inputs differ.
fn route_of_keys(merged: Vec<Keys>, layout: &Layout) -> Option<Expr> {
    match (layout.tag, merged.as_slice()) {
        (_, []) => None,
        (None, [(_, ks, fl), ..]) => Some(key_hash(ks, fl)),
        (Some(_), [(_, ks, fl)]) if layout.inputs.len() == 1 => Some(key_hash(ks, fl)),
        (Some(tag), _) => {
            let arms = merged
                .iter()
                .map(|(i, ks, fl)| {
                    let cond =
                        Expr::Column(tag, "_stream".into()).eq(Expr::int(layout.inputs[*i].0));
                    (cond, key_hash(ks, fl))
                })
                .collect();
            // Rows of streams no stateful operator keys (a stateless branch of a union)
            // may go anywhere: spread them by time. Without this arm the CASE is null
            // for them and the split would omit them.
            let spread = (merged.len() < layout.inputs.len()).then(|| {
                let t = braid_plan::interleave::TIME_COLUMN;
                Box::new(Expr::Call(
                    Func::Hash,
                    vec![Expr::Column(t, "_time".into())],
                ))
            });
            Some(Expr::Case(arms, spread))
        }
    }
}

fn trace_keys(
    l: &Logical,
    keys: &[Expr],
    layout: &Layout,
    phys: &Schema,
) -> Option<Vec<(usize, Vec<Expr>)>> {
    let mut per: Vec<(usize, Vec<Expr>)> = Vec::new();
    for k in keys {
        let t = trace(l, k, layout, phys)?;
        for (i, e) in t {
            match per
                .iter_mut()
                .find(|(j, v)| *j == i && v.len() < keys.len())
            {
                Some((_, v)) => v.push(e),
                None => per.push((i, vec![e])),
            }
        }
    }
    per.iter()
        .all(|(_, v)| v.len() == keys.len())
        .then_some(per)
}

/// Which of `keys` (over `input`'s output) are floats: hashed as floats.
fn floats(keys: &[Expr], input: &Logical) -> Vec<bool> {
    keys.iter()
        .map(|k| k.data_type(input.schema()) == Ok(DataType::Float64))
        .collect()
}

/// What one stateful operator needs of the balancer.
enum Need {
    /// Rows of each input hashed by these keys.
    Keys(Vec<Keys>, &'static str),
    /// A grid, or one partition: nothing else can be combined with it.
    Only(Partitioning),
}

/// What stateful operator `l` needs.
fn need(l: &Logical, layout: &Layout, phys: &Schema) -> Need {
    let keyed = |per: Option<Vec<(usize, Vec<Expr>)>>, float: Vec<bool>| {
        per.map(|p| {
            p.into_iter()
                .map(|(i, ks)| (i, ks, float.clone()))
                .collect::<Vec<Keys>>()
        })
    };
    match l {
        // Partial accumulators may be anywhere: the rows stay where they are.
        Logical::Aggregate {
            phase: AggPhase::Partial,
            ..
        } => Need::Only(Partitioning::Partial),
        // A final aggregate combines a window's partials of a group: hashed by the
        // window and the keys (a window's start tells windows apart; an aggregate
        // without keys spreads its windows).
        Logical::Aggregate {
            phase: AggPhase::Final,
            keys,
            input,
            ..
        } => {
            let mut by = vec![Expr::Column(0, input.schema().fields[0].name.clone())];
            by.extend(keys.iter().cloned());
            match keyed(trace_keys(input, &by, layout, phys), floats(&by, input)) {
                Some(k) => Need::Keys(k, "window and group-by keys of the partial aggregates"),
                None => Need::Only(Partitioning::Single(
                    "the partial aggregates' keys are computed from a table".into(),
                )),
            }
        }
        Logical::Aggregate { keys, input, .. } => {
            if keys.is_empty() {
                return Need::Only(Partitioning::Single(
                    "an aggregate without GROUP BY keys sees every row".into(),
                ));
            }
            match keyed(trace_keys(input, keys, layout, phys), floats(keys, input)) {
                Some(k) => Need::Keys(k, "group-by keys"),
                None => Need::Only(Partitioning::Single(
                    "the group-by keys are computed from a table, a join without keys or an aggregate's results".into(),
                )),
            }
        }
        Logical::Join {
            left,
            right,
            equi,
            window,
            kind,
            ..
        } => {
            if let JoinWindow::Count { .. } = window {
                return Need::Only(Partitioning::Single(
                    "count windows (LAST) hold each stream's last rows in arrival order".into(),
                ));
            }
            let (li, ri) = (left.inputs(), right.inputs());
            if li.iter().any(|i| ri.contains(i)) {
                return Need::Only(Partitioning::Single("a stream joined with itself".into()));
            }
            if equi.is_empty() && *kind != JoinKind::Inner {
                return Need::Only(Partitioning::Single(
                    "an outer join without equality keys: whether a row met a partner is known only where all its pairs meet".into(),
                ));
            }
            if equi.is_empty() {
                return Need::Only(match (layout.tag, ri.as_slice()) {
                    (Some(tag), [r]) => Partitioning::Grid {
                        left: Expr::Column(tag, "_stream".into())
                            .bin(braid_plan::expr::BinOp::NotEq, Expr::int(layout.inputs[*r].0)),
                        why: "a join without equality keys must meet every pair of rows: sqrt(N) x sqrt(N) grid".into(),
                    },
                    _ => Partitioning::Single(
                        "a join without keys whose right side reads several streams".into(),
                    ),
                });
            }
            let lk: Vec<Expr> = equi.iter().map(|e| e.0.clone()).collect();
            let rk: Vec<Expr> = equi.iter().map(|e| e.1.clone()).collect();
            let float = equi_floats(left.schema(), right.schema(), equi);
            let per = trace_keys(left, &lk, layout, phys).and_then(|mut l| {
                l.extend(trace_keys(right, &rk, layout, phys)?);
                Some(l)
            });
            match keyed(per, float) {
                Some(k) => Need::Keys(k, "equi-join keys"),
                None => Need::Only(Partitioning::Single(
                    "the join keys are computed from an aggregate's results or a join without keys"
                        .into(),
                )),
            }
        }
        Logical::TopN {
            input,
            partition,
            window,
            ..
        } => {
            // The window's bounds are the same for every group of a window: the other
            // PARTITION BY columns must trace to the input, or one partition sees all.
            let keys: Vec<Expr> = partition
                .iter()
                .filter(|c| !window.contains(c))
                .map(|&c| Expr::Column(c, input.schema().fields[c].name.clone()))
                .collect();
            let per = match keys.is_empty() {
                true => None,
                false => keyed(trace_keys(input, &keys, layout, phys), floats(&keys, input)),
            };
            match per {
                Some(k) => Need::Keys(k, "top-N partition keys"),
                None => Need::Only(Partitioning::Single(
                    "a window top-N ranks every group of a window (PARTITION BY only the window, or by keys that are not the input's)".into(),
                )),
            }
        }
        _ => Need::Only(Partitioning::Stateless),
    }
}

/// Decides the partitioning of `root`: any partition without state; otherwise every
/// stateful operator's key requirement per input stream, merged. Operators whose keys
/// trace to the same input columns (an aggregate over a join by the join key, a join
/// of aggregates on their group keys, two aggregates by one key) share one
/// partitioning; when requirements conflict the query needs stages (the stage-cut rule).
pub(crate) fn partitioning(root: &Logical, layout: &Layout, phys: &Schema) -> Partitioning {
    let stateful = root.stateful();
    if stateful.is_empty() {
        return Partitioning::Stateless;
    }
    let needs: Vec<Need> = stateful.iter().map(|l| need(l, layout, phys)).collect();
    let conflict = || {
        Partitioning::Single(format!(
            "{} stateful operators need different partitionings",
            stateful.len()
        ))
    };
    let mut all = Vec::new();
    let mut whys: Vec<&str> = Vec::new();
    for n in needs {
        match n {
            Need::Only(p) if stateful.len() == 1 => return p,
            Need::Only(_) => return conflict(),
            Need::Keys(k, why) => {
                all.extend(k);
                if !whys.contains(&why) {
                    whys.push(why);
                }
            }
        }
    }
    match merge_keys(all).and_then(|m| route_of_keys(m, layout)) {
        Some(route) => Partitioning::Hash {
            route,
            why: whys.join(", "),
        },
        None => conflict(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::test_plans::{col, count_by, filter, scan};

    /// The rule's choice for `l`, over the physical row of its (only) scan.
    fn part(l: &Logical) -> String {
        partitioning(l, &Layout::single(), leaf(l)).to_string()
    }

    fn leaf(l: &Logical) -> &Schema {
        match l.children().first() {
            Some(c) => leaf(c),
            None => l.schema(),
        }
    }

    #[test]
    fn stateless_queries_go_to_any_partition() {
        let s = scan("s", 0, &["a", "t"]);
        let plan = filter(s.clone(), col(&s, "a").eq(Expr::int(1)));
        assert_eq!(
            part(&plan),
            "any partition (no operator keeps state: each window whole on the worker that splits it)"
        );
    }

    #[test]
    fn an_aggregate_hashes_its_group_keys() {
        let s = scan("s", 0, &["a", "b", "t"]);
        assert_eq!(
            part(&count_by(s.clone(), &["b"])),
            "hash hash(b) (group-by keys)"
        );
        assert_eq!(
            part(&count_by(s, &[])),
            "single partition: an aggregate without GROUP BY keys sees every row"
        );
    }

    #[test]
    fn aggregates_keyed_differently_conflict() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let inner = count_by(s, &["a", "b"]);
        let outer = count_by(inner, &["b"]);
        assert_eq!(
            part(&outer),
            "single partition: 2 stateful operators need different partitionings"
        );
    }
}
