//! Joins in FROM: a stream with a table (a lookup by equality keys), and two streams
//! (equality keys, and a window: bounds on the time difference, or `LAST` count
//! windows on both sides).

use super::relation::Rel;
use super::scope::Scope;
use super::{concat_schema, outer, Planner};
use crate::catalog::TableDef;
use crate::expr::{and_all, conjuncts};
use crate::located::At;
use crate::logical::{JoinKind, JoinWindow, Logical};
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::{BinOp, Expr};
use braid_plan::types::{DataType, Schema};
use sqlparser::ast::{self, Spanned};
use std::sync::Arc;

/// One input of a join: its plan, its names, and `n` when it is `LAST(stream, n)`.
pub(super) type Side = (Logical, Scope, Option<u64>);

/// The conjuncts of a stream join's condition, sorted by what they do.
struct Condition {
    /// Equality keys: (expression over the left input, expression over the right).
    equi: Vec<(Expr, Expr)>,
    /// Lower bound of `right.time - left.time`.
    lo: Option<i64>,
    /// Upper bound of `right.time - left.time`.
    hi: Option<i64>,
    /// Everything else, over the joined row.
    rest: Vec<Expr>,
}

impl Planner<'_> {
    /// `left [INNER | LEFT | RIGHT | FULL] JOIN right ON ...`.
    pub(super) fn join(
        &mut self,
        left: Side,
        right: Rel,
        j: &ast::Join,
    ) -> Result<(Logical, Scope)> {
        let (kind, on) = self.join_kind(j)?;
        let (plan, scope) = match right {
            Rel::Table(table, alias) => {
                if matches!(kind, JoinKind::Right | JoinKind::Full) {
                    return Err(Error::NotSupported(
                        "a RIGHT or FULL JOIN with a table (its rows without a stream partner would be known only at the end of the input); write `stream LEFT JOIN table`".into(),
                    )
                    .at(self.text, j.relation.span()));
                }
                self.lookup(left, table, &alias, on, j)?
            }
            Rel::Stream {
                window: Some(_), ..
            } => return Err(window_join().at(self.text, j.relation.span())),
            Rel::Stream {
                plan, scope, last, ..
            } => {
                if kind != JoinKind::Inner && (left.2.is_some() || last.is_some()) {
                    return Err(Error::NotSupported(
                        "an outer join of count windows (LAST): a row leaves a count window whenever newer rows push it out, so when it has met no partner is not defined by event time; write [INNER] JOIN".into(),
                    )
                    .at(self.text, j.relation.span()));
                }
                self.stream_join(left, (plan, scope, last), on, j)?
            }
        };
        Ok((outer::pad(plan, kind), scope))
    }

    /// A stream joined with a table: the condition needs an equality between a stream
    /// expression and a table column.
    fn lookup(
        &self,
        (lplan, lscope, llast): Side,
        table: Arc<TableDef>,
        alias: &str,
        on: &ast::Expr,
        j: &ast::Join,
    ) -> Result<(Logical, Scope)> {
        if llast.is_some() {
            return Err(
                Error::Plan("LAST(...) joins another LAST(...), not a table".into())
                    .at(self.text, j.relation.span()),
            );
        }
        let tscope = Scope::of(&table.schema, Some(alias));
        let scope = lscope.concat(&tscope);
        let mut schema = concat_schema(lplan.schema(), &table.schema);
        let cond = self.bool_expr(on, &scope, &schema, "ON")?;
        let la = lplan.schema().arity();
        let (keys, rest) = lookup_keys(cond, la, &schema);
        if keys.is_empty() {
            return Err(Error::Plan(format!(
                "a join with table `{}` needs an equality between a stream expression and a table column of the same type (not DOUBLE)",
                table.name
            ))
            .at(self.text, on.span()));
        }
        for f in &mut schema.fields[la..] {
            f.nullable = true;
        }
        Ok((
            Logical::Lookup {
                input: Box::new(lplan),
                table,
                keys,
                residual: and_all(rest),
                kind: JoinKind::Inner,
                schema,
            },
            scope,
        ))
    }

    /// Two streams joined: by an interval of their time difference, or by count windows
    /// when both sides are `LAST(...)`.
    fn stream_join(
        &self,
        (lplan, lscope, llast): Side,
        (rplan, rscope, rlast): Side,
        on: &ast::Expr,
        j: &ast::Join,
    ) -> Result<(Logical, Scope)> {
        let scope = lscope.concat(&rscope);
        let mut schema = concat_schema(lplan.schema(), rplan.schema());
        let cond = self.bool_expr(on, &scope, &schema, "ON")?;
        let la = lplan.schema().arity();
        let lt = lplan.schema().event_time;
        let rt = rplan.schema().event_time.map(|t| t + la);
        let (equi, rest, window) = match (llast, rlast) {
            // Count windows meet every pair: the whole condition is the residual, as
            // written (no key or time bound is taken out of it).
            (Some(l), Some(r)) => (
                Vec::new(),
                vec![cond],
                JoinWindow::Count { left: l, right: r },
            ),
            (None, None) => {
                let c = split_condition(cond, la, lt, rt, &schema);
                match (c.lo, c.hi) {
                    (Some(lo), Some(hi)) if lo <= hi => {
                        (c.equi, c.rest, JoinWindow::Interval { lo, hi })
                    }
                    (Some(_), Some(_)) => return Err(Error::Plan(
                        "the join's time bounds admit no pair (lower bound above upper bound)"
                            .into(),
                    )
                    .at(self.text, on.span())),
                    _ => return Err(Error::Plan(
                        "a join of two streams needs a window: bound the time difference both ways (`b.t BETWEEN a.t - 10 AND a.t + 10`) or join count windows LAST(a, n) JOIN LAST(b, m)".into(),
                    )
                    .at(self.text, on.span())),
                }
            }
            _ => {
                return Err(
                    Error::Plan("LAST(...) must be used on both sides of the join".into())
                        .at(self.text, j.relation.span()),
                )
            }
        };
        schema.event_time = lt;
        Ok((
            Logical::Join {
                left: Box::new(lplan),
                right: Box::new(rplan),
                equi,
                residual: and_all(rest),
                window,
                kind: JoinKind::Inner,
                schema,
            },
            scope,
        ))
    }
}

