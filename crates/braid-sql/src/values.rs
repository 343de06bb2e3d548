//! `INSERT INTO stream [(columns)] VALUES (...), ...`: parsed by sqlparser like every
//! other statement, each value a constant expression evaluated here (`5 - 3` is 2,
//! `-x` of a literal, `CAST('7' AS BIGINT)`, `TIMESTAMP '...'`), then typed as its
//! column: a string literal is read as the column's type by the one field parser
//! (`braid_plan::text::parse_field`: a TIMESTAMP's text, `'5'` for a BIGINT), a BIGINT
//! goes into a DOUBLE column; anything else is refused naming the row and column.

use crate::expr::convert;
use crate::located::At;
use braid_plan::batch::{Batch, RowKey, Scalar};
use braid_plan::error::{Error, Result};
use braid_plan::types::{DataType, Schema};
use sqlparser::ast;
use sqlparser::ast::Spanned;

/// The rows of an `INSERT ... VALUES` statement (of `text`, which its positions point
/// into) into a stream of `schema`, each with one value per column of `schema` (a column
/// the statement's column list leaves out is null). None for an INSERT of a query
/// (`INSERT ... SELECT`).
pub fn insert_rows(
    text: &str,
    insert: &ast::Insert,
    schema: &Schema,
) -> Result<Option<Vec<Vec<Scalar>>>> {
    let Some(source) = insert.source.as_deref() else {
        return Err(Error::Plan("INSERT needs VALUES (...) or a query".into()));
    };
    let ast::SetExpr::Values(values) = source.body.as_ref() else {
        return Ok(None);
    };
    if source.order_by.is_some() || source.limit_clause.is_some() || source.with.is_some() {
        return Err(Error::NotSupported(
            "WITH, ORDER BY or LIMIT on INSERT ... VALUES".into(),
        ))
        .map_err(|e| e.at(text, source.span()));
    }
    // Where each value goes: the statement's columns, or all of the stream's in order.
    let targets: Vec<usize> = match insert.columns.is_empty() {
        true => (0..schema.arity()).collect(),
        false => insert
            .columns
            .iter()
            .map(|c| {
                let name = c.to_string();
                let i = schema.index_of(&name).map_err(|_| {
                    Error::Plan(format!(
                        "column `{name}` is not one of the stream's ({})",
                        schema.column_list()
                    ))
                    .at(text, c.span())
                })?;
                Ok(i)
            })
            .collect::<Result<_>>()?,
    };
    let arena = braid_plan::expr::Arena::new();
    let mut empty = Batch::new(0);
    empty.start_row(RowKey::default());
    let no_columns = Schema::new(Vec::new());
    let mut rows = Vec::with_capacity(values.rows.len());
    for (r, row) in values.rows.iter().enumerate() {
        let exprs = &row.content;
        if exprs.len() != targets.len() {
            return Err(Error::Plan(format!(
                "row {}: {} values, expected {} ({})",
                r + 1,
                exprs.len(),
                targets.len(),
                targets
                    .iter()
                    .map(|&i| schema.fields[i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .at(text, row.span()));
        }
        let mut out = vec![Scalar::Null; schema.arity()];
        for (e, &c) in exprs.iter().zip(&targets) {
            let f = &schema.fields[c];
            let at = |why: String| format!("row {}, column {}: {why}", r + 1, f.name);
            let plan = |why: String| Error::Plan(at(why)).at(text, e.span());
            let value = |why: String| Error::Value(at(why)).at(text, e.span());
            // A constant: it names no column (no stream is in scope).
            let compiled = convert(e, &no_columns).map_err(|err| plan(err.to_string()))?;
            let ety = compiled
                .data_type(&no_columns)
                .map_err(|err| plan(err.to_string()))?;
            let v = compiled
                .eval(&empty.row(0), &arena)
                .map_err(|fault| value(fault.to_string()))?
                .to_scalar();
            out[c] = typed(v, ety, f.ty).map_err(value)?;
        }
        for (c, f) in schema.fields.iter().enumerate() {
            if !f.nullable && out[c] == Scalar::Null {
                return Err(Error::Plan(format!(
                    "row {}: column {} is NOT NULL and gets null",
                    r + 1,
                    f.name
                ))
                .at(text, row.span()));
            }
        }
        rows.push(out);
    }
    Ok(Some(rows))
}

/// `v`, a value of type `got`, as a value of a column of type `ty`.
fn typed(v: Scalar, got: DataType, ty: DataType) -> std::result::Result<Scalar, String> {
    Ok(match v {
        Scalar::Null => Scalar::Null,
        _ if got == ty => v,
        // A string literal is text written for the column: read as its type.
        Scalar::Str(s) => braid_plan::text::parse_field(s.as_bytes(), ty, true, true)?.to_scalar(),
        Scalar::Int(i) if got == DataType::Int64 && ty == DataType::Float64 => {
            Scalar::Float(i as f64)
        }
        v => {
            return Err(format!(
                "{v} is {}, the column is {}",
                got.sql_name(),
                ty.sql_name()
            ))
        }
    })
}

/// What a PostgreSQL client asks about the server it is connected to, answered as
/// PostgreSQL 16 answers (`SELECT version()` names Braid after it).
fn server_function(name: &str) -> Option<String> {
    Some(match name {
        "version" => format!(
            "PostgreSQL 16.0 (Braid {}), a parallel stream processing server",
            env!("CARGO_PKG_VERSION")
        ),
        "current_database" | "current_catalog" => "braid".into(),
        "current_schema" => "public".into(),
        "current_user" | "session_user" | "user" => "braid".into(),
        _ => return None,
    })
}

#[cfg(test)]
fn select_constants(text: &str) -> Result<Option<Vec<(String, Scalar, DataType)>>> {
    match crate::parse::parse(text)?.remove(0).statement {
        crate::parse::Statement::Query(q) => constants(text, &q),
        _ => Ok(None),
    }
}

/// A `SELECT` without `FROM` (`SELECT 1`, `SELECT version()`, what drivers send to check
/// a connection): each item's column name (its alias, the function's name, or
/// `?column?` as in PostgreSQL), its value and its type, the constants evaluated as in
/// `VALUES`. None when `q` is not a SELECT without FROM (of `text`, which its
/// positions point into).
pub fn constants(text: &str, q: &ast::Query) -> Result<Option<Vec<(String, Scalar, DataType)>>> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Ok(None);
    };
    if !select.from.is_empty() || q.with.is_some() {
        return Ok(None);
    }
    if select.selection.is_some() || q.order_by.is_some() || q.limit_clause.is_some() {
        return Err(Error::NotSupported(
            "WHERE, ORDER BY or LIMIT in a SELECT without FROM (it has one row of constants)"
                .into(),
        ));
    }
    let arena = braid_plan::expr::Arena::new();
    let mut empty = Batch::new(0);
    empty.start_row(RowKey::default());
    let no_columns = Schema::new(Vec::new());
    let mut out = Vec::new();
    for item in &select.projection {
        let (e, alias) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            _ => return Err(Error::NotSupported("* in a SELECT without FROM".into())),
        };
        let called = match e {
            ast::Expr::Function(f) => Some(f.name.to_string().to_ascii_lowercase()),
            ast::Expr::Identifier(id) => Some(id.value.to_ascii_lowercase()),
            _ => None,
        };
        let server = called.as_deref().and_then(server_function);
        let name = alias
            .or_else(|| {
                called
                    .clone()
                    .filter(|_| server.is_some() || matches!(e, ast::Expr::Function(_)))
            })
            .unwrap_or_else(|| "?column?".into());
        let (v, ty) = match server {
            Some(s) => (Scalar::Str(s), DataType::String),
            None => {
                let compiled = convert(e, &no_columns).at(text, e.span())?;
                let ty = compiled.data_type(&no_columns).at(text, e.span())?;
                let v = compiled
                    .eval(&empty.row(0), &arena)
                    .map_err(|fault| Error::Value(fault.to_string()).at(text, e.span()))?
                    .to_scalar();
                (v, ty)
            }
        };
        out.push((name, v, ty));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_select_without_from_is_its_constants() {
        let got = select_constants("SELECT 1, 2 + 3 AS five, version(), current_database()")
            .expect("taken")
            .expect("a SELECT without FROM");
        assert_eq!(got[0], ("?column?".into(), Scalar::Int(1), DataType::Int64));
        assert_eq!(got[1], ("five".into(), Scalar::Int(5), DataType::Int64));
        assert_eq!(got[2].0, "version");
        assert!(matches!(&got[2].1, Scalar::Str(s) if s.starts_with("PostgreSQL 16")));
        let db = (
            "current_database".into(),
            Scalar::Str("braid".into()),
            DataType::String,
        );
        assert_eq!(got[3], db);
        assert_eq!(select_constants("SELECT a FROM t").expect("taken"), None);
        assert!(select_constants("SELECT 1 / 0").is_err());
    }
}
