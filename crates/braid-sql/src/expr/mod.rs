//! Scalar expressions from SQL text, parsed with `sqlparser` and resolved against a
//! schema. (The full query language builds on this.)

pub mod time;

use crate::located::{mark, mark_word, parse_error, At};
use crate::logical::AggFunc;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::{BinOp, Expr, Func};
use braid_plan::types::{DataType, Schema};
use sqlparser::ast;
use sqlparser::ast::Spanned;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Span;

pub use crate::located::locate;

mod strings;

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
    compile_expr(text, &parsed, schema)
}

/// A parsed expression (of `text`, which its positions point into) over `schema`,
/// compiled and type-checked.
pub fn compile_expr(text: &str, parsed: &ast::Expr, schema: &Schema) -> Result<Expr> {
    let e = convert(parsed, schema).at(text, parsed.span())?;
    e.data_type(schema).at(text, parsed.span())?;
    Ok(e)
}

/// How identifiers in an expression find their columns.
pub trait Resolve {
    /// The column named by `parts` (`x` or `alias.x`).
    fn column(&self, parts: &[ast::Ident]) -> Result<Expr>;
    /// User code callable by name (registered scalar functions), if any.
    fn registry(&self) -> Option<&braid_plan::function::Registry> {
        None
    }
    /// The time unit an INTERVAL converts to, or why there is none.
    fn time_unit(&self) -> time::Unit {
        Err("INTERVAL needs the time unit of a stream; this expression reads none".into())
    }
    /// The type of `e`, when the resolver knows the columns' types.
    fn type_of(&self, _e: &Expr) -> Option<DataType> {
        None
    }
}

impl Resolve for Schema {
    fn type_of(&self, e: &Expr) -> Option<DataType> {
        e.data_type(self).ok()
    }

    fn column(&self, parts: &[ast::Ident]) -> Result<Expr> {
        let last = parts
            .last()
            .ok_or_else(|| Error::Internal("empty identifier".into()))?;
        Expr::col(self, &last.value)
    }
}