/// The lookup keys of a table join's condition over `stream columns (la of them), then
/// table columns`: (stream expression, table column) per equality of one type (see
/// [`keyable`]); the rest.
fn lookup_keys(cond: Expr, la: usize, schema: &Schema) -> (Vec<(Expr, usize)>, Vec<Expr>) {
    let mut keys = Vec::new();
    let mut rest = Vec::new();
    for c in conjuncts(cond) {
        if let Expr::Binary(BinOp::Eq, a, b) = &c {
            if !keyable(a, b, schema) {
                rest.push(c);
                continue;
            }
            let side = |e: &Expr| {
                let cols = e.columns();
                if !cols.is_empty() && cols.iter().all(|&i| i < la) {
                    Some(0)
                } else if cols.len() == 1 && cols[0] >= la && matches!(e, Expr::Column(..)) {
                    Some(1)
                } else {
                    None
                }
            };
            match (side(a), side(b)) {
                (Some(0), Some(1)) => {
                    keys.push((*a.clone(), b.columns()[0] - la));
                    continue;
                }
                (Some(1), Some(0)) => {
                    keys.push((*b.clone(), a.columns()[0] - la));
                    continue;
                }
                _ => {}
            }
        }
        rest.push(c);
    }
    (keys, rest)
}

/// Sorts an interval join's condition (over left columns, `la` of them, then right
/// ones) into time bounds (when both sides have event times `lt` and `rt`), equality
/// keys and the rest. Several bounds on one side keep the tightest; whatever is not a
/// bound or a key stays in the rest, so every conjunct is applied.
fn split_condition(
    cond: Expr,
    la: usize,
    lt: Option<usize>,
    rt: Option<usize>,
    schema: &Schema,
) -> Condition {
    let mut c = Condition {
        equi: Vec::new(),
        lo: None,
        hi: None,
        rest: Vec::new(),
    };
    for e in conjuncts(cond) {
        if let Expr::Binary(op, a, b) = &e {
            if let (Some(lt), Some(rt)) = (lt, rt) {
                if let Some((l, h)) = time_bound(*op, a, b, lt, rt) {
                    if let Some(l) = l {
                        c.lo = Some(c.lo.map_or(l, |x: i64| x.max(l)));
                    }
                    if let Some(h) = h {
                        c.hi = Some(c.hi.map_or(h, |x: i64| x.min(h)));
                    }
                    continue;
                }
            }
            if *op == BinOp::Eq && keyable(a, b, schema) {
                let ca = a.columns();
                let cb = b.columns();
                let left_only = |v: &[usize]| !v.is_empty() && v.iter().all(|&i| i < la);
                let right_only = |v: &[usize]| !v.is_empty() && v.iter().all(|&i| i >= la);
                let shift = |e: &Expr| e.map_columns(&|i, n| Expr::Column(i - la, n.to_string()));
                if left_only(&ca) && right_only(&cb) {
                    c.equi.push((*a.clone(), shift(b)));
                    continue;
                }
                if right_only(&ca) && left_only(&cb) {
                    c.equi.push((*b.clone(), shift(a)));
                    continue;
                }
            }
        }
        c.rest.push(e);
    }
    c
}

