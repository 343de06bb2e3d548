//! A fast path for integer arithmetic, comparisons and `LIKE` ([`Compiled`]).
//!
//! The general interpreter ([`Expr::eval`]) builds a [`Value`] at every node and checks
//! every operand's type; for `v % 7 = 0` over int columns that is most of a filter's
//! cost. The fast path evaluates such an expression on plain `i64`s. It gives an answer
//! only where the general one is certain to be the same: every leaf an int column that
//! holds an int, or an int literal, and no overflow or division by zero. Anything else
//! (a null, another type, a fault) gives no answer, and the general interpreter then
//! evaluates the expression, giving its value or its fault as always. So the fast path
//! never decides a result the interpreter would not give.
//!
//! A string column `LIKE` a constant pattern of text and `%` (no `_`) is matched on the
//! value's bytes with the pattern compiled once ([`Pattern`]: its text before the first
//! `%` a prefix, after the last a suffix, each part between found in order by a SIMD
//! substring search), and a `CASE` whose conditions and values all have a fast path
//! and that has an `ELSE` is evaluated on them.

use super::{Arena, BinOp, Eval, Expr, Func};
use crate::batch::{Row, Scalar, Value};

/// An expression with its fast path, if it has one.
#[derive(Clone, Debug)]
pub struct Compiled {
    expr: Expr,
    fast: Option<Fast>,
}

#[derive(Clone, Debug)]
enum Fast {
    Int(Int),
    Bool(Bool),
}

/// Integer arithmetic over int columns and literals.
#[derive(Clone, Debug)]
enum Int {
    Col(usize),
    Lit(i64),
    Bin(BinOp, Box<Int>, Box<Int>),
    /// `/` or `%` of a positive literal, by multiplication with its precomputed
    /// reciprocal instead of a division instruction.
    ByLit(BinOp, Box<Int>, Divisor),
    /// `CASE WHEN c THEN v ... ELSE e END`.
    Case(Vec<(Bool, Int)>, Box<Int>),
}

/// A positive divisor with its reciprocal ([`strength_reduce`]).
#[derive(Clone, Copy)]
struct Divisor(strength_reduce::StrengthReducedU64);

impl Divisor {
    fn new(d: u64) -> Divisor {
        Divisor(strength_reduce::StrengthReducedU64::new(d))
    }
}

impl std::fmt::Debug for Divisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.get())
    }
}

/// Comparisons of integers, and AND, OR, NOT of them.
#[derive(Clone, Debug)]
enum Bool {
    Cmp(BinOp, Int, Int),
    And(Box<Bool>, Box<Bool>),
    Or(Box<Bool>, Box<Bool>),
    Not(Box<Bool>),
    /// String column `LIKE` a constant pattern.
    Like(usize, Pattern),
}

/// A `LIKE` pattern of text and `%` only, compiled: a value matches when it starts with
/// `prefix`, ends with `suffix`, and holds each of `middle` in order between them, not
/// overlapping (so the leftmost place of each is as good as any); without a `%`, when
/// it is `prefix`. On UTF-8 bytes this is what `LIKE` means on characters: a `%` takes
/// any run of characters, and a part (valid UTF-8) is only ever found in valid UTF-8
/// text at a character boundary. `_` (one character, not one byte) has no fast path.
#[derive(Clone, Debug)]
struct Pattern {
    prefix: Vec<u8>,
    middle: Vec<memchr::memmem::Finder<'static>>,
    suffix: Vec<u8>,
    exact: bool,
}

