//! Walks over a SELECT's syntax trees: finding aggregate calls (and refusing them where
//! a clause is evaluated on each row), and rebuilding an expression with some of its
//! parts replaced (the aggregate planner's placeholders).

use super::Planner;
use crate::located::At;
use crate::logical::AggFunc;
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Span;

/// The aggregate function `f` calls, if it is one.
pub(super) fn agg_func(f: &ast::Function) -> Option<AggFunc> {
    AggFunc::by_name(&f.name.to_string())
}

/// Whether `e` calls an aggregate function.
pub(super) fn contains_agg(e: &ast::Expr) -> bool {
    first_agg(e).is_some()
}

/// The first aggregate call in `e`: its name and place.
fn first_agg(e: &ast::Expr) -> Option<(String, Span)> {
    let mut found = None;
    let _ = rewrite(e, &mut |x| {
        if let ast::Expr::Function(f) = x {
            if agg_func(f).is_some() && found.is_none() {
                found = Some((f.name.to_string(), x.span()));
            }
        }
        None
    });
    found
}

impl Planner<'_> {
    /// Refuses an aggregate call in `e`, a clause (`what`) evaluated on each row.
    pub(super) fn refuse_aggregates(&self, e: &ast::Expr, what: &str) -> Result<()> {
        match first_agg(e) {
            Some((name, span)) => Err(Error::Plan(format!(
                "aggregate functions are not allowed in {what} (`{name}(...)`); aggregates belong in the SELECT list or HAVING"
            ))
            .at(self.text, span)),
            None => Ok(()),
        }
    }
}

/// Rebuilds `e`, replacing any sub-expression for which `f` returns a replacement.
pub(super) fn rewrite(
    e: &ast::Expr,
    f: &mut dyn FnMut(&ast::Expr) -> Option<ast::Expr>,
) -> ast::Expr {
    if let Some(r) = f(e) {
        return r;
    }
    use ast::Expr as E;
    let mut b = |x: &ast::Expr| Box::new(rewrite(x, f));
    match e {
        E::BinaryOp { left, op, right } => E::BinaryOp {
            left: b(left),
            op: op.clone(),
            right: b(right),
        },
        E::UnaryOp { op, expr } => E::UnaryOp {
            op: *op,
            expr: b(expr),
        },
        E::Nested(x) => E::Nested(b(x)),
        E::IsNull(x) => E::IsNull(b(x)),
        E::IsNotNull(x) => E::IsNotNull(b(x)),
        E::Cast {
            kind,
            expr,
            data_type,
            format,
        } => E::Cast {
            kind: kind.clone(),
            expr: b(expr),
            data_type: data_type.clone(),
            format: format.clone(),
        },
        E::Between {
            expr,
            negated,
            low,
            high,
        } => E::Between {
            expr: b(expr),
            negated: *negated,
            low: b(low),
            high: b(high),
        },
        E::InList {
            expr,
            list,
            negated,
        } => E::InList {
            expr: b(expr),
            list: list.iter().map(|x| rewrite(x, f)).collect(),
            negated: *negated,
        },
        E::Case {
            case_token,
            end_token,
            operand,
            conditions,
            else_result,
        } => E::Case {
            case_token: case_token.clone(),
            end_token: end_token.clone(),
            operand: operand.as_ref().map(|o| Box::new(rewrite(o, f))),
            conditions: conditions
                .iter()
                .map(|w| ast::CaseWhen {
                    condition: rewrite(&w.condition, f),
                    result: rewrite(&w.result, f),
                })
                .collect(),
            else_result: else_result.as_ref().map(|x| Box::new(rewrite(x, f))),
        },
        E::Floor { expr, field } => E::Floor {
            expr: b(expr),
            field: field.clone(),
        },
        E::Ceil { expr, field } => E::Ceil {
            expr: b(expr),
            field: field.clone(),
        },
        E::Like {
            negated,
            any,
            expr,
            pattern,
            escape_char,
        } => E::Like {
            negated: *negated,
            any: *any,
            expr: b(expr),
            pattern: b(pattern),
            escape_char: escape_char.clone(),
        },
        E::Function(func) => {
            let mut func = func.clone();
            if let ast::FunctionArguments::List(list) = &mut func.args {
                for a in &mut list.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a {
                        *x = rewrite(x, f);
                    }
                }
            }
            E::Function(func)
        }
        other => other.clone(),
    }
}
