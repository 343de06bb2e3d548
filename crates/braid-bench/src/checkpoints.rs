//! `braid-bench checkpoints`: checkpoint size and time against state size.
//!
//! Linear Road (the parallel plan of `examples/linear_road.sql`, its answers to a CSV
//! file) over 1, 2, 4 and 8 expressways of generated steady load, as fast as possible,
//! checkpointed every `--interval-ms`: its state grows with the expressways and over
//! the run (vehicle records), so every checkpoint is a point of (state written, time
//! from the barrier to the commit). Each expressway count also runs without
//! checkpoints, alternating, for the run time they cost. Writes
//! `checkpoints.{csv,md,svg}`.
//!
//! ```text
//! cargo run --release -p braid-bench -- checkpoints
//! ```

use crate::plot::{Chart, Series};
use crate::report::{markdown_table, round, write_csv, Align};
use anyhow::{Context, Result};
use braid_exec::checkpoint::CheckpointConfig;
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_plan::function::Registry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `braid-bench checkpoints`.
#[derive(clap::Args)]
pub struct CheckpointsArgs {
    /// Expressway counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    xways: Vec<u32>,
    /// Simulated minutes of input.
    #[arg(long, default_value_t = 20)]
    minutes: u32,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Runs of each (with and without checkpoints, alternating; medians reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Scratch directory (generated input, checkpoints, answers).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

/// One checkpoint.
#[derive(serde::Serialize, Clone)]
struct Point {
    xways: u32,
    epoch: u64,
    state_mb: f64,
    barrier_to_commit_ms: f64,
}

/// One run of `text` (checkpointed into `ck` when given): its run time and the
/// checkpoints it committed.
fn one(
    text: &str,
    lrb: &Path,
    workers: usize,
    ck: Option<(&Path, Duration)>,
) -> Result<(f64, Vec<braid_exec::checkpoint::Taken>)> {
    use linear_road::history::{SegmentHistory, TollHistory};
    let (tolls, _) = TollHistory::load(&lrb.join("toll-history.csv")).context("toll history")?;
    let (segments, _) =
        SegmentHistory::load(&lrb.join("segment-history.csv")).context("segment history")?;
    let mut registry = Registry::with_builtins();
    let sink = Arc::new(linear_road::app::OutputSink::create(None, None).context("sink")?);
    linear_road::app::register(&mut registry, Arc::new(tolls), Arc::new(segments), sink);
    if let Some((dir, _)) = ck {
        let _ = std::fs::remove_dir_all(dir);
    }
    let config = RunConfig {
        workers,
        checkpoint: ck.map(|(dir, interval)| CheckpointConfig {
            dir: dir.to_path_buf(),
            interval,
            recover: false,
            backend: None,
        }),
        ..RunConfig::default()
    };
    let mut session = Session::new(&registry, config);
    session.compile(text, lrb)?;
    let start = Instant::now();
    let report = session.run_next().context("a query")??;
    Ok((start.elapsed().as_secs_f64(), report.run.checkpoints))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the benchmark.
pub fn run(a: CheckpointsArgs) -> Result<()> {
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("braid-bench-checkpoints"));
    std::fs::create_dir_all(&a.out)?;
    let interval = Duration::from_millis(a.interval_ms);
    let mut points = Vec::new();
    let mut rows = Vec::new();
    for &xways in &a.xways {
        let lrb = dir.join(format!("lrb-{xways}x{}", a.minutes));
        if !lrb.join("input.csv").exists() {
            let cfg = linear_road::generate::GenConfig {
                xways,
                minutes: a.minutes,
                profile: linear_road::generate::Profile::Steady,
                seed: 1,
                peak_vehicles_per_xway: linear_road::generate::GenConfig::default()
                    .peak_vehicles_per_xway,
            };
            eprintln!("generating {xways} expressway(s), {} minutes", a.minutes);
            linear_road::generate::write_dir(&cfg, &lrb, &mut |_| {})?;
        }
        let text =
            linear_road::app::example_script(&lrb.join("input.csv"), &dir.join("answers.csv"))?;
        let ck = dir.join("ck");
        let (mut with, mut without) = (Vec::new(), Vec::new());
        let mut taken = Vec::new();
        for r in 0..a.runs {
            let load = crate::host::loadavg();
            let (t, _) = one(&text, &lrb, a.workers, None)?;
            without.push(t);
            let (t, c) = one(&text, &lrb, a.workers, Some((&ck, interval)))?;
            with.push(t);
            eprintln!(
                "{xways} xway(s), round {}: {:.2} s without, {t:.2} s with {} checkpoint(s) (load {load} before)",
                r + 1,
                without[r],
                c.len()
            );
            if r == 0 {
                taken = c;
            }
        }
        let _ = std::fs::remove_dir_all(&ck);
        for c in &taken {
            points.push(Point {
                xways,
                epoch: c.epoch,
                state_mb: round(c.bytes as f64 / 1e6, 3),
                barrier_to_commit_ms: round(c.duration.as_secs_f64() * 1e3, 2),
            });
        }
        let last = taken.last().map_or(0.0, |c| c.bytes as f64 / 1e6);
        let ms: Vec<f64> = taken
            .iter()
            .map(|c| c.duration.as_secs_f64() * 1e3)
            .collect();
        let (tw, to) = (median(with.clone()), median(without.clone()));
        rows.push(vec![
            xways.to_string(),
            format!("{:.2}", to),
            format!("{:.2}", tw),
            format!("{:.3}", tw / to),
            taken.len().to_string(),
            format!("{last:.1}"),
            format!("{:.0}", median(ms.clone())),
            format!("{:.0}", ms.iter().copied().fold(0.0, f64::max)),
        ]);
    }
    write_csv(&a.out.join("checkpoints.csv"), points.iter().cloned())?;
    let series = a
        .xways
        .iter()
        .map(|&x| {
            Series::line(
                format!("{x} expressway(s)"),
                points
                    .iter()
                    .filter(|p| p.xways == x)
                    .map(|p| (p.state_mb, p.barrier_to_commit_ms))
                    .collect(),
            )
        })
        .collect();
    let chart = Chart {
        title: format!(
            "Linear Road checkpoints every {} ms, {} workers: time against state",
            a.interval_ms, a.workers
        ),
        x_label: "state written (MB)".into(),
        y_label: "barrier to commit (ms)".into(),
        series,
        ..Chart::default()
    };
    chart.write_svg(&a.out.join("checkpoints.svg"), 800, 450)?;
    let table = markdown_table(
        &[
            ("expressways", Align::Right),
            ("run time without (s, median)", Align::Right),
            ("with checkpoints (s, median)", Align::Right),
            ("ratio", Align::Right),
            ("checkpoints (first run)", Align::Right),
            ("last state (MB)", Align::Right),
            ("barrier to commit, median (ms)", Align::Right),
            ("max (ms)", Align::Right),
        ],
        rows,
    );
    let md = format!(
        "# Checkpoint size and time against state size\n\n\
         `cargo run --release -p braid-bench -- checkpoints` (Linear Road, {} simulated \
         minutes of steady load per expressway count, {} workers, as fast as possible, \
         checkpoints every {} ms; {} runs with and without, alternating; every point of \
         the plot is one checkpoint of the first run: its state against the time from \
         its barrier to its commit).\n\n{table}\n\n![checkpoint time against state](checkpoints.svg)\n",
        a.minutes, a.workers, a.interval_ms, a.runs
    );
    std::fs::write(a.out.join("checkpoints.md"), md)?;
    println!("{}", a.out.join("checkpoints.md").display());
    Ok(())
}
