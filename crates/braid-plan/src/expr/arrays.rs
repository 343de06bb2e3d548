//! Numeric arrays in expressions (SCSQ's vectors of signal samples): element access
//! and slices, length, sum, min, max, average, arg max, dot product, concatenation,
//! the even and odd elements (a radix-2 FFT's halves), elementwise arithmetic, and the
//! discrete Fourier transform (`fft`, `ifft`, by rustfft) with the power per bin.
//!
//! Complex arrays are float arrays of interleaved parts, `{re0, im0, re1, im1, ...}`:
//! `fft` of n samples gives 2n floats, n bins. Results live in the expression's arena.
//! A fault is a row's error, never a quiet NULL: an index outside the array, arrays of
//! different lengths, an int64 overflow, a complex array of odd length.

use super::{Arena, BinOp, CallError, Func};
use crate::batch::Value;
use crate::error::{Error, Result};
use crate::types::DataType;
use rustfft::num_complex::Complex;
use std::cell::RefCell;

/// The result type of array function `f` over arguments of types `tys`.
pub(super) fn data_type(f: Func, tys: &[DataType]) -> Result<DataType> {
    use DataType::*;
    let arr = |t: &DataType| t.is_array();
    let bad = |takes: &str| {
        Err(Error::Plan(format!(
            "{} takes {takes}, found {}",
            f.name(),
            super::list(tys)
        )))
    };
    match f {
        Func::Cardinality => match tys {
            [t] if arr(t) => Ok(Int64),
            _ => bad("one array"),
        },
        Func::ArraySum | Func::ArrayMin | Func::ArrayMax => match tys {
            [t] if arr(t) => Ok(t.element()),
            _ => bad("one array"),
        },
        Func::ArrayAvg => match tys {
            [t] if arr(t) => Ok(Float64),
            _ => bad("one array"),
        },
        Func::ArrayArgmax => match tys {
            [t] if arr(t) => Ok(Int64),
            _ => bad("one array"),
        },
        Func::Evens | Func::Odds => match tys {
            [t] if arr(t) => Ok(*t),
            _ => bad("one array"),
        },
        Func::Element => match tys {
            [t, Int64] if arr(t) => Ok(t.element()),
            _ => bad("an array and a BIGINT index"),
        },
        Func::Slice => match tys {
            [t, Int64, Int64] if arr(t) => Ok(*t),
            _ => bad("an array and two BIGINT bounds"),
        },
        Func::ArrayCat => match tys {
            [a, b] if arr(a) && a == b => Ok(*a),
            _ => bad("two arrays of one type"),
        },
        Func::Dot => match tys {
            [Int64Array, Int64Array] => Ok(Int64),
            [a, b] if arr(a) && arr(b) => Ok(Float64),
            _ => bad("two arrays"),
        },
        Func::Fft => match tys {
            [t] if arr(t) => Ok(Float64Array),
            _ => bad("one array of samples"),
        },
        Func::Ifft | Func::PowerSpectrum => match tys {
            [Float64Array] => Ok(Float64Array),
            _ => bad("one DOUBLE[] of interleaved complex numbers (re, im, ...)"),
        },
        Func::MakeArray => {
            if tys.is_empty() {
                return Err(Error::Plan(
                    "ARRAY[] without elements has no type; give at least one".into(),
                ));
            }
            if tys.iter().all(|t| *t == Int64) {
                Ok(Int64Array)
            } else if tys.iter().all(|t| matches!(t, Int64 | Float64)) {
                Ok(Float64Array)
            } else {
                bad("numbers (BIGINT or DOUBLE)")
            }
        }
        _ => Err(Error::Internal(format!(
            "{} is no array function",
            f.name()
        ))),
    }
}

/// The type of `a op b` when either is an array: elementwise over two arrays of one
/// length, or an array and a number.
pub(super) fn binary_type(op: BinOp, a: DataType, b: DataType) -> Result<DataType> {
    use DataType::*;
    let refuse = || {
        Err(Error::Plan(format!(
            "`{}` of {a} and {b}: arrays take + - * / elementwise (with an array of the same \
             length or a number); compare elements (x[i]) or cardinality(x)",
            op.symbol()
        )))
    };
    if !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div) {
        return refuse();
    }
    let num = |t: DataType| matches!(t, Int64 | Float64);
    let ok = (a.is_array() || num(a)) && (b.is_array() || num(b));
    if !ok {
        return refuse();
    }
    let int = |t: DataType| matches!(t, Int64 | Int64Array);
    Ok(if int(a) && int(b) {
        Int64Array
    } else {
        Float64Array
    })
}

