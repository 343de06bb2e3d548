//! Windows of GROUP BY: `TUMBLE(time, size)`, `HOP(time, slide, size)` (Flink's order),
//! `CUMULATE(time, step, size)`, `SESSION(time, gap)` over the stream's event time, and
//! `ROWS(n)` count windows; the same windows of the window table functions in FROM.

use super::scope::Scope;
use super::{const_int, Planner};
use crate::expr::{check_call, Call};
use crate::located::At;
use crate::logical::WindowSpec;
use crate::time::interval;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::Schema;
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Span;

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
        if !matches!(
            name.as_str(),
            "tumble" | "hop" | "cumulate" | "session" | "rows"
        ) {
            return Ok(None);
        }
        check_call(f, Call::Plain).at(self.text, g.span())?;
        let list: &[ast::FunctionArg] = match &f.args {
            ast::FunctionArguments::List(l) => &l.args,
            _ => &[],
        };
        let args = self.unnamed(&name, list)?;
        self.window_of(&name, &args, g.span(), scope, schema)
            .map(Some)
    }

    /// The arguments of window `name`, each an expression (no names, no `*`).
    pub(super) fn unnamed<'e>(
        &self,
        name: &str,
        list: &'e [ast::FunctionArg],
    ) -> Result<Vec<&'e ast::Expr>> {
        let mut args = Vec::new();
        for a in list {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e),
                other => {
                    return Err(Error::Plan(format!(
                        "argument `{other}` of {}; write {}",
                        name.to_ascii_uppercase(),
                        usage(name)
                    ))
                    .at(self.text, other.span()))
                }
            }
        }
        Ok(args)
    }

    /// Window `name` (tumble, hop, session, rows) of arguments `args`: the event-time
    /// column, then sizes (integers of the stream's units, or INTERVALs).
    pub(super) fn window_of(
        &self,
        name: &str,
        args: &[&ast::Expr],
        at: Span,
        scope: &Scope,
        schema: &Schema,
    ) -> Result<WindowSpec> {
        let usage = usage(name);
        let bad = |why: &str| Error::Plan(format!("{why}; write {usage}")).at(self.text, at);
        if name == "rows" {
            let n = args.first().and_then(|a| const_int(a)).filter(|n| *n > 0);
            return match (n, args.len()) {
                (Some(n), 1) => Ok(WindowSpec::Count { rows: n as u64 }),
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
        let nums: Vec<Option<i64>> = args[1..]
            .iter()
            .map(|a| self.length(a))
            .collect::<Result<_>>()?;
        let pos = |v: &Option<i64>| v.filter(|n| *n > 0);
        Ok(match (name, nums.as_slice()) {
            ("tumble", [s]) => WindowSpec::Tumble {
                size: pos(s).ok_or_else(|| bad("the size must be a positive integer"))?,
            },
            // Flink's and RisingWave's order: the slide (hop), then the size.
            ("hop", [h, s]) => match (pos(h), pos(s)) {
                (Some(slide), Some(size)) if slide <= size => WindowSpec::Hop { size, slide },
                (Some(slide), Some(size)) => {
                    return Err(Error::Plan(format!(
                        "HOP's slide {slide} is larger than its size {size}: the windows would leave gaps, and rows in them would count as late; write HOP(time, slide, size) with slide <= size"
                    ))
                    .at(self.text, at))
                }
                _ => return Err(bad("slide and size must be positive integers")),
            },
            ("cumulate", [st, s]) => match (pos(st), pos(s)) {
                (Some(step), Some(size)) if size % step == 0 => WindowSpec::Cumulate { step, size },
                (Some(step), Some(size)) => {
                    return Err(Error::Plan(format!(
                        "CUMULATE's size {size} is not a multiple of its step {step}; write CUMULATE(time, step, size) with size a multiple of step"
                    ))
                    .at(self.text, at))
                }
                _ => return Err(bad("step and size must be positive integers")),
            },
            ("session", [gap]) => WindowSpec::Session {
                gap: pos(gap).ok_or_else(|| bad("the gap must be a positive integer"))?,
            },
            _ => return Err(bad("wrong number of arguments")),
        })
    }

    /// A length of event time: an integer literal of the stream's units, or an INTERVAL
    /// converted exactly to them; None for anything else.
    pub(super) fn length(&self, e: &ast::Expr) -> Result<Option<i64>> {
        match e {
            ast::Expr::Interval(iv) => interval(iv, &self.unit()).map(Some).at(self.text, e.span()),
            ast::Expr::Nested(x) => self.length(x),
            _ => Ok(const_int(e)),
        }
    }
}

/// How window `name` is written.
fn usage(name: &str) -> &'static str {
    match name {
        "tumble" => "TUMBLE(time, size)",
        "hop" => "HOP(time, slide, size)",
        "session" => "SESSION(time, gap)",
        "cumulate" => "CUMULATE(time, step, size)",
        _ => "ROWS(n)",
    }
}
