//! The scalar operations an expression evaluates: arithmetic and comparisons
//! ([`binary`]), casts, the built-in functions, LIKE, and the stable hashes.

use super::{arrays, strings, Arena, BinOp, CallError, Expr, Fault, Func};
use crate::batch::{Row, Value};
use crate::types::DataType;

/// `a op b`, or why it has no value.
pub(super) fn binary<'a>(
    op: BinOp,
    a: Value<'a>,
    b: Value<'a>,
) -> std::result::Result<Value<'a>, &'static str> {
    use Value::*;
    Ok(match op {
        BinOp::And => match (a, b) {
            (Bool(false), _) | (_, Bool(false)) => Bool(false),
            (Bool(true), Bool(true)) => Bool(true),
            _ => Null,
        },
        BinOp::Or => match (a, b) {
            (Bool(true), _) | (_, Bool(true)) => Bool(true),
            (Bool(false), Bool(false)) => Bool(false),
            _ => Null,
        },
        // Two strings are joined by `Expr::value`, which has the arena; a null gives null.
        BinOp::Concat => Null,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => match (a, b) {
            (Int(x), Int(y)) => {
                if y == 0 && matches!(op, BinOp::Div | BinOp::Mod) {
                    return Err("division by zero");
                }
                let v = match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div => x.checked_div(y),
                    _ => x.checked_rem(y),
                };
                Int(v.ok_or("integer overflow")?)
            }
            (Int(_) | Float(_), Int(_) | Float(_)) => {
                let (x, y) = (to_f64(a), to_f64(b));
                if y == 0.0 && matches!(op, BinOp::Div | BinOp::Mod) {
                    return Err("division by zero");
                }
                let v = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    _ => x % y,
                };
                if !v.is_finite() && x.is_finite() && y.is_finite() {
                    return Err("float overflow");
                }
                Float(v)
            }
            _ => Null,
        },
        _ => {
            let ord = match (a, b) {
                (Null, _) | (_, Null) => return Ok(Null),
                (Int(x), Int(y)) => x.cmp(&y),
                (Int(_) | Float(_), Int(_) | Float(_)) => match to_f64(a).partial_cmp(&to_f64(b)) {
                    Some(o) => o,
                    None => return Ok(Null),
                },
                (Bool(x), Bool(y)) => x.cmp(&y),
                (Str(x), Str(y)) => x.cmp(y),
                _ => return Ok(Null),
            };
            Bool(op.compare(ord))
        }
    })
}

fn to_f64(v: Value<'_>) -> f64 {
    match v {
        Value::Int(i) => i as f64,
        Value::Float(f) => f,
        _ => f64::NAN,
    }
}

/// `CAST(v AS t)`, or why `v` does not convert.
pub(super) fn cast(v: Value<'_>, t: DataType) -> std::result::Result<Value<'_>, &'static str> {
    // Floats in [-2^63, 2^63) truncate to an int64; others do not fit.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    Ok(match (v, t) {
        (Value::Null, _) => Value::Null,
        (Value::Int(_), DataType::Int64)
        | (Value::Int(_), DataType::Timestamp | DataType::TimestampTz | DataType::Date)
        | (Value::Float(_), DataType::Float64)
        | (Value::Bool(_), DataType::Bool)
        | (Value::Str(_), DataType::String) => v,
        (Value::Int(i), DataType::Float64) => Value::Float(i as f64),
        (Value::Float(f), DataType::Int64) => {
            if !(f.is_finite() && (-TWO_63..TWO_63).contains(&f.trunc())) {
                return Err("value out of range for bigint");
            }
            Value::Int(f.trunc() as i64)
        }
        (Value::Bool(b), DataType::Int64) => Value::Int(b as i64),
        (Value::Int(i), DataType::Bool) => Value::Bool(i != 0),
        (Value::Str(s), DataType::Int64) => {
            Value::Int(s.trim().parse().map_err(|_| "cannot cast to bigint")?)
        }
        (Value::Str(s), DataType::Float64) => {
            Value::Float(s.trim().parse().map_err(|_| "cannot cast to double")?)
        }
        (Value::Str(s), DataType::Bool) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "1" => Value::Bool(true),
            "false" | "f" | "0" => Value::Bool(false),
            _ => return Err("cannot cast to boolean"),
        },
        (Value::Str(s), t) if t.is_time() => {
            Value::Int(crate::time::parse(s, t).map_err(|_| match t {
                DataType::Date => "cannot cast to date",
                _ => "cannot cast to timestamp",
            })?)
        }
        // Casts to a string are `strings::to_text`'s, with the arena.
        _ => return Err("unsupported cast"),
    })
}

