//! `braid-bench parse`: raw CSV parse speed of a file: Braid's CSV reader alone (its
//! parser thread), no dataflow; with `--workers N`, N readers of the file in shares (as
//! N workers read it, chunk by chunk with the serial state carried between them).
//!
//! ```text
//! cargo run --release -p braid-bench -- parse --input scratch/lrb/input.csv
//! cargo run --release -p braid-bench -- parse --input scratch/lrb/input.csv --workers 2
//! ```

use anyhow::{Context, Result};
use braid_exec::source::par_csv::Board;
use braid_exec::source::{open_at, Counters, Next, ReadOptions};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SourceSpec};
use braid_plan::types::Schema;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Options of `braid-bench parse`.
#[derive(clap::Args)]
pub struct ParseArgs {
    /// The CSV file.
    #[arg(long)]
    input: PathBuf,
    /// Columns "name type, ..." (default: the 15 int64 Linear Road fields).
    #[arg(long)]
    schema: Option<String>,
    /// Readers of the file in shares (1: the serial reader).
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

/// Reads the whole file through the CSV source's parser thread and counts rows.
pub fn run(a: ParseArgs) -> Result<()> {
    let schema = match &a.schema {
        Some(s) => s.parse::<Schema>()?,
        None => linear_road::app::input_schema(),
    };
    let mut plan = Plan::source(
        "parse",
        SourceSpec::Csv {
            path: a.input.clone(),
            header: false,
        },
        schema,
    );
    plan.leaf_source_mut().window = 1024;
    let counters = Arc::new(Counters::default());
    let registry = Registry::with_builtins();
    let start = Instant::now();
    let peers = a.workers.max(1);
    let board = Arc::new(Board::new(false));
    let mut feeds = Vec::new();
    for i in 0..peers {
        let shares = (peers > 1).then_some(&board);
        let feed = open_at(
            plan.leaf_source(),
            i,
            peers,
            &ReadOptions::default(),
            counters.clone(),
            &registry,
            None,
            shares,
        )?
        .context("a reader of the file")?;
        feeds.push(feed);
    }
    let mut rows = 0u64;
    let mut done = vec![false; feeds.len()];
    while done.iter().any(|d| !d) {
        let mut waited = true;
        for (feed, done) in feeds.iter_mut().zip(done.iter_mut()) {
            if *done {
                continue;
            }
            match feed.next()? {
                Next::Window(_, b) => {
                    rows += b.len() as u64;
                    waited = false;
                }
                Next::Wait => {}
                Next::Done => *done = true,
            }
        }
        if waited {
            std::thread::yield_now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let how = match peers {
        1 => "one parser thread".to_string(),
        n => format!("{n} readers in shares"),
    };
    println!(
        "{rows} rows in {secs:.2} s: {:.0} rows/s ({how})",
        rows as f64 / secs.max(1e-9)
    );
    for feed in &mut feeds {
        let rejects = feed.rejects();
        if rejects.count > 0 {
            print!("{rejects}");
        }
    }
    Ok(())
}
