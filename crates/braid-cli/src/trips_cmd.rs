//! `braid trips`: trip grouping's requests (thesis Paper III), and the history the
//! static partitioners learn from (`--trips-history`).

use anyhow::{Context, Result};
use braid_plan::function::Registry;
use clap::Subcommand;
use std::path::{Path, PathBuf};

/// `braid trips ...`.
#[derive(Subcommand)]
pub enum Trips {
    /// Write a day of trip requests as CSV (id,t,ox,oy,dx,dy,deadline; meters and
    /// seconds), deterministic per seed.
    Generate {
        /// Requests in the day (Paper III's full load: 251,000).
        #[arg(long, default_value_t = 251_000)]
        requests: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How long a request waits at most, seconds.
        #[arg(long, default_value_t = 600)]
        wait: i64,
        /// Output file.
        #[arg(short = 'o', long)]
        out: PathBuf,
    },
}

/// Runs `braid trips ...`.
pub fn run(which: Trips) -> Result<()> {
    match which {
        Trips::Generate {
            requests,
            seed,
            wait,
            out,
        } => {
            let day = trips::generate::generate(&trips::generate::GenConfig {
                requests,
                seed,
                wait,
                ..Default::default()
            });
            let mut f = std::fs::File::create(&out)
                .with_context(|| format!("creating {}", out.display()))?;
            trips::request::write_csv(&day, &mut f)
                .with_context(|| format!("writing {}", out.display()))?;
            eprintln!("braid: {} requests written to {}", day.len(), out.display());
            Ok(())
        }
    }
}

/// Registers the static partitioners `spq` and `skd`, learned from the requests in
/// the CSV file at `path` (with the header `braid trips generate` writes).
pub fn register_history(registry: &mut Registry, path: &Path) -> Result<()> {
    let history = trips::request::read_csv(path)
        .with_context(|| format!("reading the trip history {}", path.display()))?;
    trips::app::register(
        registry,
        trips::tg::TgConfig::default(),
        Some(&history),
        trips::app::Adapt::default(),
    );
    Ok(())
}
