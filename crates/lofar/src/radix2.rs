//! A radix-2 parallel FFT as a Braid plan (thesis Paper I's FFT over stream processes):
//! every signal vector is split into its four decimated quarters (samples `k, k + 4,
//! k + 8, ...` for `k` = 0..3: the even and odd halves of the even and odd halves),
//! each quarter is transformed on its own partition, and the four partial spectra are
//! combined twice by butterflies: quarters 0 and 2 into the even half's spectrum, 1 and
//! 3 into the odd half's, then the two halves into the vector's.
//!
//! ```text
//! Source(signals) -> Map(quarters) -> Merge -> Split(route k, q = 4)
//!   -> Map(quarter_fft) -> Merge -> Split(route id, q = P) -> Map(butterflies) -> Merge(time)
//! ```
//!
//! Rows: the signal `(receiver, t, x)`; a quarter `(receiver, t, k, samples)`; a
//! partial spectrum `(receiver, t, k, spectrum)`; the result `(receiver, t, spectrum)`,
//! spectra as interleaved complex numbers (re, im per bin), as SQL's `fft` gives them.

use braid_plan::batch::{Row, Value};
use braid_plan::error::{Error, Result};
use braid_plan::expr::{Expr, Fault};
use braid_plan::function::{Emitter, Registry, StreamFunction, StreamFunctionFactory};
use braid_plan::plan::{MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_plan::types::{DataType, Field, Schema};
use rustfft::num_complex::Complex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Quarters per vector.
pub const PARTS: usize = 4;

fn quarter_schema(what: &str) -> Schema {
    Schema::new(vec![
        Field::new("receiver", DataType::Int64),
        Field::new("t", DataType::Int64),
        Field::new("k", DataType::Int64),
        Field::new(what, DataType::Float64Array),
    ])
}

/// The output schema: `(receiver, t, spectrum)`.
pub fn output_schema() -> Schema {
    Schema::new(vec![
        Field::new("receiver", DataType::Int64),
        Field::new("t", DataType::Int64),
        Field::new("spectrum", DataType::Float64Array),
    ])
}

fn ints2(row: &Row<'_>) -> Option<(i64, i64)> {
    Some((row.int(0)?, row.int(1)?))
}

/// `quarters`: a signal vector's four decimated quarters, one row each.
pub struct Quarters;

struct QuartersState {
    buf: Vec<f64>,
}

impl StreamFunctionFactory for Quarters {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        let ok = input.fields.len() == 3
            && input.fields[0].ty == DataType::Int64
            && input.fields[1].ty == DataType::Int64
            && input.fields[2].ty == DataType::Float64Array;
        match ok {
            true => Ok(quarter_schema("samples")),
            false => Err(Error::Plan(
                "quarters reads (receiver BIGINT, t BIGINT, x DOUBLE[])".into(),
            )),
        }
    }
    fn create(&self, _: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(QuartersState { buf: Vec::new() })
    }
    fn stateless(&self) -> bool {
        true
    }
    fn checkpoints(&self) -> bool {
        true
    }
}

