//! `braid lrb`: Linear Road (`docs/linear-road.md`): generate data, run the
//! parallel plan, validate every answer, explain the plan. (The sustained-peak rating
//! is a benchmark: `cargo run --release -p braid-bench -- rate`.)

use crate::args::QueryArgs;
use anyhow::{Context, Result};
use braid_exec::runtime::{prepare, RunConfig};
use braid_exec::source::ReadOptions;
use braid_plan::explain;
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SourceSpec};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Lrb {
    /// Generate input, toll history and segment history into a directory.
    Generate {
        /// Expressways.
        #[arg(long, default_value_t = 1)]
        xways: u32,
        /// Simulated minutes.
        #[arg(long, default_value_t = 180)]
        minutes: u32,
        /// Load profile: ramp, sine or steady.
        #[arg(long, default_value = "ramp")]
        profile: String,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output directory.
        #[arg(short = 'o', long)]
        out: PathBuf,
        /// Also write the input as a Braid binary batch file (input.bin), which
        /// `braid lrb run --input input.bin` replays without parsing.
        #[arg(long)]
        binary: bool,
    },
    /// Run Linear Road: replay the input by its Time field (real time by default), write
    /// the outputs with Emit stamped, report response times per type.
    Run {
        #[command(flatten)]
        files: Files,
        /// Where to write the outputs.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Replay speed factor (1 = real time).
        #[arg(long, default_value_t = 1.0, conflicts_with = "max_speed")]
        speed: f64,
        /// Replay as fast as possible (Emit is then the input clock).
        #[arg(long)]
        max_speed: bool,
        /// A latency constraint on the answers (`50ms`, `2s`): tolls and alerts leave as
        /// their rows' ticks complete instead of at the end of each second.
        #[arg(long, value_parser = duration)]
        max_latency: Option<std::time::Duration>,
        /// Worker threads.
        #[arg(long, default_value_t = 1, value_parser = crate::args::positive_usize)]
        workers: usize,
        /// Logical partitions (expressway x goes to x mod q).
        #[arg(long, default_value_t = 64)]
        parts: u32,
        /// Split strategy: fsplit, maxtree, exptree, parasplit, autosplit.
        #[arg(long, default_value = "autosplit")]
        strategy: String,
        /// Fan-in of the balance merge tree (default: per worker, then global).
        #[arg(long)]
        fanin: Option<u32>,
        /// Draw the progress line (rows, rate, lag behind the schedule) even when
        /// standard error is not a terminal (a line a second); on a terminal it is
        /// drawn anyway unless the output goes to the screen.
        #[arg(long)]
        progress: bool,
        /// Profile the run: at its end, print the time of every operator on every
        /// worker, the workers' busy time and the partitions that took the most time.
        #[arg(long)]
        profile: bool,
    },
    /// Show the Linear Road physical plan.
    Explain {
        /// Logical partitions.
        #[arg(long, default_value_t = 64)]
        parts: u32,
        /// Split strategy.
        #[arg(long, default_value = "autosplit")]
        strategy: String,
        /// Balance merge fan-in.
        #[arg(long)]
        fanin: Option<u32>,
        /// Workers in all.
        #[arg(long, default_value_t = 2, value_parser = crate::args::positive_usize)]
        workers: usize,
        /// Print Graphviz DOT instead of text.
        #[arg(long)]
        dot: bool,
    },
    /// The main job end to end: generate data, run the parallel plan, validate.
    Demo {
        /// Expressways.
        #[arg(long, default_value_t = 2)]
        xways: u32,
        /// Simulated minutes.
        #[arg(long, default_value_t = 10)]
        minutes: u32,
        /// Worker threads.
        #[arg(long, default_value_t = 2, value_parser = crate::args::positive_usize)]
        workers: usize,
        /// Replay speed factor (default: as fast as possible).
        #[arg(long)]
        speed: Option<f64>,
        /// Scratch directory for the data and outputs.
        #[arg(long, default_value = "scratch/lrb-demo")]
        dir: PathBuf,
    },
    /// Recompute the expected answers independently and compare with an output file.
    Validate {
        #[command(flatten)]
        files: Files,
        /// The outputs to check.
        #[arg(long)]
        output: PathBuf,
        /// Outputs with Time below this are not scored (sustained-peak warm-up).
        #[arg(long, default_value_t = 0)]
        score_from: i64,
        /// Do not check deadlines (for outputs of a run as fast as possible).
        #[arg(long)]
        no_deadlines: bool,
    },
}

/// A Linear Road input and the histories its answers depend on.
#[derive(Args)]
pub struct Files {
    /// Input file (15-field lines).
    #[arg(long)]
    input: PathBuf,
    /// Toll history (VID,Day,XWay,Toll).
    #[arg(long)]
    history: PathBuf,
    /// Segment history (for type-4 answers).
    #[arg(long)]
    segment_history: Option<PathBuf>,
}

