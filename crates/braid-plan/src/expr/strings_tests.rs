//! The string functions against hand-written expectations (PostgreSQL's answers),
//! through `Expr::eval`: nulls, empty strings, non-ASCII text, faults.

use super::super::{Arena, BinOp, Expr, Func};
use crate::batch::{Batch, RowKey, Scalar, Value};
use crate::types::{DataType, Field, Schema};

/// A literal: a string, an int, or NULL.
#[derive(Clone, Copy)]
enum L {
    S(&'static str),
    I(i64),
    N,
}

fn lit(l: L) -> Expr {
    Expr::Literal(match l {
        L::S(s) => Scalar::Str(s.into()),
        L::I(i) => Scalar::Int(i),
        L::N => Scalar::Null,
    })
}

/// `f(args)` evaluated on an empty row: the value, or the fault's message.
fn eval(e: &Expr) -> Result<Scalar, String> {
    let mut b = Batch::new(0);
    b.push(RowKey::default(), &[]);
    let arena = Arena::new();
    e.eval(&b.row(0), &arena)
        .map(|v| v.to_scalar())
        .map_err(|f| f.message.to_string())
}

fn call(f: Func, args: &[L]) -> Result<Scalar, String> {
    eval(&Expr::Call(f, args.iter().map(|a| lit(*a)).collect()))
}

fn s(x: &str) -> Result<Scalar, String> {
    Ok(Scalar::Str(x.into()))
}

const NULL: Result<Scalar, String> = Ok(Scalar::Null);

#[test]
fn upper_and_lower() {
    use L::*;
    assert_eq!(call(Func::Upper, &[S("abc xyZ1")]), s("ABC XYZ1"));
    assert_eq!(call(Func::Upper, &[S("")]), s(""));
    assert_eq!(call(Func::Upper, &[N]), NULL);
    assert_eq!(call(Func::Upper, &[S("straße ðé")]), s("STRASSE ÐÉ"));
    assert_eq!(call(Func::Lower, &[S("ÀÉÎ Ab")]), s("àéî ab"));
    assert_eq!(call(Func::Lower, &[S("ΟΔΟΣ")]), s("οδοσ"));
    assert_eq!(call(Func::Lower, &[S("already")]), s("already"));
    assert_eq!(call(Func::Lower, &[N]), NULL);
}

#[test]
fn concat_skips_nulls_and_the_operator_does_not() {
    use L::*;
    assert_eq!(call(Func::Concat, &[S("a"), N, S("βc"), S("")]), s("aβc"));
    assert_eq!(call(Func::Concat, &[N, N]), s(""));
    assert_eq!(call(Func::Concat, &[S("n="), I(-3)]), s("n=-3"));
    let mixed = Expr::Call(
        Func::Concat,
        vec![
            Expr::Literal(Scalar::Float(2.0)),
            Expr::Literal(Scalar::Float(0.5)),
            Expr::Literal(Scalar::Bool(true)),
        ],
    );
    assert_eq!(eval(&mixed), s("20.5true"));
    let op = |a: L, b: L| eval(&lit(a).bin(BinOp::Concat, lit(b)));
    assert_eq!(op(S("ab"), S("ç")), s("abç"));
    assert_eq!(op(S(""), S("")), s(""));
    assert_eq!(op(S("ab"), N), NULL);
    assert_eq!(op(N, S("ab")), NULL);
    let nested = lit(S("a"))
        .bin(BinOp::Concat, lit(S("b")))
        .bin(BinOp::Concat, Expr::Call(Func::Upper, vec![lit(S("c"))]));
    assert_eq!(eval(&nested), s("abC"));
}

#[test]
fn substring_is_postgres() {
    use L::*;
    let sub = |x: L, from: L, len: Option<L>| {
        let mut args = vec![x, from];
        args.extend(len);
        call(Func::Substring, &args)
    };
    assert_eq!(sub(S("hello"), I(2), Some(I(3))), s("ell"));
    assert_eq!(sub(S("hello"), I(2), None), s("ello"));
    assert_eq!(sub(S("hello"), I(0), Some(I(3))), s("he"));
    assert_eq!(sub(S("hello"), I(-5), Some(I(3))), s(""));
    assert_eq!(sub(S("hello"), I(-1), None), s("hello"));
    assert_eq!(sub(S("hello"), I(4), Some(I(100))), s("lo"));
    assert_eq!(sub(S("hello"), I(9), None), s(""));
    assert_eq!(sub(S("hello"), I(2), Some(I(0))), s(""));
    assert_eq!(sub(S(""), I(1), Some(I(1))), s(""));
    assert_eq!(sub(S("añb€c"), I(2), Some(I(3))), s("ñb€"));
    assert_eq!(sub(S("añb€c"), I(4), None), s("€c"));
    assert_eq!(sub(S("hello"), I(i64::MAX), Some(I(i64::MAX))), s(""));
    assert_eq!(sub(S("hello"), I(i64::MIN), Some(I(i64::MAX))), s(""));
    assert_eq!(sub(N, I(1), Some(I(1))), NULL);
    assert_eq!(sub(S("x"), N, None), NULL);
    assert_eq!(sub(S("x"), I(1), Some(N)), NULL);
    let e = sub(S("hello"), I(1), Some(I(-1))).expect_err("negative length");
    assert_eq!(
        e,
        "negative substring length in `substring('hello', 1, -1)` \
         (substring('hello', 1, -1))"
    );
}

#[test]
fn trims_remove_the_given_characters() {
    use L::*;
    assert_eq!(call(Func::Btrim, &[S("  a b  ")]), s("a b"));
    assert_eq!(call(Func::Btrim, &[S("\t a \n")]), s("\t a \n"));
    assert_eq!(call(Func::Ltrim, &[S("  a  ")]), s("a  "));
    assert_eq!(call(Func::Rtrim, &[S("  a  ")]), s("  a"));
    assert_eq!(call(Func::Btrim, &[S("xyxaxyx"), S("xy")]), s("a"));
    assert_eq!(call(Func::Ltrim, &[S("ééaé"), S("é")]), s("aé"));
    assert_eq!(call(Func::Rtrim, &[S("ééaé"), S("é")]), s("ééa"));
    assert_eq!(call(Func::Btrim, &[S("   ")]), s(""));
    assert_eq!(call(Func::Btrim, &[S("ab"), S("")]), s("ab"));
    assert_eq!(call(Func::Btrim, &[N]), NULL);
    assert_eq!(call(Func::Btrim, &[S("a"), N]), NULL);
}

#[test]
fn replace_position_and_split_part() {
    use L::*;
    assert_eq!(
        call(Func::Replace, &[S("abcabc"), S("b"), S("XY")]),
        s("aXYcaXYc")
    );
    assert_eq!(call(Func::Replace, &[S("aaa"), S("aa"), S("b")]), s("ba"));
    assert_eq!(call(Func::Replace, &[S("abc"), S(""), S("x")]), s("abc"));
    assert_eq!(
        call(Func::Replace, &[S("naïve"), S("ï"), S("i")]),
        s("naive")
    );
    assert_eq!(call(Func::Replace, &[S("abc"), S("b"), S("")]), s("ac"));
    assert_eq!(call(Func::Replace, &[S("abc"), N, S("")]), NULL);
    assert_eq!(
        call(Func::Strpos, &[S("héllo"), S("llo")]),
        Ok(Scalar::Int(3))
    );
    assert_eq!(
        call(Func::Strpos, &[S("hello"), S("z")]),
        Ok(Scalar::Int(0))
    );
    assert_eq!(call(Func::Strpos, &[S("hello"), S("")]), Ok(Scalar::Int(1)));
    assert_eq!(call(Func::Strpos, &[S(""), S("a")]), Ok(Scalar::Int(0)));
    assert_eq!(call(Func::Strpos, &[N, S("a")]), NULL);
    let part =
        |x: &'static str, d: &'static str, n: i64| call(Func::SplitPart, &[S(x), S(d), I(n)]);
    assert_eq!(part("a,b,,c", ",", 2), s("b"));
    assert_eq!(part("a,b,,c", ",", 3), s(""));
    assert_eq!(part("a,b,,c", ",", 4), s("c"));
    assert_eq!(part("a,b,,c", ",", 5), s(""));
    assert_eq!(part("a,b,,c", ",", -1), s("c"));
    assert_eq!(part("a,b,,c", ",", -4), s("a"));
    assert_eq!(part("a,b,,c", ",", -5), s(""));
    assert_eq!(part("a,b", ",", i64::MIN), s(""));
    assert_eq!(part("α→β→γ", "→", 2), s("β"));
    assert_eq!(part("abc", "", 1), s("abc"));
    assert_eq!(part("abc", "", 2), s(""));
    assert_eq!(part("", ",", 1), s(""));
    assert_eq!(call(Func::SplitPart, &[S("a"), N, I(1)]), NULL);
    let e = part("a,b", ",", 0).expect_err("zero");
    assert!(
        e.starts_with("split_part field position must not be zero"),
        "{e}"
    );
}

#[test]
fn casts_to_text_write_what_csv_writes() {
    let cast = |v: Scalar| eval(&Expr::Cast(Box::new(Expr::Literal(v)), DataType::String));
    assert_eq!(cast(Scalar::Int(-42)), s("-42"));
    assert_eq!(cast(Scalar::Int(i64::MIN)), s("-9223372036854775808"));
    assert_eq!(cast(Scalar::Float(2.0)), s("2"));
    assert_eq!(cast(Scalar::Float(-0.25)), s("-0.25"));
    assert_eq!(cast(Scalar::Bool(false)), s("false"));
    assert_eq!(cast(Scalar::Str("ü".into())), s("ü"));
    assert_eq!(cast(Scalar::Null), NULL);
}

#[test]
fn types_are_checked() {
    let schema = Schema::new(vec![
        Field::new("s", DataType::String),
        Field::new("i", DataType::Int64),
    ]);
    let col = |name: &str| Expr::col(&schema, name).expect("column");
    let ty = |e: Expr| e.data_type(&schema);
    assert_eq!(
        ty(Expr::Call(Func::Upper, vec![col("s")])).ok(),
        Some(DataType::String)
    );
    assert_eq!(
        ty(Expr::Call(Func::Strpos, vec![col("s"), lit(L::N)])).ok(),
        Some(DataType::Int64)
    );
    assert_eq!(
        ty(col("s").bin(BinOp::Concat, lit(L::N))).ok(),
        Some(DataType::String)
    );
    let e = ty(Expr::Call(Func::Upper, vec![col("i")])).expect_err("int");
    assert!(
        e.to_string()
            .contains("upper takes one string, found (int64)"),
        "{e}"
    );
    let e = ty(Expr::Call(Func::Substring, vec![col("s"), col("s")])).expect_err("str");
    assert!(
        e.to_string().contains("substring takes a string, a start"),
        "{e}"
    );
    let e = ty(col("s").bin(BinOp::Concat, col("i"))).expect_err("int");
    assert!(e.to_string().contains("CAST(x AS TEXT)"), "{e}");
    assert!(ty(Expr::Call(Func::Concat, vec![])).is_err());
}

/// An arena reset after each row is reused: after the first rows, `upper` on rows of
/// the same size takes no new chunk.
#[test]
fn a_reset_arena_is_reused() {
    let mut b = Batch::new(1);
    b.push(RowKey::default(), &[Value::Str("some lowercase text")]);
    let e = Expr::Call(Func::Upper, vec![Expr::Column(0, "c".into())]);
    let mut arena = Arena::new();
    let mut sizes = Vec::new();
    for _ in 0..100 {
        let v = e.eval(&b.row(0), &arena).expect("upper");
        assert_eq!(v, Value::Str("SOME LOWERCASE TEXT"));
        sizes.push(arena.allocated_bytes());
        arena.reset();
    }
    assert!(sizes.iter().all(|&s| s == sizes[0]), "{sizes:?}");
    let untouched = Arena::new();
    assert_eq!(untouched.allocated_bytes(), 0);
}
