//! The string functions of expressions, with PostgreSQL's semantics, counting
//! characters (Unicode scalar values), never bytes.
//!
//! A function whose result is a piece of its argument (`substring`, the trims,
//! `split_part`, and `upper`/`lower`/`replace` when nothing changes) returns a slice of
//! it and touches no memory. A function that makes a new string (`upper`, `lower`,
//! `replace`, `concat`, `||`, `CAST(x AS TEXT)`) writes it into the evaluation's
//! [`Arena`], which the operator evaluating the expression resets once the value has
//! been copied out (into its output batch, a group key, ...). So an expression without
//! such a function never touches the arena, and one with it allocates from the heap
//! only while the arena grows to its largest row.

use super::{list, Arena, Expr, Func};
use crate::batch::{Scalar, Value};
use crate::error::{Error, Result};
use crate::types::DataType;
use bumpalo::collections::String as ArenaString;
use std::fmt::Write;

/// Characters `trim`, `ltrim` and `rtrim` remove when not told which: the space only,
/// as in PostgreSQL (not tabs or newlines).
const SPACE: &str = " ";

/// The result type of a string function on arguments `args` of types `tys`, or an
/// error naming what the function takes. A `NULL` literal passes for a string.
pub(super) fn data_type(f: Func, args: &[Expr], tys: &[DataType]) -> Result<DataType> {
    use DataType::{Int64, String};
    let text = |k: usize| {
        tys.get(k) == Some(&String) || matches!(args.get(k), Some(Expr::Literal(Scalar::Null)))
    };
    let int = |k: usize| tys.get(k) == Some(&Int64);
    let (ok, takes, ty) = match f {
        Func::Upper | Func::Lower => (tys.len() == 1 && text(0), "one string", String),
        // A time's plain text would be its int64: SQL wraps a time argument in
        // `Func::TimeText`, so one here unwrapped is refused rather than wrong.
        Func::Concat => (
            !tys.is_empty() && !tys.iter().any(|t| t.is_time()),
            "one or more values (a timestamp or date as CAST(x AS TEXT))",
            String,
        ),
        Func::Substring => (
            matches!(tys.len(), 2 | 3) && text(0) && int(1) && (tys.len() == 2 || int(2)),
            "a string, a start and an optional length (bigint)",
            String,
        ),
        Func::Btrim | Func::Ltrim | Func::Rtrim => (
            matches!(tys.len(), 1 | 2) && text(0) && (tys.len() == 1 || text(1)),
            "a string and an optional string of the characters to remove",
            String,
        ),
        Func::Replace => (
            tys.len() == 3 && text(0) && text(1) && text(2),
            "three strings (the string, what to replace, what to put instead)",
            String,
        ),
        Func::Strpos => (
            tys.len() == 2 && text(0) && text(1),
            "two strings (the string, the substring to find)",
            Int64,
        ),
        Func::SplitPart => (
            tys.len() == 3 && text(0) && text(1) && int(2),
            "a string, a delimiter and a field number (bigint)",
            String,
        ),
        _ => {
            return Err(Error::Internal(format!(
                "{} is no string function",
                f.name()
            )))
        }
    };
    if !ok {
        return Err(Error::Plan(format!(
            "{} takes {takes}, found {}",
            f.name(),
            list(tys)
        )));
    }
    Ok(ty)
}

/// The type of `l || r`: both strings (or `NULL` literals).
pub(super) fn concat_type(l: (&Expr, DataType), r: (&Expr, DataType)) -> Result<DataType> {
    let text = |(e, t): (&Expr, DataType)| {
        t == DataType::String || matches!(e, Expr::Literal(Scalar::Null))
    };
    if text(l) && text(r) {
        Ok(DataType::String)
    } else {
        Err(Error::Plan(format!(
            "`||` cannot combine {} and {} (it joins strings; write CAST(x AS TEXT) or \
             concat(a, b))",
            l.1, r.1
        )))
    }
}

