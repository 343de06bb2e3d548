//! `braid-bench sql`'s window section: a sliding window (`HOP`) costs about what a
//! tumbling one of the same size does, whatever size / slide is (slicing: each row is
//! aggregated once into its slice), and an aggregate `FILTER` costs what the filter
//! does. One query per configuration over the same generated stream, serially (one
//! partition, 1 worker), output discarded.

use crate::measure::median;
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{Context, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::function::Registry;
use braid_sql::compile_script;
use serde::Serialize;
use std::path::Path;

/// Window size in event-time units (seconds of the generator's stream).
const SIZE: u64 = 1000;
/// Generator tuples per second of event time (with 2 M tuples: 10,000 s of stream).
const RATE: u64 = 200;

/// A line of `sql-windows.csv`.
#[derive(Serialize)]
struct WindowRow<'a> {
    query: &'a str,
    size_over_slide: u64,
    rows_per_s: u64,
    rows_out: u64,
    vs_tumble: f64,
}

/// Input rows per second and rows out of `query` over `rows` generated tuples.
fn rate(dir: &Path, rows: u64, query: &str) -> Result<(f64, u64)> {
    let text = format!(
        "SET parallel = 'off';\n\
         CREATE STREAM lr WITH (source = 'generator', tuples = {rows}, rate = {RATE}, \
         keys = 16, seed = 7, epoch = 10);\n\
         CREATE SINK out WITH (sink = 'discard');\n\
         INSERT INTO out {query};"
    );
    let script = compile_script(&text, dir, &Registry::with_builtins())?;
    let job = script.jobs.first().context("no query")?;
    let r = runtime::run(&job.plan, &script.registry, &RunConfig::default())?;
    Ok((
        r.rows_in as f64 / r.elapsed.as_secs_f64().max(1e-9),
        r.rows_out,
    ))
}

/// Runs the window queries; writes `sql-windows.csv` and returns the report's section.
pub fn section(dir: &Path, out: &Path, rows: u64, repeat: usize) -> Result<String> {
    let aggs = "xway, count(*) AS n, sum(spd) AS s, max(pos) AS p";
    let mut queries = vec![(
        "TUMBLE".to_string(),
        1,
        format!("SELECT window_end, {aggs} FROM lr GROUP BY TUMBLE(time, {SIZE}), xway"),
    )];
    for ratio in [10, 100, 1000] {
        queries.push((
            format!("HOP, slide {}", SIZE / ratio),
            ratio,
            format!(
                "SELECT window_end, {aggs} FROM lr GROUP BY HOP(time, {}, {SIZE}), xway",
                SIZE / ratio
            ),
        ));
    }
    queries.push((
        "TUMBLE with FILTER".to_string(),
        1,
        format!(
            "SELECT window_end, xway, count(*) FILTER (WHERE spd > 50) AS n, \
             sum(spd) FILTER (WHERE lane = 1) AS s, max(pos) FILTER (WHERE dir = 0) AS p \
             FROM lr GROUP BY TUMBLE(time, {SIZE}), xway"
        ),
    ));
    let mut csv = Vec::new();
    let mut md = Vec::new();
    let mut tumble = 0.0;
    for (name, ratio, q) in &queries {
        let mut runs = Vec::new();
        let mut rows_out = 0;
        for _ in 0..repeat.max(1) {
            let (r, o) = rate(dir, rows, q)?;
            runs.push(r);
            rows_out = o;
        }
        let m = median(runs);
        if name == "TUMBLE" {
            tumble = m;
        }
        let vs = m / tumble.max(1e-9);
        eprintln!("windows {name}: {m:.0} rows/s ({rows_out} rows out), {vs:.2} of TUMBLE");
        csv.push(WindowRow {
            query: name,
            size_over_slide: *ratio,
            rows_per_s: m as u64,
            rows_out,
            vs_tumble: vs,
        });
        md.push(vec![
            name.clone(),
            ratio.to_string(),
            format!("{m:.0}"),
            rows_out.to_string(),
            format!("{vs:.2}"),
        ]);
    }
    write_csv(&out.join("sql-windows.csv"), csv)?;
    let table = markdown_table(
        &[
            ("query", Align::Left),
            ("size / slide", Align::Right),
            ("rows/s (1 worker)", Align::Right),
            ("rows out", Align::Right),
            ("vs TUMBLE", Align::Right),
        ],
        md,
    );
    Ok(format!(
        "## Sliding windows and FILTER\n\n\
`SELECT window_end, {aggs} FROM lr GROUP BY <window>, xway` over the generator's stream \
of {rows} tuples ({RATE} per second of event time, 16 expressways), serially (`SET \
parallel = 'off'`, 1 worker), output discarded: a `TUMBLE(time, {SIZE})`, and `HOP(time, \
slide, {SIZE})` with size / slide = 10, 100 and 1000 (each row is in that many windows). \
A `HOP` is sliced (each row updates one slice of gcd(slide, size); closing windows merge \
slices with a running two-stack merge), so its cost does not grow with size / slide; \
the target is within 2x of the `TUMBLE` at every ratio. The last line is the `TUMBLE` \
with a `FILTER (WHERE ...)` on every aggregate. Input rows per second, medians of \
{repeat} runs.\n\n{table}\nRaw numbers: [sql-windows.csv](sql-windows.csv).\n\n"
    ))
}
