//! Flink's `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND` in `CREATE STREAM`, a
//! spelling of the `event_time` and `lateness` options. sqlparser does not parse it:
//! the statement layer cuts the clause out of the column list (blanked, so positions
//! stay) and hands it here.

use crate::catalog::Options;
use crate::located::At;
use crate::time::{interval, TimeUnit};
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan};
use std::collections::BTreeMap;

/// A `WATERMARK FOR column AS expr` clause.
#[derive(Clone, Debug)]
pub(crate) struct Watermark {
    /// The column after FOR.
    column: String,
    /// The text after AS.
    expr: String,
    /// Where the clause is (errors point there).
    at: Span,
}

/// The clause starting at `tokens[i]` (the word WATERMARK), if it is one: the clause, the
/// byte range to blank (with the comma that separates it from the columns), and the
/// index of the first token after it. `offset` turns a position into a byte offset.
pub(crate) fn clause(
    tokens: &[TokenWithSpan],
    i: usize,
    text: &str,
    offset: &dyn Fn(u64, u64) -> usize,
) -> Option<(Watermark, (usize, usize), usize)> {
    let at = |k: usize| offset(tokens[k].span.start.line, tokens[k].span.start.column);
    // The clause's first five tokens (WATERMARK FOR column AS expr...).
    let solid: Vec<usize> = (i..tokens.len())
        .filter(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
        .take(5)
        .collect();
    let word = |n: usize, w: &str| matches!(solid.get(n).map(|&k| &tokens[k].token), Some(Token::Word(x)) if x.value.eq_ignore_ascii_case(w));
    if !(word(0, "watermark") && word(1, "for") && word(3, "as")) {
        return None;
    }
    let column = match &tokens[*solid.get(2)?].token {
        Token::Word(w) => w.value.clone(),
        _ => return None,
    };
    // The expression: up to a comma or the closing parenthesis at depth 0.
    let first = *solid.get(4)?;
    let mut depth = 0i32;
    let mut end = first;
    while end < tokens.len() {
        match tokens[end].token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => break,
            Token::EOF | Token::SemiColon => return None,
            _ => {}
        }
        end += 1;
    }
    let expr = text[at(first)..at(end)].trim().to_string();
    // The comma before the clause, or (first in the list) the one after it.
    let before = (0..i)
        .rev()
        .find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)));
    let (from, to) = match before.map(|k| &tokens[k].token) {
        Some(Token::Comma) => (at(before?), at(end)),
        _ if matches!(tokens[end].token, Token::Comma) => (at(i), at(end) + 1),
        _ => (at(i), at(end)),
    };
    let span = Span::new(tokens[i].span.start, tokens[end].span.start);
    let w = Watermark {
        column,
        expr,
        at: span,
    };
    Some((w, (from, to), end))
}

/// Adds the clause to the stream's options: `event_time` (the column) and `lateness`
/// (the delay of `column - delay`, an INTERVAL as a length the stream's unit converts,
/// or an integer of its units); errors point at the clause in `text`.
pub(crate) fn apply(w: &Watermark, opts: &mut BTreeMap<String, Scalar>, text: &str) -> Result<()> {
    let fail = |why: String| Err(Error::Plan(why).at(text, w.at));
    let usage = "write WATERMARK FOR ts AS ts - INTERVAL '5' SECOND (or AS ts)";
    let parsed = Parser::new(&GenericDialect {})
        .try_with_sql(&w.expr)
        .and_then(|mut p| p.parse_expr());
    let Ok(e) = parsed else {
        return fail(format!(
            "WATERMARK: `{}` is not an expression; {usage}",
            w.expr
        ));
    };
    let is_col = |e: &ast::Expr| matches!(e, ast::Expr::Identifier(id) if id.value.eq_ignore_ascii_case(&w.column));
    let delay = match &e {
        e if is_col(e) => Scalar::Int(0),
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Minus,
            right,
        } if is_col(left) => match right.as_ref() {
            ast::Expr::Interval(iv) => match interval(iv, &Ok(TimeUnit::Nano)) {
                Ok(ns) => Scalar::Str(format!("{ns} ns")),
                Err(e) => return Err(e.at(text, w.at)),
            },
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => match n.parse::<i64>() {
                    Ok(n) => Scalar::Int(n),
                    Err(_) => return fail(format!("WATERMARK: {n} is not an integer; {usage}")),
                },
                _ => return fail(format!("WATERMARK AS `{e}`; {usage}")),
            },
            _ => return fail(format!("WATERMARK AS `{e}`; {usage}")),
        },
        _ => {
            return fail(format!(
            "WATERMARK AS `{e}`: Braid's watermark is the event time minus a fixed delay; {usage}"
        ))
        }
    };
    if let Some(t) = opts.get("event_time") {
        if !matches!(t, Scalar::Str(s) if s.eq_ignore_ascii_case(&w.column)) {
            return fail(format!(
                "WATERMARK FOR {} but event_time = {t}; the watermark is on the event-time column",
                w.column
            ));
        }
    }
    if opts.contains_key("lateness") {
        return fail("WATERMARK and the lateness option say the same; write one".into());
    }
    opts.insert("event_time".into(), Scalar::Str(w.column.clone()));
    opts.insert("lateness".into(), delay);
    Ok(())
}

/// Options of a stream with a watermark (for the catalog).
pub(crate) fn options(
    what: &str,
    mut opts: BTreeMap<String, Scalar>,
    w: Option<&Watermark>,
    text: &str,
) -> Result<Options> {
    if let Some(w) = w {
        apply(w, &mut opts, text)?;
    }
    Ok(Options::new(what, opts))
}
