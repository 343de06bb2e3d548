//! The SELECT block, planned clause by clause in evaluation order: FROM (with its
//! joins), WHERE, GROUP BY with aggregates and HAVING, then the SELECT list.

use super::join::window_join;
use super::relation::Rel;
use super::rewrite::contains_agg;
use super::scope::Scope;
use super::Planner;
use crate::located::{mark_word, At};
use crate::logical::{Logical, WindowSpec};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::{Field, Schema};
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Span;

impl Planner<'_> {
    /// Plans `SELECT ... FROM ... [WHERE ...] [GROUP BY ...] [HAVING ...]`.
    pub(super) fn select(&mut self, s: &ast::Select) -> Result<(Logical, Scope)> {
        // Syntax a stream query cannot have.
        self.refuse_ignored(s)?;
        if let Some(top) = self.window_top_n(s)? {
            return Ok(top);
        }
        let distinct = self.is_distinct(s)?;
        // FROM, with its joins (a comma list joins by conditions of WHERE).
        let (mut plan, scope, selection, window, from_span) = match s.from.as_slice() {
            [] => {
                return Err(
                    Error::NotSupported("SELECT without FROM".into()).at(self.text, s.span())
                )
            }
            [from] => {
                let (plan, scope, window) = self.from(from)?;
                (
                    plan,
                    scope,
                    s.selection.clone(),
                    window,
                    from.relation.span(),
                )
            }
            list => {
                let (plan, scope, selection) = self.comma_join(list, s.selection.as_ref())?;
                let span = list.last().map_or(s.span(), |f| f.relation.span());
                (plan, scope, selection, None, span)
            }
        };
        // WHERE.
        if let Some(w) = &selection {
            let predicate = self.bool_expr(w, &scope, plan.schema(), "WHERE")?;
            plan = Logical::Filter {
                input: Box::new(plan),
                predicate,
            };
        }
        // GROUP BY, or aggregates in the SELECT list or HAVING: an aggregate query.
        let group: Vec<ast::Expr> = match &s.group_by {
            // A key named twice is one key (`GROUP BY a.s, a.s`).
            ast::GroupByExpr::Expressions(exprs, mods) if mods.is_empty() => {
                exprs.iter().fold(Vec::new(), |mut keys, e| {
                    if !keys.contains(e) {
                        keys.push(e.clone());
                    }
                    keys
                })
            }
            other => {
                // sqlparser keeps no span of the clause: point at GROUP after FROM/WHERE.
                let after = s.selection.as_ref().map_or(from_span.end, |w| w.span().end);
                let e = Error::NotSupported(format!("`{other}` (only GROUP BY a list)"));
                return Err(mark_word(Span::new(after, after), "GROUP", e).at(self.text, s.span()));
            }
        };
        if !group.is_empty() || has_aggregates(s) {
            let planned = self.aggregate(s, plan, scope, &group, window)?;
            return Ok(match distinct {
                true => self.distinct_aggregate(s, &group, planned),
                false => planned,
            });
        }
        if window.is_some() {
            return Err(Error::NotSupported(
                "a window table function without GROUP BY (a row per input row and window); aggregate it: GROUP BY window_start, window_end, keys".into(),
            )
            .at(self.text, from_span));
        }
        if distinct {
            // SELECT DISTINCT list: GROUP BY list (see `distinct.rs`).
            let keys = self.distinct_keys(s)?;
            return self.aggregate(s, plan, scope, &keys, None);
        }
        if s.having.is_some() {
            return Err(
                Error::Plan("HAVING needs GROUP BY or an aggregate".into()).at(self.text, s.span())
            );
        }
        // The SELECT list.
        self.project(s, plan, scope)
    }

    /// Refuses the clauses of a SELECT that sqlparser accepts for some dialect and
    /// planning would otherwise pass over: each would change the answer.
    fn refuse_ignored(&self, s: &ast::Select) -> Result<()> {
        let no = |what: &str, word: &str| {
            let e = Error::NotSupported(format!("{what} in a stream query"));
            Err(mark_word(s.span(), word, e).at(self.text, s.span()))
        };
        if s.top.is_some() {
            return no("SELECT TOP", "TOP");
        }
        if s.exclude.is_some() {
            return no("SELECT ... EXCLUDE", "EXCLUDE");
        }
        if s.into.is_some() {
            return no("SELECT INTO", "INTO");
        }
        if !s.lateral_views.is_empty() {
            return no("LATERAL VIEW", "LATERAL");
        }
        if s.prewhere.is_some() {
            return no("PREWHERE (write WHERE)", "PREWHERE");
        }
        if !s.connect_by.is_empty() {
            return no("CONNECT BY", "CONNECT");
        }
        if !s.cluster_by.is_empty() {
            return no("CLUSTER BY", "CLUSTER");
        }
        if !s.distribute_by.is_empty() {
            return no("DISTRIBUTE BY", "DISTRIBUTE");
        }
        if !s.sort_by.is_empty() {
            return no("SORT BY", "SORT");
        }
        if !s.named_window.is_empty() {
            return no("WINDOW (named windows of window functions)", "WINDOW");
        }
        if s.qualify.is_some() {
            return no("QUALIFY", "QUALIFY");
        }
        if s.value_table_mode.is_some() {
            return no("SELECT AS VALUE/STRUCT", "AS");
        }
        for item in &s.projection {
            let opts = match item {
                ast::SelectItem::Wildcard(o) | ast::SelectItem::QualifiedWildcard(_, o) => o,
                _ => continue,
            };
            let extra = [
                (opts.opt_ilike.is_some(), "ILIKE"),
                (opts.opt_exclude.is_some(), "EXCLUDE"),
                (opts.opt_except.is_some(), "EXCEPT"),
                (opts.opt_replace.is_some(), "REPLACE"),
                (opts.opt_rename.is_some(), "RENAME"),
                (opts.opt_alias.is_some(), "AS"),
            ];
            if let Some((_, word)) = extra.iter().find(|(on, _)| *on) {
                let e = Error::NotSupported(format!("`* {word} ...`; list the columns"));
                return Err(mark_word(item.span(), word, e).at(self.text, item.span()));
            }
        }
        Ok(())
    }

    /// A FROM item: a stream and its joins, left to right, or two count windows
    /// `LAST(a, n) JOIN LAST(b, m)`.
    fn from(&mut self, from: &ast::TableWithJoins) -> Result<(Logical, Scope, Option<WindowSpec>)> {
        // The joins the first item has taken (a LAST(...) takes the one after it).
        let mut taken = 0;
        let (mut plan, mut scope) = match self.factor(&from.relation)? {
            Rel::Stream {
                plan,
                scope,
                last: None,
                window: Some(w),
            } => {
                if let Some(j) = from.joins.first() {
                    return Err(window_join().at(self.text, j.relation.span()));
                }
                return Ok((plan, scope, Some(w)));
            }
            Rel::Stream {
                plan,
                scope,
                last: None,
                window: None,
            } => (plan, scope),
            Rel::Stream {
                last: Some(n),
                plan,
                scope,
                ..
            } => {
                let Some(j) = from.joins.first() else {
                    return Err(Error::Plan(
                        "LAST(stream, n) is a join window; join it with another LAST(...)".into(),
                    )
                    .at(self.text, from.relation.span()));
                };
                let right = self.factor(&j.relation)?;
                let r = self.join((plan, scope, Some(n)), right, j)?;
                if from.joins.len() > 1 {
                    return Err(
                        Error::NotSupported("more than one join after LAST(...)".into())
                            .at(self.text, from.joins[1].relation.span()),
                    );
                }
                taken = 1;
                (r.0, r.1)
            }
            Rel::Table(t, _) => {
                return Err(Error::Plan(format!(
                    "`{}` is a table; a query reads a stream (FROM stream JOIN {} ON ...)",
                    t.name, t.name
                ))
                .at(self.text, from.relation.span()))
            }
        };
        for j in from.joins.iter().skip(taken) {
            let right = self.factor(&j.relation)?;
            let r = self.join((plan, scope, None), right, j)?;
            plan = r.0;
            scope = r.1;
        }
        Ok((plan, scope, None))
    }

    /// The SELECT list over `plan` (of a query without aggregates); `SELECT *` alone
    /// leaves the plan as it is.
    pub(super) fn project(
        &self,
        s: &ast::Select,
        plan: Logical,
        scope: Scope,
    ) -> Result<(Logical, Scope)> {
        let schema = plan.schema().clone();
        let mut exprs = Vec::new();
        let mut fields = Vec::new();
        let mut out_scope = Scope::default();
        let mut star_only = true;
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) => {
                    for (i, f) in schema.fields.iter().enumerate() {
                        exprs.push(Expr::Column(i, f.name.clone()));
                        fields.push(f.clone());
                        out_scope.cols.push(scope.cols[i].clone());
                    }
                }
                ast::SelectItem::QualifiedWildcard(kind, _) => {
                    star_only = false;
                    let q = kind.to_string().to_ascii_lowercase();
                    let before = exprs.len();
                    for (i, f) in schema.fields.iter().enumerate() {
                        if scope.cols[i].0.as_deref() == Some(q.as_str()) {
                            exprs.push(Expr::Column(i, format!("{q}.{}", f.name)));
                            fields.push(f.clone());
                            out_scope.cols.push(scope.cols[i].clone());
                        }
                    }
                    if exprs.len() == before {
                        return Err(Error::Plan(format!(
                            "no relation `{q}` in FROM; columns are {}",
                            scope.names()
                        ))
                        .at(self.text, item.span()));
                    }
                }
                ast::SelectItem::ExprWithAliases { .. } => {
                    return Err(Error::NotSupported("several aliases for one column".into())
                        .at(self.text, item.span()))
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    star_only = false;
                    let x = self.expr(e, &scope, &schema)?;
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match e {
                            ast::Expr::Identifier(id) => id.value.clone(),
                            ast::Expr::CompoundIdentifier(ids) => {
                                ids.last().map(|i| i.value.clone()).unwrap_or_default()
                            }
                            _ => match &x {
                                Expr::Column(i, _) => schema.fields[*i].name.clone(),
                                _ => format!("col{}", exprs.len() + 1),
                            },
                        },
                    };
                    let ty = x.data_type(&schema)?;
                    fields.push(Field::nullable(&name, ty));
                    out_scope.cols.push((None, name));
                    exprs.push(x);
                }
            }
        }
        if star_only {
            return Ok((plan, scope));
        }
        let event_time = schema.event_time.and_then(|t| {
            exprs
                .iter()
                .position(|e| matches!(e, Expr::Column(i, _) if *i == t))
        });
        if let Some(t) = event_time {
            fields[t].nullable = false;
        }
        let out = Schema { fields, event_time };
        Ok((
            Logical::Project {
                input: Box::new(plan),
                exprs,
                schema: out,
            },
            out_scope,
        ))
    }
}

/// Whether the SELECT list or HAVING calls an aggregate function.
fn has_aggregates(s: &ast::Select) -> bool {
    let mut has_aggs = false;
    for item in &s.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            has_aggs |= contains_agg(e);
        }
    }
    if let Some(h) = &s.having {
        has_aggs |= contains_agg(h);
    }
    has_aggs
}
