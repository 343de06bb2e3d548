//! From sqlparser's syntax tree to a [`Logical`] plan: names resolved, types checked,
//! aggregates and windows recognised, join conditions analysed.
//!
//! A [`Planner`] plans one query; one file per clause, in the manner of DataFusion's
//! `sql/src/select.rs`: [`select`] (the SELECT block in evaluation order: FROM, WHERE,
//! GROUP BY, SELECT list), [`relation`] (what FROM names), [`join`], [`aggregate`]
//! (GROUP BY, aggregate calls, HAVING) and [`window`] (TUMBLE, HOP, SESSION, ROWS).
//! [`scope`] resolves names; [`rewrite`] rebuilds expression trees.

mod aggregate;
mod comma;
mod distinct;
mod join;
mod named;
mod outer;
mod relation;
mod rewrite;
mod scope;
mod select;
mod topn;
mod window;

pub(crate) use scope::Scope;

use crate::catalog::{Catalog, StreamDef, TableDef, ViewDef};
use crate::expr::convert;
use crate::located::{mark_word, At};
use crate::logical::Logical;
use crate::time::{TimeUnit, Unit};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::function::Registry;
use braid_plan::types::{DataType, Schema};
use scope::{Hint, Names};
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Span;
use std::sync::Arc;

/// What the planner sees of the catalog (in the manner of DataFusion's
/// `ContextProvider`): relations by name.
pub(crate) trait Relations {
    /// A declared stream, or `late(sink)`; the error says what the valid names are.
    fn stream(&self, name: &str) -> Result<&StreamDef>;
    /// The declared table `name`, if it is one.
    fn table(&self, name: &str) -> Option<&Arc<TableDef>>;
    /// The declared view `name`, if it is one.
    fn view(&self, name: &str) -> Option<&ViewDef>;
}

impl Relations for Catalog {
    fn stream(&self, name: &str) -> Result<&StreamDef> {
        Catalog::stream(self, name)
    }

    fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(&name.to_ascii_lowercase())
    }

    fn view(&self, name: &str) -> Option<&ViewDef> {
        self.views.get(&name.to_ascii_lowercase())
    }
}

/// Plans queries against a catalog; collects the streams they read.
pub(crate) struct Planner<'a> {
    /// Declared streams and tables.
    pub catalog: &'a dyn Relations,
    /// Scalar functions the query may call.
    pub registry: &'a Registry,
    /// The script's text (errors point into it).
    pub text: &'a str,
    /// Input streams in order of first use.
    pub inputs: Vec<String>,
    /// The time unit each stream read so far declares (what INTERVAL converts to).
    units: Vec<(String, Option<TimeUnit>)>,
    /// The common table expressions in scope (`WITH name AS (...)`), innermost last.
    ctes: Vec<(String, ast::Query)>,
    /// The views being expanded, outermost first (a view naming itself is refused).
    views_open: Vec<String>,
}

impl<'a> Planner<'a> {
    /// A planner resolving names in `catalog` and `registry`; errors point into `text`.
    pub fn new(catalog: &'a dyn Relations, registry: &'a Registry, text: &'a str) -> Planner<'a> {
        Planner {
            catalog,
            registry,
            text,
            inputs: Vec::new(),
            ctes: Vec::new(),
            views_open: Vec::new(),
            units: Vec::new(),
        }
    }

    /// The time unit of the streams read so far: INTERVAL converts to it. Every one of
    /// them must declare it, the same (never a guess).
    pub(super) fn unit(&self) -> Unit {
        let mut found: Option<(&str, TimeUnit)> = None;
        for (name, u) in &self.units {
            let Some(u) = *u else {
                return Err(format!(
                    "INTERVAL needs the time unit of stream `{name}`; declare it: WITH (event_time = '...', time_unit = 's' | 'ms' | 'us' | 'ns')"
                ));
            };
            match found {
                Some((other, f)) if f != u => {
                    return Err(format!(
                        "INTERVAL over streams of different time units: `{other}` is in {f}, `{name}` in {u}"
                    ))
                }
                _ => found = Some((name, u)),
            }
        }
        found
            .map(|(_, u)| u)
            .ok_or_else(|| "INTERVAL needs a stream's time unit".to_string())
    }

    /// Names resolved in `scope` (with `hint` for a name not found).
    fn names<'s>(
        &self,
        scope: &'s Scope,
        schema: &'s Schema,
        hint: Option<&'s Hint<'s>>,
    ) -> Names<'s>
    where
        'a: 's,
    {
        Names {
            scope,
            registry: Some(self.registry),
            hint,
            unit: self.unit(),
            schema,
        }
    }

    /// `e` resolved in `scope` and type-checked against `schema`.
    pub(super) fn expr(&self, e: &ast::Expr, scope: &Scope, schema: &Schema) -> Result<Expr> {
        let names = self.names(scope, schema, None);
        let x = convert(e, &names).at(self.text, e.span())?;
        x.data_type(schema)
            .map(|_| x.clone())
            .at(self.text, e.span())
    }

    /// A condition: `e` must be bool (`what` names the clause for the message).
    pub(super) fn bool_expr(
        &self,
        e: &ast::Expr,
        scope: &Scope,
        schema: &Schema,
        what: &str,
    ) -> Result<Expr> {
        self.refuse_aggregates(e, what)?;
        let x = self.expr(e, scope, schema)?;
        match x.data_type(schema)? {
            DataType::Bool => Ok(x),
            t => Err(
                Error::Plan(format!("{what} must be a bool condition, found {t}"))
                    .at(self.text, e.span()),
            ),
        }
    }

