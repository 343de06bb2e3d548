//! `braid-bench parse`: raw CSV parse speed of a file: Braid's CSV reader alone (its
//! parser thread), no dataflow.
//!
//! ```text
//! cargo run --release -p braid-bench -- parse --input scratch/lrb/input.csv
//! ```

use anyhow::{Context, Result};
use braid_exec::source::{open, Counters, Next, ReadOptions};
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
    let mut feed = open(
        plan.leaf_source(),
        0,
        1,
        &ReadOptions::default(),
        counters,
        &registry,
    )?
    .context("worker 0 reads the file")?;
    let mut rows = 0u64;
    loop {
        match feed.next()? {
            Next::Window(_, b) => rows += b.len() as u64,
            Next::Wait => std::thread::yield_now(),
            Next::Done => break,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} rows in {secs:.2} s: {:.0} rows/s (one parser thread)",
        rows as f64 / secs.max(1e-9)
    );
    let rejects = feed.rejects();
    if rejects.count > 0 {
        print!("{rejects}");
    }
    Ok(())
}
