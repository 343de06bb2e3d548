//! Named subqueries: the common table expressions of `WITH name AS (...)` and the views
//! of the catalog (`CREATE VIEW`). A name in FROM that is one of them is planned exactly
//! as its query written there as a subquery (`FROM (query) AS name`), each time it is
//! named: a CTE or view read twice is two subqueries reading the same streams (a
//! self-join of a stream, when the two are joined).

use super::scope::Scope;
use super::Planner;
use crate::located::{mark_word, At};
use crate::logical::Logical;
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned};

impl<'a> Planner<'a> {
    /// Takes the CTEs of `WITH` into scope, each checked (planned) where it stands so an
    /// error in one that is never read is still reported, each seeing those before it.
    pub(super) fn with(&mut self, with: &ast::With) -> Result<()> {
        if with.recursive {
            let span = with.with_token.0.span;
            let e = Error::NotSupported(
                "WITH RECURSIVE (a recursive query over a stream); write each step as its own CTE"
                    .into(),
            );
            return Err(mark_word(span, "RECURSIVE", e).at(self.text, span));
        }
        let first = self.ctes.len();
        for cte in &with.cte_tables {
            let name = &cte.alias.name;
            let span = name.span;
            if !cte.alias.columns.is_empty() {
                return Err(Error::NotSupported(format!(
                    "column names after the CTE's name (`{}`); name the columns in its SELECT list (x AS y)",
                    cte.alias
                ))
                .at(self.text, span));
            }
            if cte.materialized.is_some() || cte.from.is_some() {
                return Err(Error::NotSupported(format!(
                    "`{cte}`: MATERIALIZED and FROM in a CTE; write `name AS (query)`"
                ))
                .at(self.text, span));
            }
            let key = name.value.to_ascii_lowercase();
            if self.ctes[first..].iter().any(|(n, _)| *n == key) {
                return Err(
                    Error::Plan(format!("WITH names `{}` twice", name.value)).at(self.text, span)
                );
            }
            // Checked now; it reads its streams only where the query names it.
            let inputs = self.inputs.clone();
            self.query(&cte.query)?;
            self.inputs = inputs;
            self.ctes.push((key, (*cte.query).clone()));
        }
        Ok(())
    }

    /// The plan of `name` when it is a CTE in scope or a view, with its columns
    /// qualified by `alias` (or the name); None when it is neither.
    pub(super) fn named(
        &mut self,
        name: &ast::ObjectName,
        alias: Option<&str>,
        at: &impl Spanned,
    ) -> Result<Option<(Logical, Scope)>> {
        let plan = match self.cte(name)? {
            Some(plan) => plan,
            None => match self.view(&name.to_string(), at)? {
                Some(plan) => plan,
                None => return Ok(None),
            },
        };
        let q = alias.map_or_else(|| name.to_string(), str::to_string);
        let scope = Scope::of(plan.schema(), Some(&q));
        Ok(Some((plan, scope)))
    }

    /// The CTE `name` planned where it is named: it sees the CTEs declared before it.
    fn cte(&mut self, name: &ast::ObjectName) -> Result<Option<Logical>> {
        let [ast::ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return Ok(None);
        };
        let key = id.value.to_ascii_lowercase();
        let Some(i) = self.ctes.iter().rposition(|(n, _)| *n == key) else {
            return Ok(None);
        };
        let later = self.ctes.split_off(i);
        let planned = self.query(&later[0].1);
        self.ctes.extend(later);
        Ok(Some(planned?.0))
    }

    /// The view `name` planned from its text (which sees no CTE of the query naming it);
    /// an error (something it reads has changed since it was created) names the view.
    fn view(&mut self, name: &str, at: &impl Spanned) -> Result<Option<Logical>> {
        let catalog = self.catalog;
        let Some(v) = catalog.view(name) else {
            return Ok(None);
        };
        let key = v.name.to_ascii_lowercase();
        if self.views_open.contains(&key) {
            return Err(
                Error::Plan(format!("view `{}` reads itself", v.name)).at(self.text, at.span())
            );
        }
        let text = std::mem::replace(&mut self.text, &v.sql);
        let ctes = std::mem::take(&mut self.ctes);
        self.views_open.push(key);
        let planned = self.query(&v.query);
        self.views_open.pop();
        self.ctes = ctes;
        self.text = text;
        match planned {
            Ok((plan, _)) => Ok(Some(plan)),
            Err(Error::Plan(m) | Error::NotSupported(m)) => Err(Error::Plan(format!(
                "view `{}` does not plan any more (something it reads has changed): {m}",
                v.name
            ))
            .at(self.text, at.span())),
            Err(other) => Err(other),
        }
    }

    /// Plans the query of view `name` being created: a view naming itself is refused.
    pub(crate) fn view_query(&mut self, name: &str, q: &ast::Query) -> Result<(Logical, Scope)> {
        self.views_open.push(name.to_ascii_lowercase());
        let planned = self.query(q);
        self.views_open.pop();
        planned
    }
}