/// `a op b` with an array on at least one side.
pub(super) fn binary<'a>(
    op: BinOp,
    a: Value<'a>,
    b: Value<'a>,
    arena: &'a Arena,
) -> std::result::Result<Value<'a>, &'static str> {
    use Value::*;
    if matches!(a, Null) || matches!(b, Null) {
        return Ok(Null);
    }
    // Int arrays with ints: checked int64 arithmetic.
    let int_side = |v: Value<'a>| -> Option<Result2<'a>> {
        match v {
            Ints(x) => Some(Result2::Many(x)),
            Int(i) => Some(Result2::One(i)),
            _ => None,
        }
    };
    if let (Some(x), Some(y)) = (int_side(a), int_side(b)) {
        let n = x.len().or(y.len()).unwrap_or(1);
        if let (Some(p), Some(q)) = (x.len(), y.len()) {
            if p != q {
                return Err("arrays of different lengths");
            }
        }
        let out = arena.alloc_slice_fill_copy(n, 0i64);
        for (i, o) in out.iter_mut().enumerate() {
            let (u, v) = (x.at(i), y.at(i));
            if v == 0 && op == BinOp::Div {
                return Err("division by zero");
            }
            *o = match op {
                BinOp::Add => u.checked_add(v),
                BinOp::Sub => u.checked_sub(v),
                BinOp::Mul => u.checked_mul(v),
                _ => u.checked_div(v),
            }
            .ok_or("integer overflow")?;
        }
        return Ok(Ints(out));
    }
    let side = |v: Value<'a>| -> Option<FloatSide<'a>> {
        match v {
            Floats(x) => Some(FloatSide::Floats(x)),
            Ints(x) => Some(FloatSide::Ints(x)),
            Int(i) => Some(FloatSide::One(i as f64)),
            Float(f) => Some(FloatSide::One(f)),
            _ => None,
        }
    };
    let (Some(x), Some(y)) = (side(a), side(b)) else {
        return Err("an array with a value that is no number");
    };
    let n = match (x.len(), y.len()) {
        (Some(p), Some(q)) if p != q => return Err("arrays of different lengths"),
        (Some(p), _) | (_, Some(p)) => p,
        (None, None) => 1,
    };
    let out = arena.alloc_slice_fill_copy(n, 0f64);
    for (i, o) in out.iter_mut().enumerate() {
        let (u, v) = (x.at(i), y.at(i));
        if v == 0.0 && op == BinOp::Div {
            return Err("division by zero");
        }
        let r = match op {
            BinOp::Add => u + v,
            BinOp::Sub => u - v,
            BinOp::Mul => u * v,
            _ => u / v,
        };
        if !r.is_finite() && u.is_finite() && v.is_finite() {
            return Err("float overflow");
        }
        *o = r;
    }
    Ok(Floats(out))
}

enum Result2<'a> {
    Many(&'a [i64]),
    One(i64),
}

impl Result2<'_> {
    fn len(&self) -> Option<usize> {
        match self {
            Result2::Many(x) => Some(x.len()),
            Result2::One(_) => None,
        }
    }
    fn at(&self, i: usize) -> i64 {
        match self {
            Result2::Many(x) => x[i],
            Result2::One(v) => *v,
        }
    }
}

enum FloatSide<'a> {
    Floats(&'a [f64]),
    Ints(&'a [i64]),
    One(f64),
}

impl FloatSide<'_> {
    fn len(&self) -> Option<usize> {
        match self {
            FloatSide::Floats(x) => Some(x.len()),
            FloatSide::Ints(x) => Some(x.len()),
            FloatSide::One(_) => None,
        }
    }
    fn at(&self, i: usize) -> f64 {
        match self {
            FloatSide::Floats(x) => x[i],
            FloatSide::Ints(x) => x[i] as f64,
            FloatSide::One(v) => *v,
        }
    }
}