/// For a script that names Linear Road's functions: registers them when
/// `--lrb-history` is given (the returned sink is flushed after the run).
pub fn register_for_script(
    registry: &mut Registry,
    q: &QueryArgs,
) -> Result<Option<std::sync::Arc<linear_road::app::OutputSink>>> {
    if let Some(path) = &q.trips_history {
        crate::trips_cmd::register_history(registry, path)?;
    }
    match &q.lrb_history {
        Some(dir) => Ok(Some(register_lrb(registry, dir, q.lrb_output.as_deref())?)),
        None if q.lrb_output.is_some() => Err(crate::Usage(
            "--lrb-output names where Linear Road's sink writes: give --lrb-history too".into(),
        )
        .into()),
        None => Ok(None),
    }
}

/// Registers Linear Road's stream function, combiner and sink for a script, loading the
/// histories from `dir`.
fn register_lrb(
    registry: &mut Registry,
    dir: &std::path::Path,
    output: Option<&std::path::Path>,
) -> Result<std::sync::Arc<linear_road::app::OutputSink>> {
    use linear_road::history::{SegmentHistory, TollHistory};
    let tolls_path = dir.join("toll-history.csv");
    let (tolls, _) = TollHistory::load(&tolls_path)
        .with_context(|| format!("loading {}", tolls_path.display()))?;
    let seg_path = dir.join("segment-history.csv");
    let segments = if seg_path.exists() {
        SegmentHistory::load(&seg_path)
            .with_context(|| format!("loading {}", seg_path.display()))?
            .0
    } else {
        SegmentHistory::empty()
    };
    let sink = std::sync::Arc::new(
        linear_road::app::OutputSink::create(output, None).context("creating the output")?,
    );
    linear_road::app::register(
        registry,
        std::sync::Arc::new(tolls),
        std::sync::Arc::new(segments),
        sink.clone(),
    );
    Ok(sink)
}

fn print_lr_run(run: &linear_road::app::LrRun, opts: &linear_road::app::LrOptions) -> Result<()> {
    let secs = run.report.elapsed.as_secs_f64();
    outln!(
        "histories loaded in {:.2} s ({} toll rows, {} bad lines)",
        run.load_seconds,
        run.history_rows.0,
        run.history_rows.1
    )?;
    outln!(
        "{} input rows in {:.2} s ({:.0} rows/s), {} outputs",
        run.report.rows_in,
        secs,
        run.report.rows_in as f64 / secs.max(1e-9),
        run.report.rows_out
    )?;
    let names = [
        "toll notification",
        "accident notif.",
        "account balance",
        "daily expenditure",
        "travel time",
    ];
    let deadlines = [5, 5, 5, 10, 30];
    let clock = if opts.speed.is_some() {
        "driver time"
    } else {
        "input clock"
    };
    outln!("type                   count   p50 ms   p95 ms   p99 ms   max ms   late (deadline)  [{clock}]")?;
    for t in 0..5 {
        let h = &run.stats.millis[t];
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        outln!(
            "{t} {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} ({} s)",
            names[t],
            run.stats.counts[t],
            q(0.5),
            q(0.95),
            q(0.99),
            if h.is_empty() { 0 } else { h.max() },
            run.stats.late[t],
            deadlines[t]
        )?;
    }
    for r in &run.report.rejects {
        if r.count > 0 {
            out!("{r}")?;
        }
    }
    let (ir, it) = (
        run.ignored
            .reports
            .load(std::sync::atomic::Ordering::Relaxed),
        run.ignored.types.load(std::sync::atomic::Ordering::Relaxed),
    );
    if ir + it > 0 {
        outln!(
            "ignored: {ir} position report(s) with Lane, Dir or Seg out of range, {it} record(s) of unknown Type"
        )?;
    }
    let late: u64 = run.stats.late.iter().sum();
    if opts.speed.is_some() {
        outln!("deadlines: {}", if late == 0 { "PASS" } else { "FAIL" })?;
    } else {
        outln!("deadlines: not applicable (as fast as possible; Emit is the input clock)")?;
    }
    Ok(())
}