impl Pattern {
    fn of(pattern: &str) -> Option<Pattern> {
        if pattern.contains('_') {
            return None;
        }
        let parts: Vec<&str> = pattern.split('%').collect();
        let last = parts.len() - 1;
        Some(Pattern {
            prefix: parts[0].as_bytes().to_vec(),
            middle: parts[1..last.max(1)]
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| memchr::memmem::Finder::new(p.as_bytes()).into_owned())
                .collect(),
            suffix: match last {
                0 => Vec::new(),
                _ => parts[last].as_bytes().to_vec(),
            },
            exact: last == 0,
        })
    }

    #[inline]
    fn matches(&self, s: &[u8]) -> bool {
        if self.exact {
            return s == self.prefix.as_slice();
        }
        // (An empty prefix or suffix is not compared: a call of `memcmp` for no bytes
        // cost more than the search, `perf` of examples/grep.sql.)
        let (p, q) = (self.prefix.len(), self.suffix.len());
        if s.len() < p + q
            || (p > 0 && !s.starts_with(&self.prefix))
            || (q > 0 && !s.ends_with(&self.suffix))
        {
            return false;
        }
        let mut rest = &s[p..s.len() - q];
        for f in &self.middle {
            match f.find(rest) {
                Some(at) => rest = &rest[at + f.needle().len()..],
                None => return false,
            }
        }
        true
    }
}

impl Compiled {
    /// `expr`, with a fast path where it has one.
    pub fn new(expr: Expr) -> Compiled {
        // A bare column or literal is as fast through the interpreter.
        let fast = match &expr {
            Expr::Column(..) | Expr::Literal(_) => None,
            e => Int::of(e)
                .map(Fast::Int)
                .or_else(|| Bool::of(e).map(Fast::Bool)),
        };
        Compiled { expr, fast }
    }

    /// The expression.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// What [`Expr::eval`] gives, through the fast path where it answers.
    #[inline]
    pub fn eval<'a>(&'a self, row: &Row<'a>, arena: &'a Arena) -> Eval<'a> {
        match &self.fast {
            Some(Fast::Int(i)) => {
                if let Some(v) = i.eval(row) {
                    return Ok(Value::Int(v));
                }
            }
            Some(Fast::Bool(b)) => {
                if let Some(v) = b.eval(row) {
                    return Ok(Value::Bool(v));
                }
            }
            None => {}
        }
        self.expr.eval(row, arena)
    }
}

/// Reused buffers of the window-at-a-time path ([`Compiled::eval_ints`],
/// [`Compiled::select`]): nothing is allocated per window once they have grown.
#[derive(Default)]
pub struct Scratch {
    ints: Vec<Vec<i64>>,
    bools: Vec<Vec<bool>>,
}

/// Rows of an all-int batch, for the window-at-a-time path: the payloads row-major
/// (`arity` per row) and the rows to compute for, in order.
#[derive(Clone, Copy)]
pub struct IntRows<'a> {
    /// Every value's payload ([`crate::batch::Batch::int_payloads`]).
    pub data: &'a [u64],
    /// Values per row.
    pub arity: usize,
    /// The rows, ascending.
    pub rows: &'a [u32],
}

impl IntRows<'_> {
    /// Column `c` of the rows, in order, into `out`.
    #[inline]
    pub fn column(&self, c: usize, out: &mut Vec<i64>) {
        out.clear();
        let a = self.arity;
        out.extend(
            self.rows
                .iter()
                .map(|&r| self.data[r as usize * a + c] as i64),
        );
    }
}

impl Compiled {
    /// The window-at-a-time path: the value for every row of `rows` into `out`, in
    /// order, when the fast path answers for every one of them (every row of an
    /// all-int batch holds ints; no overflow or division by zero anywhere, whichever
    /// branch a row would take). False when it does not: the caller then evaluates row
    /// by row, where each row gets its value or its fault as always. So this never
    /// decides a value [`Compiled::eval`] would not give.
    pub fn eval_ints(&self, rows: IntRows<'_>, out: &mut Vec<i64>, s: &mut Scratch) -> bool {
        match (&self.fast, &self.expr) {
            (Some(Fast::Int(i)), _) => i.ints(rows, out, s),
            (None, Expr::Column(c, _)) if *c < rows.arity => {
                rows.column(*c, out);
                true
            }
            (None, Expr::Literal(Scalar::Int(v))) => {
                out.clear();
                out.resize(rows.rows.len(), *v);
                true
            }
            _ => false,
        }
    }

