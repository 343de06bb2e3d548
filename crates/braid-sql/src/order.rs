//! `ORDER BY` and `LIMIT` of a whole query. A LIMIT stops the query's sink after n
//! rows. An ORDER BY is taken for a query whose rows are a windowed aggregate's (TUMBLE, HOP,
//! CUMULATE, SESSION; GROUP BY or window table function, a window top-N above it):
//! the windows of a stream close in the order of their ends, so an ORDER BY that
//! starts with the window (`window_end`, or `window_start` where it gives the same
//! order) needs no more than the rows of the windows that close together, which the
//! transparent merge already collects per epoch. The query's last merge becomes a
//! sorted one (`MergeKind::Sorted`): each epoch's closed windows by the ORDER BY, so
//! the output is the same serially and on any number of workers. Any other ORDER BY
//! would need the whole stream: refused by name.
//!
//! Both are steps of the query's logical plan ([`Logical::Sort`], [`Logical::Limit`],
//! which EXPLAIN shows), at its top; the rule [`physical::lower_top`] lowers them onto
//! the physical plan.

use crate::catalog::SinkDef;
use crate::located::At;
use crate::logical::{Logical, WindowSpec};
use crate::physical;
use crate::script::{Job, Script};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::plan::SortKey;
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};

/// A query's job (see [`crate::statement`]): the query without its ORDER BY and LIMIT
/// planned, then its plan topped by the steps [`Logical::Sort`] and [`Logical::Limit`]
/// (checked here), which the rule [`physical::lower_top`] lowers onto the physical plan.
pub(crate) fn job(
    script: &mut Script,
    text: &str,
    q: &ast::Query,
    sink: &SinkDef,
    sql: &str,
) -> Result<Job> {
    let limit = limit(text, q)?;
    let body = ast::Query {
        order_by: None,
        limit_clause: None,
        ..q.clone()
    };
    let mut job = match crate::parallel::call(&body) {
        Some(args) => crate::parallel::job(script, text, &body, args, sink, sql)?,
        None => crate::query::job(script, text, &body, sink, sql)?,
    };
    let top = match (job.logical.take(), &q.order_by) {
        (Some(logical), Some(ob)) => sort(text, ob, logical)?,
        (Some(logical), None) => logical,
        // An explicit PARALLEL(...) query has no logical plan: its LIMIT is lowered
        // alone, and an ORDER BY has nothing to check against.
        (None, Some(ob)) => return Err(on_stream(text, ob)),
        (None, None) => {
            if let Some(n) = limit {
                physical::limit(&mut job.plan, n)?;
            }
            return Ok(job);
        }
    };
    let top = match limit {
        Some(n) => Logical::Limit {
            input: Box::new(top),
            n,
        },
        None => top,
    };
    physical::lower_top(&top, &mut job.plan)?;
    job.logical = Some(top);
    Ok(job)
}

fn on_stream(text: &str, ob: &ast::OrderBy) -> Error {
    Error::NotSupported(
        "ORDER BY on a stream; `SET merge = 'transparent'` gives event-time order, and a windowed aggregate's rows sort by ORDER BY window_start or window_end first".into(),
    )
    .at(text, ob.span())
}

/// `logical` topped by the step `ORDER BY ob` asks for, if it is the order of the whole
/// output (see the module's text); refused by name otherwise.
fn sort(text: &str, ob: &ast::OrderBy, logical: Logical) -> Result<Logical> {
    let refuse = |what: &str, at: &dyn Spanned| {
        Err(Error::NotSupported(format!("{what} on a stream")).at(text, at.span()))
    };
    let exprs = match &ob.kind {
        ast::OrderByKind::Expressions(e) if ob.interpolate.is_none() => e,
        ast::OrderByKind::Expressions(_) => return refuse("ORDER BY ... INTERPOLATE", ob),
        ast::OrderByKind::All(_) => return refuse("ORDER BY ALL", ob),
    };
    let Some((window, keyed)) = windowed(&logical) else {
        return Err(on_stream(text, ob));
    };
    let schema = logical.schema();
    let mut keys = Vec::new();
    for o in exprs {
        keys.push(sort_key(o, schema).at(text, o.span())?);
    }
    let bound = |k: &SortKey| bound(&logical, k.column);
    let first = &exprs[0];
    let window_first = |why: &str| {
        Err(
            Error::NotSupported(format!("ORDER BY {first} on a stream: {why}"))
                .at(text, first.span()),
        )
    };
    match (bound(&keys[0]), keys[0].descending) {
        (Some(_), true) => {
            return window_first("windows come out in ascending order, so a descending one would need the whole stream; sort the rows of each window with ORDER BY window_start, x DESC")
        }
        (Some(1), false) => {}
        (Some(_), false) => match window {
            WindowSpec::Tumble { .. } | WindowSpec::Hop { .. } => {}
            WindowSpec::Session { .. } if !keyed => {}
            WindowSpec::Cumulate { .. }
                if keys.get(1).is_some_and(|k| bound(k) == Some(1) && !k.descending) => {}
            WindowSpec::Cumulate { .. } => {
                return window_first("CUMULATE's windows of one start close one after another; ORDER BY window_start, window_end, ... or window_end first")
            }
            _ => {
                return window_first("sessions of different keys overlap, so one that starts later can close first; ORDER BY window_end first")
            }
        },
        (None, _) => {
            return window_first("only the rows of the windows that close together can be sorted; ORDER BY window_start or window_end first (selected)")
        }
    }
    Ok(Logical::Sort {
        input: Box::new(logical),
        keys,
    })
}

