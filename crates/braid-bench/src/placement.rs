//! `braid-bench placement`: partitions placed by measured cost (`--calibrate`) against
//! `p % workers`, on an expensive stream function over a skewed and a uniform routing.
//! Writes `placement.md` and `placement.csv`.
//!
//! ```text
//! cargo run --release -p braid-bench -- placement --tuples 200000 --reps 1
//! ```

use crate::host;
use crate::measure::{measure, median, Measured};
use crate::report::{markdown_table, round, write_csv, Align};
use anyhow::Result;
use braid_exec::calibrate::calibrate;
use braid_exec::runtime::RunConfig;
use braid_plan::expr::Expr;
use braid_plan::function::{Registry, Spin};
use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_sql::expr::parse_expr;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `braid-bench placement`.
#[derive(clap::Args)]
pub struct PlacementArgs {
    /// Generator tuples per run.
    #[arg(long, default_value_t = 6_000_000)]
    tuples: u64,
    /// Logical partitions.
    #[arg(long, default_value_t = 16)]
    q: u32,
    /// Mixing rounds per row of the `spin` stream function (its cost per row).
    #[arg(long, default_value_t = 64)]
    rounds: u32,
    /// Input rows of the calibration run.
    #[arg(long, default_value_t = 200_000)]
    calibrate_rows: u64,
    /// Runs per configuration, in rounds of all configurations (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

/// The routings measured: name, route expression over the generator's columns (64
/// expressways), and what it means.
const ROUTES: [(&str, &str, &str); 2] = [
    (
        "skewed",
        "CASE WHEN xway < 24 THEN 0 ELSE xway END",
        "expressways 0-23 (37.5% of rows) all go to partition 0, the rest by xway % q",
    ),
    (
        "uniform",
        "xway",
        "xway % q: every partition gets the same share",
    ),
];

/// A line of `placement.csv`.
#[derive(Serialize)]
struct CsvRow<'a> {
    route: &'a str,
    config: &'a str,
    workers: usize,
    rows_per_s: u64,
    cpu_s: f64,
    other_cores: f64,
    busiest_share_modulo: f64,
    busiest_share_measured: f64,
}

fn plan(a: &PlacementArgs, route: &str) -> Result<Plan> {
    let schema = GeneratorSpec::schema();
    let spec = GeneratorSpec {
        tuples: a.tuples,
        rate: 20_000.0,
        keys: 64,
        broadcast: 0.0,
        seed: 7,
    };
    let expr: Expr = parse_expr(route, &schema)?;
    Ok(Plan::source("gen", SourceSpec::Generator(spec), schema)
        .split(
            a.q,
            Route::Expr { expr, when: None },
            None,
            Strategy::Parasplit,
        )
        .map("spin")
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard))
}

