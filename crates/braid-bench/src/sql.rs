//! `braid-bench sql`: the query-language examples at scale (serial, automatic
//! parallelization on 1 and 2 workers), StreamCloud's three ways to cut a query into
//! stages, and the StreamAPAS micro-benchmark's result latencies at 1,000-30,000
//! tuples per minute, and sliding windows against tumbling ones (`sql_windows`). Writes
//! `sql.md`, `sql-throughput.csv`, `sql-stages.csv`, `sql-windows.csv`,
//! `sql-apas-latency.csv` and `sql-apas-latency.svg`.
//!
//! ```text
//! cargo run --release -p braid-bench -- sql --rows 20000 --repeat 1 --rates 1000
//! ```

use crate::measure::median;
use crate::plot::{Chart, Series};
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{Context, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::function::Registry;
use braid_sql::compile_script;
use braid_sql::examples;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Options of `braid-bench sql`.
#[derive(clap::Args)]
pub struct SqlArgs {
    /// Rows of each example's input (calls, samples, log lines, generator tuples).
    #[arg(long, default_value_t = 2_000_000)]
    rows: u64,
    /// Runs per configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// StreamAPAS rates in tuples per minute per generator.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,20000,30000"
    )]
    rates: Vec<f64>,
    /// Where the inputs are generated.
    #[arg(long, default_value = "scratch/bench-sql")]
    scratch: PathBuf,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

const EXAMPLES: [&str; 4] = ["fraud", "lr_segments", "grep", "fft"];

/// A row of the throughput table: its label, the example, and a text replaced in it.
type Variant = (String, &'static str, Option<(&'static str, &'static str)>);

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The example's text without its expected block, writing to `sink` instead of stdout.
fn example(name: &str, sink: &str) -> Result<String> {
    let p = examples_dir().join(format!("{name}.sql"));
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    let text = text
        .split("-- EXPECTED")
        .next()
        .unwrap_or(&text)
        .to_string();
    Ok(text.replace("sink = 'stdout'", sink))
}

/// Input rows per second, rows out, and the cores the run used (its process's CPU
/// seconds, reader threads included, over its wall time).
fn rate(dir: &Path, text: &str, workers: usize) -> Result<(f64, u64, f64)> {
    let script = compile_script(text, dir, &Registry::with_builtins())?;
    let job = script.jobs.first().context("no query")?;
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    let cpu = crate::host::process_cpu();
    let r = runtime::run(&job.plan, &script.registry, &cfg)?;
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let cores = (crate::host::process_cpu() - cpu) / secs;
    Ok((r.rows_in as f64 / secs, r.rows_out, cores))
}

/// A line of `sql-throughput.csv`.
#[derive(Serialize)]
struct ThroughputRow<'a> {
    example: &'a str,
    config: &'a str,
    workers: usize,
    rows_per_s: u64,
    rows_out: u64,
    cores: f64,
}

/// A line of `sql-stages.csv`.
#[derive(Serialize)]
struct StagesRow<'a> {
    example: &'a str,
    stages_setting: &'a str,
    stages: usize,
    rows_per_s: u64,
}

/// A line of `sql-apas-latency.csv`.
#[derive(Serialize)]
struct LatencyRow {
    tuples_per_minute: f64,
    results: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// Latencies in ms of the StreamAPAS results in the CSV file `out`: emit time minus the
/// later of the two input tuples' times (columns a.time, value1, time2, value2, emit).
pub(crate) fn apas_latencies(out: &Path) -> Result<Vec<f64>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(out)
        .with_context(|| format!("reading {}", out.display()))?;
    let mut lat = Vec::new();
    for record in reader.records() {
        let record = record.with_context(|| format!("reading {}", out.display()))?;
        let v: Vec<f64> = record.iter().filter_map(|x| x.parse().ok()).collect();
        if v.len() == 5 {
            lat.push(v[4] - v[0].max(v[2]));
        }
    }
    Ok(lat)
}

