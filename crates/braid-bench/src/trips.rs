//! `braid-bench trips`: trip grouping (thesis Paper III) split by each partitioner into
//! q = 1, 2, 4, ... partitions: the savings against the unpartitioned run, the
//! throughput, and the load balance (the busiest partition's TG work, fractional extra
//! costs computed, over the mean). The shape of Paper III's figures 8 and 9. Writes
//! `trips.md`, `trips.csv` and three SVG plots.
//!
//! ```text
//! cargo run --release -p braid-bench -- trips --requests 251000 --workers 2
//! ```

use crate::measure::median;
use crate::plot::{Chart, Series};
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{Context, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_plan::plan::{SinkSpec, SourceSpec};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use trips::app::{self, Adapt, Partitioner};
use trips::generate::{generate, GenConfig};
use trips::request;
use trips::tg::TgConfig;

/// Options of `braid-bench trips`.
#[derive(clap::Args)]
pub struct TripsArgs {
    /// Requests in the day (Paper III's full load: 251,000).
    #[arg(long, default_value_t = 251_000)]
    requests: usize,
    /// The day's seed (the static partitioners learn from the day of seed + 1000).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Workers.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Partition counts.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64")]
    qs: Vec<u32>,
    /// Runs of each (the median time is reported; outputs must be equal).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

#[derive(Serialize, Clone)]
struct Row {
    partitioner: String,
    q: u32,
    workers: usize,
    seconds: f64,
    requests_per_second: f64,
    savings: f64,
    savings_vs_unpartitioned: f64,
    work_max_over_mean: f64,
    requests_max_over_mean: f64,
    fec_total: u64,
}

/// Runs one configuration `repeat` times: its row.
fn measure(
    a: &TripsArgs,
    by: Partitioner,
    q: u32,
    day: &[request::Request],
    history: &[request::Request],
    input: &Arc<braid_plan::batch::Batch>,
) -> Result<(Row, f64)> {
    let mut times = Vec::new();
    let mut out: Option<Vec<Vec<Scalar>>> = None;
    let mut loads = Default::default();
    for _ in 0..a.repeat.max(1) {
        let mut reg = Registry::with_builtins();
        let l = app::register(
            &mut reg,
            TgConfig::default(),
            Some(history),
            Adapt::default(),
        );
        let plan = app::plan(
            SourceSpec::Memory(input.clone()),
            q,
            by,
            &TgConfig::default(),
            SinkSpec::Collect,
            &mut reg,
        )?;
        let cfg = RunConfig {
            workers: a.workers,
            ..RunConfig::default()
        };
        let t = Instant::now();
        let r = runtime::run(&plan, &reg, &cfg)?;
        times.push(t.elapsed().as_secs_f64());
        let got: Vec<Vec<Scalar>> = r.collected.into_iter().map(|o| o.values).collect();
        if let Some(w) = &out {
            anyhow::ensure!(
                *w == got,
                "{} q = {q}: another output on a rerun",
                by.name()
            );
        }
        out = Some(got);
        loads = l.snapshot();
    }
    let out = out.expect("a run");
    anyhow::ensure!(
        out.len() == day.len(),
        "{} q = {q}: {} output rows for {} requests",
        by.name(),
        out.len(),
        day.len()
    );
    let pairs: Vec<(f64, f64)> = out
        .iter()
        .map(|r| match (&r[4], &r[5]) {
            (Scalar::Float(c), Scalar::Float(x)) => (*c, *x),
            _ => (0.0, 0.0),
        })
        .collect();
    let savings = trips::tg::savings(&pairs);
    // Balance over all q partitions (a partition without requests counts as idle).
    let max_mean = |f: &dyn Fn(&trips::tg::Work) -> u64| {
        let v: Vec<u64> = loads.values().map(f).collect();
        let total: u64 = v.iter().sum();
        let max = v.iter().copied().max().unwrap_or(0);
        if total == 0 {
            1.0
        } else {
            max as f64 / (total as f64 / f64::from(q))
        }
    };
    let secs = median(times);
    Ok((
        Row {
            partitioner: by.name().to_string(),
            q,
            workers: a.workers,
            seconds: secs,
            requests_per_second: day.len() as f64 / secs,
            savings,
            savings_vs_unpartitioned: 0.0,
            work_max_over_mean: max_mean(&|w| w.fec),
            requests_max_over_mean: max_mean(&|w| w.requests),
            fec_total: loads.values().map(|w| w.fec).sum(),
        },
        savings,
    ))
}

/// `braid-bench trips`.
pub fn run(a: TripsArgs) -> Result<()> {
    let gen = |seed| {
        generate(&GenConfig {
            requests: a.requests,
            seed,
            ..GenConfig::default()
        })
    };
    let day = gen(a.seed);
    let history = gen(a.seed + 1000);
    let input = Arc::new(request::batch(&day));
    eprintln!("{} requests; the unpartitioned run first", day.len());
    let (mut base, serial) = measure(&a, Partitioner::RoundRobin, 1, &day, &history, &input)?;
    base.partitioner = "unpartitioned".into();
    base.savings_vs_unpartitioned = 1.0;
    eprintln!(
        "unpartitioned: {:.2} s, savings {:.4}",
        base.seconds, base.savings
    );
    let mut rows = vec![base.clone()];
    for &q in &a.qs {
        for by in Partitioner::ALL {
            let (mut r, s) = measure(&a, by, q, &day, &history, &input)
                .with_context(|| format!("{} q = {q}", by.name()))?;
            r.savings_vs_unpartitioned = if serial > 0.0 { s / serial } else { 0.0 };
            eprintln!(
                "{} q = {q}: {:.2} s, savings {:.4} ({:.3} of unpartitioned), work max/mean {:.2}",
                r.partitioner,
                r.seconds,
                r.savings,
                r.savings_vs_unpartitioned,
                r.work_max_over_mean
            );
            rows.push(r);
        }
    }
    std::fs::create_dir_all(&a.out)?;
    write_csv(&a.out.join("trips.csv"), rows.iter())?;
    let series = |f: &dyn Fn(&Row) -> f64| {
        Partitioner::ALL
            .iter()
            .map(|p| {
                let mut pts = vec![(1.0, f(&base))];
                pts.extend(
                    rows.iter()
                        .filter(|r| r.partitioner == p.name())
                        .map(|r| (f64::from(r.q), f(r))),
                );
                Series::line(p.name().to_uppercase(), pts)
            })
            .collect::<Vec<_>>()
    };
    for (file, title, y, log_y, f) in [
        (
            "trips-savings.svg",
            "Trip grouping: savings against the unpartitioned run",
            "savings / unpartitioned savings",
            false,
            &(|r: &Row| r.savings_vs_unpartitioned) as &dyn Fn(&Row) -> f64,
        ),
        (
            "trips-throughput.svg",
            "Trip grouping: throughput (a day of requests, as fast as possible)",
            "requests/s",
            true,
            &|r: &Row| r.requests_per_second,
        ),
        (
            "trips-balance.svg",
            "Trip grouping: the busiest partition's TG work over the mean",
            "max / mean work",
            false,
            &|r: &Row| r.work_max_over_mean,
        ),
    ] {
        Chart {
            title: title.into(),
            x_label: "q (partitions)".into(),
            y_label: y.into(),
            log_x: true,
            log_y,
            series: series(f),
            ..Chart::default()
        }
        .write_svg(&a.out.join(file), 800, 450)?;
    }
    let table = markdown_table(
        &[
            ("partitioner", Align::Left),
            ("q", Align::Right),
            ("seconds", Align::Right),
            ("requests/s", Align::Right),
            ("savings", Align::Right),
            ("of unpartitioned", Align::Right),
            ("work max/mean", Align::Right),
            ("requests max/mean", Align::Right),
            ("FECs computed", Align::Right),
        ],
        rows.iter()
            .map(|r| {
                vec![
                    r.partitioner.clone(),
                    r.q.to_string(),
                    format!("{:.2}", r.seconds),
                    format!("{:.0}", r.requests_per_second),
                    format!("{:.4}", r.savings),
                    format!("{:.3}", r.savings_vs_unpartitioned),
                    format!("{:.2}", r.work_max_over_mean),
                    format!("{:.2}", r.requests_max_over_mean),
                    format!("{:.3e}", r.fec_total as f64),
                ]
            })
            .collect(),
    );
    let qs: Vec<String> = a.qs.iter().map(|q| q.to_string()).collect();
    let md = format!(
        "# Trip grouping: spatial partitioners (thesis Paper III)\n\n\
         A generated day of {} trip requests (seed {}; `trips::generate`: clustered homes, \
         work places and shops in a 40 x 40 km city, a daily rate curve with morning and \
         evening peaks, trips of 3 km or more, 10 minutes' wait), grouped every minute by \
         TG (k = 4, least savings 0.2) on each partition. The static partitioners learned \
         their cuts from the day of seed {}; the adaptive ones learn again every 10 minutes \
         from the last 10 minutes. {} workers, {} run(s) each (median time); every run's \
         output holds every request once.\n\n\
         ```\ncargo run --release -p braid-bench -- trips --requests {} --seed {} --workers {} --qs {} --repeat {}\n```\n\n\
         ![savings](trips-savings.svg)\n\n![throughput](trips-throughput.svg)\n\n\
         ![balance](trips-balance.svg)\n\n{table}\n",
        a.requests,
        a.seed,
        a.seed + 1000,
        a.workers,
        a.repeat,
        a.requests,
        a.seed,
        a.workers,
        qs.join(","),
        a.repeat
    );
    std::fs::write(a.out.join("trips.md"), md)?;
    println!("{table}");
    Ok(())
}
