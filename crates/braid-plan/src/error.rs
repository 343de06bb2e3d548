//! Errors of the planning layer, typed by blame.

use std::fmt;

/// A position in a text: 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u64,
    /// 1-based column (in characters).
    pub column: u64,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Every error the planning layer returns, by who is to blame.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The text could not be read: where, and what was expected there.
    #[error("parse error at {pos}: {message}")]
    Parse {
        /// Where the fault is.
        pos: Pos,
        /// What was found and what was expected.
        message: String,
    },
    /// The request is well formed but wrong (unknown name, type mismatch...).
    #[error("plan error: {0}")]
    Plan(String),
    /// Valid, but Braid does not do it (yet).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// A value given as data is not one of its column's type, or cannot be computed
    /// (a literal of an INSERT: `'abc'` for a BIGINT, an overflow).
    #[error("invalid value: {0}")]
    Value(String),
    /// A bug in Braid.
    #[error("internal error (a bug in Braid, please report it): {0}")]
    Internal(String),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::Plan`] with `format!` syntax.
#[macro_export]
macro_rules! plan_err {
    ($($arg:tt)*) => { $crate::error::Error::Plan(format!($($arg)*)) };
}
