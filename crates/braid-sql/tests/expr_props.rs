//! Property tests of scalar expressions: printing then parsing gives the same
//! expression back, and evaluation agrees with a naive evaluator written here over
//! plain `Option<i64>` / `Option<bool>` (SQL's three-valued logic).

use braid_plan::batch::{Batch, RowKey, Scalar, Value};
use braid_plan::expr::{BinOp, Expr};
use braid_plan::types::{DataType, Field, Schema};
use braid_sql::expr::parse_expr;
use proptest::prelude::*;

fn schema() -> Schema {
    Schema::new(vec![
        Field::nullable("a", DataType::Int64),
        Field::nullable("b", DataType::Int64),
        Field::nullable("c", DataType::Int64),
    ])
}

/// Integer expressions.
fn int_expr() -> BoxedStrategy<Expr> {
    let leaf = prop_oneof![
        (0usize..3).prop_map(|i| Expr::Column(i, ["a", "b", "c"][i].to_string())),
        (-50i64..50).prop_map(|i| Expr::Literal(Scalar::Int(i))),
        // The ends of int64, so that overflow happens.
        prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(i64::MAX / 2)]
            .prop_map(|i| Expr::Literal(Scalar::Int(i))),
    ];
    // Floats only appear in the print/parse test (the naive evaluator is for ints).
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone(), 0..5u8).prop_map(|(l, r, op)| {
                let op = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Mod][op as usize];
                Expr::Binary(op, Box::new(l), Box::new(r))
            }),
            inner.clone().prop_map(|e| Expr::Neg(Box::new(e))),
            (
                bool_leaf(inner.clone().boxed()),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(c, t, e)| Expr::Case(vec![(c, t)], Some(Box::new(e)))),
        ]
    })
    .boxed()
}

fn bool_leaf(ints: BoxedStrategy<Expr>) -> BoxedStrategy<Expr> {
    (ints.clone(), ints, 0..6u8)
        .prop_map(|(l, r, op)| {
            let op = BinOp::COMPARISONS[op as usize];
            Expr::Binary(op, Box::new(l), Box::new(r))
        })
        .boxed()
}

/// Boolean expressions over integer comparisons.
fn bool_expr() -> impl Strategy<Value = Expr> {
    bool_leaf(int_expr()).prop_recursive(3, 16, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Expr::Binary(
                BinOp::And,
                Box::new(l),
                Box::new(r)
            )),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Expr::Binary(
                BinOp::Or,
                Box::new(l),
                Box::new(r)
            )),
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            inner.prop_map(|e| Expr::IsNull(Box::new(e), false)),
        ]
    })
}

#[derive(Debug, PartialEq)]
enum V {
    I(Option<i64>),
    B(Option<bool>),
    /// A runtime fault: overflow or division by zero.
    Fault,
}

/// The naive evaluator: checked arithmetic (overflow and division by zero are faults),
/// left to right, AND/OR and CASE evaluating no more than they need.
fn naive(e: &Expr, row: &[Option<i64>]) -> V {
    naive_or_fault(e, row).unwrap_or(V::Fault)
}

