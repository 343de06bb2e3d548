//! Comma joins: `FROM a, b, c WHERE ...` is planned exactly as
//! `FROM a JOIN b ON pb JOIN c ON pc WHERE rest`, where each conjunct of WHERE goes to
//! the ON of the last relation whose columns it names (`pb` names b's columns and maybe
//! a's, `pc` c's) and the conjuncts that name only a's columns, or none, stay in WHERE.
//! So a comma join is a table lookup or a stream join with its time bound, as the JOIN
//! would be; a relation no conjunct joins (a cross product) is refused.

use super::relation::Rel;
use super::scope::Scope;
use super::Planner;
use crate::expr::convert;
use crate::located::At;
use crate::logical::Logical;
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned};

impl Planner<'_> {
    /// The relations of a comma list in FROM joined by the conditions of WHERE; the
    /// conditions left for WHERE.
    pub(super) fn comma_join(
        &mut self,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
    ) -> Result<(Logical, Scope, Option<ast::Expr>)> {
        if let Some(j) = from.iter().flat_map(|f| &f.joins).next() {
            return Err(Error::NotSupported(
                "JOIN in a comma list of FROM; write every join with JOIN ... ON, or every one with commas".into(),
            )
            .at(self.text, j.relation.span()));
        }
        let mut rels = Vec::new();
        for f in from {
            rels.push(self.factor(&f.relation)?);
        }
        // Which relation each column of the joined row comes from.
        let mut owner = Vec::new();
        let mut all = Scope::default();
        for (k, r) in rels.iter().enumerate() {
            let scope = match r {
                Rel::Stream { scope, .. } => scope.clone(),
                Rel::Table(t, alias) => Scope::of(&t.schema, Some(alias)),
            };
            owner.extend(std::iter::repeat_n(k, scope.cols.len()));
            all = all.concat(&scope);
        }
        // The joined row's columns (for the types the conditions are checked with).
        let fields = rels
            .iter()
            .flat_map(|r| match r {
                Rel::Stream { plan, .. } => plan.schema().fields.clone(),
                Rel::Table(t, _) => t.schema.fields.clone(),
            })
            .collect();
        let joined = braid_plan::types::Schema::new(fields);
        let mut on: Vec<Vec<ast::Expr>> = vec![Vec::new(); rels.len()];
        for c in selection.map(conjuncts).unwrap_or_default() {
            let names = self.names(&all, &joined, None);
            // A conjunct that does not resolve stays in WHERE, which reports it.
            let k = convert(&c, &names)
                .map(|x| x.columns().iter().map(|&i| owner[i]).max().unwrap_or(0))
                .unwrap_or(0);
            on[k].push(c);
        }
        let mut rels = rels.into_iter();
        let (mut plan, mut scope, mut last) = match rels.next() {
            Some(Rel::Stream {
                plan,
                scope,
                last,
                window: None,
            }) => (plan, scope, last),
            Some(Rel::Stream {
                window: Some(_), ..
            }) => {
                return Err(Error::NotSupported(
                    "a window table function in a comma join; aggregate it in a subquery".into(),
                )
                .at(self.text, from[0].relation.span()))
            }
            Some(Rel::Table(t, _)) => {
                return Err(Error::Plan(format!(
                    "`{}` is a table; a query reads a stream (FROM stream, {} WHERE ...)",
                    t.name, t.name
                ))
                .at(self.text, from[0].relation.span()))
            }
            None => return Err(Error::Internal("an empty comma list".into())),
        };
        if last.is_some() && from.len() > 2 {
            return Err(
                Error::NotSupported("more than one join after LAST(...)".into())
                    .at(self.text, from[2].relation.span()),
            );
        }
        for (k, rel) in rels.enumerate() {
            let relation = &from[k + 1].relation;
            let Some(cond) = and_all(std::mem::take(&mut on[k + 1])) else {
                return Err(self.no_condition(&rel, relation));
            };
            let j = ast::Join {
                relation: relation.clone(),
                global: false,
                join_operator: ast::JoinOperator::Inner(ast::JoinConstraint::On(cond)),
            };
            (plan, scope) = self.join((plan, scope, last.take()), rel, &j)?;
        }
        Ok((plan, scope, and_all(std::mem::take(&mut on[0]))))
    }

    /// The error for a relation of a comma list that no condition of WHERE joins.
    fn no_condition(&self, rel: &Rel, relation: &ast::TableFactor) -> Error {
        let what = match rel {
            Rel::Table(t, _) => format!(
                "no condition in WHERE joins table `{}` to the relations before it in FROM; a join with a table needs an equality between a stream expression and a table column",
                t.name
            ),
            Rel::Stream { .. } => "no condition in WHERE joins this stream to the relations before it in FROM: a cross product of two streams is not built; bound the time difference both ways (`b.t BETWEEN a.t - 10 AND a.t + 10`) or join count windows LAST(a, n), LAST(b, m)".to_string(),
        };
        Error::Plan(what).at(self.text, relation.span())
    }
}

/// The conjuncts of `e` (`a AND b AND c`), in order.
fn conjuncts(e: &ast::Expr) -> Vec<ast::Expr> {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            let mut v = conjuncts(left);
            v.extend(conjuncts(right));
            v
        }
        other => vec![other.clone()],
    }
}

/// `a AND b AND ...` of the conjuncts, if any.
fn and_all(v: Vec<ast::Expr>) -> Option<ast::Expr> {
    v.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
        left: Box::new(a),
        op: ast::BinaryOperator::And,
        right: Box::new(b),
    })
}
