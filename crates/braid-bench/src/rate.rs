//! `braid-bench rate`: the Linear Road sustained-peak rating search
//! (`linear_road::rate`) and its report, `linear-road-rating.md` with response-time,
//! throughput and CPU plots per candidate L.
//!
//! ```text
//! cargo run --release -p braid-bench -- rate --candidates 4 --minutes 1 --warmup 0 --speed 10 --out target/rate-trial
//! ```

use crate::host;
use crate::plot::{Chart, Series};
use crate::report::{markdown_table, Align};
use anyhow::{Context, Result};
use linear_road::rate::{run_candidate, Candidate, RateConfig};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Options of `braid-bench rate`.
#[derive(clap::Args)]
pub struct RateArgs {
    /// Candidate L values, tried in increasing order until one fails.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8,64,128,256,512,768,1024"
    )]
    candidates: Vec<u32>,
    /// Scored minutes W per candidate.
    #[arg(long, default_value_t = 5)]
    minutes: u32,
    /// Unscored warm-up minutes.
    #[arg(long, default_value_t = 5)]
    warmup: u32,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Generated expressways replicated to reach L.
    #[arg(long, default_value_t = 4)]
    base_xways: u32,
    /// Copies validated answer by answer per candidate.
    #[arg(long, default_value_t = 2)]
    sample_copies: u32,
    /// Split strategy.
    #[arg(long, default_value = "autosplit")]
    strategy: String,
    /// Logical partitions (expressway x to x mod N); default min(L, 16).
    #[arg(long)]
    parts: Option<u32>,
    /// Balance merge fan-in.
    #[arg(long)]
    fanin: Option<u32>,
    /// Replay speed (1 = real time; anything else is a trial, not a rating).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Before each candidate, wait up to this many minutes for the 1-minute load
    /// average to fall below 1.0; a candidate that fails after starting above it is
    /// run once more (after waiting again).
    #[arg(long, default_value_t = 3.0)]
    settle_minutes: f64,
    /// Stop starting candidates after this many minutes.
    #[arg(long, default_value_t = 60.0)]
    budget_minutes: f64,
    /// Where to write the report.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

/// One candidate's result with the readings around it.
struct Rated {
    candidate: Candidate,
    /// Load average before the candidate started.
    load_before: String,
    /// Peak resident memory of the process after the candidate (MB).
    peak_rss_mb: f64,
}

/// Runs the search and writes the report.
pub fn run(a: RateArgs) -> Result<()> {
    let cfg = RateConfig {
        base_xways: a.base_xways,
        warmup_minutes: a.warmup,
        minutes: a.minutes,
        workers: a.workers,
        strategy: a.strategy.parse()?,
        parts: a.parts,
        fanin: a.fanin,
        sample_copies: a.sample_copies,
        speed: a.speed,
        process_cpu: host::process_cpu,
        process_rss: host::rss_mb,
        ..RateConfig::default()
    };
    let start = Instant::now();
    let per_run = f64::from(a.warmup + a.minutes) / a.speed.max(1e-9);
    let mut candidates = a.candidates.clone();
    candidates.sort_unstable();
    let mut results: Vec<Rated> = Vec::new();
    let bar = crate::report::bar(candidates.len() as u64, "candidates");
    for l in candidates {
        let spent = start.elapsed().as_secs_f64() / 60.0;
        if spent + per_run > a.budget_minutes {
            crate::report::say(
                &bar,
                &format!(
                    "braid-bench: time budget reached ({spent:.1} of {} min); not trying L = {l}",
                    a.budget_minutes
                ),
            );
            break;
        }
        bar.set_message(format!("L = {l}, {:.0} min each", per_run));
        let mut tries = 0;
        let (c, load_before) = loop {
            tries += 1;
            settle(&bar, a.settle_minutes);
            let (load1, load_before) = (host::load1(), host::loadavg());
            crate::report::say(
                &bar,
                &format!(
                    "braid-bench: L = {l}: {} + {} min at speed {} (load {load_before})",
                    a.warmup, a.minutes, a.speed
                ),
            );
            let c = run_candidate(&cfg, l).with_context(|| format!("running L = {l}"))?;
            if c.passed || load1 < 1.0 || tries > 1 {
                let noted = match tries {
                    1 => load_before,
                    _ => {
                        format!("{load_before} (rerun: the first try started above 1.0 and failed)")
                    }
                };
                break (c, noted);
            }
            crate::report::say(
                &bar,
                &format!(
                    "braid-bench: L = {l} failed after starting at load {load1:.2}: once more"
                ),
            );
        };
        bar.inc(1);
        let peak_rss_mb = host::peak_rss_mb();
        crate::report::say(&bar, &format!(
            "braid-bench: L = {}: {} rows in {:.0} s, late {:?}, sampled copies {}, peak RSS {:.0} MB -> {}",
            c.l,
            c.rows_in,
            c.seconds,
            c.late,
            c.validation.iter().map(|(k, r)| format!("{k}:{}", if r.passed() { "ok" } else { "FAIL" })).collect::<Vec<_>>().join(" "),
            peak_rss_mb,
            if c.passed { "PASS" } else { "FAIL" }
        ));
        let passed = c.passed;
        results.push(Rated {
            candidate: c,
            load_before,
            peak_rss_mb,
        });
        if !passed {
            break;
        }
    }
    bar.finish_and_clear();
    let best = results
        .iter()
        .filter(|r| r.candidate.passed)
        .map(|r| r.candidate.l)
        .max();
    write_report(&a, &results, best)?;
    match best {
        Some(l) if a.speed == 1.0 => {
            println!("rating: L = {l} (sustained peak, {} min)", a.minutes)
        }
        Some(l) => println!(
            "trial at speed {}: L = {l} passed (not a rating: not real time)",
            a.speed
        ),
        None => println!("no candidate passed"),
    }
    Ok(())
}

