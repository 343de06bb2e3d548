//! Rewriting a SQL expression tree: aggregate calls and group expressions replaced by
//! the columns of the aggregate's output.

use sqlparser::ast;

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
