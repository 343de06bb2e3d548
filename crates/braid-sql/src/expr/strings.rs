//! The string syntax sqlparser gives nodes of their own: `SUBSTRING(s FROM a FOR n)`
//! and `SUBSTRING(s, a, n)`, `TRIM([BOTH|LEADING|TRAILING] [chars FROM] s)` and
//! `TRIM(s, chars)`, `POSITION(sub IN s)`. Each becomes a call of a built-in function
//! (`substring`, `btrim`/`ltrim`/`rtrim`, `strpos`), as PostgreSQL rewrites them.

use super::{sub, Resolve};
use braid_plan::error::{Error, Result};
use braid_plan::expr::{Expr, Func};
use sqlparser::ast;

/// `SUBSTRING(s FROM start FOR len)`, either part optional (start 1 without `FROM`), or
/// `SUBSTRING(s, start[, len])`.
pub(super) fn substring(
    expr: &ast::Expr,
    from: Option<&ast::Expr>,
    len: Option<&ast::Expr>,
    r: &dyn Resolve,
) -> Result<Expr> {
    if from.is_none() && len.is_none() {
        return Err(Error::Plan(
            "SUBSTRING needs a start (FROM start) or a length (FOR len)".into(),
        ));
    }
    let mut args = vec![sub(expr, r)?];
    args.push(match from {
        Some(f) => sub(f, r)?,
        None => Expr::int(1),
    });
    if let Some(l) = len {
        args.push(sub(l, r)?);
    }
    Ok(Expr::Call(Func::Substring, args))
}

/// `TRIM([BOTH | LEADING | TRAILING] [chars FROM] s)` or `TRIM(s, chars)`.
pub(super) fn trim(
    expr: &ast::Expr,
    side: Option<&ast::TrimWhereField>,
    what: Option<&ast::Expr>,
    characters: Option<&[ast::Expr]>,
    r: &dyn Resolve,
) -> Result<Expr> {
    let f = match side {
        None | Some(ast::TrimWhereField::Both) => Func::Btrim,
        Some(ast::TrimWhereField::Leading) => Func::Ltrim,
        Some(ast::TrimWhereField::Trailing) => Func::Rtrim,
    };
    let mut args = vec![sub(expr, r)?];
    match (what, characters) {
        (Some(w), _) => args.push(sub(w, r)?),
        (None, Some([c])) => args.push(sub(c, r)?),
        (None, Some(more)) if !more.is_empty() => {
            return Err(Error::NotSupported(format!(
                "TRIM with {} strings of characters; put the characters to remove in one string",
                more.len()
            )))
        }
        _ => {}
    }
    Ok(Expr::Call(f, args))
}

/// `POSITION(needle IN haystack)`: `strpos(haystack, needle)`.
pub(super) fn position(needle: &ast::Expr, haystack: &ast::Expr, r: &dyn Resolve) -> Result<Expr> {
    Ok(Expr::Call(
        Func::Strpos,
        vec![sub(haystack, r)?, sub(needle, r)?],
    ))
}