/// Converts a sqlparser expression, resolving names with `r`. Errors carry no position;
/// callers add it with [`locate`] (the innermost failing node's span is best).
pub fn convert(e: &ast::Expr, r: &dyn Resolve) -> Result<Expr> {
    use ast::Expr as E;
    Ok(match e {
        E::Identifier(id) => r.column(std::slice::from_ref(id))?,
        E::CompoundIdentifier(ids) => r.column(ids)?,
        E::Value(v) => Expr::Literal(literal(&v.value)?),
        E::Nested(inner) => convert(inner, r)?,
        E::BinaryOp { left, op, right } => {
            let op = binary_op(op)?;
            time::arithmetic(left, op, right, r)?
        }
        E::TypedString(ts) => time::typed_literal(ts)?,
        E::UnaryOp { op, expr } => unary(*op, expr, r)?,
        E::IsNull(x) => Expr::IsNull(Box::new(sub(x, r)?), false),
        E::IsNotNull(x) => Expr::IsNull(Box::new(sub(x, r)?), true),
        E::InList {
            expr,
            list,
            negated,
        } => not_if(*negated, in_list(expr, list, r)?),
        E::Between {
            expr,
            negated,
            low,
            high,
        } => {
            let x = sub(expr, r)?;
            let inside = x
                .clone()
                .bin(BinOp::GtEq, sub(low, r)?)
                .bin(BinOp::And, x.bin(BinOp::LtEq, sub(high, r)?));
            not_if(*negated, inside)
        }
        E::Like {
            negated,
            expr,
            pattern,
            escape_char,
            any,
        } => {
            if escape_char.is_some() || *any {
                return Err(Error::NotSupported(
                    "LIKE with ESCAPE or ANY; write the pattern with % and _".into(),
                ));
            }
            let l = Expr::Call(Func::Like, vec![sub(expr, r)?, sub(pattern, r)?]);
            not_if(*negated, l)
        }
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => case(operand.as_deref(), conditions, else_result.as_deref(), r)?,
        E::Cast {
            expr,
            data_type,
            format,
            ..
        } => {
            if let Some(f) = format {
                return Err(Error::NotSupported(format!("CAST with FORMAT {f}")));
            }
            let t = sql_type(data_type).map_err(|why| {
                // Pointed at the type's name, after the expression.
                let name = data_type.to_string();
                let word: String = name.chars().take_while(|c| c.is_alphanumeric()).collect();
                let end = expr.span().end;
                let e = Error::NotSupported(format!("CAST to {why}"));
                mark_word(Span::new(end, end), &word, e)
            })?;
            let x = sub(expr, r)?;
            time::cast(x.clone(), r.type_of(&x), t)?.unwrap_or(Expr::Cast(Box::new(x), t))
        }
        E::Function(f) => function(f, r)?,
        E::Array(a) => {
            let elems = a
                .elem
                .iter()
                .map(|x| sub(x, r))
                .collect::<Result<Vec<_>>>()?;
            Expr::Call(Func::MakeArray, elems)
        }
        E::CompoundFieldAccess { root, access_chain } => {
            let mut x = sub(root, r)?;
            for access in access_chain {
                x = match access {
                    ast::AccessExpr::Subscript(ast::Subscript::Index { index }) => {
                        Expr::Call(Func::Element, vec![x, sub(index, r)?])
                    }
                    ast::AccessExpr::Subscript(ast::Subscript::Slice {
                        lower_bound,
                        upper_bound,
                        stride: None,
                    }) => {
                        let lo = match lower_bound {
                            Some(l) => sub(l, r)?,
                            None => Expr::int(1),
                        };
                        let hi = match upper_bound {
                            Some(u) => sub(u, r)?,
                            None => Expr::Call(Func::Cardinality, vec![x.clone()]),
                        };
                        Expr::Call(Func::Slice, vec![x, lo, hi])
                    }
                    ast::AccessExpr::Subscript(ast::Subscript::Slice { .. }) => {
                        return Err(Error::NotSupported(
                            "a slice with a stride `x[a:b:s]`; write evens(x) or odds(x) for every other element".into(),
                        ))
                    }
                    ast::AccessExpr::Dot(_) => {
                        return Err(Error::NotSupported(format!(
                            "field access `{e}`; Braid's values have no fields"
                        )))
                    }
                };
            }
            x
        }
        E::Interval(iv) => Expr::Literal(Scalar::Int(time::interval(iv, &r.time_unit())?)),
        E::Exists { negated, .. } => {
            let word = if *negated { "NOT EXISTS" } else { "EXISTS" };
            // sqlparser's span starts at the subquery, after the word.
            return Err(subquery(e, &format!("`{word} (SELECT ...)`"), ""));
        }
        E::InSubquery { negated, .. } => {
            let word = if *negated { "NOT IN" } else { "IN" };
            return Err(subquery(e, &format!("`x {word} (SELECT ...)`"), "SELECT"));
        }
        E::AnyOp { .. } | E::AllOp { .. } => {
            let word = if matches!(e, E::AnyOp { .. }) {
                "ANY"
            } else {
                "ALL"
            };
            return Err(subquery(e, &format!("`x op {word} (...)`"), word));
        }
        E::Subquery(_) => return Err(subquery(e, "a scalar subquery `(SELECT ...)`", "SELECT")),
        E::GroupingSets(_) | E::Rollup(_) | E::Cube(_) => {
            let name = e.to_string();
            let name: String = name.chars().take_while(|c| *c != '(').collect();
            return Err(Error::NotSupported(format!(
                "`{}` (several groupings in one query); write one query per grouping and UNION ALL them",
                name.trim()
            )));
        }
        E::Floor { expr, field } => rounding(Func::Floor, "FLOOR", expr, field, r)?,
        E::Ceil { expr, field } => rounding(Func::Ceil, "CEIL", expr, field, r)?,
        E::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => strings::substring(expr, substring_from.as_deref(), substring_for.as_deref(), r)?,
        E::Trim {
            expr,
            trim_where,
            trim_what,
            trim_characters,
        } => strings::trim(
            expr,
            trim_where.as_ref(),
            trim_what.as_deref(),
            trim_characters.as_deref(),
            r,
        )?,
        E::Position { expr, r#in } => strings::position(expr, r#in, r)?,
        other => return Err(Error::NotSupported(format!("expression `{other}`"))),
    })
}

/// The type Braid stores a SQL type as: BIGINT, DOUBLE, BOOLEAN and TEXT, under their
/// usual names. Any other type is refused, never stored as a near one (DECIMAL as a
/// float, INT as a 64-bit integer, VARCHAR(n) without its length), since the answers
/// would differ from what the type promises; the error (`Err`) names the type, what
/// Braid lacks, and what to write instead.
pub(crate) fn sql_type(t: &ast::DataType) -> std::result::Result<DataType, String> {
    use ast::DataType as T;
    const TYPES: &str = "types are BIGINT, DOUBLE, BOOLEAN, TEXT (or STRING, VARCHAR), TIMESTAMP, TIMESTAMP WITH TIME ZONE (TIMESTAMPTZ), DATE, DOUBLE PRECISION[] and BIGINT[]";
    Ok(match t {
        T::BigInt(None) | T::Int64 => DataType::Int64,
        T::Double(ast::ExactNumberInfo::None) | T::DoublePrecision | T::Float64 | T::Float8 => {
            DataType::Float64
        }
        T::Bool | T::Boolean => DataType::Bool,
        T::Timestamp(p, tz) if p.is_none_or(|p| p <= 6) => match tz {
            ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone => DataType::Timestamp,
            ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz => DataType::TimestampTz,
        },
        T::Timestamp(..) => {
            return Err(format!(
                "{t} (Braid keeps microseconds); write TIMESTAMP or TIMESTAMP(6)"
            ))
        }
        T::Date => DataType::Date,
        T::Array(
            ast::ArrayElemTypeDef::SquareBracket(inner, None)
            | ast::ArrayElemTypeDef::AngleBracket(inner)
            | ast::ArrayElemTypeDef::Parenthesis(inner)
            | ast::ArrayElemTypeDef::Qualified(inner, None),
        ) => match sql_type(inner)? {
            DataType::Float64 => DataType::Float64Array,
            DataType::Int64 => DataType::Int64Array,
            other => {
                return Err(format!(
                    "{t}: arrays hold DOUBLE or BIGINT elements, not {}",
                    other.sql_name()
                ))
            }
        },
        T::Array(
            ast::ArrayElemTypeDef::SquareBracket(_, Some(_))
            | ast::ArrayElemTypeDef::Qualified(_, Some(_)),
        ) => {
            return Err(format!(
                "{t}: a declared array length belongs to a stream's or table's column; \
                 write DOUBLE PRECISION[] or BIGINT[] here"
            ))
        }
        T::Array(ast::ArrayElemTypeDef::None) => {
            return Err(format!(
                "{t} without an element type; write DOUBLE PRECISION[] or BIGINT[]"
            ))
        }
        T::Text
        | T::String(None)
        | T::Varchar(None)
        | T::CharacterVarying(None)
        | T::CharVarying(None) => DataType::String,
        T::Decimal(_)
        | T::DecimalUnsigned(_)
        | T::Numeric(_)
        | T::Dec(_)
        | T::DecUnsigned(_)
        | T::BigNumeric(_)
        | T::BigDecimal(_) => {
            return Err(format!(
                "{t} (exact decimals); write DOUBLE for an approximate number or BIGINT for a whole number (of cents, say)"
            ))
        }
        T::TinyInt(_)
        | T::TinyIntUnsigned(_)
        | T::UTinyInt
        | T::Int2(_)
        | T::Int2Unsigned(_)
        | T::SmallInt(_)
        | T::SmallIntUnsigned(_)
        | T::USmallInt
        | T::MediumInt(_)
        | T::MediumIntUnsigned(_)
        | T::Int(_)
        | T::Int4(_)
        | T::Int8(_)
        | T::Int16
        | T::Int32
        | T::Int128
        | T::Int256
        | T::Integer(_)
        | T::IntUnsigned(_)
        | T::Int4Unsigned(_)
        | T::IntegerUnsigned(_)
        | T::HugeInt
        | T::UHugeInt
        | T::UInt8
        | T::UInt16
        | T::UInt32
        | T::UInt64
        | T::UInt128
        | T::UInt256
        | T::BigInt(Some(_))
        | T::BigIntUnsigned(_)
        | T::UBigInt
        | T::Int8Unsigned(_)
        | T::Signed
        | T::SignedInteger
        | T::Unsigned
        | T::UnsignedInteger => {
            return Err(format!(
                "{t} (Braid's integers are 64-bit and signed); write BIGINT"
            ))
        }
        T::Float(_)
        | T::FloatUnsigned(_)
        | T::Float4
        | T::Float32
        | T::Real
        | T::RealUnsigned
        | T::Double(_)
        | T::DoubleUnsigned(_)
        | T::DoublePrecisionUnsigned => {
            return Err(format!(
                "{t} (Braid's floating-point numbers are 64-bit); write DOUBLE"
            ))
        }
        T::Character(_)
        | T::Char(_)
        | T::CharacterVarying(Some(_))
        | T::CharVarying(Some(_))
        | T::Varchar(Some(_))
        | T::Nvarchar(_)
        | T::String(Some(_))
        | T::FixedString(_)
        | T::TinyText
        | T::MediumText
        | T::LongText => {
            return Err(format!(
                "{t} (Braid's strings have no length limit or padding); write TEXT, STRING or VARCHAR"
            ))
        }
        other => return Err(format!("type {other}; {TYPES}")),
    })
}

/// A column's type: [`sql_type`], and for an array with a declared length
/// (`DOUBLE PRECISION[1024]`) that length.
pub(crate) fn column_type(
    t: &ast::DataType,
) -> std::result::Result<(DataType, Option<u32>), String> {
    use ast::ArrayElemTypeDef as A;
    match t {
        ast::DataType::Array(A::SquareBracket(inner, Some(n)) | A::Qualified(inner, Some(n))) => {
            let ty = sql_type(&ast::DataType::Array(A::SquareBracket(inner.clone(), None)))?;
            let n =
                u32::try_from(*n).map_err(|_| format!("{t}: an array length beyond 2^32 - 1"))?;
            Ok((ty, Some(n)))
        }
        _ => Ok((sql_type(t)?, None)),
    }
}

/// The refusal of a subquery in an expression (`what`), at its first `word` (or at
/// the start of its span).
fn subquery(e: &ast::Expr, what: &str, word: &str) -> Error {
    let e2 = Error::NotSupported(format!(
        "{what}: subqueries in expressions; join the streams (JOIN ... ON) or a table instead"
    ));
    match word {
        "" => mark(e.span(), e2),
        w => mark_word(e.span(), w, e2),
    }
}

/// `FLOOR(x)` and `CEIL(x)` (sqlparser's own nodes, not function calls); the forms
/// with a unit (`FLOOR(t TO DAY)`) or a scale (`FLOOR(x, 2)`) are refused by name.
fn rounding(
    f: Func,
    name: &str,
    expr: &ast::Expr,
    field: &ast::CeilFloorKind,
    r: &dyn Resolve,
) -> Result<Expr> {
    use ast::CeilFloorKind as K;
    let after = Span::new(expr.span().end, expr.span().end);
    match field {
        K::DateTimeField(ast::DateTimeField::NoDateTime) => Ok(Expr::Call(f, vec![sub(expr, r)?])),
        K::DateTimeField(unit) => Err(mark_word(
            after,
            "TO",
            Error::NotSupported(format!(
                "`{name}(... TO {unit})` (rounding to a unit of time; Braid's times are integers)"
            )),
        )),
        K::Scale(s) => Err(mark(
            s.span,
            Error::NotSupported(format!(
                "`{name}(x, {s})` (rounding to a scale): write `{name}(x * 100) / 100` for two decimals",
                s = s.value
            )),
        )),
    }
}

/// `NOT x` when `negated`, else `x`.
fn not_if(negated: bool, x: Expr) -> Expr {
    if negated {
        Expr::Not(Box::new(x))
    } else {
        x
    }
}

/// The operator of a binary expression.
fn binary_op(op: &ast::BinaryOperator) -> Result<BinOp> {
    use ast::BinaryOperator as B;
    Ok(match op {
        B::Plus => BinOp::Add,
        B::Minus => BinOp::Sub,
        B::Multiply => BinOp::Mul,
        B::Divide => BinOp::Div,
        B::Modulo => BinOp::Mod,
        B::Eq => BinOp::Eq,
        B::NotEq => BinOp::NotEq,
        B::Lt => BinOp::Lt,
        B::LtEq => BinOp::LtEq,
        B::Gt => BinOp::Gt,
        B::GtEq => BinOp::GtEq,
        B::And => BinOp::And,
        B::Or => BinOp::Or,
        B::StringConcat => BinOp::Concat,
        other => return Err(Error::NotSupported(format!("operator {other}"))),
    })
}

/// `NOT x`, `-x` (a negative number is a literal, as EXPLAIN prints it) or `+x`.
fn unary(op: ast::UnaryOperator, expr: &ast::Expr, r: &dyn Resolve) -> Result<Expr> {
    let nested = matches!(expr, ast::Expr::Nested(_));
    Ok(match op {
        ast::UnaryOperator::Not => Expr::Not(Box::new(sub(expr, r)?)),
        // -9223372036854775808 is the one int64 whose digits alone do not fit one.
        ast::UnaryOperator::Minus
            if matches!(expr, ast::Expr::Value(v)
                if matches!(&v.value, ast::Value::Number(n, _) if n == "9223372036854775808")) =>
        {
            Expr::Literal(Scalar::Int(i64::MIN))
        }
        ast::UnaryOperator::Minus => match sub(expr, r)? {
            Expr::Literal(Scalar::Int(i)) if !nested => {
                Expr::Literal(Scalar::Int(i.wrapping_neg()))
            }
            Expr::Literal(Scalar::Float(f)) if !nested => Expr::Literal(Scalar::Float(-f)),
            x => Expr::Neg(Box::new(x)),
        },
        ast::UnaryOperator::Plus => sub(expr, r)?,
        other => return Err(Error::NotSupported(format!("unary operator {other}"))),
    })
}

/// `x IN (a, b, ...)` as `x = a OR x = b OR ...`.
fn in_list(expr: &ast::Expr, list: &[ast::Expr], r: &dyn Resolve) -> Result<Expr> {
    let x = sub(expr, r)?;
    let mut any: Option<Expr> = None;
    for item in list {
        let eq = x.clone().eq(sub(item, r)?);
        any = Some(match any {
            None => eq,
            Some(a) => a.bin(BinOp::Or, eq),
        });
    }
    any.ok_or_else(|| Error::Plan("IN needs at least one value".into()))
}

/// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`.
fn case(
    operand: Option<&ast::Expr>,
    conditions: &[ast::CaseWhen],
    else_result: Option<&ast::Expr>,
    r: &dyn Resolve,
) -> Result<Expr> {
    let op = operand.map(|o| sub(o, r)).transpose()?;
    let mut arms = Vec::new();
    for w in conditions {
        let cond = sub(&w.condition, r)?;
        let cond = match &op {
            Some(o) => o.clone().eq(cond),
            None => cond,
        };
        arms.push((cond, sub(&w.result, r)?));
    }
    let d = else_result.map(|e| sub(e, r)).transpose()?;
    Ok(Expr::Case(arms, d.map(Box::new)))
}

/// What a function call is, for the parts of the call's syntax Braid honours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// An aggregate of a query (count, sum, avg, min, max): it honours
    /// `FILTER (WHERE ...)`, and `DISTINCT` as the aggregate's planner decides.
    Aggregate,
    /// Any other call (a scalar function, a window of GROUP BY, a combiner of
    /// PARALLEL): its arguments only.
    Plain,
}

