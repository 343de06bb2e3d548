//! What FROM names: a stream, a table (for a lookup join), a subquery, a CTE or a view
//! (`named`), `LAST(stream, n)`
//! (a count window of a join) or `LATE(sink)` (the late rows of an earlier query).

use super::scope::Scope;
use super::{const_int, Planner};
use crate::catalog::TableDef;
use crate::located::At;
use crate::logical::Logical;
use braid_plan::error::{Error, Result};
use braid_plan::plan::{Source, SourceSpec};
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};
use std::sync::Arc;

/// A relation in FROM.
pub(super) enum Rel {
    /// A stream (or subquery); `last` is the row count of `LAST(stream, n)`.
    Stream {
        plan: Logical,
        scope: Scope,
        last: Option<u64>,
    },
    /// A table and the name that qualifies its columns.
    Table(Arc<TableDef>, String),
}

impl Rel {
    fn stream((plan, scope): (Logical, Scope), last: Option<u64>) -> Rel {
        Rel::Stream { plan, scope, last }
    }
}

impl Planner<'_> {
    /// The relation `f` names.
    pub(super) fn factor(&mut self, f: &ast::TableFactor) -> Result<Rel> {
        match f {
            ast::TableFactor::Table {
                name,
                alias,
                args,
                sample,
                partitions,
                json_path,
                with_ordinality,
                ..
            } => {
                // What some dialect reads here that would change the rows.
                let extra = [
                    (sample.is_some(), "TABLESAMPLE"),
                    (!partitions.is_empty(), "PARTITION (...)"),
                    (json_path.is_some(), "a JSON path"),
                    (*with_ordinality, "WITH ORDINALITY"),
                ];
                if let Some((_, what)) = extra.iter().find(|(on, _)| *on) {
                    return Err(
                        Error::NotSupported(format!("{what} in FROM")).at(self.text, f.span())
                    );
                }
                refuse_column_aliases(alias.as_ref()).at(self.text, f.span())?;
                let n = name.to_string();
                let alias_name = alias.as_ref().map(|a| a.name.value.clone());
                if let Some(args) = args {
                    return self.table_function(f, &n, args, alias_name.as_deref());
                }
                if let Some(named) = self.named(name, alias_name.as_deref(), f)? {
                    return Ok(Rel::stream(named, None));
                }
                if let Some(t) = self.catalog.table(&n) {
                    return Ok(Rel::Table(t.clone(), alias_name.unwrap_or(n)));
                }
                Ok(Rel::stream(self.scan(&n, alias_name.as_deref(), f)?, None))
            }
            ast::TableFactor::Derived {
                subquery, alias, ..
            } => {
                refuse_column_aliases(alias.as_ref()).at(self.text, f.span())?;
                let (plan, _) = self.query(subquery)?;
                let q = alias.as_ref().map(|a| a.name.value.clone());
                let scope = Scope::of(plan.schema(), q.as_deref());
                Ok(Rel::stream((plan, scope), None))
            }
            other => {
                Err(Error::NotSupported(format!("`{other}` in FROM")).at(self.text, other.span()))
            }
        }
    }

    /// `LATE(sink)` or `LAST(stream, n)`; other table functions are refused.
    fn table_function(
        &mut self,
        f: &ast::TableFactor,
        n: &str,
        args: &ast::TableFunctionArgs,
        alias: Option<&str>,
    ) -> Result<Rel> {
        if n.eq_ignore_ascii_case("late") {
            let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(sink)))] =
                args.args.as_slice()
            else {
                return Err(Error::Plan(
                    "LATE takes the sink of an earlier query: LATE(alerts)".into(),
                )
                .at(self.text, f.span()));
            };
            let name = format!("late({})", sink.value);
            return Ok(Rel::stream(self.scan(&name, alias, f)?, None));
        }
        if !n.eq_ignore_ascii_case("last") {
            let what = if n.eq_ignore_ascii_case("parallel") {
                "PARALLEL(...) as part of a query; write it alone: SELECT * FROM PARALLEL(...)"
                    .to_string()
            } else {
                format!("table function `{n}`; FROM takes a stream, LAST(stream, n), LATE(sink) or PARALLEL(...)")
            };
            return Err(Error::NotSupported(what).at(self.text, f.span()));
        }
        let (stream, rows) = match args.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(s))), ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(n))] => {
                (s.value.clone(), const_int(n).filter(|n| *n > 0))
            }
            _ => (String::new(), None),
        };
        let Some(rows) = rows else {
            return Err(Error::Plan(
                "LAST takes a stream and a positive row count: LAST(s, 500)".into(),
            )
            .at(self.text, f.span()));
        };
        Ok(Rel::stream(
            self.scan(&stream, alias, f)?,
            Some(rows as u64),
        ))
    }

    /// A scan of declared stream `stream`, its columns qualified by `alias` (or its name).
    fn scan(
        &mut self,
        stream: &str,
        alias: Option<&str>,
        at: &impl Spanned,
    ) -> Result<(Logical, Scope)> {
        let def = self.catalog.stream(stream).at(self.text, at.span())?;
        let schema = plain_schema(&def.source);
        let input = self.input_index(&def.name);
        let scope = Scope::of(&schema, Some(alias.unwrap_or(&def.name)));
        Ok((
            Logical::Scan {
                stream: def.name.clone(),
                input,
                schema,
            },
            scope,
        ))
    }
}

/// The stream's columns as SQL sees them (an interleaved multi-file stream shows the
/// files' common columns).
fn plain_schema(source: &Source) -> Schema {
    match &source.spec {
        SourceSpec::Interleave(kids) if !kids.is_empty() => kids[0].schema.clone(),
        _ => source.schema.clone(),
    }
}

/// `AS t(a, b, ...)` would rename the relation's columns by position; Braid names them
/// only in the SELECT list.
fn refuse_column_aliases(alias: Option<&ast::TableAlias>) -> Result<()> {
    match alias {
        Some(a) if !a.columns.is_empty() => {
            let cols: Vec<String> = a.columns.iter().map(|c| c.to_string()).collect();
            Err(Error::NotSupported(format!(
                "column aliases `{}({})` in FROM; name the columns in the SELECT list (x AS y)",
                a.name,
                cols.join(", ")
            )))
        }
        _ => Ok(()),
    }
}
