//! A fast path for integer arithmetic and comparisons ([`Compiled`]).
//!
//! The general interpreter ([`Expr::eval`]) builds a [`Value`] at every node and checks
//! every operand's type; for `v % 7 = 0` over int columns that is most of a filter's
//! cost. The fast path evaluates such an expression on plain `i64`s. It gives an answer
//! only where the general one is certain to be the same: every leaf an int column that
//! holds an int, or an int literal, and no overflow or division by zero. Anything else
//! (a null, another type, a fault) gives no answer, and the general interpreter then
//! evaluates the expression, giving its value or its fault as always. So the fast path
//! never decides a result the interpreter would not give.

use super::{Arena, BinOp, Eval, Expr};
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
}

/// Comparisons of integers, and AND, OR, NOT of them.
#[derive(Clone, Debug)]
enum Bool {
    Cmp(BinOp, Int, Int),
    And(Box<Bool>, Box<Bool>),
    Or(Box<Bool>, Box<Bool>),
    Not(Box<Bool>),
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

impl Int {
    fn of(e: &Expr) -> Option<Int> {
        Some(match e {
            Expr::Column(c, _) => Int::Col(*c),
            Expr::Literal(Scalar::Int(i)) => Int::Lit(*i),
            Expr::Binary(
                op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod),
                l,
                r,
            ) => Int::Bin(*op, Box::new(Int::of(l)?), Box::new(Int::of(r)?)),
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
