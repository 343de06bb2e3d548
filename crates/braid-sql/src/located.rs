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
use sqlparser::tokenizer::Span;

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
    let pos = Pos {
        line: num_after("Line:").unwrap_or(1),
        column: num_after("Column:").unwrap_or(1),
    };
    let message = msg
        .split(" at Line:")
        .next()
        .unwrap_or(msg)
        .trim_start_matches("sql parser error: ")
        .to_string();
    Error::Parse {
        pos,
        message: format!("{message}\n{}", caret(text, pos)),
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
        // A position recorded deeper down (see `mark`) wins over `span`.
        let (pos, m) = match m.strip_prefix("@@").and_then(|r| r.split_once("@@")) {
            Some((lc, rest)) => {
                let (l, c) = lc.split_once(':').unwrap_or(("0", "0"));
                let pos = Pos {
                    line: l.parse().unwrap_or(0),
                    column: c.parse().unwrap_or(0),
                };
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
        other => other,
    }
}

/// Records `span` in an error that has no position yet (resolved to text by [`locate`]).
pub(crate) fn mark(span: Span, e: Error) -> Error {
    let tag = |m: String| {
        if m.starts_with("@@") || m.starts_with("at line ") || span.start.line == 0 {
            m
        } else {
            format!("@@{}:{}@@{m}", span.start.line, span.start.column)
        }
    };
    match e {
        Error::Plan(m) => Error::Plan(tag(m)),
        Error::NotSupported(m) => Error::NotSupported(tag(m)),
        other => other,
    }
}
