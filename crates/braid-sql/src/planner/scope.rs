//! Names in scope: which columns a query can see, qualified by the alias (or stream
//! name) of the relation they come from, and how identifiers resolve against them.

use crate::expr::Resolve;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::Schema;
use sqlparser::ast;

/// Who a column belongs to: the alias (or stream name) that qualifies it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    /// Per column: qualifier (lower case) and name.
    pub cols: Vec<(Option<String>, String)>,
}

impl Scope {
    pub(super) fn of(schema: &Schema, qualifier: Option<&str>) -> Scope {
        Scope {
            cols: schema
                .fields
                .iter()
                .map(|f| (qualifier.map(|q| q.to_ascii_lowercase()), f.name.clone()))
                .collect(),
        }
    }

    pub(super) fn concat(&self, other: &Scope) -> Scope {
        let mut cols = self.cols.clone();
        cols.extend(other.cols.iter().cloned());
        Scope { cols }
    }

    pub(super) fn names(&self) -> String {
        self.cols
            .iter()
            .map(|(q, n)| match q {
                Some(q) => format!("{q}.{n}"),
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Advice for a name that is not found.
pub(super) type Hint<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Resolves identifiers against a scope.
pub(super) struct Names<'a> {
    pub scope: &'a Scope,
    pub registry: Option<&'a braid_plan::function::Registry>,
    /// Extra advice when a name is not found (e.g. GROUP BY hints).
    pub hint: Option<&'a Hint<'a>>,
    /// The time unit INTERVAL converts to, or why there is none.
    pub unit: crate::time::Unit,
    /// The columns' types (what is a timestamp).
    pub schema: &'a Schema,
}

impl Resolve for Names<'_> {
    fn registry(&self) -> Option<&braid_plan::function::Registry> {
        self.registry
    }

    fn time_unit(&self) -> crate::time::Unit {
        self.unit.clone()
    }

    fn type_of(&self, e: &Expr) -> Option<braid_plan::types::DataType> {
        e.data_type(self.schema).ok()
    }

    fn column(&self, parts: &[ast::Ident]) -> Result<Expr> {
        let (qual, name) = match parts {
            [n] => (None, n.value.as_str()),
            [q, n] => (Some(q.value.to_ascii_lowercase()), n.value.as_str()),
            _ => {
                let text: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                return Err(Error::NotSupported(format!(
                    "name `{}` with more than two parts",
                    text.join(".")
                )));
            }
        };
        let hits: Vec<usize> = (0..self.scope.cols.len())
            .filter(|&i| {
                let (q, n) = &self.scope.cols[i];
                n.eq_ignore_ascii_case(name) && (qual.is_none() || q.as_ref() == qual.as_ref())
            })
            .collect();
        let shown = match &qual {
            Some(q) => format!("{q}.{name}"),
            None => name.to_string(),
        };
        match hits.as_slice() {
            [i] => Ok(Expr::Column(*i, shown)),
            [] => {
                if let Some(h) = self.hint.and_then(|h| h(name)) {
                    return Err(Error::Plan(h));
                }
                Err(Error::Plan(format!(
                    "no column `{shown}`; columns are {}",
                    self.scope.names()
                )))
            }
            many => {
                let opts: Vec<String> = many
                    .iter()
                    .map(|&i| match &self.scope.cols[i].0 {
                        Some(q) => format!("{q}.{name}"),
                        None => name.to_string(),
                    })
                    .collect();
                Err(Error::Plan(format!(
                    "column `{name}` is ambiguous: it could be {}",
                    opts.join(" or ")
                )))
            }
        }
    }
}