/// Refuses, by name and at its place, every part of a function call that Braid does not
/// honour. sqlparser accepts them for one dialect or another; ignoring one would give a
/// wrong answer without a word. The arguments themselves are the caller's to check.
pub(crate) fn check_call(f: &ast::Function, kind: Call) -> Result<()> {
    let name = f.name.to_string();
    let no = |what: String| Error::NotSupported(what);
    // Clauses after the argument list are searched for from its end.
    let args_end = {
        let end = f.args.span().end;
        let end = if end.line == 0 {
            f.name.span().end
        } else {
            end
        };
        Span::new(end, end)
    };
    if f.over.is_some() {
        let e = no(format!(
            "window function `{name}(...) OVER (...)` (over-aggregations)"
        ));
        return Err(mark_word(args_end, "OVER", e));
    }
    if !f.within_group.is_empty() {
        let e = no(format!(
            "`{name}(...) WITHIN GROUP (ORDER BY ...)` (ordered-set aggregates)"
        ));
        return Err(mark_word(args_end, "WITHIN", e));
    }
    if let Some(nt) = &f.null_treatment {
        let word = nt.to_string();
        let first = word
            .split_whitespace()
            .next()
            .unwrap_or("NULLS")
            .to_string();
        let e = no(format!("`{word}` in a call of `{name}`"));
        return Err(mark_word(args_end, &first, e));
    }
    if !matches!(f.parameters, ast::FunctionArguments::None) {
        return Err(mark(
            f.span(),
            no(format!("parametric call `{name}{}(...)`", f.parameters)),
        ));
    }
    if f.filter.is_some() && kind != Call::Aggregate {
        let e = no(format!(
            "FILTER (WHERE ...) on `{name}(...)`; it applies to a query's aggregates (count, sum, avg, min, max)"
        ));
        return Err(mark_word(args_end, "FILTER", e));
    }
    match &f.args {
        ast::FunctionArguments::None => {}
        ast::FunctionArguments::Subquery(q) => {
            return Err(mark(
                q.span(),
                no(format!("a subquery as the argument of `{name}`")),
            ))
        }
        ast::FunctionArguments::List(list) => {
            if let (Some(d), Call::Plain) = (list.duplicate_treatment, kind) {
                let e = no(format!("{d} in a call of `{name}`"));
                return Err(mark(f.span(), e));
            }
            let from_name = Span::new(f.name.span().start, f.name.span().start);
            if let Some(c) = list.clauses.first() {
                use ast::FunctionArgumentClause as C;
                return Err(match c {
                    C::Where(w) => mark(
                        w.span(),
                        no(format!(
                            "`{name}(... WHERE ...)`; write `{name}(...) FILTER (WHERE ...)`"
                        )),
                    ),
                    C::OrderBy(_) => mark_word(
                        from_name,
                        "ORDER",
                        no(format!(
                            "ORDER BY inside `{name}(...)`: no function of Braid depends on the order of its rows"
                        )),
                    ),
                    C::IgnoreOrRespectNulls(nt) => {
                        let word = nt.to_string();
                        let first = word.split_whitespace().next().unwrap_or("NULLS").to_string();
                        mark_word(
                            from_name,
                            &first,
                            no(format!("`{word}` in a call of `{name}`")),
                        )
                    }
                    other => mark(f.span(), no(format!("`{other}` in a call of `{name}`"))),
                });
            }
        }
    }
    Ok(())
}