/// Runs the benchmark and writes the report.
pub fn run(a: SqlArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let data = a.scratch.join("data");
    eprintln!(
        "generating {} rows per example input into {}",
        a.rows,
        data.display()
    );
    examples::write(&data, a.rows, 1000.0, 1)?;
    let mut md_rows = Vec::new();
    let mut csv_rows = Vec::new();
    // Each example as written, and fraud with epochs of an hour (its windows' length)
    // instead of a minute: 60 times fewer epochs, each a round of progress messages
    // between the workers.
    let variants: Vec<Variant> = EXAMPLES
        .iter()
        .map(|&n| (n.to_string(), n, None))
        .chain([(
            "fraud, epoch 3600".to_string(),
            "fraud",
            Some(("epoch = 60,", "epoch = 3600,")),
        )])
        .collect();
    for (label, name, change) in &variants {
        let (name, change) = (*name, *change);
        let mut text = example(name, "sink = 'discard'")?
            .replace("tuples = 200000", &format!("tuples = {}", a.rows));
        if let Some((from, to)) = change {
            anyhow::ensure!(text.contains(from), "{name} has no `{from}`");
            text = text.replace(from, to);
        }
        let name = label.as_str();
        let part = compile_script(&text, &a.scratch, &Registry::with_builtins())?
            .jobs
            .first()
            .map(|j| j.partitioning.clone())
            .unwrap_or_default();
        // The last: one worker on one core (CPU 0 only, so no reader thread beside it
        // either): what a second worker on a second core is measured against.
        let configs = [
            (
                "serial",
                format!("SET parallel = 'off';\n{text}"),
                1usize,
                false,
            ),
            ("auto", text.clone(), 1, false),
            ("auto", text.clone(), 2, false),
            ("auto, 1 core", text.clone(), 1, true),
        ];
        let mut rates = Vec::new();
        let mut used = Vec::new();
        for (label, t, workers, pinned) in &configs {
            let mut runs = Vec::new();
            let mut cores = Vec::new();
            let mut out = 0;
            for _ in 0..a.repeat.max(1) {
                let (r, o, c) = match pinned {
                    true => crate::host::on_one_core(|| rate(&a.scratch, t, *workers))?,
                    false => rate(&a.scratch, t, *workers)?,
                };
                runs.push(r);
                cores.push(c);
                out = o;
            }
            let m = median(runs);
            let c = median(cores);
            eprintln!("{name} {label} {workers}w: {m:.0} rows/s ({out} rows out, {c:.2} cores)");
            csv_rows.push(ThroughputRow {
                example: name,
                config: label,
                workers: *workers,
                rows_per_s: m as u64,
                rows_out: out,
                cores: (c * 100.0).round() / 100.0,
            });
            rates.push(m);
            used.push(c);
        }
        md_rows.push(vec![
            name.to_string(),
            part.to_string(),
            format!("{:.0}", rates[0]),
            format!("{:.0}", rates[1]),
            format!("{:.0}", rates[2]),
            format!("{:.2}", rates[2] / rates[1]),
            format!("{:.2}", rates[2] / rates[0]),
            format!("{:.2} / {:.2}", used[1], used[2]),
            format!("{:.0}", rates[3]),
            format!("{:.2}", rates[2] / rates[3]),
        ]);
    }
    write_csv(&a.out.join("sql-throughput.csv"), csv_rows)?;
    let md = markdown_table(
        &[
            ("example", Align::Left),
            ("partitioning", Align::Left),
            ("serial, 1 worker (rows/s)", Align::Right),
            ("auto, 1 worker", Align::Right),
            ("auto, 2 workers", Align::Right),
            ("2 workers / 1", Align::Right),
            ("2 workers / serial", Align::Right),
            ("cores used, 1 / 2 workers", Align::Right),
            ("auto, 1 worker on 1 core", Align::Right),
            ("2 workers / 1 on 1 core", Align::Right),
        ],
        md_rows,
    );
    // StreamCloud's three ways to cut a query, as Braid stages (2 workers).
    let mut cut_md_rows = Vec::new();
    let mut cut_csv = Vec::new();
    for name in ["fraud", "calls_and_texts"] {
        let text = example(name, "sink = 'discard'")?;
        let mut results = Vec::new();
        for cut in ["query", "operator", "subquery"] {
            let t = format!("SET stages = '{cut}';\n{text}");
            let n = compile_script(&t, &a.scratch, &Registry::with_builtins())?
                .jobs
                .first()
                .map_or(0, |j| j.stages.len());
            let mut runs = Vec::new();
            for _ in 0..a.repeat.max(1) {
                runs.push(rate(&a.scratch, &t, 2)?.0);
            }
            let m = median(runs);
            eprintln!("{name} stages={cut} ({n} stages): {m:.0} rows/s");
            cut_csv.push(StagesRow {
                example: name,
                stages_setting: cut,
                stages: n,
                rows_per_s: m as u64,
            });
            results.push((cut, n, m));
        }
        let sub = results[2].2;
        for (cut, n, m) in results {
            cut_md_rows.push(vec![
                name.to_string(),
                cut.to_string(),
                n.to_string(),
                format!("{m:.0}"),
                format!("{:.2}", m / sub),
            ]);
        }
    }
    write_csv(&a.out.join("sql-stages.csv"), cut_csv)?;
    let windows = crate::sql_windows::section(&a.scratch, &a.out, a.rows, a.repeat)?;
    let cut_md = markdown_table(
        &[
            ("example", Align::Left),
            ("`SET stages`", Align::Left),
            ("stages", Align::Right),
            ("rows/s (2 workers)", Align::Right),
            ("vs subquery", Align::Right),
        ],
        cut_md_rows,
    );
    // StreamAPAS latencies.
    let mut lat_csv = Vec::new();
    let mut lat_md_rows = Vec::new();
    let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
    for &r in &a.rates {
        let dir = a.scratch.join(format!("apas-{r}"));
        examples::write(&dir.join("data"), 1000, r, 1)?;
        let out = dir.join("out.csv");
        let text = example(
            "streamapas",
            "sink = 'csv', path = 'out.csv', stamp_emit = true",
        )?
        .replace(
            "epoch = 1000)",
            "epoch = 100, speed = 1, units_per_second = 1000)",
        );
        let script = compile_script(&text, &dir, &Registry::with_builtins())?;
        let job = script.jobs.first().context("no query")?;
        runtime::run(&job.plan, &script.registry, &RunConfig::default())?;
        let mut lat = apas_latencies(&out)?;
        lat.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| {
            lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        let (p50, p99, max) = (q(0.5), q(0.99), q(1.0));
        eprintln!(
            "streamapas {r}/min: {} results, p50 {p50} ms, p99 {p99} ms, max {max} ms",
            lat.len()
        );
        lat_csv.push(LatencyRow {
            tuples_per_minute: r,
            results: lat.len(),
            p50_ms: p50,
            p99_ms: p99,
            max_ms: max,
        });
        lat_md_rows.push(vec![
            r.to_string(),
            lat.len().to_string(),
            format!("{p50:.0}"),
            format!("{p99:.0}"),
            format!("{max:.0}"),
        ]);
        p50s.push((r, p50.max(0.5)));
        p99s.push((r, p99.max(0.5)));
    }
    write_csv(&a.out.join("sql-apas-latency.csv"), lat_csv)?;
    let lat_md = markdown_table(
        &[
            ("tuples/min per generator", Align::Right),
            ("results", Align::Right),
            ("p50 (ms)", Align::Right),
            ("p99 (ms)", Align::Right),
            ("max (ms)", Align::Right),
        ],
        lat_md_rows,
    );
    let chart = Chart {
        title: "StreamAPAS micro-benchmark: result latency vs input rate (epoch 100 ms)".into(),
        x_label: "tuples per minute per generator".into(),
        y_label: "latency (ms)".into(),
        log_x: true,
        log_y: false,
        series: vec![Series::line("p50", p50s), Series::line("p99", p99s)],
        ..Chart::default()
    };
    chart.write_svg(&a.out.join("sql-apas-latency.svg"), 800, 450)?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let report = format!(
        "# Query-language benchmarks\n\n\
Made by `cargo run --release -p braid-bench -- sql --rows {rows} --repeat {rep}` (release build, {cores} cores; \
medians of {rep} runs in one session; absolute numbers from other runs are not comparable).\n\n\
## Throughput: automatic parallelization vs one worker\n\n\
Each example of `examples/` on generated inputs of {rows} rows (`braid examples-data`), \
output discarded. *serial*: `SET parallel = 'off'` (one partition), 1 worker; *auto*: the \
automatically parallelized plan (16 partitions; the explicit `PARALLEL` plans of grep and \
fft as written) on 1 and 2 workers; `SET parallel = 'off'` does not change an explicit \
`PARALLEL` plan, so for grep and fft *serial* is that plan on 1 worker; *1 worker on 1 \
core*: the auto plan on 1 worker with the run's threads allowed on one CPU only (so it \
parses in the worker, no reader thread beside it): the baseline a second worker on a \
second core is measured against. Input rows per second.\n\n{md}\n\
Raw numbers: [sql-throughput.csv](sql-throughput.csv).\n\n\
How to read it: fraud and fft read one CSV file, which every worker parses its share \
of (docs/benchmarks/ingest.md; on a reader thread beside it when the process has more \
cores than workers, as 1 worker on this machine, in the worker itself otherwise), and which each worker then \
splits where it read it (autosplit chooses parasplit dealt locally over such a source: a \
single splitter would gather every row first; a worker may run as many epochs ahead \
of the output as the chunks the other workers read before its own span, so the workers \
parse and query their chunks at once rather than taking turns); lr_segments reads the generator on every \
worker the same way; grep reads several files (a glob), each read whole by one worker \
(rows numbered by file). fraud's aggregate runs in two phases (a partial count, sum and max where the \
rows are, combined by window and key in a second stage): its key, `dur / 60`, has a \
handful of values, so hashing by it kept most rows in two partitions. *cores used* is the \
process's CPU time over the run's wall time: one worker already uses more than one core \
(its reader thread parses while it runs the query), which bounds what a second worker \
can add on this 2-core machine to about 2 / (cores used by one); *2 workers / 1 on 1 \
core* is what a second core adds to one. fraud's stream declares \
epochs of 60 against windows of 3600: about 33,000 epochs of 60 rows. Each timely time \
holds 1,024 of them (the run's granule, ARCHITECTURE.md: about 64 windows of rows a \
time), so the round of progress messages every worker pays per time, again rather than \
shared, comes once per 61,000 rows rather than per 60; each epoch still ends, in order, \
in every partial aggregate. The last row runs the same query with epochs of 3600 (about \
20 epochs a time). fft's partitions each emit a row per window of 8 samples (250,000 \
in all), which the keyed merge combines row by row, on worker 0 at the end. A partial \
aggregate keeps each window of rows whole in one partition of the worker that split it \
(`Route::Any`), so a worker makes one set of partial groups, not one per partition; on \
one worker the second stage and its exchange are what two phases cost against serial.\n\n\
## Cutting a query into stages (StreamCloud's three strategies)\n\n\
`SET stages = 'query'` keeps the whole query in one stage (one partition when its \
stateful operators need different partitionings), `'operator'` makes every operator a \
stage, `'subquery'` (the default, StreamCloud's choice) starts a stage only at a \
stateful operator whose input is partitioned differently. Each stage is a split, a map \
and a merge. Unlike StreamCloud's subclusters, every Braid stage runs on \
all workers, so this measures the cost of the extra exchange steps, not subcluster \
sizing. fraud has one stateful operator, an aggregate: cut by subquery it runs in two \
phases (two stages), in one stage hashed by its key otherwise; calls_and_texts \
(`examples/calls_and_texts.sql`) has two, keyed differently.\n\n{cut_md}\n\
Raw numbers: [sql-stages.csv](sql-stages.csv).\n\n\
Between stages rows are not collected anywhere: each is keyed by a hash of its values \
where it is, and the next stage splits it on the worker that made it. \
calls_and_texts reads its two CSV files on worker 0 (two parser threads and the \
interleave); on 2 cores that reading bounds every cut, and the subquery cut's extra \
exchange costs more than running its cheap join in parallel saves, so StreamCloud's \
advantage for the subquery cut (measured on 30-60 nodes) does not show here.\
\n\n{windows}\
## StreamAPAS micro-benchmark latency\n\n\
(Without a latency constraint, epoch 100 ms. With one, and with shorter epochs: [latency.md](latency.md).)\n\n\
`examples/streamapas.sql` (two count windows of 500, join on value1 < value2, selection \
value1 < 50) replayed in real time (`speed = 1`, epoch 100 ms), 1,000 tuples per generator \
as in the paper, 1 worker. Latency of a result = its emit time minus the event time of the \
later of its two input tuples (both in ms since the start of the replay).\n\n{lat_md}\n\
![latency](sql-apas-latency.svg)\n\nRaw numbers: [sql-apas-latency.csv](sql-apas-latency.csv).\n",
        rows = a.rows,
        rep = a.repeat,
    );
    std::fs::write(a.out.join("sql.md"), report)?;
    eprintln!("wrote {}", a.out.join("sql.md").display());
    Ok(())
}