/// Runs a `braid lrb` subcommand.
pub fn run(which: Lrb) -> Result<()> {
    match which {
        Lrb::Generate {
            xways,
            minutes,
            profile,
            seed,
            out,
            binary,
        } => {
            let profile = profile.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            let cfg = linear_road::generate::GenConfig {
                xways,
                minutes,
                profile,
                seed,
                ..Default::default()
            };
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let t = std::time::Instant::now();
            let bar = indicatif::ProgressBar::new(u64::from(minutes) * 60);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} simulated s, {elapsed} ({eta} left)",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let stats = linear_road::generate::write_dir(&cfg, &out, &mut |s| bar.set_position(s))
                .with_context(|| format!("writing into {}", out.display()))?;
            bar.finish_and_clear();
            let secs = t.elapsed().as_secs_f64();
            eprintln!(
                "braid: {} tuples ({:?} by type), {} vehicles, {} re-entries, {} accidents in {:.2} s ({:.0} tuples/s)",
                stats.tuples,
                stats.by_type,
                stats.vehicles,
                stats.reentries,
                stats.accidents,
                secs,
                stats.tuples as f64 / secs.max(1e-9)
            );
            if binary {
                let mut plan = Plan::source(
                    "lrb",
                    SourceSpec::Csv {
                        path: out.join("input.csv"),
                        header: false,
                    },
                    linear_road::app::input_schema(),
                );
                plan.leaf_source_mut().window = 4096;
                crate::convert::write(
                    plan.leaf_source(),
                    &out.join("input.bin"),
                    &ReadOptions::default(),
                )?;
            }
        }
        Lrb::Run {
            files,
            output,
            speed,
            max_speed,
            max_latency,
            workers,
            parts,
            strategy,
            fanin,
            progress,
            profile,
        } => {
            let opts = linear_road::app::LrOptions {
                q: parts,
                strategy: strategy.parse()?,
                fanin,
                speed: (!max_speed).then_some(speed),
                max_latency,
                ..Default::default()
            };
            let (counters, bar) = crate::progress::Progress::maybe(progress, None);
            let cfg = RunConfig {
                workers,
                counters,
                profile: profile.then(braid_exec::profile::Profiler::new),
                ..RunConfig::default()
            };
            let run = linear_road::app::run_files(
                &files.input,
                &files.history,
                files.segment_history.as_deref(),
                output.as_deref(),
                &opts,
                &cfg,
            )?;
            drop(bar);
            print_lr_run(&run, &opts)?;
            crate::report::latency(&run.report);
            if profile {
                eprint!("{}", crate::profile::tables(&run.report));
            }
            if run.stats.late.iter().sum::<u64>() > 0 && !max_speed {
                return Err(crate::Failed.into());
            }
        }
        Lrb::Explain {
            parts,
            strategy,
            fanin,
            workers,
            dot,
        } => {
            let opts = linear_road::app::LrOptions {
                q: parts,
                strategy: strategy.parse()?,
                fanin,
                ..Default::default()
            };
            let mut registry = crate::registry();
            let sink = std::sync::Arc::new(linear_road::app::OutputSink::create(None, opts.speed)?);
            linear_road::app::register(
                &mut registry,
                std::sync::Arc::new(linear_road::history::TollHistory::from_rows(
                    std::iter::empty(),
                )),
                std::sync::Arc::new(linear_road::history::SegmentHistory::empty()),
                sink,
            );
            let source = SourceSpec::Csv {
                path: "input.csv".into(),
                header: false,
            };
            let plan = prepare(&linear_road::app::plan(source, &opts), &registry, workers)?;
            if dot {
                out!("{}", explain::dot(&plan, &registry, workers))?;
            } else {
                out!("{}", explain::text(&plan, &registry, workers))?;
            }
        }
        Lrb::Demo {
            xways,
            minutes,
            workers,
            speed,
            dir,
        } => {
            let cfg = linear_road::generate::GenConfig {
                xways,
                minutes,
                profile: linear_road::generate::Profile::Steady,
                seed: 1,
                ..Default::default()
            };
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let t = std::time::Instant::now();
            let stats = linear_road::generate::write_dir(&cfg, &dir, &mut |_| {})
                .with_context(|| format!("writing into {}", dir.display()))?;
            outln!(
                "generated {} tuples on {xways} expressway(s), {minutes} min, in {:.2} s ({})",
                stats.tuples,
                t.elapsed().as_secs_f64(),
                dir.display()
            )?;
            let (input, history, segs, out) = (
                dir.join("input.csv"),
                dir.join("toll-history.csv"),
                dir.join("segment-history.csv"),
                dir.join("output.csv"),
            );
            let opts = linear_road::app::LrOptions {
                q: xways.max(1) * 4,
                speed,
                ..Default::default()
            };
            let run_cfg = RunConfig {
                workers,
                ..RunConfig::default()
            };
            let run = linear_road::app::run_files(
                &input,
                &history,
                Some(&segs),
                Some(&out),
                &opts,
                &run_cfg,
            )?;
            print_lr_run(&run, &opts)?;
            let report = linear_road::validate::validate_files(
                &input,
                &history,
                Some(&segs),
                &out,
                &linear_road::validate::Options {
                    check_deadlines: speed.is_some(),
                    ..Default::default()
                },
            )
            .context("validating")?;
            out!("{report}")?;
            if !report.passed() {
                return Err(crate::Failed.into());
            }
        }
        Lrb::Validate {
            files,
            output,
            score_from,
            no_deadlines,
        } => {
            let opts = linear_road::validate::Options {
                score_from_time: score_from,
                check_deadlines: !no_deadlines,
                ..Default::default()
            };
            let report = linear_road::validate::validate_files(
                &files.input,
                &files.history,
                files.segment_history.as_deref(),
                &output,
                &opts,
            )
            .context("validating")?;
            out!("{report}")?;
            if !report.passed() {
                return Err(crate::Failed.into());
            }
        }
    }
    Ok(())
}

/// A duration as SQL's `SET max_latency` reads it (`50ms`, `250us`, `2s`).
fn duration(text: &str) -> Result<std::time::Duration, String> {
    braid_sql::catalog::duration(text, "--max-latency").map_err(|e| e.to_string())
}