/// A string function's value on its evaluated arguments (not `concat`, which takes its
/// arguments one by one), or why it has none. Null in, null out.
pub(super) fn call<'a>(
    f: Func,
    args: &[Value<'a>],
    arena: &'a Arena,
) -> std::result::Result<Value<'a>, &'static str> {
    if args.iter().any(|v| matches!(v, Value::Null)) {
        return Ok(Value::Null);
    }
    let s = |k: usize| match args.get(k) {
        Some(Value::Str(s)) => *s,
        _ => "",
    };
    let int = |k: usize| args.get(k).and_then(|v| v.as_int());
    Ok(match f {
        Func::Upper => Value::Str(upper(s(0), arena)),
        Func::Lower => Value::Str(lower(s(0), arena)),
        Func::Substring => Value::Str(substring(s(0), int(1).unwrap_or(1), int(2))?),
        Func::Btrim | Func::Ltrim | Func::Rtrim => {
            let chars = if args.len() > 1 { s(1) } else { SPACE };
            let (start, end) = (f != Func::Rtrim, f != Func::Ltrim);
            Value::Str(trim(s(0), chars, start, end))
        }
        Func::Replace => Value::Str(replace(s(0), s(1), s(2), arena)),
        Func::Strpos => Value::Int(strpos(s(0), s(1))),
        Func::SplitPart => Value::Str(split_part(s(0), s(1), int(2).unwrap_or(0))?),
        _ => return Err("not a string function"),
    })
}

/// Appends `v`'s text (as `CAST(v AS TEXT)` writes it) to `out`; null appends nothing.
pub(super) fn append(out: &mut ArenaString<'_>, v: Value<'_>) {
    match v {
        Value::Null => {}
        Value::Str(s) => out.push_str(s),
        v => {
            // Writing to a string cannot fail.
            let _ = write!(out, "{v}");
        }
    }
}

/// `CAST(v AS TEXT)`: the text Braid's CSV output writes for the value (`1.5`, `2` for
/// the DOUBLE 2.0, `true`, `NaN`, `inf`); null stays null.
pub(super) fn to_text<'a>(v: Value<'a>, arena: &'a Arena) -> Value<'a> {
    match v {
        Value::Null | Value::Str(_) => v,
        Value::Bool(b) => Value::Str(if b { "true" } else { "false" }),
        v => {
            let mut out = ArenaString::new_in(arena);
            append(&mut out, v);
            Value::Str(out.into_bump_str())
        }
    }
}

/// `a || b` on two strings.
pub(super) fn concat2<'a>(a: &'a str, b: &'a str, arena: &'a Arena) -> &'a str {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = ArenaString::with_capacity_in(a.len() + b.len(), arena);
    out.push_str(a);
    out.push_str(b);
    out.into_bump_str()
}

/// `upper(s)`: each character's full Unicode uppercase mapping (`ß` becomes `SS`), with
/// no locale; `s` itself when nothing changes.
pub(super) fn upper<'a>(s: &'a str, arena: &'a Arena) -> &'a str {
    if s.is_ascii() {
        if !s.bytes().any(|b| b.is_ascii_lowercase()) {
            return s;
        }
        let out = arena.alloc_str(s);
        out.make_ascii_uppercase();
        return out;
    }
    let mut out = ArenaString::with_capacity_in(s.len(), arena);
    for c in s.chars() {
        out.extend(c.to_uppercase());
    }
    out.into_bump_str()
}

/// `lower(s)`: each character's full Unicode lowercase mapping, one character at a time
/// (a final `Σ` becomes `σ`), with no locale; `s` itself when nothing changes.
pub(super) fn lower<'a>(s: &'a str, arena: &'a Arena) -> &'a str {
    if s.is_ascii() {
        if !s.bytes().any(|b| b.is_ascii_uppercase()) {
            return s;
        }
        let out = arena.alloc_str(s);
        out.make_ascii_lowercase();
        return out;
    }
    let mut out = ArenaString::with_capacity_in(s.len(), arena);
    for c in s.chars() {
        out.extend(c.to_lowercase());
    }
    out.into_bump_str()
}

