//! Errors that point into the script: `at line L, column C: message`, then the line with a
//! caret under the spot.
//!
//! Planning code builds its errors without a position ([`Error::Plan`],
//! [`Error::NotSupported`]) and the code holding the syntax node locates them with
//! [`At::at`], on an error or on a result:
//!
//! ```text
//! let def = catalog.stream(&name).at(text, q.span())?;
//! return Err(Error::Plan("LATE takes a sink".into()).at(text, f.span()));
//! ```
//!
//! The innermost position wins: an error that already has one keeps it, and
//! expression conversion records the failing sub-expression's span ([`mark`]) for the
//! outer [`At::at`] to print.

use braid_plan::error::{Error, Pos, Result};
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Span, Token, Tokenizer};

/// Adds the position of a syntax node to an error (or a result's error) that has none.
pub(crate) trait At {
    /// `self` with the position of `span` in `text` (line, column and caret), unless it
    /// has one already or is not a plan or not-supported error.
    fn at(self, text: &str, span: Span) -> Self;
}

impl At for Error {
    fn at(self, text: &str, span: Span) -> Error {
        locate(text, span, self)
    }
}

impl<T> At for Result<T> {
    fn at(self, text: &str, span: Span) -> Result<T> {
        self.map_err(|e| locate(text, span, e))
    }
}

/// Turns a sqlparser message ("... at Line: 1, Column: 5") into a positioned error.
pub(crate) fn parse_error(text: &str, msg: &str) -> Error {
    let num_after = |key: &str| -> Option<u64> {
        let i = msg.find(key)? + key.len();
        msg[i..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    // sqlparser gives no position at the end of the input: point after the last token.
    let pos = match (num_after("Line:"), num_after("Column:")) {
        (Some(line), Some(column)) if line > 0 => Pos { line, column },
        _ => end_of(text),
    };
    let message = msg
        .split(" at Line:")
        .next()
        .unwrap_or(msg)
        .trim_start_matches("sql parser error: ")
        .replace("found: EOF", "found: the end of the input");
    Error::Parse {
        pos,
        message: format!("{message}\n{}", caret(text, pos)),
    }
}

/// The position right after the last token of `text` (comments and blanks are no tokens).
fn end_of(text: &str) -> Pos {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .unwrap_or_default();
    let last = tokens
        .iter()
        .rev()
        .find(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF));
    match last {
        Some(t) => Pos {
            line: t.span.end.line,
            column: t.span.end.column,
        },
        None => {
            // Untokenizable text: after its last character that is not blank.
            let trimmed = text.trim_end();
            let line = trimmed.lines().count().max(1);
            let column = trimmed.lines().last().map_or(0, |l| l.chars().count()) + 1;
            Pos {
                line: line as u64,
                column: column as u64,
            }
        }
    }
}

/// The line at `pos` with a caret under the column.
pub(crate) fn caret(text: &str, pos: Pos) -> String {
    let line = text
        .lines()
        .nth(pos.line.saturating_sub(1) as usize)
        .unwrap_or("");
    let pad = " ".repeat(pos.column.saturating_sub(1) as usize);
    format!("  {line}\n  {pad}^")
}

/// Adds the position of `span` in `text` (with a caret) to a plan or not-supported
/// error that has none yet.
pub fn locate(text: &str, span: Span, e: Error) -> Error {
    let with = |m: String| {
        if m.starts_with("at line ") {
            return m;
        }
        // A position recorded deeper down (see `mark`, `mark_word`) wins over `span`.
        let (pos, m) = match m.strip_prefix("@@").and_then(|r| r.split_once("@@")) {
            Some((lc, rest)) => {
                let mut parts = lc.splitn(3, ':');
                let mut num = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let mut pos = Pos {
                    line: num(),
                    column: num(),
                };
                if let Some(word) = parts.next() {
                    pos = word_at_or_after(text, pos, word).unwrap_or(pos);
                }
                (pos, rest.to_string())
            }
            None => (
                Pos {
                    line: span.start.line,
                    column: span.start.column,
                },
                m,
            ),
        };
        if pos.line == 0 {
            m
        } else {
            format!("at {pos}: {m}\n{}", caret(text, pos))
        }
    };
    match e {
        Error::Plan(m) => Error::Plan(with(m)),
        Error::NotSupported(m) => Error::NotSupported(with(m)),
        Error::Value(m) => Error::Value(with(m)),
        other => other,
    }
}

/// Records `span` in an error that has no position yet (resolved to text by [`locate`]).
pub(crate) fn mark(span: Span, e: Error) -> Error {
    mark_at(span, "", e)
}

/// Records, in an error that has no position yet, the position of the first keyword
/// `word` at or after the start of `span` (the start itself when there is none):
/// sqlparser keeps no position for some clauses (`OVER (...)`, `WITHIN GROUP`, `FILTER`),
/// so [`locate`] finds the keyword in the text.
pub(crate) fn mark_word(span: Span, word: &str, e: Error) -> Error {
    mark_at(span, word, e)
}

fn mark_at(span: Span, word: &str, e: Error) -> Error {
    let tag = |m: String| {
        if m.starts_with("@@") || m.starts_with("at line ") || span.start.line == 0 {
            m
        } else if word.is_empty() {
            format!("@@{}:{}@@{m}", span.start.line, span.start.column)
        } else {
            format!("@@{}:{}:{word}@@{m}", span.start.line, span.start.column)
        }
    };
    match e {
        Error::Plan(m) => Error::Plan(tag(m)),
        Error::NotSupported(m) => Error::NotSupported(tag(m)),
        Error::Value(m) => Error::Value(tag(m)),
        other => other,
    }
}

/// The position of the first unquoted word `word` (any case) at or after `from`.
fn word_at_or_after(text: &str, from: Pos, word: &str) -> Option<Pos> {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .ok()?;
    tokens.iter().find_map(|t| {
        let start = (t.span.start.line, t.span.start.column);
        match &t.token {
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case(word)
                    && start >= (from.line, from.column) =>
            {
                Some(Pos {
                    line: start.0,
                    column: start.1,
                })
            }
            _ => None,
        }
    })
}