/// The stable hash used by `hash(x)` and by hash partitioning: FNV-1a, top bit cleared.
pub fn stable_hash(v: Value<'_>) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    match v {
        Value::Null => eat(&[0]),
        Value::Int(i) => eat(&i.to_le_bytes()),
        Value::Float(f) => eat(&crate::batch::float_key(f).to_bits().to_le_bytes()),
        Value::Bool(b) => eat(&[b as u8]),
        Value::Str(s) => eat(s.as_bytes()),
        // A word at a time (FNV-1a over 64-bit words, after a type byte): arrays are
        // long, and a stage cut hashes every row it passes on.
        Value::Floats(a) => {
            eat(&[5]);
            for x in a {
                h = (h ^ crate::batch::float_key(*x).to_bits()).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Value::Ints(a) => {
            eat(&[6]);
            for &x in a {
                h = (h ^ x as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    (h >> 1) as i64
}

/// `hash(v0, v1, ...)` one argument at a time: `h` the hash of the arguments before
/// `v`, which is argument `k`.
#[inline]
pub fn hash_step(h: i64, k: usize, v: Value<'_>) -> i64 {
    let v = stable_hash(v);
    match k {
        0 => v,
        _ => (h.wrapping_mul(0x100_0000_01b3) ^ v) & i64::MAX,
    }
}

/// `hash(values...)`, as the SQL function and hash partitioning compute it.
pub fn hash_values<'a>(values: impl IntoIterator<Item = Value<'a>>) -> i64 {
    values
        .into_iter()
        .enumerate()
        .fold(0, |h, (k, v)| hash_step(h, k, v))
}

/// A 63-bit hash of a row's values (the broadcast bit of a lane is never set).
pub fn row_hash(row: &Row<'_>) -> u64 {
    values_hash((0..row.arity()).map(|c| row.get(c)))
}

/// [`row_hash`] of a row of these int64 values.
pub fn int_row_hash(values: &[i64]) -> u64 {
    values_hash(values.iter().map(|&v| Value::Int(v)))
}

#[inline]
fn values_hash<'a>(values: impl Iterator<Item = Value<'a>>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        h = (h ^ stable_hash(v) as u64).wrapping_mul(0x100_0000_01b3);
    }
    h & !crate::batch::RowKey::BROADCAST
}

/// A built-in function's value, or why it has none with the argument at fault (a fault
/// of an argument is in `fault`).
pub(super) fn call<'a>(
    f: Func,
    args: &'a [Expr],
    row: &Row<'a>,
    fault: &mut Option<Fault>,
    arena: &'a Arena,
) -> std::result::Result<Value<'a>, CallError<'a>> {
    let mut arg = |a: &'a Expr| -> std::result::Result<Value<'a>, CallError<'a>> {
        Ok(a.value(row, fault, arena))
    };
    let own = |why: &'static str, v: Value<'a>| (why, [v, Value::Null, Value::Null], 1);
    Ok(match f {
        Func::Abs => match args.first().map(arg).transpose()? {
            Some(Value::Int(i)) => Value::Int(
                i.checked_abs()
                    .ok_or(own("integer overflow", Value::Int(i)))?,
            ),
            Some(Value::Float(x)) => Value::Float(x.abs()),
            _ => Value::Null,
        },
        Func::Hash => {
            let mut h: i64 = 0;
            for (k, a) in args.iter().enumerate() {
                h = hash_step(h, k, arg(a)?);
            }
            Value::Int(h)
        }
        Func::Coalesce => {
            for a in args {
                let v = arg(a)?;
                if !matches!(v, Value::Null) {
                    return Ok(v);
                }
            }
            Value::Null
        }
        Func::Like => match (arg(&args[0])?, arg(&args[1])?) {
            (Value::Str(s), Value::Str(p)) => Value::Bool(like(s, p)),
            _ => Value::Null,
        },
        Func::Length => match arg(&args[0])? {
            Value::Str(s) => Value::Int(s.chars().count() as i64),
            _ => Value::Null,
        },
        Func::Floor | Func::Ceil | Func::Round | Func::Sqrt => {
            let v = arg(&args[0])?;
            let x = match v {
                Value::Int(i) => i as f64,
                Value::Float(x) => x,
                _ => return Ok(Value::Null),
            };
            Value::Float(match f {
                Func::Floor => x.floor(),
                Func::Ceil => x.ceil(),
                Func::Round => x.round(),
                _ if x < 0.0 => return Err(own("square root of a negative number", v)),
                _ => x.sqrt(),
            })
        }
        Func::Concat => {
            let mut out = bumpalo::collections::String::new_in(arena);
            for a in args {
                strings::append(&mut out, arg(a)?);
            }
            Value::Str(out.into_bump_str())
        }
        Func::TimeText(t) => match arg(&args[0])? {
            Value::Int(v) => {
                let mut out = bumpalo::collections::String::new_in(arena);
                if !crate::time::write_sql_text(&mut out, v, t) {
                    return Err(own("value out of range for text", Value::Int(v)));
                }
                Value::Str(out.into_bump_str())
            }
            _ => Value::Null,
        },
        Func::Upper
        | Func::Lower
        | Func::Substring
        | Func::Btrim
        | Func::Ltrim
        | Func::Rtrim
        | Func::Replace
        | Func::Strpos
        | Func::SplitPart => {
            // At most three arguments (the type check saw to it).
            let mut vals = [Value::Null; 3];
            for (v, a) in vals.iter_mut().zip(args) {
                *v = arg(a)?;
            }
            let n = args.len().min(3);
            strings::call(f, &vals[..n], arena).map_err(|why| (why, vals, n))?
        }
        Func::MakeArray => {
            let mut vals = bumpalo::collections::Vec::with_capacity_in(args.len(), arena);
            for a in args {
                vals.push(arg(a)?);
            }
            arrays::call(f, &vals, arena)?
        }
        // Named one by one, not by `is_array_fn`: a function added later must be
        // placed here on purpose.
        Func::Cardinality
        | Func::ArraySum
        | Func::ArrayMin
        | Func::ArrayMax
        | Func::ArrayAvg
        | Func::ArrayArgmax
        | Func::Evens
        | Func::Odds
        | Func::Element
        | Func::Slice
        | Func::ArrayCat
        | Func::Dot
        | Func::Fft
        | Func::Ifft
        | Func::PowerSpectrum => {
            // At most three arguments (the type check saw to it).
            let mut vals = [Value::Null; 3];
            for (v, a) in vals.iter_mut().zip(args) {
                *v = arg(a)?;
            }
            arrays::call(f, &vals[..args.len().min(3)], arena)?
        }
        Func::Least | Func::Greatest => {
            let mut best: Option<Value<'a>> = None;
            for a in args {
                let v = arg(a)?;
                if matches!(v, Value::Null) {
                    return Ok(Value::Null);
                }
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let less = matches!(binary(BinOp::Lt, v, b), Ok(Value::Bool(true)));
                        if less == (f == Func::Least) {
                            v
                        } else {
                            b
                        }
                    }
                });
            }
            best.unwrap_or(Value::Null)
        }
    })
}

