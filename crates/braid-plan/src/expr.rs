//! Scalar expressions over the columns of one row.

use crate::batch::{Row, Scalar, Value};
use crate::error::Result;
use crate::types::{DataType, Schema};
use serde::{Deserialize, Serialize};
use std::fmt;

mod arrays;
mod fast;
pub mod prefetch;
mod scalar;
mod strings;
mod typing;

pub use fast::{Compiled, IntRows, Scratch};
use scalar::{binary, call, cast};
pub use scalar::{hash_values, int_row_hash, like, row_hash, stable_hash};
use typing::list;

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
    /// `cardinality(a)`: an array's length.
    Cardinality,
    /// `array_sum(a)`: the sum of an array's elements (int64 checked).
    ArraySum,
    /// `array_min(a)`: the least element (null for an empty array).
    ArrayMin,
    /// `array_max(a)`: the greatest element (null for an empty array).
    ArrayMax,
    /// `array_avg(a)`: the mean of the elements, a float (null for an empty array).
    ArrayAvg,
    /// `array_argmax(a)`: the 1-based index of the first greatest element.
    ArrayArgmax,
    /// `evens(a)`: the elements at even 0-based indexes (a[1], a[3], ... in SQL's
    /// 1-based count): a radix-2 FFT's even half.
    Evens,
    /// `odds(a)`: the elements at odd 0-based indexes.
    Odds,
    /// `a[i]` (SQL subscript, 1-based; outside the array a fault).
    Element,
    /// `a[i:j]` or `array_slice(a, i, j)`: elements i to j, 1-based, inclusive.
    Slice,
    /// `array_cat(a, b)`.
    ArrayCat,
    /// `dot(a, b)`: the dot product of two arrays of one length.
    Dot,
    /// `fft(x)`: the discrete Fourier transform of real samples, as interleaved
    /// complex numbers (re, im per bin).
    Fft,
    /// `ifft(z)`: the inverse transform of interleaved complex numbers, scaled by 1/n.
    Ifft,
    /// `power_spectrum(z)`: `re^2 + im^2` of each complex number of an interleaved array.
    PowerSpectrum,
    /// `ARRAY[a, b, ...]`.
    MakeArray,
    /// `CAST(x AS TEXT)` of a value of the time type it holds (TIMESTAMP, TIMESTAMPTZ
    /// or DATE, all int64 at run time): PostgreSQL's text of it
    /// ([`crate::time::write_sql_text`]). Not callable by name; SQL's CAST, `||` and
    /// `concat` of a time make it.
    TimeText(DataType),
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
            "cardinality" => Some(Func::Cardinality),
            "array_sum" => Some(Func::ArraySum),
            "array_min" => Some(Func::ArrayMin),
            "array_max" => Some(Func::ArrayMax),
            "array_avg" => Some(Func::ArrayAvg),
            "array_argmax" => Some(Func::ArrayArgmax),
            "evens" => Some(Func::Evens),
            "odds" => Some(Func::Odds),
            "array_slice" => Some(Func::Slice),
            "array_cat" => Some(Func::ArrayCat),
            "dot" => Some(Func::Dot),
            "fft" => Some(Func::Fft),
            "ifft" => Some(Func::Ifft),
            "power_spectrum" => Some(Func::PowerSpectrum),
            _ => None,
        }
    }

    /// Whether this is an array function ([`arrays`] types and evaluates them).
    fn is_array_fn(self) -> bool {
        matches!(
            self,
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
                | Func::PowerSpectrum
                | Func::MakeArray
        )
    }

    /// Names of all built-in functions.
    pub const NAMES: &'static str =
        "abs, hash, least, greatest, coalesce, like, length, floor, ceil, round, sqrt, \
         upper, lower, concat, substring, btrim, ltrim, rtrim, replace, strpos, split_part, \
         cardinality, array_sum, array_min, array_max, array_avg, array_argmax, evens, odds, \
         array_slice, array_cat, dot, fft, ifft, power_spectrum";

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
            Func::Cardinality => "cardinality",
            Func::ArraySum => "array_sum",
            Func::ArrayMin => "array_min",
            Func::ArrayMax => "array_max",
            Func::ArrayAvg => "array_avg",
            Func::ArrayArgmax => "array_argmax",
            Func::Evens => "evens",
            Func::Odds => "odds",
            Func::Element => "element",
            Func::Slice => "array_slice",
            Func::ArrayCat => "array_cat",
            Func::Dot => "dot",
            Func::Fft => "fft",
            Func::Ifft => "ifft",
            Func::PowerSpectrum => "power_spectrum",
            Func::MakeArray => "ARRAY",
            Func::TimeText(_) => "CAST",
        }
    }
}

