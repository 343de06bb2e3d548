//! A LOFAR-like source: many receivers, each a stream of sample vectors (one per time
//! step), white Gaussian noise with transients injected: a few (receiver, time) vectors
//! carry a sinusoid at some frequency bin, strong enough to stand out of the noise in
//! the vector's power spectrum. Deterministic per seed; each vector is drawn from its
//! own seed, so any part of the stream can be made alone.

use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::types::{DataType, Field, Schema};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct SignalConfig {
    /// Receivers (stations).
    pub receivers: u32,
    /// Vectors per receiver (time steps).
    pub steps: u32,
    /// Samples per vector.
    pub samples: usize,
    /// The seed.
    pub seed: u64,
    /// The chance that a vector holds a transient.
    pub transient_rate: f64,
    /// A transient's amplitude (the noise's standard deviation is 1).
    pub amplitude: f64,
}

impl Default for SignalConfig {
    fn default() -> SignalConfig {
        SignalConfig {
            receivers: 16,
            steps: 64,
            samples: 1024,
            seed: 1,
            transient_rate: 0.01,
            amplitude: 1.0,
        }
    }
}

/// An injected transient: where, and at which frequency bin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Transient {
    /// Receiver.
    pub receiver: i64,
    /// Time step.
    pub t: i64,
    /// The frequency bin of its sinusoid (1 to samples / 2 - 1).
    pub bin: i64,
}

/// The schema of a signal stream: `(receiver, t, x)`, `t` the event time.
pub fn schema() -> Schema {
    let mut s = Schema::new(vec![
        Field::new("receiver", DataType::Int64),
        Field::new("t", DataType::Int64),
        Field::new("x", DataType::Float64Array),
    ]);
    s.event_time = Some(1);
    s
}

/// The samples of receiver `r` at step `t`, and its transient if it has one.
pub fn vector(cfg: &SignalConfig, r: u32, t: u32, out: &mut Vec<f64>) -> Option<Transient> {
    let mut rng = ChaCha8Rng::seed_from_u64(
        cfg.seed ^ (u64::from(r) << 32 | u64::from(t)).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    out.clear();
    let n = cfg.samples;
    while out.len() < n {
        // Box-Muller: two standard normals per draw.
        let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
        let u2: f64 = rng.gen();
        let rad = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (2.0 * std::f64::consts::PI * u2).sin_cos();
        out.push(rad * c);
        if out.len() < n {
            out.push(rad * s);
        }
    }
    if n >= 8 && rng.gen::<f64>() < cfg.transient_rate {
        let bin = rng.gen_range(1..n / 2) as i64;
        let phase: f64 = rng.gen::<f64>() * std::f64::consts::TAU;
        for (j, x) in out.iter_mut().enumerate() {
            let a = std::f64::consts::TAU * bin as f64 * j as f64 / n as f64 + phase;
            *x += cfg.amplitude * a.cos();
        }
        return Some(Transient {
            receiver: i64::from(r),
            t: i64::from(t),
            bin,
        });
    }
    None
}

/// The whole stream in time order (receivers in order within a step) as a batch, and
/// the transients injected.
pub fn batch(cfg: &SignalConfig) -> (Batch, Vec<Transient>) {
    let mut b = Batch::with_capacity(3, (cfg.receivers * cfg.steps) as usize);
    let mut found = Vec::new();
    let mut x = Vec::with_capacity(cfg.samples);
    let mut seq = 0;
    for t in 0..cfg.steps {
        for r in 0..cfg.receivers {
            found.extend(vector(cfg, r, t, &mut x));
            b.push(
                RowKey { seq, lane: 0 },
                &[
                    Value::Int(i64::from(r)),
                    Value::Int(i64::from(t)),
                    Value::Floats(&x),
                ],
            );
            seq += 1;
        }
    }
    (b, found)
}

/// Writes the stream as CSV (`receiver,t,x` with a header; `x` as `"{...}"`), and
/// returns the transients injected.
pub fn write_csv(cfg: &SignalConfig, out: &mut dyn Write) -> std::io::Result<Vec<Transient>> {
    let mut w = std::io::BufWriter::new(out);
    writeln!(w, "receiver,t,x")?;
    let mut found = Vec::new();
    let mut x = Vec::with_capacity(cfg.samples);
    for t in 0..cfg.steps {
        for r in 0..cfg.receivers {
            found.extend(vector(cfg, r, t, &mut x));
            write!(w, "{r},{t},\"")?;
            let mut text = String::new();
            braid_plan::batch::write_array(&mut text, &x).map_err(std::io::Error::other)?;
            w.write_all(text.as_bytes())?;
            writeln!(w, "\"")?;
        }
    }
    w.flush()?;
    Ok(found)
}
