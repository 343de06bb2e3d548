//! `SELECT DISTINCT`. Braid's results are append-only, so it is what a GROUP BY gives:
//! `SELECT DISTINCT a, b FROM s` is `SELECT a, b FROM s GROUP BY a, b`, one row per
//! distinct value when the input ends (hash-partitioned by the columns, the same rows
//! serially and in parallel). Over an aggregate, DISTINCT changes nothing when every
//! group key and the window (`window_start` or `window_end` of a time window) are
//! selected; otherwise the aggregate's rows go through that GROUP BY of all their
//! columns, at the end of the input.

use super::rewrite::contains_agg;
use super::scope::Scope;
use super::Planner;
use crate::located::{mark_word, At};
use crate::logical::{aggregate_schema, Logical, WindowSpec};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};

impl Planner<'_> {
    /// Whether the SELECT is DISTINCT; `DISTINCT ON (...)` is refused.
    pub(super) fn is_distinct(&self, s: &ast::Select) -> Result<bool> {
        match &s.distinct {
            None | Some(ast::Distinct::All) => Ok(false),
            Some(ast::Distinct::Distinct) => Ok(true),
            Some(ast::Distinct::On(_)) => {
                let e = Error::NotSupported(
                    "SELECT DISTINCT ON (...) (the first row of each group needs an order a stream does not have)"
                        .into(),
                );
                Err(mark_word(s.span(), "DISTINCT", e).at(self.text, s.span()))
            }
        }
    }

    /// The GROUP BY that `SELECT DISTINCT` without aggregates means: its SELECT list.
    pub(super) fn distinct_keys(&self, s: &ast::Select) -> Result<Vec<ast::Expr>> {
        let mut keys = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    // A column selected twice is one key (`SELECT DISTINCT a.x, a.x AS y`).
                    if !keys.contains(e) {
                        keys.push(e.clone());
                    }
                }
                other => {
                    return Err(Error::NotSupported(
                        "SELECT DISTINCT * (list the columns: SELECT DISTINCT a, b)".into(),
                    )
                    .at(self.text, other.span()))
                }
            }
        }
        Ok(keys)
    }

    /// DISTINCT over an aggregate query's rows (`plan`): as they are when they are
    /// distinct already, else one row per distinct row at the end of the input.
    pub(super) fn distinct_aggregate(
        &self,
        s: &ast::Select,
        group: &[ast::Expr],
        (plan, scope): (Logical, Scope),
    ) -> (Logical, Scope) {
        if distinct_already(s, group) {
            return (plan, scope);
        }
        let schema = plan.schema().clone();
        let n = schema.fields.len();
        let names: Vec<_> = schema
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty))
            .collect();
        let keys = (0..n)
            .map(|i| Expr::Column(i, schema.fields[i].name.clone()))
            .collect();
        let agg = Logical::Aggregate {
            phase: crate::logical::AggPhase::Whole,
            input: Box::new(plan),
            window: WindowSpec::Unbounded,
            keys,
            aggs: Vec::new(),
            schema: aggregate_schema(&names, &[]),
        };
        // The distinct rows without the aggregate's window columns.
        let out = Schema {
            fields: agg.schema().fields[2..].to_vec(),
            event_time: None,
        };
        let exprs = (0..n)
            .map(|i| Expr::Column(i + 2, schema.fields[i].name.clone()))
            .collect();
        let project = Logical::Project {
            input: Box::new(agg),
            exprs,
            schema: out,
        };
        (project, scope)
    }
}

/// Whether an aggregate query's rows are distinct already: each is one group, named by
/// the selected group keys and window.
fn distinct_already(s: &ast::Select, group: &[ast::Expr]) -> bool {
    let selected: Vec<String> = s
        .projection
        .iter()
        .filter_map(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                Some(e.to_string().to_ascii_lowercase())
            }
            _ => None,
        })
        .collect();
    let has = |name: &str| selected.iter().any(|x| x == name);
    group.iter().all(|g| match window_kind(g) {
        Some(true) => has("window_start") || has("window_end"),
        // A count window's bounds do not name one window of a key.
        Some(false) => false,
        None => !contains_agg(g) && has(&g.to_string().to_ascii_lowercase()),
    })
}

/// Some(timed) when `g` is a window of GROUP BY: TUMBLE, HOP, SESSION (true), ROWS.
fn window_kind(g: &ast::Expr) -> Option<bool> {
    let ast::Expr::Function(f) = g else {
        return None;
    };
    match f.name.to_string().to_ascii_uppercase().as_str() {
        "TUMBLE" | "HOP" | "SESSION" => Some(true),
        "ROWS" => Some(false),
        _ => None,
    }
}