fn naive_or_fault(e: &Expr, row: &[Option<i64>]) -> Result<V, ()> {
    let int = |x: &Expr| match naive_or_fault(x, row)? {
        V::I(v) => Ok(v),
        _ => panic!("int expected"),
    };
    let boolean = |x: &Expr| match naive_or_fault(x, row)? {
        V::B(v) => Ok(v),
        _ => panic!("bool expected"),
    };
    Ok(match e {
        Expr::Column(i, _) => V::I(row[*i]),
        Expr::Literal(Scalar::Int(i)) => V::I(Some(*i)),
        Expr::Neg(x) => V::I(match int(x)? {
            Some(v) => Some(v.checked_neg().ok_or(())?),
            None => None,
        }),
        Expr::Not(x) => V::B(boolean(x)?.map(|b| !b)),
        Expr::IsNull(x, _) => V::B(Some(match naive_or_fault(x, row)? {
            V::I(v) => v.is_none(),
            V::B(v) => v.is_none(),
            V::Fault => unreachable!(),
        })),
        Expr::Case(arms, d) => {
            for (c, v) in arms {
                if boolean(c)? == Some(true) {
                    return naive_or_fault(v, row);
                }
            }
            return naive_or_fault(d.as_ref().expect("else"), row);
        }
        Expr::Binary(BinOp::And, l, r) => V::B(match boolean(l)? {
            Some(false) => Some(false),
            a => match (a, boolean(r)?) {
                (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
        }),
        Expr::Binary(BinOp::Or, l, r) => V::B(match boolean(l)? {
            Some(true) => Some(true),
            a => match (a, boolean(r)?) {
                (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        }),
        Expr::Binary(op, l, r) => {
            let (a, b) = (int(l)?, int(r)?);
            let (Some(a), Some(b)) = (a, b) else {
                return Ok(match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => V::I(None),
                    _ => V::B(None),
                });
            };
            match op {
                BinOp::Add => V::I(Some(a.checked_add(b).ok_or(())?)),
                BinOp::Sub => V::I(Some(a.checked_sub(b).ok_or(())?)),
                BinOp::Mul => V::I(Some(a.checked_mul(b).ok_or(())?)),
                BinOp::Div => V::I(Some(a.checked_div(b).ok_or(())?)),
                BinOp::Mod => V::I(Some(a.checked_rem(b).ok_or(())?)),
                BinOp::Eq => V::B(Some(a == b)),
                BinOp::NotEq => V::B(Some(a != b)),
                BinOp::Lt => V::B(Some(a < b)),
                BinOp::LtEq => V::B(Some(a <= b)),
                BinOp::Gt => V::B(Some(a > b)),
                BinOp::GtEq => V::B(Some(a >= b)),
                _ => unreachable!(),
            }
        }
        other => panic!("not generated: {other}"),
    })
}

fn eval(e: &Expr, row: &[Option<i64>]) -> V {
    let mut b = Batch::new(3);
    let vals: Vec<Value<'_>> = row
        .iter()
        .map(|v| v.map_or(Value::Null, Value::Int))
        .collect();
    b.push(RowKey::default(), &vals);
    match e.eval(&b.row(0), &braid_plan::expr::Arena::new()) {
        Err(_) => V::Fault,
        Ok(Value::Int(i)) => V::I(Some(i)),
        Ok(Value::Bool(x)) => V::B(Some(x)),
        Ok(Value::Null) => match e.data_type(&schema()).expect("typed") {
            DataType::Bool => V::B(None),
            _ => V::I(None),
        },
        other => panic!("unexpected {other:?}"),
    }
}

fn row() -> impl Strategy<Value = Vec<Option<i64>>> {
    prop::collection::vec(prop::option::weighted(0.85, -20i64..20), 3)
}

fn float_expr() -> impl Strategy<Value = Expr> {
    (
        int_expr(),
        prop_oneof![
            (-1000i32..1000).prop_map(|i| i as f64 / 8.0),
            Just(3.0),
            Just(-2.5)
        ],
    )
        .prop_map(|(e, x)| {
            Expr::Binary(
                BinOp::Mul,
                Box::new(Expr::Cast(Box::new(e), DataType::Float64)),
                Box::new(Expr::Literal(Scalar::Float(x))),
            )
        })
}

proptest! {
    #[test]
    fn floats_and_casts_print_then_parse(e in float_expr()) {
        let text = e.to_string();
        let back = parse_expr(&text, &schema()).map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        prop_assert_eq!(back, e, "{}", text);
    }

    #[test]
    fn print_then_parse_is_identity(e in prop_oneof![int_expr(), bool_expr()]) {
        let text = e.to_string();
        let back = parse_expr(&text, &schema()).map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        prop_assert_eq!(back.to_string(), text);
        prop_assert_eq!(back, e);
    }

    #[test]
    fn evaluation_matches_the_naive_evaluator(e in prop_oneof![int_expr(), bool_expr()], r in row()) {
        prop_assert_eq!(eval(&e, &r), naive(&e, &r), "{}", e);
    }
}
