//! Scalar expressions from SQL text, parsed with `sqlparser` and resolved against a
//! schema. (The full query language builds on this.)

use crate::batch::Scalar;
use crate::error::{Error, Pos, Result};
use crate::expr::{BinOp, Expr, Func};
use crate::types::{DataType, Schema};
use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

/// Parses `text` as a scalar expression over `schema` and type-checks it.
pub fn parse_expr(text: &str, schema: &Schema) -> Result<Expr> {
    let dialect = GenericDialect {};
    let parsed = Parser::new(&dialect)
        .try_with_sql(text)
        .and_then(|mut p| {
            let e = p.parse_expr()?;
            p.expect_token(&sqlparser::tokenizer::Token::EOF)?;
            Ok(e)
        })
        .map_err(|e| parse_error(text, &e.to_string()))?;
    let e = convert(&parsed, schema)?;
    e.data_type(schema)?;
    Ok(e)
}

/// Turns a sqlparser message ("... at Line: 1, Column: 5") into a positioned error.
fn parse_error(text: &str, msg: &str) -> Error {
    let num_after = |key: &str| -> Option<u64> {
        let i = msg.find(key)? + key.len();
        msg[i..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let pos = Pos {
        line: num_after("Line:").unwrap_or(1),
        column: num_after("Column:").unwrap_or(1),
    };
    let message = msg
        .split(" at Line:")
        .next()
        .unwrap_or(msg)
        .trim_start_matches("sql parser error: ")
        .to_string();
    let line = text
        .lines()
        .nth(pos.line.saturating_sub(1) as usize)
        .unwrap_or("");
    let caret = format!("{}^", " ".repeat(pos.column.saturating_sub(1) as usize));
    Error::Parse {
        pos,
        message: format!("{message}\n  {line}\n  {caret}"),
    }
}

fn convert(e: &ast::Expr, schema: &Schema) -> Result<Expr> {
    use ast::Expr as E;
    Ok(match e {
        E::Identifier(id) => Expr::col(schema, &id.value)?,
        E::CompoundIdentifier(ids) => {
            let last = ids
                .last()
                .ok_or_else(|| Error::Internal("empty identifier".into()))?;
            Expr::col(schema, &last.value)?
        }
        E::Value(v) => Expr::Literal(literal(&v.value)?),
        E::Nested(inner) => convert(inner, schema)?,
        E::BinaryOp { left, op, right } => {
            let op = match op {
                ast::BinaryOperator::Plus => BinOp::Add,
                ast::BinaryOperator::Minus => BinOp::Sub,
                ast::BinaryOperator::Multiply => BinOp::Mul,
                ast::BinaryOperator::Divide => BinOp::Div,
                ast::BinaryOperator::Modulo => BinOp::Mod,
                ast::BinaryOperator::Eq => BinOp::Eq,
                ast::BinaryOperator::NotEq => BinOp::NotEq,
                ast::BinaryOperator::Lt => BinOp::Lt,
                ast::BinaryOperator::LtEq => BinOp::LtEq,
                ast::BinaryOperator::Gt => BinOp::Gt,
                ast::BinaryOperator::GtEq => BinOp::GtEq,
                ast::BinaryOperator::And => BinOp::And,
                ast::BinaryOperator::Or => BinOp::Or,
                other => return Err(Error::NotSupported(format!("operator {other}"))),
            };
            convert(left, schema)?.bin(op, convert(right, schema)?)
        }
        E::UnaryOp { op, expr } => match op {
            ast::UnaryOperator::Not => Expr::Not(Box::new(convert(expr, schema)?)),
            ast::UnaryOperator::Minus => Expr::Neg(Box::new(convert(expr, schema)?)),
            ast::UnaryOperator::Plus => convert(expr, schema)?,
            other => return Err(Error::NotSupported(format!("unary operator {other}"))),
        },
        E::IsNull(x) => Expr::IsNull(Box::new(convert(x, schema)?), false),
        E::IsNotNull(x) => Expr::IsNull(Box::new(convert(x, schema)?), true),
        E::Cast {
            expr, data_type, ..
        } => {
            let t: DataType = data_type.to_string().parse()?;
            if t == DataType::String {
                return Err(Error::NotSupported("CAST to string".into()));
            }
            Expr::Cast(Box::new(convert(expr, schema)?), t)
        }
        E::Function(f) => {
            let name = f.name.to_string();
            let func = Func::by_name(&name).ok_or_else(|| {
                Error::Plan(format!(
                    "no function `{name}`; functions are {}",
                    Func::NAMES
                ))
            })?;
            let mut args = Vec::new();
            if let ast::FunctionArguments::List(list) = &f.args {
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => {
                            args.push(convert(x, schema)?)
                        }
                        other => {
                            return Err(Error::NotSupported(format!("function argument {other}")))
                        }
                    }
                }
            }
            Expr::Call(func, args)
        }
        other => return Err(Error::NotSupported(format!("expression `{other}`"))),
    })
}

fn literal(v: &ast::Value) -> Result<Scalar> {
    Ok(match v {
        ast::Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Float(
                n.parse()
                    .map_err(|_| Error::Plan(format!("bad number {n}")))?,
            ),
        },
        ast::Value::SingleQuotedString(s) => Scalar::Str(s.clone()),
        ast::Value::Boolean(b) => Scalar::Bool(*b),
        ast::Value::Null => Scalar::Null,
        other => return Err(Error::NotSupported(format!("literal {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves() {
        let s = Schema::ints(&["type", "xway"]);
        let e = parse_expr("type = 0 AND xway % 4 <> 1", &s).expect("valid");
        assert_eq!(e.to_string(), "((type = 0) AND ((xway % 4) <> 1))");
    }

    #[test]
    fn errors_name_position_and_columns() {
        let s = Schema::ints(&["type", "xway"]);
        match parse_expr("type = ", &s) {
            Err(Error::Parse { pos, .. }) => assert_eq!(pos.line, 1),
            other => panic!("unexpected {other:?}"),
        }
        let e = parse_expr("spd > 3", &s).expect_err("unknown column");
        assert!(e.to_string().contains("columns are type, xway"), "{e}");
        let e = parse_expr("type AND xway", &s).expect_err("type error");
        assert!(e.to_string().contains("int64"), "{e}");
    }
}
