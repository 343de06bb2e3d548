//! Time as SQL writes it: a stream's declared time unit (`time_unit = 's' | 'ms' | 'us'
//! | 'ns'`) and `INTERVAL` literals converted exactly to it. An INTERVAL is a whole
//! number of the stream's units or an error (never rounded, never guessed: a stream
//! that does not declare its unit refuses INTERVAL).

use super::{sql_type, sub, Resolve};
use crate::located::mark;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::{BinOp, Expr, Func};
use braid_plan::types::DataType;
use sqlparser::ast;
use sqlparser::ast::Spanned;

pub use braid_plan::time::TimeUnit;

/// The time unit INTERVAL converts to, or why there is none (the message says what to
/// declare).
pub type Unit = std::result::Result<TimeUnit, String>;

/// `iv` in units of `unit`, exactly.
pub fn interval(iv: &ast::Interval, unit: &Unit) -> Result<i64> {
    let shown = ast::Expr::Interval(iv.clone()).to_string();
    if iv.last_field.is_some() || iv.leading_precision.is_some() {
        return Err(Error::NotSupported(format!(
            "`{shown}`: an interval with a range or precision; write one unit, INTERVAL '90' SECOND"
        )));
    }
    if iv.fractional_seconds_precision.is_some() {
        return Err(Error::NotSupported(format!(
            "`{shown}`: an interval with a precision; write INTERVAL '0.5' SECOND"
        )));
    }
    let text = match iv.value.as_ref() {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    let nanos = match &iv.leading_field {
        Some(f) => amount(text.trim(), &f.to_string()),
        None => length_nanos(&text),
    }
    .map_err(|why| Error::Plan(format!("`{shown}`: {why}")))?;
    let unit = unit.as_ref().map_err(|why| Error::Plan(why.clone()))?;
    unit.of_nanos(nanos, &format!("`{shown}`"))
}

/// A length written as text, `'1 minute'`, `'1 hour 30 minutes'`, `'500 ms'`, in
/// nanoseconds.
pub fn length_nanos(text: &str) -> std::result::Result<i128, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return Err(format!(
            "'{text}' is not a length; write a number and a unit, '1 minute' or '90 seconds'"
        ));
    }
    let mut total = 0i128;
    for pair in words.chunks(2) {
        total += amount(pair[0], pair[1])?;
    }
    Ok(total)
}

/// `number` of `unit` in nanoseconds (a decimal number must come out whole).
fn amount(number: &str, unit: &str) -> std::result::Result<i128, String> {
    let u = unit.to_ascii_lowercase();
    let per: i128 = match u.trim_end_matches('s') {
        "n" | "nanosecond" => 1,
        "u" | "microsecond" => 1_000,
        "m" | "millisecond" => 1_000_000,
        "" | "second" | "sec" => 1_000_000_000,
        "min" | "minute" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        "week" => 7 * 86_400_000_000_000,
        "month" | "year" => {
            return Err(format!(
                "{unit} has no fixed length; write days, hours, minutes or seconds"
            ))
        }
        _ => {
            return Err(format!(
                "unknown unit `{unit}`; write DAY, HOUR, MINUTE, SECOND, MILLISECOND, MICROSECOND or NANOSECOND"
            ))
        }
    };
    // `ms` trims to `m`: a bare `m` is ambiguous, so only `ms` means milliseconds.
    if u == "m" {
        return Err("`m` is ambiguous; write min or ms".into());
    }
    let bad = || format!("'{number}' is not a number of {unit}");
    let (neg, digits) = match number.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(frac) || frac.len() > 18 {
        return Err(bad());
    }
    let whole: i128 = whole.parse().map_err(|_| bad())?;
    let scale = 10i128.pow(frac.len() as u32);
    let frac_n: i128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    if (frac_n * per) % scale != 0 {
        return Err(format!(
            "{number} {unit} is not a whole number of nanoseconds"
        ));
    }
    let n = whole
        .checked_mul(per)
        .and_then(|w| w.checked_add(frac_n * per / scale))
        .ok_or_else(bad)?;
    Ok(if neg { -n } else { n })
}