/// SQL `LIKE`: `%` matches any run of characters, `_` exactly one.
pub fn like(s: &str, pattern: &str) -> bool {
    if s.is_ascii() && pattern.is_ascii() {
        return like_units(s.as_bytes(), pattern.as_bytes(), b'%', b'_');
    }
    let (s, p): (Vec<char>, Vec<char>) = (s.chars().collect(), pattern.chars().collect());
    like_units(&s, &p, '%', '_')
}

/// LIKE over code units (bytes of ASCII text, or chars): no allocation.
fn like_units<T: PartialEq + Copy>(s: &[T], p: &[T], any: T, one: T) -> bool {
    // Greedy matching with backtracking to the last `%`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if j < p.len() && (p[j] == one || (p[j] != any && p[j] == s[i])) {
            i += 1;
            j += 1;
        } else if j < p.len() && p[j] == any {
            star = Some((j, i));
            j += 1;
        } else if let Some((sj, si)) = star {
            j = sj + 1;
            i = si + 1;
            star = Some((sj, si + 1));
        } else {
            return false;
        }
    }
    p[j..].iter().all(|&c| c == any)
}

#[cfg(test)]
mod like_tests {
    use super::like;

    #[test]
    fn like_matches_sql() {
        assert!(like("1-2 ERROR request", "% ERROR %"));
        assert!(!like("1-2 INFO request", "% ERROR %"));
        assert!(like("abc", "a_c") && like("abc", "%") && like("", "%"));
        assert!(!like("abc", "a_") && !like("ab", "abc"));
        assert!(like("aXbXc", "a%b%c") && like("ααβ", "_α%") && !like("αβ", "β%"));
    }
}