/// Waits up to `minutes` for the 1-minute load average to fall below 1.0.
fn settle(bar: &indicatif::ProgressBar, minutes: f64) {
    let until = Instant::now() + std::time::Duration::from_secs_f64(minutes.max(0.0) * 60.0);
    if host::load1() >= 1.0 {
        crate::report::say(
            bar,
            &format!(
                "braid-bench: load {}: waiting for it to fall below 1.0",
                host::loadavg()
            ),
        );
    }
    while host::load1() >= 1.0 && Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
}

fn write_report(a: &RateArgs, results: &[Rated], best: Option<u32>) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut md = String::new();
    let _ = writeln!(md, "# Linear Road: sustained-peak rating\n");
    let _ = writeln!(
        md,
        "Written by `braid-bench rate` (see `crates/braid-bench/src/rate.rs`); rerun with:\n\n```\ncargo run --release -p braid-bench -- rate --candidates {} --minutes {} --warmup {} --workers {} --base-xways {} --sample-copies {} --speed {} --strategy {}{}{} --budget-minutes {}\n```\n",
        a.candidates.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
        a.minutes,
        a.warmup,
        a.workers,
        a.base_xways,
        a.sample_copies,
        a.speed,
        a.strategy,
        a.parts.map_or(String::new(), |k| format!(" --parts {k}")),
        a.fanin.map_or(String::new(), |k| format!(" --fanin {k}")),
        a.budget_minutes
    );
    let verdict = match best {
        Some(l) if a.speed == 1.0 => format!("**L = {l} (sustained peak, {} min)**", a.minutes),
        Some(l) => format!(
            "L = {l} passed at speed {} (a trial, not a rating)",
            a.speed
        ),
        None => "no candidate passed".to_string(),
    };
    let _ = writeln!(md, "Result: {verdict}. This is not the 3-hour L-rating of the benchmark paper (doc section 7).\n");
    let _ = writeln!(
        md,
        "How: {} generated expressways at peak load from second 0 (`steady`), replicated into L/{} copies by renumbering expressways, vehicle ids (+{} per copy) and query ids; {}; replayed in real time for {} + {} minutes on {} worker(s); outputs of the first {} minutes are produced but not scored. Every scored output's Emit - Time is checked against its deadline; the outputs of the sampled copies are compared answer by answer with the independent validator's recomputation of the base data (renumbered). Copies are independent worlds, so the other copies' answers are the same computation on renumbered ids; they are checked for deadlines and counts only. `state MB` is what the Linear Road partitions' state reserved at the end (vehicle records, their index, the groups vehicles left within the minute, segment records, at capacity: `PartitionStats::heap_bytes` and its `parts`; a list's capacity beyond its length is never touched and not resident, so it can exceed the peak RSS); the memory plot gives the process's resident memory each second. `M rows in flight` is the most input rows sent into the dataflow and not yet through it at once (136 bytes a row in a batch of 15 int64 columns and its key).\n",
        a.base_xways, a.base_xways, results.first().map_or(0, |r| r.candidate.vid_stride),
        a.parts.map_or(format!("min(L, {}) logical partitions (expressway x in partition x mod q)", linear_road::rate::PARTS), |q| format!("{q} logical partitions")),
        a.warmup, a.minutes, a.workers, a.warmup
    );
    let mut rows = Vec::new();
    for r in results {
        let c = &r.candidate;
        let valid = c
            .validation
            .iter()
            .map(|(k, r)| format!("{k}:{}", if r.passed() { "ok" } else { "FAIL" }))
            .collect::<Vec<_>>()
            .join(" ");
        let max = c.millis.iter().map(|m| m[2]).max().unwrap_or(0);
        rows.push(vec![
            c.l.to_string(),
            c.rows_in.to_string(),
            format!("{:.0}", c.rows_in as f64 / c.seconds.max(1e-9)),
            format!("{:.1}", c.cpu_seconds),
            format!("{:.0}", r.peak_rss_mb),
            format!("{:.2}", r.peak_rss_mb / f64::from(c.l.max(1))),
            {
                let mb = |b: u64| format!("{:.0}", b as f64 / 1e6);
                let [rec, index, left, road, _] = c.state_parts.map(mb);
                format!("{} ({rec} / {index} / {left} / {road})", mb(c.state_bytes))
            },
            format!("{:.1}", c.vehicles as f64 / f64::from(c.l.max(1)) / 1e3),
            format!("{:.1}", c.in_flight_peak as f64 / 1e6),
            format!("{:?}", c.late),
            format!("{} / {}", c.millis[0][1], c.millis[2][1]),
            max.to_string(),
            valid,
            if c.passed { "PASS" } else { "FAIL" }.to_string(),
            r.load_before.clone(),
        ]);
    }
    md.push_str(&markdown_table(
        &[
            ("L", Align::Right),
            ("input rows", Align::Right),
            ("rows/s", Align::Right),
            ("CPU s", Align::Right),
            ("peak RSS MB", Align::Right),
            ("MB per xway", Align::Right),
            (
                "state MB (records / index / left groups / segments)",
                Align::Right,
            ),
            ("k vehicles per xway", Align::Right),
            ("M rows in flight (peak)", Align::Right),
            ("late (0..4)", Align::Left),
            ("p99 ms toll / bal", Align::Right),
            ("max ms", Align::Right),
            ("sampled copies valid", Align::Left),
            ("result", Align::Left),
            ("load before", Align::Left),
        ],
        rows,
    ));
    for r in results {
        let c = &r.candidate;
        let file = format!("lr-rating-response-L{}.svg", c.l);
        let names = ["toll", "accident", "balance", "daily", "travel time"];
        let series = (0..5)
            .filter(|&t| !c.series[t].is_empty())
            .map(|t| {
                Series::line(
                    names[t],
                    c.series[t]
                        .iter()
                        .map(|&(s, ms)| (s as f64, ms as f64))
                        .collect(),
                )
            })
            .collect();
        let chart = Chart {
            title: format!(
                "Linear Road, L = {}: worst response time per simulation second",
                c.l
            ),
            x_label: "simulation time (s)".into(),
            y_label: "response time (ms)".into(),
            log_y: true,
            series,
            hlines: vec![(5000.0, "5 s deadline".into())],
            ..Chart::default()
        };
        chart.write_svg(&a.out.join(&file), 900, 420)?;
        let _ = writeln!(md, "\n![response times, L = {}]({file})", c.l);
        if !c.load.is_empty() {
            // A chart over the run's wall time, written as `lr-rating-{what}-L{l}.svg`.
            let plot = |what: &str, title: String, y_label: &str, series, hlines| {
                let file = format!("lr-rating-{what}-L{}.svg", c.l);
                let chart = Chart {
                    title,
                    x_label: "wall time (s)".into(),
                    y_label: y_label.into(),
                    series: vec![series],
                    hlines,
                    ..Chart::default()
                };
                chart.write_svg(&a.out.join(&file), 900, 360).map(|()| file)
            };
            let tput = plot(
                "throughput",
                format!(
                    "Linear Road, L = {}: input rows per second (real time)",
                    c.l
                ),
                "input rows/s",
                Series::line("rows/s", c.load.iter().map(|&(t, r, _)| (t, r)).collect()),
                Vec::new(),
            )?;
            let cpu = plot(
                "cpu",
                format!(
                    "Linear Road, L = {}: CPU cores used by Braid (of {} workers)",
                    c.l, a.workers
                ),
                "cores",
                Series::line(
                    "cores",
                    c.load.iter().map(|&(t, _, cpu)| (t, cpu)).collect(),
                ),
                vec![(a.workers as f64, format!("{} cores", a.workers))],
            )?;
            let mem = plot(
                "memory",
                format!(
                    "Linear Road, L = {}: resident memory of the process (peak {:.0} MB)",
                    c.l, r.peak_rss_mb
                ),
                "MB",
                Series::line("resident MB", c.rss.clone()),
                vec![(
                    c.state_bytes as f64 / 1e6,
                    "partitions' state at the end (reserved)".into(),
                )],
            )?;
            let _ = writeln!(
                md,
                "\n![throughput, L = {l}]({tput})\n\n![CPU, L = {l}]({cpu})\n\n![memory, L = {l}]({mem})",
                l = c.l
            );
        }
    }
    std::fs::write(a.out.join("linear-road-rating.md"), md)?;
    eprintln!(
        "braid-bench: wrote {}",
        a.out.join("linear-road-rating.md").display()
    );
    Ok(())
}