    /// The window-at-a-time path of a predicate: the rows of `rows` for which it is
    /// true into `keep`, in order, when the fast path answers for every row (as
    /// [`Compiled::eval_ints`]); false when it does not.
    pub fn select(&self, rows: IntRows<'_>, keep: &mut Vec<u32>, s: &mut Scratch) -> bool {
        let Some(Fast::Bool(b)) = &self.fast else {
            return false;
        };
        let mut mask = s.bools.pop().unwrap_or_default();
        let ok = b.bits(rows, &mut mask, s);
        if ok {
            keep.clear();
            keep.extend(
                rows.rows
                    .iter()
                    .zip(&mask)
                    .filter(|(_, &m)| m)
                    .map(|(&r, _)| r),
            );
        }
        s.bools.push(mask);
        ok
    }
}

/// `op` of `x` and `y` element by element into `x`; false on an overflow or a division
/// by zero in any element.
#[inline]
fn combine(op: BinOp, x: &mut [i64], y: &[i64]) -> bool {
    let mut bad = false;
    match op {
        BinOp::Add => x.iter_mut().zip(y).for_each(|(a, &b)| {
            let (v, o) = a.overflowing_add(b);
            *a = v;
            bad |= o;
        }),
        BinOp::Sub => x.iter_mut().zip(y).for_each(|(a, &b)| {
            let (v, o) = a.overflowing_sub(b);
            *a = v;
            bad |= o;
        }),
        BinOp::Mul => x.iter_mut().zip(y).for_each(|(a, &b)| {
            let (v, o) = a.overflowing_mul(b);
            *a = v;
            bad |= o;
        }),
        BinOp::Div => x
            .iter_mut()
            .zip(y)
            .for_each(|(a, &b)| match a.checked_div(b) {
                Some(v) => *a = v,
                None => bad = true,
            }),
        _ => x
            .iter_mut()
            .zip(y)
            .for_each(|(a, &b)| match a.checked_rem(b) {
                Some(v) => *a = v,
                None => bad = true,
            }),
    }
    !bad
}

/// Comparison `op` of `x` and `y` element by element into `out`.
#[inline]
fn compare(op: BinOp, x: &[i64], y: &[i64], out: &mut Vec<bool>) {
    out.clear();
    let pairs = x.iter().zip(y);
    match op {
        BinOp::Eq => out.extend(pairs.map(|(a, b)| a == b)),
        BinOp::NotEq => out.extend(pairs.map(|(a, b)| a != b)),
        BinOp::Lt => out.extend(pairs.map(|(a, b)| a < b)),
        BinOp::LtEq => out.extend(pairs.map(|(a, b)| a <= b)),
        BinOp::Gt => out.extend(pairs.map(|(a, b)| a > b)),
        _ => out.extend(pairs.map(|(a, b)| a >= b)),
    }
}

impl Int {
    /// [`Compiled::eval_ints`] of this node.
    fn ints(&self, rows: IntRows<'_>, out: &mut Vec<i64>, s: &mut Scratch) -> bool {
        match self {
            Int::Col(c) if *c < rows.arity => {
                rows.column(*c, out);
                true
            }
            Int::Col(_) => false,
            Int::Lit(i) => {
                out.clear();
                out.resize(rows.rows.len(), *i);
                true
            }
            Int::Bin(op, l, r) => {
                if !l.ints(rows, out, s) {
                    return false;
                }
                let mut y = s.ints.pop().unwrap_or_default();
                let ok = r.ints(rows, &mut y, s) && combine(*op, out, &y);
                s.ints.push(y);
                ok
            }
            Int::ByLit(op, l, d) => {
                if !l.ints(rows, out, s) {
                    return false;
                }
                // As `eval`: the magnitude's quotient or remainder, with the sign of x.
                let d = d.0;
                let div = *op == BinOp::Div;
                for x in out.iter_mut() {
                    let m = x.unsigned_abs();
                    let v = if div { (m / d) as i64 } else { (m % d) as i64 };
                    *x = if *x < 0 { v.wrapping_neg() } else { v };
                }
                true
            }
            Int::Case(..) => false,
        }
    }
}

