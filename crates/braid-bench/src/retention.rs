//! `braid-bench retention`: what a stream's retention buys a server that runs for long.
//!
//! A live session with a data directory (every append written and synced to the
//! stream's file), one stream with a running query (`CREATE MATERIALIZED VIEW ...
//! WHERE v % 10 = 0`) and a subscriber of the stream; a producer appends `--rows` rows
//! (the COPY parser, chunks of 10,000). With `retention = K` and without, alternating,
//! it reports the ingest rate until the subscriber has read every row, the rows the
//! log holds in memory and its file's size at the end, and the resident memory the
//! run added (peak over samples taken every 10 % of the rows).
//!
//! ```text
//! cargo run --release -p braid-bench -- retention
//! ```

use crate::report::{markdown_table, round, write_csv, Align};
use anyhow::{bail, Context, Result};
use braid_exec::live::ingest::{Format, Ingest};
use braid_exec::live::{LiveSession, Outcome};
use braid_plan::function::Registry;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `braid-bench retention`.
#[derive(clap::Args)]
pub struct RetentionArgs {
    /// Rows appended per run.
    #[arg(long, default_value_t = 4_000_000)]
    rows: u64,
    /// The retention measured against none: the newest rows kept.
    #[arg(long, default_value_t = 100_000)]
    keep: u64,
    /// Engine worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Runs of each (alternating; medians reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

#[derive(serde::Serialize, Clone)]
struct Run {
    retention: String,
    rows_per_s: f64,
    rows_in_memory: u64,
    file_mb: f64,
    rss_added_mb: f64,
}

/// Resident memory now, in MB.
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4.0 / 1024.0)
}

fn execute(s: &mut LiveSession, sql: &str) -> Result<Outcome> {
    match s.execute(sql).pop() {
        Some(Ok(o)) => Ok(o),
        Some(Err(e)) => bail!("{sql}: {e}"),
        None => bail!("{sql}: nothing ran"),
    }
}