/// The column of the output an ORDER BY item names (by name or 1-based position), with
/// its direction; nulls first when ascending, last when descending, as Flink and the
/// window top-N sort (NULLS FIRST / LAST say otherwise).
fn sort_key(o: &ast::OrderByExpr, schema: &Schema) -> Result<SortKey> {
    let descending = match &o.options.sort {
        None | Some(ast::OrderBySort::Asc) => false,
        Some(ast::OrderBySort::Desc) => true,
        Some(ast::OrderBySort::Using(_)) => {
            return Err(Error::NotSupported("ORDER BY ... USING".into()))
        }
    };
    if o.with_fill.is_some() {
        return Err(Error::NotSupported("ORDER BY ... WITH FILL".into()));
    }
    let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    let column = match &o.expr {
        ast::Expr::Identifier(id) => {
            let found: Vec<usize> = (0..names.len())
                .filter(|&i| names[i].eq_ignore_ascii_case(&id.value))
                .collect();
            match found.as_slice() {
                [c] => *c,
                [] => {
                    return Err(Error::Plan(format!(
                        "ORDER BY {id}: no such column in the query's output ({})",
                        names.join(", ")
                    )))
                }
                _ => {
                    return Err(Error::Plan(format!(
                        "ORDER BY {id}: the query's output has several columns of that name"
                    )))
                }
            }
        }
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => match n.parse::<usize>() {
                Ok(p) if (1..=names.len()).contains(&p) => p - 1,
                _ => {
                    return Err(Error::Plan(format!(
                        "ORDER BY {n}: a position is 1 to {}",
                        names.len()
                    )))
                }
            },
            _ => return Err(not_a_column(o)),
        },
        _ => return Err(not_a_column(o)),
    };
    Ok(SortKey {
        column,
        descending,
        nulls_first: o.options.nulls_first.unwrap_or(!descending),
    })
}

fn not_a_column(o: &ast::OrderByExpr) -> Error {
    Error::NotSupported(format!(
        "ORDER BY {} (an expression); ORDER BY names a column of the query's output or its position (count(*) AS n ... ORDER BY n)",
        o.expr
    ))
}

/// The time window of the aggregate whose rows `l` gives (through projections,
/// filters and a window top-N), and whether it has group keys.
fn windowed(l: &Logical) -> Option<(&WindowSpec, bool)> {
    match l {
        Logical::Aggregate { window, keys, .. } if window.is_timed() => {
            Some((window, !keys.is_empty()))
        }
        Logical::Filter { input, .. }
        | Logical::Project { input, .. }
        | Logical::TopN { input, .. } => windowed(input),
        _ => None,
    }
}

/// 0 when column `c` of `l`'s output is the window's `window_start`, 1 when it is
/// `window_end`.
fn bound(l: &Logical, c: usize) -> Option<usize> {
    match l {
        Logical::Aggregate { window, .. } if window.is_timed() && c < 2 => Some(c),
        Logical::Filter { input, .. } => bound(input, c),
        Logical::TopN { input, .. } if c < input.schema().arity() => bound(input, c),
        Logical::Project { input, exprs, .. } => match exprs.get(c)? {
            Expr::Column(i, _) => bound(input, *i),
            _ => None,
        },
        _ => None,
    }
}

/// The query's `LIMIT n`, if it has one. Only a plain `LIMIT n` of the whole query is
/// taken; with OFFSET (or the forms of other dialects) it is refused by name, and so is
/// a LIMIT inside a subquery (by the planner).
fn limit(text: &str, q: &ast::Query) -> Result<Option<u64>> {
    let Some(clause) = &q.limit_clause else {
        return Ok(None);
    };
    let refuse = |what: &str| Error::NotSupported(what.to_string()).at(text, clause.span());
    match clause {
        ast::LimitClause::LimitOffset {
            limit: Some(ast::Expr::Value(v)),
            offset: None,
            limit_by,
        } if limit_by.is_empty() => match &v.value {
            ast::Value::Number(n, _) => n.parse::<u64>().ok(),
            _ => None,
        }
        .map(Some)
        .ok_or_else(|| refuse("LIMIT other than a whole number of rows (LIMIT n)")),
        ast::LimitClause::LimitOffset {
            offset: Some(_), ..
        }
        | ast::LimitClause::OffsetCommaLimit { .. } => Err(refuse(
            "OFFSET on a stream (LIMIT n takes the first n rows)",
        )),
        _ => Err(refuse("this LIMIT; write LIMIT n")),
    }
}