impl Bool {
    /// The window-at-a-time value of this node for every row (see
    /// [`Compiled::eval_ints`]): with every operand answered everywhere, AND and OR are
    /// what the row-at-a-time path gives whichever operand decides them.
    fn bits(&self, rows: IntRows<'_>, out: &mut Vec<bool>, s: &mut Scratch) -> bool {
        match self {
            Bool::Cmp(op, l, r) => {
                let mut x = s.ints.pop().unwrap_or_default();
                let mut y = s.ints.pop().unwrap_or_default();
                let ok = l.ints(rows, &mut x, s) && r.ints(rows, &mut y, s);
                if ok {
                    compare(*op, &x, &y, out);
                }
                s.ints.push(x);
                s.ints.push(y);
                ok
            }
            Bool::And(l, r) | Bool::Or(l, r) => {
                if !l.bits(rows, out, s) {
                    return false;
                }
                let mut y = s.bools.pop().unwrap_or_default();
                let ok = r.bits(rows, &mut y, s);
                if ok {
                    let and = matches!(self, Bool::And(..));
                    for (a, &b) in out.iter_mut().zip(&y) {
                        *a = if and { *a && b } else { *a || b };
                    }
                }
                s.bools.push(y);
                ok
            }
            Bool::Not(e) => {
                let ok = e.bits(rows, out, s);
                out.iter_mut().for_each(|b| *b = !*b);
                ok
            }
            Bool::Like(..) => false,
        }
    }
}

impl Int {
    fn of(e: &Expr) -> Option<Int> {
        Some(match e {
            Expr::Column(c, _) => Int::Col(*c),
            Expr::Literal(Scalar::Int(i)) => Int::Lit(*i),
            Expr::Binary(
                op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod),
                l,
                r,
            ) => match (op, Int::of(r)?) {
                (BinOp::Div | BinOp::Mod, Int::Lit(d)) if d > 0 => {
                    Int::ByLit(*op, Box::new(Int::of(l)?), Divisor::new(d as u64))
                }
                (_, r) => Int::Bin(*op, Box::new(Int::of(l)?), Box::new(r)),
            },
            Expr::Case(arms, Some(default)) => Int::Case(
                arms.iter()
                    .map(|(c, v)| Some((Bool::of(c)?, Int::of(v)?)))
                    .collect::<Option<Vec<_>>>()?,
                Box::new(Int::of(default)?),
            ),
            _ => return None,
        })
    }

    /// The value; none for a null or non-int column, an overflow or a division by zero.
    #[inline]
    fn eval(&self, row: &Row<'_>) -> Option<i64> {
        match self {
            Int::Col(c) => row.int(*c),
            Int::Lit(i) => Some(*i),
            Int::Bin(op, l, r) => {
                let (x, y) = (l.eval(row)?, r.eval(row)?);
                match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div => x.checked_div(y),
                    _ => x.checked_rem(y),
                }
            }
            Int::ByLit(op, l, d) => {
                let x = l.eval(row)?;
                // Truncated toward zero, as `checked_div` and `checked_rem` are: the
                // magnitude's quotient or remainder, with the sign of `x`. (|i64::MIN|
                // is 2^63: divided by 1 it wraps back to i64::MIN, which is its quotient;
                // by anything more it fits.)
                let m = x.unsigned_abs();
                let v = match op {
                    BinOp::Div => (m / d.0) as i64,
                    _ => (m % d.0) as i64,
                };
                Some(if x < 0 { v.wrapping_neg() } else { v })
            }
            // A condition without an answer (null, or a fault) leaves the whole CASE
            // to the interpreter.
            Int::Case(arms, default) => {
                for (c, v) in arms {
                    if c.eval(row)? {
                        return v.eval(row);
                    }
                }
                default.eval(row)
            }
        }
    }
}