thread_local! {
    /// rustfft's planner keeps the plans it made, by length: one per thread.
    static PLANNER: RefCell<rustfft::FftPlanner<f64>> = RefCell::new(rustfft::FftPlanner::new());
}

/// The discrete Fourier transform of `data` in place (`inverse`: unscaled inverse).
pub fn dft(data: &mut [Complex<f64>], inverse: bool) {
    if data.is_empty() {
        return;
    }
    PLANNER.with(|p| {
        let mut p = p.borrow_mut();
        let plan = match inverse {
            false => p.plan_fft_forward(data.len()),
            true => p.plan_fft_inverse(data.len()),
        };
        plan.process(data);
    });
}

/// Array function `f` over evaluated arguments `vals`.
pub(super) fn call<'a>(
    f: Func,
    vals: &[Value<'a>],
    arena: &'a Arena,
) -> std::result::Result<Value<'a>, CallError<'a>> {
    use Value::*;
    let mut three = [Null; 3];
    for (t, v) in three.iter_mut().zip(vals) {
        *t = *v;
    }
    let n = vals.len().min(3);
    let err = |why: &'static str| (why, three, n);
    if f != Func::MakeArray && vals.iter().any(|v| matches!(v, Null)) {
        return Ok(Null);
    }
    Ok(match (f, vals) {
        (Func::Cardinality, [Floats(a)]) => Int(a.len() as i64),
        (Func::Cardinality, [Ints(a)]) => Int(a.len() as i64),
        (Func::ArraySum, [Floats(a)]) => Float(a.iter().fold(0.0, |s, x| s + x)),
        (Func::ArraySum, [Ints(a)]) => Int(a
            .iter()
            .try_fold(0i64, |s, &x| s.checked_add(x))
            .ok_or_else(|| err("integer overflow"))?),
        (Func::ArrayMin | Func::ArrayMax, [Floats(a)]) => {
            let max = f == Func::ArrayMax;
            // NaN: by total order, as elsewhere in Braid's sorting.
            match a.iter().copied().reduce(|x, y| {
                let later = y.total_cmp(&x).is_gt();
                if later == max {
                    y
                } else {
                    x
                }
            }) {
                Some(x) => Float(x),
                None => Null,
            }
        }
        (Func::ArrayMin, [Ints(a)]) => a.iter().min().map_or(Null, |&x| Int(x)),
        (Func::ArrayMax, [Ints(a)]) => a.iter().max().map_or(Null, |&x| Int(x)),
        (Func::ArrayAvg, [Floats(a)]) if !a.is_empty() => {
            Float(a.iter().fold(0.0, |s, x| s + x) / a.len() as f64)
        }
        (Func::ArrayAvg, [Ints(a)]) if !a.is_empty() => {
            Float(a.iter().map(|&x| x as i128).sum::<i128>() as f64 / a.len() as f64)
        }
        (Func::ArrayAvg, _) => Null,
        (Func::ArrayArgmax, [Floats(a)]) => {
            let mut best: Option<(usize, f64)> = None;
            for (i, &x) in a.iter().enumerate() {
                if best.is_none_or(|(_, b)| x.total_cmp(&b).is_gt()) {
                    best = Some((i, x));
                }
            }
            best.map_or(Null, |(i, _)| Int(i as i64 + 1))
        }
        (Func::ArrayArgmax, [Ints(a)]) => {
            let mut best: Option<(usize, i64)> = None;
            for (i, &x) in a.iter().enumerate() {
                if best.is_none_or(|(_, b)| x > b) {
                    best = Some((i, x));
                }
            }
            best.map_or(Null, |(i, _)| Int(i as i64 + 1))
        }
        (Func::Evens | Func::Odds, [v]) => {
            let start = usize::from(f == Func::Odds);
            match *v {
                Floats(a) => {
                    Floats(arena.alloc_slice_fill_iter(a.iter().skip(start).step_by(2).copied()))
                }
                Ints(a) => {
                    Ints(arena.alloc_slice_fill_iter(a.iter().skip(start).step_by(2).copied()))
                }
                _ => return Err(err("not an array")),
            }
        }
        (Func::Element, [v, Int(i)]) => {
            let len = v.array_len().ok_or_else(|| err("not an array"))?;
            if *i < 1 || *i as u64 > len as u64 {
                return Err(err("array index out of range (arrays count from 1)"));
            }
            let k = (*i - 1) as usize;
            match *v {
                Floats(a) => Float(a[k]),
                Ints(a) => Int(a[k]),
                _ => return Err(err("not an array")),
            }
        }
        (Func::Slice, [v, Int(lo), Int(hi)]) => {
            let len = v.array_len().ok_or_else(|| err("not an array"))? as i64;
            if *lo < 1 || *hi > len || *lo > *hi + 1 {
                return Err(err(
                    "slice bounds out of range (from 1 to the length, the lower at most one past the upper)",
                ));
            }
            let (a, b) = ((*lo - 1) as usize, *hi as usize);
            match *v {
                Floats(x) => Floats(&x[a..b]),
                Ints(x) => Ints(&x[a..b]),
                _ => return Err(err("not an array")),
            }
        }
        (Func::ArrayCat, [Floats(a), Floats(b)]) => {
            Floats(arena.alloc_slice_fill_with(a.len() + b.len(), |i| {
                if i < a.len() {
                    a[i]
                } else {
                    b[i - a.len()]
                }
            }))
        }
        (Func::ArrayCat, [Ints(a), Ints(b)]) => {
            Ints(arena.alloc_slice_fill_with(a.len() + b.len(), |i| {
                if i < a.len() {
                    a[i]
                } else {
                    b[i - a.len()]
                }
            }))
        }
        (Func::Dot, [Ints(a), Ints(b)]) => {
            if a.len() != b.len() {
                return Err(err("arrays of different lengths"));
            }
            let mut s = 0i64;
            for (x, y) in a.iter().zip(b.iter()) {
                s = x
                    .checked_mul(*y)
                    .and_then(|p| s.checked_add(p))
                    .ok_or_else(|| err("integer overflow"))?;
            }
            Int(s)
        }
        (Func::Dot, [x, y]) => {
            let (Some(p), Some(q)) = (Nums::of(*x), Nums::of(*y)) else {
                return Err(err("not an array"));
            };
            if p.len() != q.len() {
                return Err(err("arrays of different lengths"));
            }
            Float((0..p.len()).fold(0.0, |s, i| s + p.at(i) * q.at(i)))
        }
        (Func::Fft, [x]) => {
            let p = Nums::of(*x).ok_or_else(|| err("not an array"))?;
            let buf = arena.alloc_slice_fill_with(p.len(), |i| Complex::new(p.at(i), 0.0));
            dft(buf, false);
            Floats(interleave(buf, 1.0, arena))
        }
        (Func::Ifft, [Floats(z)]) => {
            if z.len() % 2 != 0 {
                return Err(err("a complex array of odd length (parts come in pairs)"));
            }
            let buf =
                arena.alloc_slice_fill_with(z.len() / 2, |k| Complex::new(z[2 * k], z[2 * k + 1]));
            dft(buf, true);
            let scale = 1.0 / buf.len().max(1) as f64;
            Floats(interleave(buf, scale, arena))
        }
        (Func::PowerSpectrum, [Floats(z)]) => {
            if z.len() % 2 != 0 {
                return Err(err("a complex array of odd length (parts come in pairs)"));
            }
            Floats(
                arena.alloc_slice_fill_iter(z.chunks_exact(2).map(|c| c[0] * c[0] + c[1] * c[1])),
            )
        }
        (Func::MakeArray, vals) => {
            if vals.iter().any(|v| matches!(v, Null)) {
                return Err(err("a NULL element (arrays hold numbers only)"));
            }
            if vals.iter().all(|v| matches!(v, Int(_))) {
                Ints(arena.alloc_slice_fill_iter(vals.iter().map(|v| v.as_int().unwrap_or(0))))
            } else {
                Floats(arena.alloc_slice_fill_iter(vals.iter().map(|v| match v {
                    Int(i) => *i as f64,
                    Float(f) => *f,
                    _ => f64::NAN, // refused by the type check
                })))
            }
        }
        _ => return Err(err("arguments of other types than the type check allowed")),
    })
}