/// `left op right`. A timestamp takes an INTERVAL (in microseconds, whatever the
/// stream's unit) in `+` and `-`, and nothing else: a plain number's unit would be a
/// guess. `ts - ts` is refused by the type check (no interval type).
pub(crate) fn arithmetic(
    left: &ast::Expr,
    op: BinOp,
    right: &ast::Expr,
    r: &dyn Resolve,
) -> Result<Expr> {
    let as_interval = |e: &ast::Expr| match e {
        ast::Expr::Interval(iv) => Some(iv.clone()),
        _ => None,
    };
    let (li, ri) = (as_interval(left), as_interval(right));
    let l = li.is_none().then(|| sub(left, r)).transpose()?;
    let rr = ri.is_none().then(|| sub(right, r)).transpose()?;
    let time = |x: &Expr| r.type_of(x).filter(|t| t.is_time());
    let lt = l.as_ref().and_then(time);
    let rt = rr.as_ref().and_then(time);
    let side = |iv: Option<ast::Interval>,
                x: Option<Expr>,
                other: Option<DataType>,
                at: &ast::Expr| match x {
        Some(x) => Ok(x),
        None => (|| {
            let iv = iv.ok_or_else(|| Error::Internal("an operand vanished".into()))?;
            let unit = match other {
                Some(DataType::Date) => {
                    return Err(Error::NotSupported(
                        "DATE arithmetic; CAST the date AS TIMESTAMP".into(),
                    ))
                }
                Some(_) => Ok(TimeUnit::Micro),
                None => r.time_unit(),
            };
            Ok(Expr::Literal(Scalar::Int(interval(&iv, &unit)?)))
        })()
        .map_err(|e| mark(at.span(), e)),
    };
    let plain = |iv: &Option<ast::Interval>, t: Option<DataType>| iv.is_none() && t.is_none();
    if matches!(op, BinOp::Add | BinOp::Sub)
        && ((lt.is_some() && plain(&ri, rt)) || (rt.is_some() && plain(&li, lt)))
    {
        return Err(Error::Plan(format!(
            "`{left}` with `{right}`: a timestamp takes an INTERVAL, ts + INTERVAL '5' SECOND (a plain number's unit would be a guess)"
        )));
    }
    let l = side(li, l, rt, left)?;
    let rr = side(ri, rr, lt, right)?;
    if op == BinOp::Concat {
        // A time joined with text is its text, as in PostgreSQL (`'at ' || ts`).
        let is_text = |x: &Expr| {
            matches!(x, Expr::Literal(Scalar::Null)) || r.type_of(x) == Some(DataType::String)
        };
        return Ok(match (lt, rt) {
            (Some(t), None) if is_text(&rr) => text(l, t).bin(op, rr),
            (None, Some(t)) if is_text(&l) => l.bin(op, text(rr, t)),
            _ => l.bin(op, rr),
        });
    }
    Ok(l.bin(op, rr))
}

/// `TIMESTAMP '2026-11-24 10:15:00'`, `TIMESTAMPTZ '...Z'`, `DATE '2026-11-24'`: the
/// value, typed.
pub(crate) fn typed_literal(ts: &ast::TypedString) -> Result<Expr> {
    let ty = sql_type(&ts.data_type)
        .map_err(|why| Error::NotSupported(format!("a literal of {why}")))?;
    let ast::Value::SingleQuotedString(text) = &ts.value.value else {
        return Err(Error::Plan(format!(
            "{ts}: write the value in single quotes"
        )));
    };
    if !ty.is_time() {
        return Err(Error::NotSupported(format!(
            "{ts}; typed literals are TIMESTAMP, TIMESTAMPTZ and DATE (write CAST('...' AS type))"
        )));
    }
    let v = braid_plan::time::parse(text, ty).map_err(Error::Plan)?;
    Ok(Expr::Cast(Box::new(Expr::Literal(Scalar::Int(v))), ty))
}

/// `NOW()`, `PROCTIME()`, `CURRENT_TIMESTAMP` and the like read the clock: refused by
/// name, since Braid's answers depend on event time only (the same on every run).
pub(crate) fn refuse_clock(name: &str) -> Result<()> {
    const CLOCK: [&str; 8] = [
        "now",
        "proctime",
        "current_timestamp",
        "current_date",
        "current_time",
        "localtimestamp",
        "localtime",
        "current_row_timestamp",
    ];
    if CLOCK.iter().any(|c| name.eq_ignore_ascii_case(c)) {
        return Err(Error::NotSupported(format!(
            "{}: processing time (the clock); Braid's answers depend on event time only, the same on every run",
            name.to_uppercase()
        )));
    }
    Ok(())
}

/// `x`, of time type `ty`, as PostgreSQL's text of it (`CAST(x AS TEXT)`; the plain
/// cast would write its int64).
pub(crate) fn text(x: Expr, ty: DataType) -> Expr {
    Expr::Call(Func::TimeText(ty), vec![x])
}

/// `x` as text when it is of a time type (an operand of `||`, an argument of
/// `concat`), else `x`.
pub(crate) fn text_if_time(x: Expr, r: &dyn Resolve) -> Expr {
    match r.type_of(&x) {
        Some(t) if t.is_time() => text(x, t),
        _ => x,
    }
}

/// `CAST(x AS to)` where a time type is involved (`from` is x's type when known): None
/// when the plain cast is right (text parsed, BIGINT taken as microseconds or days, a
/// time type as its BIGINT), a DATE made microseconds for a timestamp, the rest refused.
pub(crate) fn cast(x: Expr, from: Option<DataType>, to: DataType) -> Result<Option<Expr>> {
    use DataType::*;
    let refuse = |f: DataType| {
        Err(Error::NotSupported(format!(
            "CAST from {f} to {to}; a time type casts from TEXT or BIGINT (microseconds, or days for DATE) and to BIGINT and TEXT, and DATE to TIMESTAMP"
        )))
    };
    match (from, to) {
        (Some(Date), Timestamp | TimestampTz) => {
            let days = Expr::Cast(Box::new(x), Int64);
            let micros = days.bin(BinOp::Mul, Expr::Literal(Scalar::Int(86_400_000_000)));
            Ok(Some(Expr::Cast(Box::new(micros), to)))
        }
        (Some(Timestamp | TimestampTz), Date) => refuse(from.unwrap_or(to)),
        (Some(f @ (Float64 | Bool)), Timestamp | TimestampTz | Date) => refuse(f),
        (Some(f @ (Timestamp | TimestampTz | Date)), String) => Ok(Some(text(x, f))),
        (Some(f @ (Timestamp | TimestampTz | Date)), Float64 | Bool) => refuse(f),
        _ => Ok(None),
    }
}