/// The byte offset of character `k` (0-based) of `s`, or `s.len()` past its end.
fn byte_of_char(s: &str, k: u64) -> usize {
    if s.is_ascii() {
        return usize::try_from(k).map_or(s.len(), |k| k.min(s.len()));
    }
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    s.char_indices().nth(k).map_or(s.len(), |(b, _)| b)
}

/// `substring(s FROM start [FOR len])`, PostgreSQL's: the characters at positions
/// `start .. start + len` (1-based) that exist, so a start below 1 eats into the
/// length (`substring('hello', 0, 3)` is `he`); a negative length is an error.
pub(super) fn substring(
    s: &str,
    start: i64,
    len: Option<i64>,
) -> std::result::Result<&str, &'static str> {
    let first = i128::from(start.max(1));
    let end = match len {
        Some(l) if l < 0 => return Err("negative substring length"),
        Some(l) => i128::from(start) + i128::from(l),
        None => i128::MAX,
    };
    if end <= first {
        return Ok("");
    }
    // Positions are 1-based; both are at least 1 here.
    let from = byte_of_char(s, (first - 1).min(u64::MAX as i128) as u64);
    let rest = &s[from..];
    let n = (end - first).min(u64::MAX as i128) as u64;
    Ok(&rest[..byte_of_char(rest, n)])
}

/// `btrim`/`ltrim`/`rtrim`: `s` without the characters of `chars` at its start
/// (`start`) and end (`end`).
pub(super) fn trim<'a>(s: &'a str, chars: &str, start: bool, end: bool) -> &'a str {
    let set = |c: char| chars.contains(c);
    let s = if start { s.trim_start_matches(set) } else { s };
    if end {
        s.trim_end_matches(set)
    } else {
        s
    }
}

/// `replace(s, from, to)`: every occurrence of `from`, left to right and not
/// overlapping, replaced by `to`; `s` itself when `from` is empty or absent.
pub(super) fn replace<'a>(s: &'a str, from: &str, to: &str, arena: &'a Arena) -> &'a str {
    if from.is_empty() || !s.contains(from) {
        return s;
    }
    let mut out = ArenaString::with_capacity_in(s.len(), arena);
    let mut last = 0;
    for (i, _) in s.match_indices(from) {
        out.push_str(&s[last..i]);
        out.push_str(to);
        last = i + from.len();
    }
    out.push_str(&s[last..]);
    out.into_bump_str()
}

/// `strpos(s, sub)` (SQL `POSITION(sub IN s)`): the 1-based character position of the
/// first occurrence of `sub` in `s`, 0 if there is none (1 for an empty `sub`).
pub(super) fn strpos(s: &str, sub: &str) -> i64 {
    match s.find(sub) {
        Some(b) => s[..b].chars().count() as i64 + 1,
        None => 0,
    }
}

/// `split_part(s, delim, n)`, PostgreSQL's: field `n` (1-based) of `s` split at each
/// `delim`, counted from the end when `n` is negative; empty when there is no such
/// field or `s` is empty; an empty `delim` makes `s` one field. `n = 0` is an error.
pub(super) fn split_part<'a>(
    s: &'a str,
    delim: &str,
    n: i64,
) -> std::result::Result<&'a str, &'static str> {
    if n == 0 {
        return Err("split_part field position must not be zero");
    }
    if s.is_empty() {
        return Ok("");
    }
    if delim.is_empty() {
        return Ok(if n == 1 || n == -1 { s } else { "" });
    }
    let k = if n > 0 {
        n as u64 - 1
    } else {
        let fields = s.matches(delim).count() as u64 + 1;
        match fields.checked_sub(n.unsigned_abs()) {
            Some(k) => k,
            None => return Ok(""),
        }
    };
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    Ok(s.split(delim).nth(k).unwrap_or(""))
}

#[cfg(test)]
#[path = "strings_tests.rs"]
mod tests;
