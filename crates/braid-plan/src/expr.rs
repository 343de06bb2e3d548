//! Scalar expressions over the columns of one row.

use crate::batch::{Row, Scalar, Value};
use crate::error::{Error, Result};
use crate::types::{DataType, Schema};
use serde::{Deserialize, Serialize};
use std::fmt;

mod strings;

/// Where the values an evaluation makes are kept: the strings that string functions
/// build (`upper`, `concat`, `CAST(x AS TEXT)`, ...). [`Expr::eval`] borrows it for as
/// long as the values it returns, and the operator that evaluates resets it
/// (`Arena::reset`) once it has copied them out, say after each row. An expression
/// without such a function never touches it, and `reset` of an untouched arena is one
/// comparison, so the hot path of an expression over numbers allocates nothing. (A
/// `Value` that owned its string instead would need a destructor on every value.)
pub use bumpalo::Bump as Arena;

/// A value an expression cannot compute on some row: integer overflow, division by
/// zero, a failed cast, a float result out of range. Operators turn it into a run error
/// or a counted, reported skip of the row (`OnError` of the runtime), never into a
/// wrapped number or a null.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// What went wrong, in which expression, on which values.
    pub message: Box<str>,
}

impl Fault {
    /// A fault saying `message`.
    pub fn new(message: impl Into<String>) -> Fault {
        Fault {
            message: message.into().into_boxed_str(),
        }
    }

