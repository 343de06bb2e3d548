//! `braid-bench vectors`: numeric vector streams (LOFAR-like signals) against the
//! physical reference, a single-threaded loop calling the same FFT (rustfft) on the
//! same vectors in memory. Two queries: transient detection (`examples/transients.sql`:
//! power spectrum of every vector, threshold, parallelized by receiver) and the
//! radix-2 FFT plan (four partial FFTs combined twice). Throughput in MB/s of samples
//! (8 bytes each), 1 and 2 workers, the variants alternating; outputs checked against
//! the reference's. Writes `vectors.md` and `vectors.csv`.
//!
//! ```text
//! cargo run --release -p braid-bench -- vectors --receivers 64 --steps 256 --samples 1024
//! ```

use crate::measure::median;
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{bail, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::batch::{Batch, Scalar, Value};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SinkSpec, SourceSpec};
use lofar::signal::{self, SignalConfig};
use rustfft::num_complex::Complex;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Options of `braid-bench vectors`.
#[derive(clap::Args)]
pub struct VectorsArgs {
    /// Receivers.
    #[arg(long, default_value_t = 64)]
    receivers: u32,
    /// Vectors per receiver.
    #[arg(long, default_value_t = 256)]
    steps: u32,
    /// Samples per vector (a power of two for the radix-2 plan).
    #[arg(long, default_value_t = 1024)]
    samples: usize,
    /// Rounds (medians reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

#[derive(Serialize)]
struct Row {
    query: String,
    variant: String,
    workers: usize,
    seconds: f64,
    mb_per_second: f64,
    over_reference: f64,
}

/// The reference for transient detection: per vector, the power spectrum and the test;
/// the (receiver, t, bin) found.
fn detect_loop(input: &Batch, n: usize) -> Vec<(i64, i64, i64)> {
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let fft = planner.plan_fft_forward(n);
    let mut z = vec![Complex::new(0.0, 0.0); n];
    let mut found = Vec::new();
    for row in input.rows() {
        let Value::Floats(x) = row.get(2) else {
            continue;
        };
        for (c, &v) in z.iter_mut().zip(x) {
            *c = Complex::new(v, 0.0);
        }
        fft.process(&mut z);
        // Bins 1 .. n/2 - 1 (the query's slice [2 : n/2] of the 1-based spectrum).
        let p: Vec<f64> = z[1..n / 2]
            .iter()
            .map(|c| c.re * c.re + c.im * c.im)
            .collect();
        let (mut best, mut at) = (f64::NEG_INFINITY, 0);
        for (i, &v) in p.iter().enumerate() {
            if v > best {
                (best, at) = (v, i);
            }
        }
        let mean = p.iter().sum::<f64>() / p.len() as f64;
        if best > 20.0 * mean {
            found.push((
                row.int(0).unwrap_or(0),
                row.int(1).unwrap_or(0),
                at as i64 + 1,
            ));
        }
    }
    found
}

/// The reference for the radix-2 plan: a direct FFT of every vector; a checksum.
fn fft_loop(input: &Batch, n: usize) -> f64 {
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let fft = planner.plan_fft_forward(n);
    let mut z = vec![Complex::new(0.0, 0.0); n];
    let mut sum = 0.0;
    for row in input.rows() {
        let Value::Floats(x) = row.get(2) else {
            continue;
        };
        for (c, &v) in z.iter_mut().zip(x) {
            *c = Complex::new(v, 0.0);
        }
        fft.process(&mut z);
        sum += z[1].re;
    }
    sum
}

fn with_memory_source(plan: &mut Plan, input: &Arc<Batch>) {
    match plan {
        Plan::Source(s) => s.spec = SourceSpec::Memory(input.clone()),
        Plan::Split(s) => with_memory_source(&mut s.input, input),
        Plan::Map(m) => with_memory_source(&mut m.input, input),
        Plan::Merge(m) => with_memory_source(&mut m.input, input),
        Plan::Sink(s) => with_memory_source(&mut s.input, input),
        Plan::Together(ps) => ps.iter_mut().for_each(|p| with_memory_source(p, input)),
    }
}

/// `braid-bench vectors`.
pub fn run(a: VectorsArgs) -> Result<()> {
    let cfg = SignalConfig {
        receivers: a.receivers,
        steps: a.steps,
        samples: a.samples,
        ..SignalConfig::default()
    };
    let (input, injected) = signal::batch(&cfg);
    let input = Arc::new(input);
    let mb = input.len() as f64 * a.samples as f64 * 8.0 / 1e6;
    eprintln!(
        "{} vectors of {} samples ({mb:.0} MB), {} transients",
        input.len(),
        a.samples,
        injected.len()
    );
    // The transient query, its source swapped for the vectors in memory.
    let example = include_str!("../../../examples/transients.sql");
    let text = example
        .split("-- EXPECTED")
        .next()
        .unwrap_or_default()
        .replace("(sink = 'stdout')", "(sink = 'collect')");
    let script =
        braid_sql::compile_script(&text, std::path::Path::new("."), &Registry::with_builtins())?;
    let mut detect = script.jobs[0].plan.clone();
    with_memory_source(&mut detect, &input);
    let mut reg = script.registry.clone();
    lofar::radix2::register(&mut reg);
    let radix2 = lofar::radix2::plan(SourceSpec::Memory(input.clone()), 8, SinkSpec::Collect);
    let want_found = detect_loop(&input, a.samples);
    let mut times: std::collections::BTreeMap<(String, String, usize), Vec<f64>> =
        Default::default();
    for round in 0..a.repeat.max(1) {
        let t = Instant::now();
        let found = detect_loop(&input, a.samples);
        let s = t.elapsed().as_secs_f64();
        times
            .entry(("transients".into(), "reference loop".into(), 1))
            .or_default()
            .push(s);
        let t = Instant::now();
        let check = fft_loop(&input, a.samples);
        times
            .entry(("fft".into(), "reference loop".into(), 1))
            .or_default()
            .push(t.elapsed().as_secs_f64());
        assert_eq!(found, want_found);
        for workers in [1usize, 2] {
            let cfg = RunConfig {
                workers,
                ..RunConfig::default()
            };
            let t = Instant::now();
            let r = runtime::run(&detect, &reg, &cfg)?;
            let s = t.elapsed().as_secs_f64();
            let mut got: Vec<(i64, i64, i64)> = r
                .collected
                .iter()
                .map(|o| match (&o.values[0], &o.values[1], &o.values[2]) {
                    (Scalar::Int(x), Scalar::Int(y), Scalar::Int(z)) => (*x, *y, *z),
                    _ => (-1, -1, -1),
                })
                .collect();
            got.sort();
            let mut want = want_found.clone();
            want.sort();
            if got != want {
                bail!("transients on {workers} workers: {got:?}, the loop found {want:?}");
            }
            times
                .entry((
                    "transients".into(),
                    "Braid SQL (PARALLEL by receiver)".into(),
                    workers,
                ))
                .or_default()
                .push(s);
            let t = Instant::now();
            let r = runtime::run(&radix2, &reg, &cfg)?;
            let s = t.elapsed().as_secs_f64();
            if r.collected.len() != input.len() {
                bail!("radix-2 gave {} spectra", r.collected.len());
            }
            let sum: f64 = r
                .collected
                .iter()
                .map(|o| match &o.values[2] {
                    Scalar::Floats(z) => z[2],
                    _ => 0.0,
                })
                .sum();
            if (sum - check).abs() > 1e-6 * check.abs().max(1.0) {
                bail!("radix-2's bin 1 sums to {sum}, the loop's to {check}");
            }
            times
                .entry(("fft".into(), "Braid radix-2 plan".into(), workers))
                .or_default()
                .push(s);
            eprintln!("round {round}, {workers} workers done");
        }
    }
    let mut rows = Vec::new();
    for ((query, variant, workers), v) in &times {
        let s = median(v.clone());
        let reference = median(times[&(query.clone(), "reference loop".to_string(), 1)].clone());
        rows.push(Row {
            query: query.clone(),
            variant: variant.clone(),
            workers: *workers,
            seconds: s,
            mb_per_second: mb / s,
            over_reference: reference / s,
        });
    }
    std::fs::create_dir_all(&a.out)?;
    write_csv(&a.out.join("vectors.csv"), rows.iter())?;
    // MB/s against workers, a line per query and way; the loops are one thread.
    let mut series: Vec<crate::plot::Series> = Vec::new();
    for r in &rows {
        let name = format!("{}: {}", r.query, r.variant);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((r.workers as f64, r.mb_per_second)),
            None => series.push(crate::plot::Series::line(
                name,
                vec![(r.workers as f64, r.mb_per_second)],
            )),
        }
    }
    crate::plot::Chart {
        title: "Vector streams: MB/s of samples, Braid against a loop over the same FFT".into(),
        x_label: "workers (the reference loops run on one thread)".into(),
        y_label: "MB/s of samples".into(),
        log_y: true,
        series,
        ..crate::plot::Chart::default()
    }
    .write_svg(&a.out.join("vectors.svg"), 800, 450)?;
    let table = markdown_table(
        &[
            ("query", Align::Left),
            ("how", Align::Left),
            ("workers", Align::Right),
            ("seconds", Align::Right),
            ("MB/s of samples", Align::Right),
            ("throughput / reference loop", Align::Right),
        ],
        rows.iter()
            .map(|r| {
                vec![
                    r.query.clone(),
                    r.variant.clone(),
                    r.workers.to_string(),
                    format!("{:.3}", r.seconds),
                    format!("{:.0}", r.mb_per_second),
                    format!("{:.2}", r.over_reference),
                ]
            })
            .collect(),
    );
    let md = format!(
        "# Numeric vector streams: Braid against a loop over the same FFT\n\n\
         {} vectors of {} samples ({mb:.0} MB of float64 samples; `lofar::signal`: {} \
         receivers x {} steps, white noise with {} transients) in memory. *transients* is \
         `examples/transients.sql` (the power spectrum of every vector by `fft`, a \
         threshold at 20 times the mean power, `PARALLEL` by receiver over 8 partitions), \
         against a loop doing the same per vector with rustfft (the physical reference, \
         one thread); both found the same transients. *fft* is the radix-2 plan \
         (`lofar::radix2`: each vector cut into four decimated quarters, four partial \
         FFTs on four partitions, combined twice by butterflies on 8) against a loop \
         calling rustfft on each whole vector. Median of {} rounds, alternating.\n\n\
         ```\ncargo run --release -p braid-bench -- vectors --receivers {} --steps {} --samples {} --repeat {}\n```\n\n\
         ![MB/s](vectors.svg)\n\n{table}\n",
        input.len(),
        a.samples,
        a.receivers,
        a.steps,
        injected.len(),
        a.repeat,
        a.receivers,
        a.steps,
        a.samples,
        a.repeat
    );
    std::fs::write(a.out.join("vectors.md"), md)?;
    println!("{table}");
    Ok(())
}
