//! Which join a FROM item asks for (inner, left, right, full outer), and what an outer
//! join does to the joined schema: the padded side's columns become nullable, and the
//! event time is the preserved side's (none for a FULL join, where either side may be
//! null).

use super::Planner;
use crate::located::At;
use crate::logical::{JoinKind, Logical};
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, JoinConstraint as C, JoinOperator as Op, Spanned};

impl Planner<'_> {
    /// The kind of join `j` and its ON condition; any other join or constraint is
    /// refused by name.
    pub(super) fn join_kind<'j>(&self, j: &'j ast::Join) -> Result<(JoinKind, &'j ast::Expr)> {
        let (kind, constraint) = match &j.join_operator {
            Op::Join(c) | Op::Inner(c) => (JoinKind::Inner, c),
            Op::Left(c) | Op::LeftOuter(c) => (JoinKind::Left, c),
            Op::Right(c) | Op::RightOuter(c) => (JoinKind::Right, c),
            Op::FullOuter(c) => (JoinKind::Full, c),
            Op::CrossJoin(_) => {
                return Err(refuse("CROSS JOIN (give a condition with JOIN ... ON)")
                    .at(self.text, j.relation.span()))
            }
            _ => return Err(refuse("this join").at(self.text, j.relation.span())),
        };
        match constraint {
            C::On(e) => Ok((kind, e)),
            C::Using(_) => Err(refuse("JOIN ... USING (...) (write ON a.x = b.x)")
                .at(self.text, j.relation.span())),
            C::Natural => Err(refuse("NATURAL JOIN (write JOIN ... ON a.x = b.x)")
                .at(self.text, j.relation.span())),
            C::None => Err(
                Error::Plan("a JOIN needs a condition: JOIN ... ON <condition>".into())
                    .at(self.text, j.relation.span()),
            ),
        }
    }
}

fn refuse(what: &str) -> Error {
    Error::NotSupported(format!(
        "{what}; Braid joins with [INNER | LEFT | RIGHT | FULL [OUTER]] JOIN ... ON"
    ))
}

/// `plan` (a join or lookup just planned as inner) made a join of `kind`.
pub(super) fn pad(mut plan: Logical, kind: JoinKind) -> Logical {
    match &mut plan {
        Logical::Join {
            left,
            right,
            kind: k,
            schema,
            ..
        } => {
            *k = kind;
            let la = left.schema().arity();
            for (c, f) in schema.fields.iter_mut().enumerate() {
                if kind.keeps(usize::from(c < la)) {
                    f.nullable = true;
                }
            }
            schema.event_time = match kind {
                JoinKind::Inner | JoinKind::Left => left.schema().event_time,
                JoinKind::Right => right.schema().event_time.map(|t| t + la),
                JoinKind::Full => None,
            };
        }
        // The table's columns are nullable in a lookup's schema already.
        Logical::Lookup { kind: k, .. } => *k = kind,
        _ => {}
    }
    plan
}