    /// `why` in `expr`, whose operands were `values`: "division by zero in `(a / b)`
    /// (5 / 0)".
    fn at(why: &str, expr: &Expr, values: &str) -> Fault {
        Fault::new(format!("{why} in `{expr}` ({values})"))
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A value, or the fault that kept an expression from computing it.
pub type Eval<'a> = std::result::Result<Value<'a>, Fault>;

/// A value shown in a fault message: strings quoted, null as NULL.
fn shown(v: Value<'_>) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Str(s) => format!("'{}'", s.replace('\'', "''")),
        v => v.to_string(),
    }
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (integer division truncates; division by zero is a [`Fault`])
    Div,
    /// `%` (remainder by zero is a [`Fault`])
    Mod,
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND` (three-valued)
    And,
    /// `OR` (three-valued)
    Or,
    /// `||`: two strings joined (null if either is null).
    Concat,
}

impl BinOp {
    /// The comparisons: `=`, `<>`, `<`, `<=`, `>`, `>=`.
    pub const COMPARISONS: [BinOp; 6] = [
        BinOp::Eq,
        BinOp::NotEq,
        BinOp::Lt,
        BinOp::LtEq,
        BinOp::Gt,
        BinOp::GtEq,
    ];

    /// One of [`BinOp::COMPARISONS`].
    pub fn is_comparison(&self) -> bool {
        BinOp::COMPARISONS.contains(self)
    }

    /// A comparison's result for operands ordered `ord` (false for other operators).
    #[inline]
    pub fn compare(&self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            BinOp::Eq => ord == Equal,
            BinOp::NotEq => ord != Equal,
            BinOp::Lt => ord == Less,
            BinOp::LtEq => ord != Greater,
            BinOp::Gt => ord == Greater,
            BinOp::GtEq => ord != Less,
            _ => false,
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Eq => "=",
            BinOp::NotEq => "<>",
            BinOp::Lt => "<",
            BinOp::LtEq => "<=",
            BinOp::Gt => ">",
            BinOp::GtEq => ">=",
            BinOp::And => "AND",
            BinOp::Or => "OR",
            BinOp::Concat => "||",
        }
    }
}

/// A built-in scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Func {
    /// `abs(x)`
    Abs,
    /// `hash(x)`: a stable 63-bit hash (FNV-1a of the value's bytes), non-negative.
    Hash,
    /// `least(a, b, ...)`
    Least,
    /// `greatest(a, b, ...)`
    Greatest,
    /// `coalesce(a, b, ...)`: the first non-null argument.
    Coalesce,
    /// `like(s, pattern)` (SQL `s LIKE pattern`): `%` matches any run, `_` one character.
    Like,
    /// `length(s)`: characters in a string.
    Length,
    /// `floor(x)`, a float.
    Floor,
    /// `ceil(x)`, a float.
    Ceil,
    /// `round(x)`, a float (halves away from zero).
    Round,
    /// `sqrt(x)`, a float (a negative x is a [`Fault`]).
    Sqrt,
    /// `upper(s)`.
    Upper,
    /// `lower(s)`.
    Lower,
    /// `concat(a, b, ...)`: the arguments' text joined, nulls skipped.
    Concat,
    /// `substring(s, start[, len])` (SQL `SUBSTRING(s FROM start FOR len)`), 1-based.
    Substring,
    /// `btrim(s[, chars])` (SQL `TRIM([BOTH] [chars FROM] s)`), chars default a space.
    Btrim,
    /// `ltrim(s[, chars])` (SQL `TRIM(LEADING ...)`).
    Ltrim,
    /// `rtrim(s[, chars])` (SQL `TRIM(TRAILING ...)`).
    Rtrim,
    /// `replace(s, from, to)`.
    Replace,
    /// `strpos(s, sub)` (SQL `POSITION(sub IN s)`): 1-based, 0 if absent.
    Strpos,
    /// `split_part(s, delim, n)`: field n, 1-based, negative n from the end.
    SplitPart,
}

impl Func {
    /// Looks a function up by name.
    pub fn by_name(name: &str) -> Option<Func> {
        match name.to_ascii_lowercase().as_str() {
            "abs" => Some(Func::Abs),
            "hash" => Some(Func::Hash),
            "least" => Some(Func::Least),
            "greatest" => Some(Func::Greatest),
            "coalesce" => Some(Func::Coalesce),
            "like" => Some(Func::Like),
            "length" | "char_length" => Some(Func::Length),
            "floor" => Some(Func::Floor),
            "ceil" | "ceiling" => Some(Func::Ceil),
            "round" => Some(Func::Round),
            "sqrt" => Some(Func::Sqrt),
            "upper" => Some(Func::Upper),
            "lower" => Some(Func::Lower),
            "concat" => Some(Func::Concat),
            "substring" | "substr" => Some(Func::Substring),
            "btrim" => Some(Func::Btrim),
            "ltrim" => Some(Func::Ltrim),
            "rtrim" => Some(Func::Rtrim),
            "replace" => Some(Func::Replace),
            "strpos" => Some(Func::Strpos),
            "split_part" => Some(Func::SplitPart),
            _ => None,
        }
    }

    /// Names of all built-in functions.
    pub const NAMES: &'static str =
        "abs, hash, least, greatest, coalesce, like, length, floor, ceil, round, sqrt, \
         upper, lower, concat, substring, btrim, ltrim, rtrim, replace, strpos, split_part";

    fn name(&self) -> &'static str {
        match self {
            Func::Abs => "abs",
            Func::Hash => "hash",
            Func::Least => "least",
            Func::Greatest => "greatest",
            Func::Coalesce => "coalesce",
            Func::Like => "like",
            Func::Length => "length",
            Func::Floor => "floor",
            Func::Ceil => "ceil",
            Func::Round => "round",
            Func::Sqrt => "sqrt",
            Func::Upper => "upper",
            Func::Lower => "lower",
            Func::Concat => "concat",
            Func::Substring => "substring",
            Func::Btrim => "btrim",
            Func::Ltrim => "ltrim",
            Func::Rtrim => "rtrim",
            Func::Replace => "replace",
            Func::Strpos => "strpos",
            Func::SplitPart => "split_part",
        }
    }
}

/// A scalar function written in Rust and registered by name
/// ([`crate::function::Registry::add_scalar`]); callable from queries.
pub trait ScalarUdf: Send + Sync {
    /// The result type for these argument types (int64, float64 or bool), or an error
    /// naming what it accepts.
    fn return_type(&self, args: &[DataType]) -> Result<DataType>;
    /// The result for these arguments (of the types `return_type` accepted; nulls
    /// possible).
    fn call(&self, args: &[Value<'_>]) -> Scalar;
}

/// A registered scalar function in an expression.
#[derive(Clone)]
pub struct Udf {
    /// The registered name.
    pub name: String,
    /// The function.
    pub f: std::sync::Arc<dyn ScalarUdf>,
}

impl fmt::Debug for Udf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Udf({})", self.name)
    }
}

impl PartialEq for Udf {
    fn eq(&self, other: &Udf) -> bool {
        self.name == other.name && std::sync::Arc::ptr_eq(&self.f, &other.f)
    }
}

/// Most arguments a UDF takes (they are evaluated into a stack array).
pub const UDF_MAX_ARGS: usize = 8;

/// A scalar expression. Columns are resolved to indexes when the expression is built.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Column by index, with its name for display.
    Column(usize, String),
    /// A constant.
    Literal(Scalar),
    /// `l op r`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `NOT e`.
    Not(Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
    /// `e IS NULL` (or `IS NOT NULL` when the flag is true).
    IsNull(Box<Expr>, bool),
    /// `CASE WHEN c THEN v ... ELSE e END`.
    Case(Vec<(Expr, Expr)>, Option<Box<Expr>>),
    /// `CAST(e AS t)`.
    Cast(Box<Expr>, DataType),
    /// A built-in function call.
    Call(Func, Vec<Expr>),
    /// A call of a registered scalar function.
    Udf(Udf, Vec<Expr>),
}

impl Expr {
    /// A column by name.
    pub fn col(schema: &Schema, name: &str) -> Result<Expr> {
        let i = schema.index_of(name)?;
        Ok(Expr::Column(i, schema.fields[i].name.clone()))
    }

    /// An int64 literal.
    pub fn int(i: i64) -> Expr {
        Expr::Literal(Scalar::Int(i))
    }

    /// `self op other`.
    pub fn bin(self, op: BinOp, other: Expr) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(other))
    }

    /// `self = other`.
    pub fn eq(self, other: Expr) -> Expr {
        self.bin(BinOp::Eq, other)
    }

    /// This expression with every column replaced by `f(index, name)`.
    pub fn map_columns(&self, f: &dyn Fn(usize, &str) -> Expr) -> Expr {
        let m = |e: &Expr| Box::new(e.map_columns(f));
        match self {
            Expr::Column(i, name) => f(*i, name),
            Expr::Literal(s) => Expr::Literal(s.clone()),
            Expr::Binary(op, l, r) => Expr::Binary(*op, m(l), m(r)),
            Expr::Not(e) => Expr::Not(m(e)),
            Expr::Neg(e) => Expr::Neg(m(e)),
            Expr::IsNull(e, not) => Expr::IsNull(m(e), *not),
            Expr::Case(arms, d) => Expr::Case(
                arms.iter()
                    .map(|(c, v)| (c.map_columns(f), v.map_columns(f)))
                    .collect(),
                d.as_ref().map(|d| m(d)),
            ),
            Expr::Cast(e, t) => Expr::Cast(m(e), *t),
            Expr::Call(func, args) => {
                Expr::Call(*func, args.iter().map(|a| a.map_columns(f)).collect())
            }
            Expr::Udf(u, args) => {
                Expr::Udf(u.clone(), args.iter().map(|a| a.map_columns(f)).collect())
            }
        }
    }

    /// The column indexes this expression reads, in order of appearance.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.collect_columns(&mut out);
        out
    }

    fn collect_columns(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Column(i, _) => out.push(*i),
            Expr::Literal(_) => {}
            Expr::Binary(_, l, r) => {
                l.collect_columns(out);
                r.collect_columns(out);
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) | Expr::Cast(e, _) => {
                e.collect_columns(out)
            }
            Expr::Case(arms, d) => {
                for (c, v) in arms {
                    c.collect_columns(out);
                    v.collect_columns(out);
                }
                if let Some(d) = d {
                    d.collect_columns(out);
                }
            }
            Expr::Call(_, args) | Expr::Udf(_, args) => {
                args.iter().for_each(|a| a.collect_columns(out))
            }
        }
    }

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
                    t @ (Int64 | Float64 | Bool) => t,
                    t => {
                        return Err(Error::NotSupported(format!(
                            "scalar function {} returning {t}; UDFs return int64, float64 or bool",
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
                            return Err(Error::Plan(format!("abs takes one number, found {tys:?}")))
                        }
                    },
                    Func::Least | Func::Greatest | Func::Coalesce => {
                        let first = *tys.first().ok_or_else(|| {
                            Error::Plan(format!("{} needs at least one argument", f.name()))
                        })?;
                        if let Some(t) = tys.iter().find(|t| **t != first) {
                            return Err(type_error(f.name(), first, *t));
                        }
                        first
                    }
                    _ => strings::data_type(*f, args, &tys)?,
                }
            }
        })
    }

    /// Evaluates the expression on a row: its value, or the [`Fault`] (overflow,
    /// division by zero, a failed cast) that keeps it from having one: the first one
    /// met, evaluating left to right, `AND`, `OR` and `CASE` no further than they need.
    /// Strings the expression makes are kept in `arena` (see [`Arena`]).
    #[inline]
    pub fn eval<'a>(&'a self, row: &Row<'a>, arena: &'a Arena) -> Eval<'a> {
        let mut fault = None;
        let v = self.value(row, &mut fault, arena);
        match fault {
            None => Ok(v),
            Some(f) => Err(f),
        }
    }

    /// The value, or null with the first fault in `fault`. Once a fault is met the rest
    /// is evaluated on nulls and thrown away (expressions have no effects), so the hot
    /// path checks nothing after each operand: returning a plain `Value` keeps it as
    /// fast as before faults existed (a `Result` per node measured 1.5x slower).
    fn value<'a>(
        &'a self,
        row: &Row<'a>,
        fault: &mut Option<Fault>,
        arena: &'a Arena,
    ) -> Value<'a> {
        match self {
            Expr::Column(i, _) => row.get(*i),
            Expr::Literal(s) => s.as_value(),
            Expr::Binary(op, l, r) => {
                let a = l.value(row, fault, arena);
                // Short-circuit AND/OR with three-valued logic.
                match (op, a) {
                    (BinOp::And, Value::Bool(false)) => return Value::Bool(false),
                    (BinOp::Or, Value::Bool(true)) => return Value::Bool(true),
                    _ => {}
                }
                let b = r.value(row, fault, arena);
                if let (BinOp::Concat, Value::Str(x), Value::Str(y)) = (op, a, b) {
                    return Value::Str(strings::concat2(x, y, arena));
                }
                match binary(*op, a, b) {
                    Ok(v) => v,
                    Err(why) => fail(fault, || binary_fault(why, self, *op, a, b)),
                }
            }
            Expr::Not(e) => match e.value(row, fault, arena) {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            },
            Expr::Neg(e) => match e.value(row, fault, arena) {
                Value::Int(i) => match i.checked_neg() {
                    Some(n) => Value::Int(n),
                    None => fail(fault, || {
                        value_fault("integer overflow", self, "-", Value::Int(i))
                    }),
                },
                Value::Float(f) => Value::Float(-f),
                _ => Value::Null,
            },
            Expr::IsNull(e, negated) => {
                Value::Bool(matches!(e.value(row, fault, arena), Value::Null) != *negated)
            }
            Expr::Case(arms, default) => {
                for (c, v) in arms {
                    if c.value(row, fault, arena).is_true() {
                        return v.value(row, fault, arena);
                    }
                }
                match default {
                    Some(d) => d.value(row, fault, arena),
                    None => Value::Null,
                }
            }
            Expr::Cast(e, t) => {
                let v = e.value(row, fault, arena);
                if *t == DataType::String {
                    return strings::to_text(v, arena);
                }
                match cast(v, *t) {
                    Ok(v) => v,
                    Err(why) => fail(fault, || value_fault(why, self, "", v)),
                }
            }
            Expr::Call(f, args) => match call(*f, args, row, fault, arena) {
                Ok(v) => v,
                Err((why, vals, n)) => fail(fault, || call_fault(why, self, f.name(), &vals[..n])),
            },
            Expr::Udf(u, args) => udf(u, args, row, fault, arena),
        }
    }
}

/// Records `make()` as the fault unless an earlier one is there; null.
#[cold]
#[inline(never)]
fn fail<'a>(fault: &mut Option<Fault>, make: impl FnOnce() -> Fault) -> Value<'a> {
    if fault.is_none() {
        *fault = Some(make());
    }
    Value::Null
}

/// A registered scalar function's value.
fn udf<'a>(
    u: &Udf,
    args: &'a [Expr],
    row: &Row<'a>,
    fault: &mut Option<Fault>,
    arena: &'a Arena,
) -> Value<'a> {
    let mut vals = [Value::Null; UDF_MAX_ARGS];
    for (v, a) in vals.iter_mut().zip(args) {
        *v = a.value(row, fault, arena);
    }
    match u.f.call(&vals[..args.len().min(UDF_MAX_ARGS)]) {
        Scalar::Int(i) => Value::Int(i),
        Scalar::Float(x) => Value::Float(x),
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Null => Value::Null,
        Scalar::Str(_) => fail(fault, || {
            Fault::new(format!(
                "scalar function {} returned a string, which its declared type does not allow",
                u.name
            ))
        }),
    }
}

/// The fault of `a op b` in `expr` (out of line: the evaluation's hot path stays small).
#[cold]
#[inline(never)]
fn binary_fault(why: &str, expr: &Expr, op: BinOp, a: Value<'_>, b: Value<'_>) -> Fault {
    Fault::at(
        why,
        expr,
        &format!("{} {} {}", shown(a), op.symbol(), shown(b)),
    )
}

/// Why a built-in function has no value: what, and its first (at most three) arguments.
type CallError<'a> = (&'static str, [Value<'a>; 3], usize);

/// The fault of the call `f(vals...)` in `expr`.
#[cold]
#[inline(never)]
fn call_fault(why: &str, expr: &Expr, f: &str, vals: &[Value<'_>]) -> Fault {
    let vals: Vec<String> = vals.iter().map(|v| shown(*v)).collect();
    Fault::at(why, expr, &format!("{f}({})", vals.join(", ")))
}

/// The fault of `f(v)` in `expr` (`f` empty: just the value; `-`: a negation).
#[cold]
#[inline(never)]
fn value_fault(why: &str, expr: &Expr, f: &str, v: Value<'_>) -> Fault {
    match f {
        "" => Fault::at(why, expr, &shown(v)),
        "-" => Fault::at(why, expr, &format!("-({})", shown(v))),
        f => Fault::at(why, expr, &format!("{f}({})", shown(v))),
    }
}

fn type_error(op: &str, a: DataType, b: DataType) -> Error {
    Error::Plan(format!("`{op}` cannot combine {a} and {b}"))
}

/// `a op b`, or why it has no value.
fn binary<'a>(
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
fn cast(v: Value<'_>, t: DataType) -> std::result::Result<Value<'_>, &'static str> {
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
        Value::Float(f) => eat(&f.to_bits().to_le_bytes()),
        Value::Bool(b) => eat(&[b as u8]),
        Value::Str(s) => eat(s.as_bytes()),
    }
    (h >> 1) as i64
}

/// A 63-bit hash of a row's values (the broadcast bit of a lane is never set).
pub fn row_hash(row: &Row<'_>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in 0..row.arity() {
        h = (h ^ stable_hash(row.get(c)) as u64).wrapping_mul(0x100_0000_01b3);
    }
    h & !crate::batch::RowKey::BROADCAST
}

/// A built-in function's value, or why it has none with the argument at fault (a fault
/// of an argument is in `fault`).
fn call<'a>(
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
                let v = stable_hash(arg(a)?);
                h = if k == 0 {
                    v
                } else {
                    (h.wrapping_mul(0x100_0000_01b3) ^ v) & i64::MAX
                };
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

fn list(tys: &[DataType]) -> String {
    let v: Vec<String> = tys.iter().map(|t| t.to_string()).collect();
    format!("({})", v.join(", "))
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

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Column(_, name) => f.write_str(name),
            Expr::Literal(Scalar::Str(s)) => write!(f, "'{}'", s.replace('\'', "''")),
            Expr::Literal(Scalar::Null) => f.write_str("NULL"),
            // A float keeps its decimal point, so the text parses back to a float.
            Expr::Literal(Scalar::Float(x)) if x.is_finite() && x.fract() == 0.0 => {
                write!(f, "{x:.1}")
            }
            Expr::Literal(s) => write!(f, "{s}"),
            Expr::Binary(op, l, r) => write!(f, "({l} {} {r})", op.symbol()),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::Neg(e) => write!(f, "(-({e}))"),
            Expr::IsNull(e, false) => write!(f, "({e} IS NULL)"),
            Expr::IsNull(e, true) => write!(f, "({e} IS NOT NULL)"),
            Expr::Case(arms, default) => {
                f.write_str("CASE")?;
                for (c, v) in arms {
                    write!(f, " WHEN {c} THEN {v}")?;
                }
                if let Some(d) = default {
                    write!(f, " ELSE {d}")?;
                }
                f.write_str(" END")
            }
            Expr::Cast(e, t) => write!(f, "CAST({e} AS {t})"),
            Expr::Call(_, args) | Expr::Udf(_, args) => {
                let name = match self {
                    Expr::Call(func, _) => func.name(),
                    Expr::Udf(u, _) => u.name.as_str(),
                    _ => "",
                };
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
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