/// Complex numbers as interleaved parts, each times `scale`.
fn interleave<'a>(z: &[Complex<f64>], scale: f64, arena: &'a Arena) -> &'a [f64] {
    arena.alloc_slice_fill_with(2 * z.len(), |i| {
        let c = z[i / 2];
        scale * if i % 2 == 0 { c.re } else { c.im }
    })
}

/// A numeric array's elements, read as floats.
enum Nums<'a> {
    F(&'a [f64]),
    I(&'a [i64]),
}

impl<'a> Nums<'a> {
    fn of(v: Value<'a>) -> Option<Nums<'a>> {
        match v {
            Value::Floats(a) => Some(Nums::F(a)),
            Value::Ints(a) => Some(Nums::I(a)),
            _ => None,
        }
    }
    fn len(&self) -> usize {
        match self {
            Nums::F(a) => a.len(),
            Nums::I(a) => a.len(),
        }
    }
    fn at(&self, i: usize) -> f64 {
        match self {
            Nums::F(a) => a[i],
            Nums::I(a) => a[i] as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::batch::{Batch, RowKey, Scalar, Value};
    use crate::expr::{Arena, Expr, Func};
    use crate::types::{DataType, Field, Schema};

    /// Evaluates `f(args)` over one row holding the arguments as columns.
    fn call(f: Func, args: &[Scalar]) -> Result<Scalar, String> {
        let mut b = Batch::new(args.len());
        b.start_row(RowKey::default());
        let mut fields = Vec::new();
        for (i, a) in args.iter().enumerate() {
            b.push_value(a.as_value());
            let ty = a.as_value().data_type().unwrap_or(DataType::Int64);
            fields.push(Field::new(&format!("c{i}"), ty));
        }
        let schema = Schema::new(fields);
        let e = Expr::Call(
            f,
            (0..args.len())
                .map(|i| Expr::col(&schema, &format!("c{i}")).unwrap())
                .collect(),
        );
        e.data_type(&schema).map_err(|e| e.to_string())?;
        let arena = Arena::new();
        let row = b.row(0);
        e.eval(&row, &arena)
            .map(|v| v.to_scalar())
            .map_err(|f| f.to_string())
    }

    fn fl(v: &[f64]) -> Scalar {
        Scalar::Floats(v.to_vec())
    }

    /// A direct O(n^2) DFT, written from the definition (shares nothing with rustfft).
    fn naive_dft(x: &[f64]) -> Vec<f64> {
        let n = x.len();
        let mut out = Vec::new();
        for k in 0..n {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, &v) in x.iter().enumerate() {
                let a = -2.0 * std::f64::consts::PI * (k * j % n) as f64 / n as f64;
                re += v * a.cos();
                im += v * a.sin();
            }
            out.extend([re, im]);
        }
        out
    }

    #[test]
    fn fft_equals_the_definition_and_ifft_inverts_it() {
        for n in [1usize, 2, 7, 64, 1000] {
            let x: Vec<f64> = (0..n).map(|i| ((i * 37 % 11) as f64 - 5.0) * 0.3).collect();
            let Ok(Scalar::Floats(z)) = call(Func::Fft, &[fl(&x)]) else {
                panic!("fft")
            };
            let want = naive_dft(&x);
            assert_eq!(z.len(), 2 * n);
            for (a, b) in z.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-9 * (1.0 + b.abs()),
                    "n = {n}: {a} vs {b}"
                );
            }
            let Ok(Scalar::Floats(back)) = call(Func::Ifft, &[fl(&z)]) else {
                panic!("ifft")
            };
            for (k, v) in x.iter().enumerate() {
                assert!((back[2 * k] - v).abs() < 1e-9 && back[2 * k + 1].abs() < 1e-9);
            }
            let Ok(Scalar::Floats(p)) = call(Func::PowerSpectrum, &[fl(&z)]) else {
                panic!("power")
            };
            assert_eq!(p.len(), n);
            assert!((p[0] - z[0] * z[0] - z[1] * z[1]).abs() < 1e-9);
        }
        // An int array's samples are its elements.
        assert_eq!(
            call(Func::Fft, &[Scalar::Ints(vec![1, 2])]),
            Ok(fl(&[3.0, 0.0, -1.0, 0.0]))
        );
        assert!(call(Func::Ifft, &[fl(&[1.0, 2.0, 3.0])])
            .unwrap_err()
            .contains("odd length"));
    }

    #[test]
    fn array_functions_and_their_faults() {
        let x = fl(&[3.0, -1.0, 4.0, 1.5]);
        let i = Scalar::Ints(vec![5, 6, 7]);
        assert_eq!(
            call(Func::Cardinality, std::slice::from_ref(&x)),
            Ok(Scalar::Int(4))
        );
        assert_eq!(
            call(Func::ArraySum, std::slice::from_ref(&x)),
            Ok(Scalar::Float(7.5))
        );
        assert_eq!(
            call(Func::ArraySum, std::slice::from_ref(&i)),
            Ok(Scalar::Int(18))
        );
        assert_eq!(
            call(Func::ArrayMax, std::slice::from_ref(&x)),
            Ok(Scalar::Float(4.0))
        );
        assert_eq!(
            call(Func::ArrayMin, std::slice::from_ref(&i)),
            Ok(Scalar::Int(5))
        );
        assert_eq!(
            call(Func::ArrayArgmax, std::slice::from_ref(&x)),
            Ok(Scalar::Int(3))
        );
        assert_eq!(
            call(Func::ArrayAvg, std::slice::from_ref(&i)),
            Ok(Scalar::Float(6.0))
        );
        assert_eq!(call(Func::ArrayMax, &[fl(&[])]), Ok(Scalar::Null));
        assert_eq!(call(Func::ArraySum, &[fl(&[])]), Ok(Scalar::Float(0.0)));
        assert_eq!(
            call(Func::Evens, std::slice::from_ref(&x)),
            Ok(fl(&[3.0, 4.0]))
        );
        assert_eq!(
            call(Func::Odds, std::slice::from_ref(&i)),
            Ok(Scalar::Ints(vec![6]))
        );
        assert_eq!(
            call(Func::Element, &[i.clone(), Scalar::Int(3)]),
            Ok(Scalar::Int(7))
        );
        for bad in [0, 4, -1] {
            let e = call(Func::Element, &[i.clone(), Scalar::Int(bad)]).unwrap_err();
            assert!(e.contains("out of range"), "{e}");
        }
        assert_eq!(
            call(Func::Slice, &[x.clone(), Scalar::Int(2), Scalar::Int(3)]),
            Ok(fl(&[-1.0, 4.0]))
        );
        assert_eq!(
            call(Func::Slice, &[x.clone(), Scalar::Int(3), Scalar::Int(2)]),
            Ok(fl(&[]))
        );
        assert!(call(Func::Slice, &[x.clone(), Scalar::Int(2), Scalar::Int(5)]).is_err());
        assert_eq!(
            call(Func::Dot, &[i.clone(), i.clone()]),
            Ok(Scalar::Int(25 + 36 + 49))
        );
        assert!(call(Func::Dot, &[x.clone(), i.clone()])
            .unwrap_err()
            .contains("different lengths"));
        assert!(call(Func::ArraySum, &[Scalar::Ints(vec![i64::MAX, 1])])
            .unwrap_err()
            .contains("overflow"));
        assert_eq!(
            call(Func::ArrayCat, &[i.clone(), Scalar::Ints(vec![1])]),
            Ok(Scalar::Ints(vec![5, 6, 7, 1]))
        );
        assert_eq!(
            call(Func::MakeArray, &[Scalar::Int(1), Scalar::Float(0.5)]),
            Ok(fl(&[1.0, 0.5]))
        );
        assert!(call(Func::Cardinality, &[Scalar::Int(1)])
            .unwrap_err()
            .contains("takes one array"));
    }

    #[test]
    fn elementwise_arithmetic_checks_lengths_and_overflow() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64Array),
            Field::new("b", DataType::Float64Array),
        ]);
        let mut batch = Batch::new(2);
        batch.push(
            RowKey::default(),
            &[Value::Ints(&[1, i64::MAX]), Value::Floats(&[0.5, 2.0])],
        );
        let col = |n| Expr::col(&schema, n).unwrap();
        let arena = Arena::new();
        let row = batch.row(0);
        let ev = |e: Expr| {
            e.eval(&row, &arena)
                .map(|v| v.to_scalar())
                .map_err(|f| f.to_string())
        };
        use crate::expr::BinOp::*;
        assert_eq!(ev(col("b").bin(Mul, Expr::int(2))), Ok(fl(&[1.0, 4.0])));
        assert_eq!(
            ev(col("a").bin(Add, col("b"))),
            Ok(fl(&[1.5, i64::MAX as f64 + 2.0]))
        );
        assert!(ev(col("a").bin(Add, Expr::int(1)))
            .unwrap_err()
            .contains("overflow"));
        assert!(ev(col("b").bin(Div, Expr::Literal(Scalar::Float(0.0))))
            .unwrap_err()
            .contains("division by zero"));
        let short = Expr::Call(Func::MakeArray, vec![Expr::int(1)]);
        assert!(ev(col("a").bin(Sub, short))
            .unwrap_err()
            .contains("different lengths"));
        assert_eq!(
            col("a").bin(Add, col("a")).data_type(&schema).unwrap(),
            DataType::Int64Array
        );
        assert!(col("a").eq(col("a")).data_type(&schema).is_err());
    }

    #[test]
    fn arrays_move_between_batches_and_read_from_text() {
        let mut a = Batch::new(2);
        a.start_row(RowKey::default());
        a.push_array_text(DataType::Float64Array, " { 1.5, -2 ,3e2} ", false, Some(3))
            .unwrap();
        a.push_array_text(DataType::Int64Array, "{}", false, None)
            .unwrap();
        a.start_row(RowKey { seq: 1, lane: 0 });
        a.push_array_text(DataType::Float64Array, "", true, Some(3))
            .unwrap();
        a.push_array_text(DataType::Int64Array, "{7,8}", false, None)
            .unwrap();
        assert_eq!(a.row(0).get(0), Value::Floats(&[1.5, -2.0, 300.0]));
        assert_eq!(a.row(0).get(1), Value::Ints(&[]));
        assert_eq!(a.row(1).get(0), Value::Null);
        for (text, why) in [
            ("{1,x}", "element 2"),
            ("1,2", "is not an array"),
            ("{1,NULL}", "NULL element"),
            ("{1.5}", "element 1"),
        ] {
            a.start_row(RowKey::default());
            let e = a
                .push_array_text(DataType::Int64Array, text, false, None)
                .unwrap_err();
            a.abandon_row();
            assert!(e.contains(why), "{text}: {e}");
        }
        assert!(a
            .push_array_text(DataType::Int64Array, " ", false, None)
            .is_err());
        // A declared length: another is an error naming both.
        a.start_row(RowKey::default());
        let e = a
            .push_array_text(DataType::Float64Array, "{1,2}", false, Some(3))
            .unwrap_err();
        a.abandon_row();
        assert_eq!(e, "2 elements, expected 3 (declared DOUBLE[3])");
        // Copied row by row and appended whole, into a batch that has arrays already.
        let mut b = Batch::new(2);
        b.push(
            RowKey::default(),
            &[Value::Floats(&[9.0]), Value::Ints(&[1])],
        );
        b.push_row_of(&a, 1, RowKey::default());
        b.append(&a);
        assert_eq!(b.row(1).get(1), Value::Ints(&[7, 8]));
        assert_eq!(b.row(2).get(0), Value::Floats(&[1.5, -2.0, 300.0]));
        assert_eq!(b.row(3).get(1), Value::Ints(&[7, 8]));
        assert_eq!(b.row(0).get(0), Value::Floats(&[9.0]));
        assert_eq!(
            crate::batch::parse_array("{1,2}", DataType::Int64Array, false, Some(2)),
            Ok(Scalar::Ints(vec![1, 2]))
        );
        assert_eq!(b.row(2).get(0).to_string(), "{1.5,-2,300}");
    }
}