impl Bool {
    fn of(e: &Expr) -> Option<Bool> {
        Some(match e {
            Expr::Binary(op, l, r) if op.is_comparison() => {
                Bool::Cmp(*op, Int::of(l)?, Int::of(r)?)
            }
            Expr::Binary(BinOp::And, l, r) => {
                Bool::And(Box::new(Bool::of(l)?), Box::new(Bool::of(r)?))
            }
            Expr::Binary(BinOp::Or, l, r) => {
                Bool::Or(Box::new(Bool::of(l)?), Box::new(Bool::of(r)?))
            }
            Expr::Not(e) => Bool::Not(Box::new(Bool::of(e)?)),
            Expr::Call(Func::Like, args) => match args.as_slice() {
                [Expr::Column(c, _), Expr::Literal(Scalar::Str(p))] => {
                    Bool::Like(*c, Pattern::of(p)?)
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The value; none where an operand has none. AND and OR decide on their left
    /// operand alone when it decides them, as the interpreter does (it then does not
    /// evaluate the right one, so a fault there is no fault).
    #[inline]
    fn eval(&self, row: &Row<'_>) -> Option<bool> {
        match self {
            Bool::Cmp(op, l, r) => Some(op.compare(l.eval(row)?.cmp(&r.eval(row)?))),
            Bool::And(l, r) => match l.eval(row)? {
                false => Some(false),
                true => r.eval(row),
            },
            Bool::Or(l, r) => match l.eval(row)? {
                true => Some(true),
                false => r.eval(row),
            },
            Bool::Not(e) => Some(!e.eval(row)?),
            Bool::Like(c, p) => match row.get(*c) {
                Value::Str(s) => Some(p.matches(s.as_bytes())),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Batch, Datum, RowKey};

    /// A random expression over columns 0..3 (ints, or null in some rows) and literals
    /// near the edges of int64, of depth at most `depth`.
    fn int_expr(x: &mut u64, depth: u32) -> Expr {
        let r = next(x);
        if depth == 0 || r.is_multiple_of(3) {
            return match r % 4 {
                0 | 1 => Expr::Column((r / 4 % 3) as usize, format!("c{}", r / 4 % 3)),
                _ => Expr::Literal(Scalar::Int(EDGES[(r / 4 % EDGES.len() as u64) as usize])),
            };
        }
        let op = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Mod][(r / 3 % 5) as usize];
        Expr::Binary(
            op,
            Box::new(int_expr(x, depth - 1)),
            Box::new(int_expr(x, depth - 1)),
        )
    }

    fn bool_expr(x: &mut u64, depth: u32) -> Expr {
        let r = next(x);
        if depth == 0 || r.is_multiple_of(3) {
            let op = BinOp::COMPARISONS[(r / 3 % 6) as usize];
            return Expr::Binary(op, Box::new(int_expr(x, 2)), Box::new(int_expr(x, 2)));
        }
        match r / 3 % 3 {
            0 => Expr::Binary(
                BinOp::And,
                Box::new(bool_expr(x, depth - 1)),
                Box::new(bool_expr(x, depth - 1)),
            ),
            1 => Expr::Binary(
                BinOp::Or,
                Box::new(bool_expr(x, depth - 1)),
                Box::new(bool_expr(x, depth - 1)),
            ),
            _ => Expr::Not(Box::new(bool_expr(x, depth - 1))),
        }
    }

    const EDGES: [i64; 9] = [0, 1, -1, 2, 7, -7, i64::MAX, i64::MIN, 1 << 32];

    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// A string column `LIKE` a constant pattern, and `CASE` over it, agree with the
    /// interpreter on every pair of short texts and patterns over `a`, `b`, a two-byte
    /// character, `%` and `_` (with a null and an int in the column too); every
    /// pattern without `_` has the fast path, and it answers for every text.
    #[test]
    fn like_and_case_agree_with_the_interpreter() {
        let alphabet = ["a", "b", "é"];
        let mut texts = vec![String::new()];
        for len in 1..=5 {
            let mut x = 0x2545_f491_4f6c_dd1du64 ^ len;
            for _ in 0..60 {
                texts.push(
                    (0..len)
                        .map(|_| alphabet[(next(&mut x) % 3) as usize])
                        .collect(),
                );
            }
        }
        let mut rows = Batch::new(2);
        for (i, t) in texts.iter().enumerate() {
            rows.push(
                RowKey::default(),
                &[Value::Str(t), Value::Int(i as i64 % 5)],
            );
        }
        rows.push(RowKey::default(), &[Value::Null, Value::Int(1)]);
        rows.push(RowKey::default(), &[Value::Int(7), Value::Int(1)]);
        let signs = ["a", "b", "é", "%", "_"];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let arena = Arena::new();
        let (mut compiled, mut matched) = (0, 0);
        for k in 0..1500 {
            let len = k % 7;
            let p: String = (0..len)
                .map(|_| signs[(next(&mut x) % 5) as usize])
                .collect();
            let like = Expr::Call(
                Func::Like,
                vec![
                    Expr::Column(0, "s".into()),
                    Expr::Literal(Scalar::Str(p.clone())),
                ],
            );
            let case = Expr::Case(
                vec![
                    (like.clone(), Expr::int(2)),
                    (
                        Expr::Binary(
                            BinOp::Lt,
                            Box::new(Expr::Column(1, "i".into())),
                            Box::new(Expr::int(2)),
                        ),
                        Expr::int(3),
                    ),
                ],
                Some(Box::new(Expr::int(1))),
            );
            for e in [like, Expr::Not(Box::new(case.clone())), case] {
                let c = Compiled::new(e.clone());
                if !p.contains('_') && !matches!(e, Expr::Not(_)) {
                    assert!(c.fast.is_some(), "{e} has no fast path");
                    compiled += 1;
                }
                for i in 0..rows.len() {
                    let row = rows.row(i);
                    let want = e.eval(&row, &arena).map(|v| format!("{v:?}"));
                    let got = c.eval(&row, &arena).map(|v| format!("{v:?}"));
                    assert_eq!(
                        got.map_err(|f| f.to_string()),
                        want.map_err(|f| f.to_string()),
                        "{e} on row {i} ({:?})",
                        texts.get(i)
                    );
                    if let (Some(Fast::Bool(f)), Some(_)) = (&c.fast, texts.get(i)) {
                        assert!(f.eval(&row).is_some(), "{e} not answered on {:?}", texts[i]);
                        matched += (f.eval(&row) == Some(true)) as usize;
                    }
                }
            }
        }
        assert!(compiled > 1000, "{compiled} compiled");
        assert!(matched > 10_000, "{matched} matches");
    }

    /// The window-at-a-time path agrees with the row-at-a-time one: over windows of
    /// all-int rows (edge values, so overflows and divisions by zero are common) it
    /// answers only when every row has a value, and then with each row's value; a
    /// predicate keeps exactly the rows whose value is true.
    #[test]
    fn the_window_path_agrees_with_the_row_path() {
        let mut rows = Batch::new(3);
        for a in EDGES {
            for b in EDGES {
                for c in [3, -2] {
                    rows.push_ints(RowKey::default(), &[a, b, c]);
                }
            }
        }
        let data = rows.int_payloads().expect("all ints");
        let arena = Arena::new();
        let mut s = Scratch::default();
        let (mut x, mut answered, mut refused) = (0x2545_f491_4f6c_dd1du64, 0, 0);
        let (mut vals, mut keep) = (Vec::new(), Vec::new());
        for k in 0..3000 {
            let e = match k % 2 {
                0 => int_expr(&mut x, 3),
                _ => bool_expr(&mut x, 2),
            };
            let c = Compiled::new(e.clone());
            // Windows of 1 to 6 rows, some of them every other row.
            let at = (next(&mut x) % rows.len() as u64) as u32;
            let len = 1 + (next(&mut x) % 6) as u32;
            let step = 1 + (next(&mut x) % 2) as u32;
            let sel: Vec<u32> = (0..len)
                .map(|i| at + i * step)
                .filter(|&r| (r as usize) < rows.len())
                .collect();
            let window = IntRows {
                data,
                arity: 3,
                rows: &sel,
            };
            let want: Vec<_> = sel
                .iter()
                .map(|&r| c.eval(&rows.row(r as usize), &arena).ok())
                .collect();
            let ok = match k % 2 {
                0 => c.eval_ints(window, &mut vals, &mut s),
                _ => c.select(window, &mut keep, &mut s),
            };
            if !ok {
                refused += 1;
                continue;
            }
            answered += 1;
            match k % 2 {
                0 => {
                    let got: Vec<_> = vals.iter().map(|&v| Some(Value::Int(v))).collect();
                    assert_eq!(got, want, "{e} on rows {sel:?}");
                }
                _ => {
                    assert!(
                        want.iter().all(|v| matches!(v, Some(Value::Bool(_)))),
                        "{e}"
                    );
                    let true_rows: Vec<u32> = sel
                        .iter()
                        .zip(&want)
                        .filter(|(_, v)| **v == Some(Value::Bool(true)))
                        .map(|(&r, _)| r)
                        .collect();
                    assert_eq!(keep, true_rows, "{e} on rows {sel:?}");
                }
            }
        }
        assert!(
            answered > 1000 && refused > 100,
            "{answered} answered, {refused} refused"
        );
    }

    /// The fast path agrees with the interpreter, value for value and fault for
    /// fault, on random expressions over rows of edge values, nulls and a float.
    #[test]
    fn the_fast_path_agrees_with_the_interpreter() {
        let mut rows = Batch::new(3);
        let vals: Vec<Datum> = EDGES
            .iter()
            .map(|&v| Datum::Int(v))
            .chain([Datum::Null])
            .collect();
        for (i, a) in vals.iter().enumerate() {
            for b in &vals {
                let c = if i % 2 == 0 {
                    Datum::Int(3)
                } else {
                    Datum::Float(3.0)
                };
                rows.push_datums(RowKey::default(), &[*a, *b, c]);
            }
        }
        let arena = Arena::new();
        let (mut x, mut fast, mut decided) = (0x9e37_79b9_7f4a_7c15u64, 0, 0);
        for k in 0..3000 {
            let e = match k % 2 {
                0 => int_expr(&mut x, 3),
                _ => bool_expr(&mut x, 2),
            };
            let c = Compiled::new(e.clone());
            fast += c.fast.is_some() as usize;
            for i in 0..rows.len() {
                let row = rows.row(i);
                let want = e.eval(&row, &arena).map(|v| format!("{v:?}"));
                let got = c.eval(&row, &arena).map(|v| format!("{v:?}"));
                let answered = match &c.fast {
                    Some(Fast::Int(f)) => f.eval(&row).is_some(),
                    Some(Fast::Bool(f)) => f.eval(&row).is_some(),
                    None => false,
                };
                decided += answered as usize;
                assert_eq!(
                    got.map_err(|f| f.to_string()),
                    want.map_err(|f| f.to_string()),
                    "{e} on row {i}"
                );
            }
        }
        // Most expressions compile, and the fast path answers often.
        assert!(fast > 2500, "{fast} of 3000 compiled");
        assert!(decided > 10_000, "the fast path answered {decided} times");
    }
}
