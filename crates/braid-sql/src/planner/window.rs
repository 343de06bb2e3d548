//! Windows of GROUP BY: `TUMBLE(time, size)`, `HOP(time, size, slide)`,
//! `SESSION(time, gap)` over the stream's event time, and `ROWS(n)` count windows.

use super::scope::Scope;
use super::{const_int, Planner};
use crate::located::At;
use crate::logical::WindowSpec;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};

impl Planner<'_> {
    /// A window function of GROUP BY, if `g` is one.
    pub(super) fn window(
        &self,
        g: &ast::Expr,
        scope: &Scope,
        schema: &Schema,
    ) -> Result<Option<WindowSpec>> {
        let ast::Expr::Function(f) = g else {
            return Ok(None);
        };
        let name = f.name.to_string().to_ascii_lowercase();
        if !matches!(name.as_str(), "tumble" | "hop" | "session" | "rows") {
            return Ok(None);
        }
        let args: Vec<&ast::Expr> = match &f.args {
            ast::FunctionArguments::List(l) => l
                .args
                .iter()
                .filter_map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let usage = match name.as_str() {
            "tumble" => "TUMBLE(time, size)",
            "hop" => "HOP(time, size, slide)",
            "session" => "SESSION(time, gap)",
            _ => "ROWS(n)",
        };
        let bad = |why: &str| Error::Plan(format!("{why}; write {usage}")).at(self.text, g.span());
        if name == "rows" {
            let n = args.first().and_then(|a| const_int(a)).filter(|n| *n > 0);
            return match (n, args.len()) {
                (Some(n), 1) => Ok(Some(WindowSpec::Count { rows: n as u64 })),
                _ => Err(bad("ROWS takes a positive row count")),
            };
        }
        let Some(time) = args.first() else {
            return Err(bad("the window needs the event-time column"));
        };
        let t = self.expr(time, scope, schema)?;
        let ok_time = matches!(t, Expr::Column(i, _) if Some(i) == schema.event_time);
        if !ok_time {
            let et = schema
                .event_time
                .map(|i| format!("`{}`", schema.fields[i].name))
                .unwrap_or_else(|| "none (declare event_time in CREATE STREAM)".into());
            return Err(Error::Plan(format!(
                "windows are over the stream's event time; its event-time column is {et}"
            ))
            .at(self.text, time.span()));
        }
        let nums: Vec<Option<i64>> = args[1..].iter().map(|a| const_int(a)).collect();
        let pos = |v: &Option<i64>| v.filter(|n| *n > 0);
        Ok(Some(match (name.as_str(), nums.as_slice()) {
            ("tumble", [s]) => WindowSpec::Tumble {
                size: pos(s).ok_or_else(|| bad("the size must be a positive integer"))?,
            },
            ("hop", [s, h]) => {
                let (size, slide) = (pos(s), pos(h));
                match (size, slide) {
                    (Some(size), Some(slide)) => WindowSpec::Hop { size, slide },
                    _ => return Err(bad("size and slide must be positive integers")),
                }
            }
            ("session", [gap]) => WindowSpec::Session {
                gap: pos(gap).ok_or_else(|| bad("the gap must be a positive integer"))?,
            },
            _ => return Err(bad("wrong number of arguments")),
        }))
    }
}