/// Runs the benchmark and writes the report.
pub fn run(a: PlacementArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let mut registry = Registry::with_builtins();
    registry.add_function("spin", Arc::new(Spin(a.rounds)));
    let load0 = host::loadavg();
    let mut md_rows = Vec::new();
    let mut csv_rows = Vec::new();
    let mut unchanged = Vec::new();
    let mut each_run = Vec::new();
    for (name, route, _) in ROUTES {
        let p = plan(&a, route)?;
        let cfg = RunConfig {
            workers: 2,
            ..RunConfig::default()
        };
        let cal = calibrate(&p, &registry, &cfg, a.calibrate_rows)?;
        eprint!("{name}: {cal}");
        let (before, after) = cal.busiest_share();
        let configs: [(&str, &Plan, usize); 3] = [
            ("1 worker", &p, 1),
            ("p % workers", &p, 2),
            ("measured", &cal.plan, 2),
        ];
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); configs.len()];
        // The 1-worker runs first. Then one 2-worker run that is not counted: a 2-worker
        // run right after a 1-worker run was about 10% slower (seen by swapping the two
        // 2-worker plans when they were equal). Then the two 2-worker configurations in
        // rounds, each round starting with the other one.
        for _ in 0..a.reps.max(1) {
            runs[0].push(measure(&p, &registry, 1)?);
        }
        measure(&p, &registry, 2)?;
        for round in 0..a.reps.max(1) {
            for i in 0..2 {
                let k = 1 + (round + i) % 2;
                let (_, plan, workers) = configs[k];
                runs[k].push(measure(plan, &registry, workers)?);
            }
        }
        let rate = |k: usize| median(runs[k].iter().map(|m| m.rate).collect());
        for (k, (label, _, workers)) in configs.iter().enumerate() {
            let each: Vec<String> = runs[k]
                .iter()
                .map(|m| format!("{:.2}", m.rate / 1e6))
                .collect();
            eprintln!("{name} {label}: runs {} M rows/s", each.join(" "));
            each_run.push(vec![name.to_string(), label.to_string(), each.join(", ")]);
            let cpu = median(runs[k].iter().map(|m| m.cpu).collect());
            let others = median(runs[k].iter().map(|m| m.others).collect());
            eprintln!(
                "{name} {label} ({workers}w): {:.0} rows/s, {cpu:.2} CPU-s, other processes {others:.2} cores",
                rate(k)
            );
            csv_rows.push(CsvRow {
                route: name,
                config: label,
                workers: *workers,
                rows_per_s: rate(k) as u64,
                cpu_s: round(cpu, 3),
                other_cores: round(others, 2),
                busiest_share_modulo: round(before, 3),
                busiest_share_measured: round(after, 3),
            });
        }
        md_rows.push(vec![
            name.to_string(),
            format!("{:.0}", rate(0)),
            format!("{:.0}", rate(1)),
            format!("{:.0}", rate(2)),
            format!("**{:.2}**", rate(2) / rate(1).max(1e-9)),
            format!("{:.0}% → {:.0}%", 100.0 * before, 100.0 * after),
            if cal.applied { "yes" } else { "no" }.to_string(),
        ]);
        if !cal.applied {
            unchanged.push(name);
        }
    }
    let load1 = host::loadavg();
    let mut doc = String::new();
    writeln!(
        doc,
        "# Placing partitions by measured cost\n\n\
Command (one run, every ratio below from it):\n\n\
```\ncargo run --release -p braid-bench -- placement --tuples {} --q {} --rounds {} --calibrate-rows {} --reps {}\n```\n\n\
A generator stream (64 expressways) is split into q = {} partitions by parasplit (each worker splits its own windows); each \
partition runs `spin`, a stand-in for an expensive query ({} rounds of a 64-bit mix per \
row). \"Measured placement\" is what `braid run --calibrate {}` does: run the plan on \
the first {} rows, measure each partition's stream-function time, and place the \
partitions by the longest-processing-time rule (`braid_exec::calibrate`). Throughput is \
the median of {} runs per configuration: the 1-worker runs, one uncounted 2-worker run, \
then the two 2-worker configurations in rounds, each round starting with the other one; load average before {load0}, after \
{load1}.\n",
        a.tuples, a.q, a.rounds, a.calibrate_rows, a.reps, a.q, a.rounds, a.calibrate_rows,
        a.calibrate_rows, a.reps
    )?;
    for (name, route, what) in ROUTES {
        writeln!(doc, "- **{name}**: route `{route}`; {what}.")?;
    }
    writeln!(doc)?;
    doc.push_str(&markdown_table(
        &[
            ("routing", Align::Left),
            ("1 worker (rows/s)", Align::Right),
            ("2 workers, p % workers", Align::Right),
            ("2 workers, measured placement", Align::Right),
            ("measured / p % workers", Align::Right),
            (
                "busiest worker's share of the measured work: p % workers → measured",
                Align::Left,
            ),
            ("placement changed", Align::Left),
        ],
        md_rows,
    ));
    if !unchanged.is_empty() {
        writeln!(
            doc,
            "\nWhere the placement did not change ({}), measured placement would have lowered \
the busiest worker's load by less than {:.0}% and `p % workers` was kept: both 2-worker \
columns ran the same plan, so their ratio is the run-to-run noise of this machine.",
            unchanged.join(", "),
            100.0 * braid_exec::calibrate::MIN_GAIN
        )?;
    }
    writeln!(
        doc,
        "\nEvery run of each configuration, in the order made, to judge the spread:\n"
    )?;
    doc.push_str(&markdown_table(
        &[
            ("routing", Align::Left),
            ("configuration", Align::Left),
            ("every run in order (M rows/s)", Align::Left),
        ],
        each_run,
    ));
    std::fs::write(a.out.join("placement.md"), doc)?;
    write_csv(&a.out.join("placement.csv"), csv_rows)?;
    eprintln!(
        "bench placement: wrote {} and placement.csv",
        a.out.join("placement.md").display()
    );
    Ok(())
}