/// A scalar function written in Rust and registered by name
/// ([`crate::function::Registry::add_scalar`]); callable from queries.
pub trait ScalarUdf: Send + Sync {
    /// The result type for these argument types (int64, float64, bool or string), or
    /// an error naming what it accepts.
    fn return_type(&self, args: &[DataType]) -> Result<DataType>;
    /// The result for these arguments (of the types `return_type` accepted; nulls
    /// possible), of the type `return_type` gave (or null); `Err` says why there is
    /// none, and the row is skipped and the fault counted and reported (or the run
    /// fails), never a quiet NULL.
    fn call(&self, args: &[Value<'_>]) -> std::result::Result<Scalar, String>;

    /// Whether calls are better made many at once ([`ScalarUdf::call_batch`]): a
    /// query then computes a batch of rows' arguments first and calls once for them
    /// all (see [`prefetch`]). False by default.
    fn batched(&self) -> bool {
        false
    }

    /// The results for `rows` argument lists at once (`args` holds them one after
    /// another, `args.len() / rows` values each), one per list in order, each what
    /// [`ScalarUdf::call`] would give. By default `call` on each.
    fn call_batch(
        &self,
        args: &[Value<'_>],
        rows: usize,
    ) -> Vec<std::result::Result<Scalar, String>> {
        arg_lists(args, rows).map(|a| self.call(a)).collect()
    }
}

/// The `rows` argument lists of a batch, `args` holding them one after another
/// ([`ScalarUdf::call_batch`]); empty lists for a function without arguments.
pub fn arg_lists<'a, 'v>(
    args: &'a [Value<'v>],
    rows: usize,
) -> impl Iterator<Item = &'a [Value<'v>]> {
    let arity = args.len().checked_div(rows).unwrap_or(0);
    (0..rows).map(move |i| &args[i * arity..(i + 1) * arity])
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

    /// Calls `f` on this expression and every expression in it, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Column(..) | Expr::Literal(_) => {}
            Expr::Binary(_, l, r) => {
                l.walk(f);
                r.walk(f);
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) | Expr::Cast(e, _) => e.walk(f),
            Expr::Case(arms, d) => {
                for (c, v) in arms {
                    c.walk(f);
                    v.walk(f);
                }
                if let Some(d) = d {
                    d.walk(f);
                }
            }
            Expr::Call(_, args) | Expr::Udf(_, args) => args.iter().for_each(|a| a.walk(f)),
        }
    }

    /// Whether it calls a batched scalar function ([`ScalarUdf::batched`]).
    pub fn calls_batched(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Udf(u, _) if u.f.batched()));
        found
    }

    /// The column indexes this expression reads, in order of appearance.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column(i, _) = e {
                out.push(*i);
            }
        });
        out
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
                if matches!(a, Value::Floats(_) | Value::Ints(_))
                    || matches!(b, Value::Floats(_) | Value::Ints(_))
                {
                    return match arrays::binary(*op, a, b, arena) {
                        Ok(v) => v,
                        Err(why) => fail(fault, || binary_fault(why, self, *op, a, b)),
                    };
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
    let vals = &vals[..args.len().min(UDF_MAX_ARGS)];
    let result = match u.f.batched() {
        true => prefetch::take(&u.f, vals).unwrap_or_else(|| u.f.call(vals)),
        false => u.f.call(vals),
    };
    match result {
        Ok(Scalar::Int(i)) => Value::Int(i),
        Ok(Scalar::Float(x)) => Value::Float(x),
        Ok(Scalar::Bool(b)) => Value::Bool(b),
        Ok(Scalar::Null) => Value::Null,
        Ok(Scalar::Str(s)) => Value::Str(arena.alloc_str(&s)),
        Ok(Scalar::Floats(a)) => Value::Floats(arena.alloc_slice_copy(&a)),
        Ok(Scalar::Ints(a)) => Value::Ints(arena.alloc_slice_copy(&a)),
        Err(why) => fail(fault, || {
            let vals: Vec<String> = vals.iter().map(|v| shown(*v)).collect();
            Fault::new(format!("{}({}): {why}", u.name, vals.join(", ")))
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
pub(super) type CallError<'a> = (&'static str, [Value<'a>; 3], usize);

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
            Expr::Call(Func::TimeText(_), args) if args.len() == 1 => {
                write!(f, "CAST({} AS {})", args[0], DataType::String)
            }
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