impl StreamFunction for QuartersState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let (Some((r, t)), Value::Floats(x)) = (ints2(&row), row.get(2)) else {
            return out.fault("quarters", Fault::new("a null receiver, time or vector"));
        };
        if x.len() % PARTS != 0 || !x.len().is_power_of_two() {
            return out.fault(
                "quarters",
                Fault::new(format!(
                    "a vector of {} samples; the radix-2 plan takes a power of two of 4 or more",
                    x.len()
                )),
            );
        }
        for k in 0..PARTS {
            self.buf.clear();
            self.buf.extend(x.iter().skip(k).step_by(PARTS));
            out.emit(&[
                Value::Int(r),
                Value::Int(t),
                Value::Int(k as i64),
                Value::Floats(&self.buf),
            ]);
        }
    }
    fn save(&self, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn restore(&mut self, _: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// `quarter_fft`: the FFT of a quarter (rustfft).
pub struct QuarterFft;

struct QuarterFftState {
    z: Vec<Complex<f64>>,
    flat: Vec<f64>,
}

impl StreamFunctionFactory for QuarterFft {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        match input.fields.get(3).map(|f| f.ty) {
            Some(DataType::Float64Array) if input.fields.len() == 4 => {
                Ok(quarter_schema("spectrum"))
            }
            _ => Err(Error::Plan(
                "quarter_fft reads (receiver, t, k, samples DOUBLE[])".into(),
            )),
        }
    }
    fn create(&self, _: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(QuarterFftState {
            z: Vec::new(),
            flat: Vec::new(),
        })
    }
    fn stateless(&self) -> bool {
        true
    }
    fn checkpoints(&self) -> bool {
        true
    }
}

impl StreamFunction for QuarterFftState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let (Some((r, t)), Some(k), Value::Floats(x)) = (ints2(&row), row.int(2), row.get(3))
        else {
            return out.fault("quarter_fft", Fault::new("a null field"));
        };
        self.z.clear();
        self.z.extend(x.iter().map(|&re| Complex::new(re, 0.0)));
        dft(&mut self.z);
        self.flat.clear();
        self.flat.extend(self.z.iter().flat_map(|c| [c.re, c.im]));
        out.emit(&[
            Value::Int(r),
            Value::Int(t),
            Value::Int(k),
            Value::Floats(&self.flat),
        ]);
    }
    fn save(&self, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn restore(&mut self, _: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// The forward DFT in place (rustfft, a planner per thread).
pub fn dft(z: &mut [Complex<f64>]) {
    thread_local! {
        static PLANNER: std::cell::RefCell<rustfft::FftPlanner<f64>> =
            std::cell::RefCell::new(rustfft::FftPlanner::new());
    }
    if z.is_empty() {
        return;
    }
    PLANNER.with(|p| p.borrow_mut().plan_fft_forward(z.len()).process(z));
}

/// The butterfly: the spectrum of a sequence from those of its even (`e`) and odd
/// (`o`) halves: `X[j] = E[j] + w^j O[j]`, `X[j + m] = E[j] - w^j O[j]`, `w =
/// exp(-2 pi i / 2m)`.
pub fn butterfly(e: &[Complex<f64>], o: &[Complex<f64>]) -> Vec<Complex<f64>> {
    let m = e.len();
    let mut x = vec![Complex::new(0.0, 0.0); 2 * m];
    with_twiddles(m, |w| {
        for j in 0..m {
            let t = w[j] * o[j];
            x[j] = e[j] + t;
            x[j + m] = e[j] - t;
        }
    });
    x
}

/// Calls `f` with the twiddles `exp(-2 pi i j / 2m)`, j < m, computed once per `m` and
/// thread (a sine and cosine per bin cost more than rustfft's whole transform).
fn with_twiddles<R>(m: usize, f: impl FnOnce(&[Complex<f64>]) -> R) -> R {
    thread_local! {
        static TWIDDLES: std::cell::RefCell<BTreeMap<usize, Vec<Complex<f64>>>> =
            const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    TWIDDLES.with(|t| {
        let mut t = t.borrow_mut();
        let w = t.entry(m).or_insert_with(|| {
            (0..m)
                .map(|j| {
                    let a = -std::f64::consts::PI * j as f64 / m as f64;
                    Complex::new(a.cos(), a.sin())
                })
                .collect()
        });
        f(w)
    })
}

/// `butterflies`: a vector's four partial spectra combined twice, at the end of the
/// epoch they came in (all four come in one: they were made from one row); the vectors
/// of an epoch in (receiver, t) order.
pub struct Butterflies;

/// A vector's partial spectra, by quarter, as they come.
type Quartered = [Option<Vec<Complex<f64>>>; PARTS];

#[derive(Default)]
struct ButterfliesState {
    parts: BTreeMap<(i64, i64), Quartered>,
}

impl StreamFunctionFactory for Butterflies {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        match input.fields.get(3).map(|f| f.ty) {
            Some(DataType::Float64Array) if input.fields.len() == 4 => Ok(output_schema()),
            _ => Err(Error::Plan(
                "butterflies reads (receiver, t, k, spectrum DOUBLE[])".into(),
            )),
        }
    }
    fn create(&self, _: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(ButterfliesState::default())
    }
}

impl StreamFunction for ButterfliesState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let (Some(key), Some(k), Value::Floats(z)) = (ints2(&row), row.int(2), row.get(3)) else {
            return out.fault("butterflies", Fault::new("a null field"));
        };
        let Some(slot) = usize::try_from(k).ok().filter(|&k| k < PARTS) else {
            return out.fault("butterflies", Fault::new(format!("quarter {k} of 0..4")));
        };
        let spec = z
            .chunks_exact(2)
            .map(|c| Complex::new(c[0], c[1]))
            .collect();
        let parts = self.parts.entry(key).or_default();
        if parts[slot].replace(spec).is_some() {
            out.fault(
                "butterflies",
                Fault::new(format!(
                    "quarter {k} of receiver {} at {} twice",
                    key.0, key.1
                )),
            );
        }
    }

    fn end_of_epoch(&mut self, _: u64, out: &mut Emitter<'_>) {
        let mut flat = Vec::new();
        for ((r, t), parts) in std::mem::take(&mut self.parts) {
            let [Some(q0), Some(q1), Some(q2), Some(q3)] = parts else {
                out.fault(
                    "butterflies",
                    Fault::new(format!(
                        "receiver {r} at {t}: not all four quarters came in its epoch"
                    )),
                );
                continue;
            };
            let even = butterfly(&q0, &q2);
            let odd = butterfly(&q1, &q3);
            let x = butterfly(&even, &odd);
            flat.clear();
            flat.extend(x.iter().flat_map(|c| [c.re, c.im]));
            out.emit(&[Value::Int(r), Value::Int(t), Value::Floats(&flat)]);
        }
    }
}

/// Registers `quarters`, `quarter_fft` and `butterflies`.
pub fn register(registry: &mut Registry) {
    registry.add_function("quarters", Arc::new(Quarters));
    registry.add_function("quarter_fft", Arc::new(QuarterFft));
    registry.add_function("butterflies", Arc::new(Butterflies));
}

/// The radix-2 plan over `source` (a signal stream, one epoch per time step), the
/// butterflies on `combiners` partitions, the spectra merged in time order.
pub fn plan(source: SourceSpec, combiners: u32, sink: SinkSpec) -> Plan {
    let s = crate::signal::schema();
    let q = quarter_schema("samples");
    let col = |schema: &Schema, n: &str| Expr::col(schema, n).expect("column");
    let mut p = Plan::source("signals", source, s.clone());
    if let Plan::Source(src) = &mut p {
        src.epoch = 1;
    }
    // Cutting vectors into quarters keeps nothing: any partition does it.
    p.split(PARTS as u32, Route::RoundRobin, None, Strategy::Fsplit)
        .map("quarters")
        .merge(MergeKind::Union)
        .split(
            PARTS as u32,
            Route::Expr {
                expr: col(&q, "k"),
                when: None,
            },
            None,
            Strategy::Fsplit,
        )
        .map("quarter_fft")
        .merge(MergeKind::Union)
        .split(
            combiners,
            Route::Expr {
                expr: col(&q, "receiver"),
                when: None,
            },
            None,
            Strategy::Fsplit,
        )
        .map("butterflies")
        .merge(MergeKind::TimeOrdered)
        .sink(sink)
}
