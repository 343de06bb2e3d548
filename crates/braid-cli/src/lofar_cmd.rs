//! `braid lofar`: a LOFAR-like stream of receivers' sample vectors.

use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::Write;
use std::path::PathBuf;

/// `braid lofar ...`.
#[derive(Subcommand)]
pub enum Lofar {
    /// Write receivers' sample vectors as CSV (`receiver,t,x`, x a DOUBLE[] as
    /// "{...}"): white noise, some vectors with a sinusoid injected; deterministic
    /// per seed. The transients injected are listed on standard error (or in --truth).
    Generate {
        /// Receivers.
        #[arg(long, default_value_t = 16)]
        receivers: u32,
        /// Vectors per receiver (time steps).
        #[arg(long, default_value_t = 64)]
        steps: u32,
        /// Samples per vector.
        #[arg(long, default_value_t = 1024)]
        samples: usize,
        /// The chance that a vector holds a transient.
        #[arg(long, default_value_t = 0.01)]
        transient_rate: f64,
        /// A transient's amplitude (the noise's standard deviation is 1).
        #[arg(long, default_value_t = 1.0)]
        amplitude: f64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file.
        #[arg(short = 'o', long)]
        out: PathBuf,
        /// Where to write the transients injected (receiver,t,bin), as CSV.
        #[arg(long)]
        truth: Option<PathBuf>,
    },
}

/// Runs `braid lofar ...`.
pub fn run(which: Lofar) -> Result<()> {
    match which {
        Lofar::Generate {
            receivers,
            steps,
            samples,
            transient_rate,
            amplitude,
            seed,
            out,
            truth,
        } => {
            let cfg = lofar::signal::SignalConfig {
                receivers,
                steps,
                samples,
                seed,
                transient_rate,
                amplitude,
            };
            let mut f = std::fs::File::create(&out)
                .with_context(|| format!("creating {}", out.display()))?;
            let found = lofar::signal::write_csv(&cfg, &mut f)
                .with_context(|| format!("writing {}", out.display()))?;
            let mut text = String::from("receiver,t,bin\n");
            for t in &found {
                text += &format!("{},{},{}\n", t.receiver, t.t, t.bin);
            }
            match truth {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => std::io::stderr().write_all(text.as_bytes())?,
            }
            eprintln!(
                "braid: {} vectors of {samples} samples written to {}; {} transients",
                u64::from(receivers) * u64::from(steps),
                out.display(),
                found.len()
            );
            Ok(())
        }
    }
}