/// One run, with `keep` rows kept (all of them when `None`).
fn one(a: &RetentionArgs, keep: Option<u64>) -> Result<Run> {
    let dir = std::env::temp_dir().join(format!("braid-bench-retention-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = LiveSession::new(&Registry::with_builtins(), a.workers, Some(&dir), &dir)?;
    let with = keep.map_or(String::new(), |k| format!(" WITH (retention = {k})"));
    execute(
        &mut s,
        &format!("CREATE STREAM events (k BIGINT, v BIGINT, t BIGINT){with}"),
    )?;
    execute(
        &mut s,
        "CREATE MATERIALIZED VIEW tenth AS SELECT k, v FROM events WHERE v % 10 = 0",
    )?;
    let mut sub = match execute(&mut s, "SUBSCRIBE TO events")? {
        Outcome::Rows(sub, _) => sub,
        _ => bail!("SUBSCRIBE: no rows"),
    };
    let log = s.log("events").context("the stream's log")?.clone();
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_mb();
    let start = Instant::now();
    let rows = a.rows;
    let producer = std::thread::spawn(move || -> Result<()> {
        let mut ingest = Ingest::new(log, Format::Csv, false);
        let mut i = 0;
        let mut text = String::new();
        while i < rows {
            let to = (i + 10_000).min(rows);
            text.clear();
            for r in i..to {
                use std::fmt::Write;
                let _ = writeln!(text, "{},{},{}", r % 1000, (r * 7919) % 100_000, r);
            }
            ingest.push(text.as_bytes())?;
            i = to;
        }
        Ok(())
    });
    let (mut read, mut peak, mut next) = (0u64, 0f64, 0u64);
    while read < a.rows {
        match sub.try_next() {
            Ok(b) => read += b.len() as u64,
            Err(true) => bail!("the subscription ended at {read} rows"),
            Err(false) => std::thread::sleep(Duration::from_micros(200)),
        }
        if read >= next {
            peak = peak.max(rss_mb());
            next += a.rows / 10;
        }
        if start.elapsed() > Duration::from_secs(600) {
            bail!("{read} of {} rows after 600 s", a.rows);
        }
    }
    producer
        .join()
        .map_err(|_| anyhow::anyhow!("the producer panicked"))??;
    let secs = start.elapsed().as_secs_f64();
    peak = peak.max(rss_mb());
    // The query catches up too; an idle read then trims what both readers passed.
    std::thread::sleep(Duration::from_millis(300));
    let _ = sub.try_next();
    let log = s.log("events").context("the stream's log")?;
    let held = log.rows() - log.first_row();
    let file = std::fs::metadata(dir.join("streams").join("events.csv")).map_or(0, |m| m.len());
    drop(sub);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Run {
        retention: keep.map_or("none".into(), |k| format!("{k} rows")),
        rows_per_s: a.rows as f64 / secs,
        rows_in_memory: held,
        file_mb: file as f64 / 1e6,
        rss_added_mb: peak - before,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the comparison and writes `retention.md` and `retention.csv`.
pub fn run(a: RetentionArgs) -> Result<()> {
    let load = crate::host::loadavg();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(), Vec::new()];
    for r in 0..a.runs {
        // Alternating, the retention first in even rounds.
        let order = match r % 2 {
            0 => [Some(a.keep), None],
            _ => [None, Some(a.keep)],
        };
        for keep in order {
            let run = one(&a, keep)?;
            eprintln!(
                "{}: {:.0} rows/s, {} rows in memory, file {:.1} MB, +{:.0} MB resident",
                run.retention, run.rows_per_s, run.rows_in_memory, run.file_mb, run.rss_added_mb
            );
            runs[usize::from(keep.is_none())].push(run);
        }
    }
    let summary: Vec<Run> = runs
        .iter()
        .map(|rs| Run {
            retention: rs[0].retention.clone(),
            rows_per_s: round(median(rs.iter().map(|r| r.rows_per_s).collect()), 0),
            rows_in_memory: rs.iter().map(|r| r.rows_in_memory).max().unwrap_or(0),
            file_mb: round(median(rs.iter().map(|r| r.file_mb).collect()), 1),
            rss_added_mb: round(median(rs.iter().map(|r| r.rss_added_mb).collect()), 0),
        })
        .collect();
    std::fs::create_dir_all(&a.out)?;
    write_csv(&a.out.join("retention.csv"), summary.iter().cloned())?;
    let ratio = summary[0].rows_per_s / summary[1].rows_per_s;
    let table = markdown_table(
        &[
            ("retention", Align::Left),
            ("ingest rows/s", Align::Right),
            ("rows in memory, readers caught up", Align::Right),
            ("file MB at the end", Align::Right),
            ("resident MB added (peak)", Align::Right),
        ],
        summary
            .iter()
            .map(|r| {
                vec![
                    r.retention.clone(),
                    r.rows_per_s.to_string(),
                    r.rows_in_memory.to_string(),
                    r.file_mb.to_string(),
                    r.rss_added_mb.to_string(),
                ]
            })
            .collect(),
    );
    let md = format!(
        "# Stream retention\n\n\
         Command: `cargo run --release -p braid-bench -- retention --rows {} --keep {} --workers {} --runs {}` \
         (medians of {} runs each, alternating; one sitting; machine load before: {load}).\n\n{table}\n\
         Ingest with the retention / without: {:.2}.\n\n\
         A live session with a data directory (each append written and synced to the \
         stream's file), one stream read by a running query (`CREATE MATERIALIZED VIEW \
         ... WHERE v % 10 = 0`) and by a subscriber (`SUBSCRIBE TO events`); a producer \
         appends the rows with the COPY parser in chunks of 10,000. The rate is rows per \
         second until the subscriber has read them all. Rows in memory: what the log \
         holds once both readers have caught up (the most over the runs; the appends \
         trim only what the readers have passed, and a burst outruns them). Resident memory: the most the \
         process added during a run, sampled every 10 % of the rows (a run's memory is \
         reused by the next, so read it as an order of magnitude). With the retention \
         the log trims whole batches (10,000 rows each here) once both readers have \
         passed them and they are older than the newest K rows, and rewrites the file \
         from the first row kept once half of it is trimmed rows.\n",
        a.rows, a.keep, a.workers, a.runs, a.runs, ratio
    );
    std::fs::write(a.out.join("retention.md"), md)?;
    println!("{table}\nwith / without: {ratio:.2}");
    Ok(())
}
