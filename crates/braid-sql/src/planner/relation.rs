//! What FROM names: a stream, a table (for a lookup join), a subquery, a CTE or a view
//! (`named`), `LAST(stream, n)`
//! (a count window of a join) or `LATE(sink)` (the late rows of an earlier query).

use super::scope::Scope;
use super::{const_int, Planner};
use crate::catalog::TableDef;
use crate::located::At;
use crate::logical::{Logical, WindowSpec};
use braid_plan::error::{Error, Result};
use braid_plan::plan::{Source, SourceSpec};
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};
use std::sync::Arc;

/// A relation in FROM (built once per FROM item: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum Rel {
    /// A stream (or subquery); `last` is the row count of `LAST(stream, n)`, `window`
    /// the window of a window table function (`TABLE(TUMBLE(TABLE t, ...))`), which
    /// GROUP BY window_start, window_end takes.
    Stream {
        plan: Logical,
        scope: Scope,
        last: Option<u64>,
        window: Option<WindowSpec>,
    },
    /// A table and the name that qualifies its columns.
    Table(Arc<TableDef>, String),
}

impl Rel {
    fn stream((plan, scope): (Logical, Scope), last: Option<u64>) -> Rel {
        Rel::Stream {
            plan,
            scope,
            last,
            window: None,
        }
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
                    if let Some(rel) =
                        self.window_table(f, &n, &args.args, alias_name.as_deref(), false)?
                    {
                        return Ok(rel);
                    }
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
            ast::TableFactor::TableFunction {
                expr: ast::Expr::Function(call),
                alias,
            } => {
                refuse_column_aliases(alias.as_ref()).at(self.text, f.span())?;
                let n = call.name.to_string();
                let alias_name = alias.as_ref().map(|a| a.name.value.clone());
                let list: &[ast::FunctionArg] = match &call.args {
                    ast::FunctionArguments::List(l) => &l.args,
                    _ => &[],
                };
                match self.window_table(f, &n, list, alias_name.as_deref(), true)? {
                    Some(rel) => Ok(rel),
                    None => Err(Error::NotSupported(format!(
                        "TABLE({n}(...)); the table functions of TABLE(...) are TUMBLE, HOP and CUMULATE"
                    ))
                    .at(self.text, f.span())),
                }
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

    /// A window table function, if `n` names one: Flink's
    /// `TABLE(TUMBLE(TABLE t, DESCRIPTOR(time), size))` (`flink`) or RisingWave's
    /// `TUMBLE(t, time, size)`, likewise HOP with slide and size, CUMULATE with step
    /// and size, and Flink's SESSION with its gap. The rows are the stream's; the
    /// window goes to GROUP BY window_start, window_end.
    fn window_table(
        &mut self,
        f: &ast::TableFactor,
        n: &str,
        list: &[ast::FunctionArg],
        alias: Option<&str>,
        flink: bool,
    ) -> Result<Option<Rel>> {
        let name = n.to_ascii_lowercase();
        let form = if flink {
            format!(
                "TABLE({}(TABLE stream, DESCRIPTOR(time), ...))",
                name.to_uppercase()
            )
        } else {
            format!("{}(stream, time, ...)", name.to_uppercase())
        };
        match name.as_str() {
            "tumble" | "hop" | "cumulate" => {}
            "session" if flink => {}
            "session" => {
                return Err(Error::NotSupported(format!(
                    "the SESSION window table function in RisingWave's form ({form}), which RisingWave does not have; write Flink's TABLE(SESSION(TABLE stream, DESCRIPTOR(time), gap)) or GROUP BY SESSION(time, gap), keys"
                ))
                .at(self.text, f.span()))
            }
            _ => return Ok(None),
        }
        let args = self.unnamed(&name, list)?;
        let Some(ast::Expr::Identifier(stream)) = args.first() else {
            return Err(Error::Plan(format!(
                "{} takes a stream first: {form}",
                name.to_uppercase()
            ))
            .at(self.text, f.span()));
        };
        let (plan, scope) = self.scan(&stream.value, alias, f)?;
        let mut wargs: Vec<&ast::Expr> = args[1..].to_vec();
        if flink {
            let time = match args.get(1) {
                Some(ast::Expr::Function(d))
                    if d.name.to_string().eq_ignore_ascii_case("descriptor") =>
                {
                    match &d.args {
                        ast::FunctionArguments::List(l) => match l.args.as_slice() {
                            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(c))] => Some(c),
                            _ => None,
                        },
                        _ => None,
                    }
                }
                _ => None,
            };
            let Some(time) = time else {
                return Err(Error::Plan(format!(
                    "{} names its time column with DESCRIPTOR(column): {form}",
                    name.to_uppercase()
                ))
                .at(self.text, args.get(1).map_or(f.span(), |a| a.span())));
            };
            wargs[0] = time;
        }
        let window = self.window_of(&name, &wargs, f.span(), &scope, plan.schema())?;
        Ok(Some(Rel::Stream {
            plan,
            scope,
            last: None,
            window: Some(window),
        }))
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
        self.units.push((def.name.clone(), def.time_unit));
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