/// Whether `a = b` can be a join key: rows meet when their keys are the same value,
/// which is what `=` says only when both sides have one type and it is not DOUBLE
/// (`1 = 1.0` and `0.0 = -0.0` hold, `NaN = NaN` does not). Other equalities stay
/// conditions of the pair.
fn keyable(a: &Expr, b: &Expr, schema: &Schema) -> bool {
    match (a.data_type(schema), b.data_type(schema)) {
        (Ok(x), Ok(y)) => x == y && x != DataType::Float64,
        _ => false,
    }
}

/// `side ± constant` for a time column: (is_right, constant).
fn linear(e: &Expr, lt: usize, rt: usize) -> Option<(bool, i64)> {
    match e {
        Expr::Column(i, _) if *i == lt => Some((false, 0)),
        Expr::Column(i, _) if *i == rt => Some((true, 0)),
        Expr::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            let (side, c) = linear(a, lt, rt)?;
            let Expr::Literal(Scalar::Int(k)) = b.as_ref() else {
                return None;
            };
            // A constant beyond int64 is left to the condition (which faults).
            let c = if *op == BinOp::Add {
                c.checked_add(*k)
            } else {
                c.checked_sub(*k)
            };
            Some((side, c?))
        }
        _ => None,
    }
}

/// Bounds on `d = right.time - left.time` implied by `a op b`, if it compares the two
/// time columns (plus constants).
fn time_bound(
    op: BinOp,
    a: &Expr,
    b: &Expr,
    lt: usize,
    rt: usize,
) -> Option<(Option<i64>, Option<i64>)> {
    let (sa, ca) = linear(a, lt, rt)?;
    let (sb, cb) = linear(b, lt, rt)?;
    if sa == sb {
        return None;
    }
    // Normalise to `d op k`.
    let (op, k) = if sa {
        // r + ca op l + cb  =>  d op cb - ca
        (op, cb.checked_sub(ca)?)
    } else {
        // l + ca op r + cb  =>  -d op cb - ca  =>  d flip(op) ca - cb
        let flipped = match op {
            BinOp::Lt => BinOp::Gt,
            BinOp::LtEq => BinOp::GtEq,
            BinOp::Gt => BinOp::Lt,
            BinOp::GtEq => BinOp::LtEq,
            other => other,
        };
        (flipped, ca.checked_sub(cb)?)
    };
    Some(match op {
        BinOp::GtEq => (Some(k), None),
        BinOp::Gt => (Some(k.checked_add(1)?), None),
        BinOp::LtEq => (None, Some(k)),
        BinOp::Lt => (None, Some(k.checked_sub(1)?)),
        BinOp::Eq => (Some(k), Some(k)),
        _ => return None,
    })
}

/// A window table function in a join (Flink's window join) is not built.
pub(super) fn window_join() -> Error {
    Error::NotSupported(
        "a window table function in a join (a window join); join the streams, then GROUP BY TUMBLE(time, size)".into(),
    )
}