/// A call of a built-in or registered scalar function.
fn function(f: &ast::Function, r: &dyn Resolve) -> Result<Expr> {
    let name = f.name.to_string();
    time::refuse_clock(&name)?;
    let kind = match AggFunc::by_name(&name) {
        Some(_) => Call::Aggregate,
        None => Call::Plain,
    };
    check_call(f, kind)?;
    let udf = r.registry().and_then(|reg| reg.scalar(&name)).cloned();
    let func = Func::by_name(&name);
    if func.is_none() && udf.is_none() && kind == Call::Aggregate {
        // The planner takes aggregates out of the SELECT list and HAVING first.
        return Err(Error::Plan(format!(
            "aggregate `{name}(...)` is not allowed here: aggregates belong in the SELECT list or HAVING, not inside another aggregate, a window or a row's condition"
        )));
    }
    if func.is_none() && udf.is_none() {
        let mut known = Func::NAMES.to_string();
        for n in r.registry().map(|g| g.scalar_names()).unwrap_or_default() {
            known += &format!(", {n}");
        }
        return Err(Error::Plan(format!(
            "no function `{name}`; functions are {known}"
        )));
    }
    let mut args = Vec::new();
    if let ast::FunctionArguments::List(list) = &f.args {
        for a in &list.args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => {
                    let x = sub(x, r)?;
                    // concat writes each argument's text, a time's as CAST writes it.
                    args.push(match func {
                        Some(Func::Concat) => time::text_if_time(x, r),
                        _ => x,
                    })
                }
                other => return Err(Error::NotSupported(format!("function argument {other}"))),
            }
        }
    }
    Ok(match (func, udf) {
        (Some(func), _) => Expr::Call(func, args),
        (None, Some(f)) => Expr::Udf(
            braid_plan::expr::Udf {
                name: name.to_ascii_lowercase(),
                f,
            },
            args,
        ),
        (None, None) => return Err(Error::Internal("function vanished".into())),
    })
}

/// Converts a sub-expression, giving its errors the sub-expression's position (as a
/// marker the caller's [`locate`] replaces with line and column).
pub(crate) fn sub(e: &ast::Expr, r: &dyn Resolve) -> Result<Expr> {
    convert(e, r).map_err(|err| mark(e.span(), err))
}

/// Splits a condition at its top-level ANDs.
pub fn conjuncts(e: Expr) -> Vec<Expr> {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            let mut v = conjuncts(*a);
            v.extend(conjuncts(*b));
            v
        }
        other => vec![other],
    }
}

/// ANDs conditions together.
pub fn and_all(v: Vec<Expr>) -> Option<Expr> {
    v.into_iter().reduce(|a, b| a.bin(BinOp::And, b))
}

fn literal(v: &ast::Value) -> Result<Scalar> {
    Ok(match v {
        ast::Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Scalar::Int(i),
            // A whole number too large for a BIGINT is refused, not made a DOUBLE.
            Err(_) if n.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(Error::Plan(format!(
                    "integer {n} is beyond BIGINT's range (at most 9223372036854775807); \
                     write {n}.0 for a DOUBLE"
                )))
            }
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
