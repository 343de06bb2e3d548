//! Typing: an expression's result type, checking its operands' types.

use super::{arrays, strings, BinOp, Expr, Func, UDF_MAX_ARGS};
use crate::error::{Error, Result};
use crate::types::{DataType, Schema};

impl Expr {
    /// The result type, checking operand types; errors name both types.
    pub fn data_type(&self, schema: &Schema) -> Result<DataType> {
        use DataType::*;
        Ok(match self {
            Expr::Column(i, name) => schema.fields.get(*i).map(|f| f.ty).ok_or_else(|| {
                Error::Internal(format!(
                    "column {name} (#{i}) is outside the schema {schema}"
                ))
            })?,
            Expr::Literal(s) => s.as_value().data_type().unwrap_or(Int64),
            Expr::Binary(op, l, r) => {
                let (a, b) = (l.data_type(schema)?, r.data_type(schema)?);
                if a.is_array() || b.is_array() {
                    return arrays::binary_type(*op, a, b);
                }
                match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => {
                        match (a, b) {
                            (Int64, Int64) => Int64,
                            // A timestamp and microseconds (SQL writes an INTERVAL).
                            (t @ (Timestamp | TimestampTz), Int64)
                                if matches!(op, BinOp::Add | BinOp::Sub) =>
                            {
                                t
                            }
                            (Int64, t @ (Timestamp | TimestampTz)) if *op == BinOp::Add => t,
                            (Int64 | Float64, Int64 | Float64) => Float64,
                            _ => return Err(type_error(op.symbol(), a, b)),
                        }
                    }
                    BinOp::And | BinOp::Or => match (a, b) {
                        (Bool, Bool) => Bool,
                        _ => return Err(type_error(op.symbol(), a, b)),
                    },
                    BinOp::Concat => strings::concat_type((l, a), (r, b))?,
                    _ => {
                        let numeric = |t| matches!(t, Int64 | Float64);
                        if a == b || (numeric(a) && numeric(b)) {
                            Bool
                        } else {
                            return Err(type_error(op.symbol(), a, b));
                        }
                    }
                }
            }
            Expr::Not(e) => match e.data_type(schema)? {
                Bool => Bool,
                t => return Err(Error::Plan(format!("NOT needs a bool, found {t}"))),
            },
            Expr::Neg(e) => match e.data_type(schema)? {
                t @ (Int64 | Float64) => t,
                t => {
                    return Err(Error::Plan(format!(
                        "unary minus needs a number, found {t}"
                    )))
                }
            },
            Expr::IsNull(..) => Bool,
            Expr::Case(arms, default) => {
                let mut ty = None;
                for (c, v) in arms {
                    let ct = c.data_type(schema)?;
                    if ct != Bool {
                        return Err(Error::Plan(format!("CASE WHEN needs a bool, found {ct}")));
                    }
                    let vt = v.data_type(schema)?;
                    match ty {
                        None => ty = Some(vt),
                        Some(t) if t == vt => {}
                        Some(t) => return Err(type_error("CASE", t, vt)),
                    }
                }
                if let Some(d) = default {
                    let dt = d.data_type(schema)?;
                    if let Some(t) = ty {
                        if t != dt {
                            return Err(type_error("CASE ELSE", t, dt));
                        }
                    }
                    ty = Some(dt);
                }
                ty.unwrap_or(Int64)
            }
            Expr::Cast(e, DataType::String) if e.data_type(schema)?.is_time() => {
                return Err(Error::NotSupported(
                    "CAST of a timestamp or date to text (it would be its int64)".into(),
                ))
            }
            Expr::Cast(e, t) if t.is_array() || e.data_type(schema)?.is_array() => {
                return Err(Error::NotSupported(format!(
                    "CAST to or from an array (to {t}); build arrays with ARRAY[...] or read them from a stream"
                )))
            }
            Expr::Cast(_, t) => *t,
            Expr::Udf(u, args) => {
                if args.len() > UDF_MAX_ARGS {
                    return Err(Error::Plan(format!(
                        "{} takes at most {UDF_MAX_ARGS} arguments",
                        u.name
                    )));
                }
                let tys = args
                    .iter()
                    .map(|a| a.data_type(schema))
                    .collect::<Result<Vec<_>>>()?;
                match u.f.return_type(&tys)? {
                    t @ (Int64 | Float64 | Bool | String) => t,
                    t => {
                        return Err(Error::NotSupported(format!(
                            "scalar function {} returning {t}; UDFs return int64, float64, bool or string",
                            u.name
                        )))
                    }
                }
            }
            Expr::Call(f, args) => {
                let tys = args
                    .iter()
                    .map(|a| a.data_type(schema))
                    .collect::<Result<Vec<_>>>()?;
                match f {
                    Func::Hash => {
                        if tys.is_empty() {
                            return Err(Error::Plan("hash needs at least one argument".into()));
                        }
                        Int64
                    }
                    Func::Like => match tys.as_slice() {
                        [String, String] => Bool,
                        _ => {
                            return Err(Error::Plan(format!(
                                "LIKE compares a string with a string pattern, found {}",
                                list(&tys)
                            )))
                        }
                    },
                    Func::Length => match tys.as_slice() {
                        [String] => Int64,
                        _ => {
                            return Err(Error::Plan(format!(
                                "length takes one string, found {}",
                                list(&tys)
                            )))
                        }
                    },
                    Func::Floor | Func::Ceil | Func::Round | Func::Sqrt => match tys.as_slice() {
                        [Int64 | Float64] => Float64,
                        _ => {
                            return Err(Error::Plan(format!(
                                "{} takes one number, found {}",
                                f.name(),
                                list(&tys)
                            )))
                        }
                    },
                    Func::Abs => match tys.as_slice() {
                        [t @ (Int64 | Float64)] => *t,
                        _ => {
                            let found: Vec<std::string::String> = tys.iter().map(|t| t.to_string()).collect();
                            return Err(Error::Plan(format!(
                                "abs takes one number, found ({})",
                                found.join(", ")
                            )));
                        }
                    },
                    Func::Least | Func::Greatest | Func::Coalesce => {
                        let first = *tys.first().ok_or_else(|| {
                            Error::Plan(format!("{} needs at least one argument", f.name()))
                        })?;
                        if first.is_array() && *f != Func::Coalesce {
                            return Err(Error::Plan(format!(
                                "{} of arrays (arrays have no order here); use array_max or array_min of one array",
                                f.name()
                            )));
                        }
                        if let Some(t) = tys.iter().find(|t| **t != first) {
                            return Err(type_error(f.name(), first, *t));
                        }
                        first
                    }
                    Func::TimeText(t) => match tys.as_slice() {
                        [x] if x == t => String,
                        _ => {
                            return Err(Error::Internal(format!(
                                "the text of a {t} given {}",
                                list(&tys)
                            )))
                        }
                    },
                    f if f.is_array_fn() => arrays::data_type(*f, &tys)?,
                    _ => strings::data_type(*f, args, &tys)?,
                }
            }
        })
    }
}

fn type_error(op: &str, a: DataType, b: DataType) -> Error {
    Error::Plan(format!("`{op}` cannot combine {a} and {b}"))
}

pub(super) fn list(tys: &[DataType]) -> String {
    let v: Vec<String> = tys.iter().map(|t| t.to_string()).collect();
    format!("({})", v.join(", "))
}