    /// Plans a query (SELECT or UNION ALL of SELECTs): what a stream cannot do is
    /// refused first, then the body is planned.
    pub fn query(&mut self, q: &ast::Query) -> Result<(Logical, Scope)> {
        if let Some(ob) = &q.order_by {
            return Err(Error::NotSupported(
                "ORDER BY on a stream; `SET merge = 'transparent'` gives event-time order".into(),
            )
            .at(self.text, ob.span()));
        }
        // A whole query's LIMIT n is taken off before planning (`statement.rs`).
        if let Some(l) = &q.limit_clause {
            return Err(Error::NotSupported(
                "LIMIT inside a subquery (LIMIT n stops a whole query after n rows)".into(),
            )
            .at(self.text, l.span()));
        }
        if q.fetch.is_some() {
            return Err(Error::NotSupported("FETCH on a stream".into()).at(self.text, q.span()));
        }
        // Clauses of some dialect that planning the body would pass over.
        let after = [
            (!q.locks.is_empty(), "FOR UPDATE/SHARE", "FOR"),
            (q.for_clause.is_some(), "FOR XML/JSON/BROWSE", "FOR"),
            (q.settings.is_some(), "SETTINGS", "SETTINGS"),
            (q.format_clause.is_some(), "FORMAT", "FORMAT"),
            (!q.pipe_operators.is_empty(), "pipe operators (`|>`)", "|>"),
        ];
        if let Some((_, what, word)) = after.iter().find(|(on, _, _)| *on) {
            let e = Error::NotSupported(format!("{what} on a stream"));
            return Err(mark_word(q.span(), word, e).at(self.text, q.span()));
        }
        let Some(with) = &q.with else {
            return self.set_expr(&q.body);
        };
        // WITH: its names are in scope in the body (and in the later ones), no further.
        let outer = self.ctes.len();
        self.with(with)?;
        let planned = self.set_expr(&q.body);
        self.ctes.truncate(outer);
        planned
    }

    fn set_expr(&mut self, body: &ast::SetExpr) -> Result<(Logical, Scope)> {
        match body {
            ast::SetExpr::Select(s) => self.select(s),
            ast::SetExpr::Query(q) => self.query(q),
            ast::SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier: ast::SetQuantifier::All,
                left,
                right,
            } => {
                let (l, ls) = self.set_expr(left)?;
                let (r, _) = self.set_expr(right)?;
                Ok((self.union_all(l, r, body)?, ls))
            }
            ast::SetExpr::Insert(_) => Err(Error::NotSupported(
                "WITH ... INSERT INTO; write INSERT INTO sink WITH ... SELECT".into(),
            )
            .at(self.text, body.span())),
            ast::SetExpr::SetOperation {
                op,
                set_quantifier,
                left,
                ..
            } => {
                let q = set_quantifier.to_string();
                let written = if q.is_empty() {
                    op.to_string()
                } else {
                    format!("{op} {q}")
                };
                let why = match op {
                    ast::SetOperator::Union => " (it would remove duplicate rows)",
                    _ => "",
                };
                let e = Error::NotSupported(format!(
                    "`{written}`{why} on streams; streams combine with UNION ALL"
                ));
                let end = left.span().end;
                let word = op.to_string();
                Err(mark_word(Span::new(end, end), &word, e).at(self.text, body.span()))
            }
            other => {
                let words: Vec<String> = other
                    .to_string()
                    .split_whitespace()
                    .take(3)
                    .map(str::to_string)
                    .collect();
                Err(Error::NotSupported(format!(
                    "`{} ...` as a query; a query is SELECT or a UNION ALL of SELECTs",
                    words.join(" ")
                ))
                .at(self.text, other.span()))
            }
        }
    }

    /// `UNION ALL` of two plans with the same column types; nested unions flatten.
    fn union_all(&self, l: Logical, r: Logical, body: &ast::SetExpr) -> Result<Logical> {
        let (lt, rt) = (l.schema(), r.schema());
        let types = |s: &Schema| s.fields.iter().map(|f| f.ty).collect::<Vec<_>>();
        if types(lt) != types(rt) {
            return Err(Error::Plan(format!(
                "UNION ALL needs the same column types on both sides: {lt} vs {rt}"
            ))
            .at(self.text, body.span()));
        }
        let mut schema = lt.clone();
        for f in &mut schema.fields {
            f.nullable = true;
        }
        if lt.event_time != rt.event_time {
            schema.event_time = None;
        }
        let mut inputs = Vec::new();
        for side in [l, r] {
            match side {
                Logical::Union { inputs: i, .. } => inputs.extend(i),
                other => inputs.push(other),
            }
        }
        Ok(Logical::Union { inputs, schema })
    }

    /// The index of `stream` among the query's inputs, added if new.
    pub(super) fn input_index(&mut self, stream: &str) -> usize {
        let key = stream.to_ascii_lowercase();
        match self.inputs.iter().position(|s| *s == key) {
            Some(i) => i,
            None => {
                self.inputs.push(key);
                self.inputs.len() - 1
            }
        }
    }
}

/// An integer literal (possibly negative or parenthesized).
fn const_int(e: &ast::Expr) -> Option<i64> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => const_int(expr).map(|n| -n),
        ast::Expr::Nested(e) => const_int(e),
        _ => None,
    }
}

/// The columns of `a`, then those of `b` (event time: `a`'s).
fn concat_schema(a: &Schema, b: &Schema) -> Schema {
    let mut fields = a.fields.clone();
    fields.extend(b.fields.iter().cloned());
    Schema {
        fields,
        event_time: a.event_time,
    }
}
