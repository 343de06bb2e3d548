//! `braid-bench udf`: what a scalar function costs per row. The same query over the
//! same rows, `SELECT k, sum(f(x, y)) FROM rows GROUP BY k` with `f(x, y) = x * 3 + y`
//! written five ways: as a SQL expression (no function), as a Rust function
//! (`Registry::add_scalar`), and in Python (`CREATE FUNCTION ... LANGUAGE python`'s
//! compiled body) called a row at a time (each call taking the interpreter's lock, as
//! before batching), batched (the lock taken once for a batch of rows, the function
//! still called per row) and vectorized (called once per batch with one list per
//! argument). 1 and 2 workers, the variants alternating in each round; every output is
//! checked equal to the SQL expression's. Writes `udf.md` and `udf.csv`.
//!
//! ```text
//! cargo run --release -p braid-bench -- udf --rows 1000000 --repeat 3
//! ```

use crate::measure::median;
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{bail, Context, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::batch::{Scalar, Value};
use braid_plan::expr::ScalarUdf;
use braid_plan::function::{FunctionDef, Registry};
use braid_plan::types::DataType;
use braid_python::udf::PyScalar;
use braid_sql::compile_script;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Options of `braid-bench udf`.
#[derive(clap::Args)]
pub struct UdfArgs {
    /// Rows of the input.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Rounds (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where the input is generated.
    #[arg(long, default_value = "scratch/bench-udf")]
    scratch: PathBuf,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

/// `x * 3 + y` in Rust.
struct RustF;

impl ScalarUdf for RustF {
    fn return_type(&self, args: &[DataType]) -> braid_plan::error::Result<DataType> {
        match args {
            [DataType::Int64, DataType::Int64] => Ok(DataType::Int64),
            _ => Err(braid_plan::error::Error::Plan(
                "f takes (BIGINT, BIGINT)".into(),
            )),
        }
    }
    fn call(&self, args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
        match (args[0].as_int(), args[1].as_int()) {
            (Some(x), Some(y)) => x
                .checked_mul(3)
                .and_then(|v| v.checked_add(y))
                .map(Scalar::Int)
                .ok_or_else(|| "integer overflow".to_string()),
            _ => Ok(Scalar::Null),
        }
    }
}

/// A Python function called a row at a time (not batched).
struct RowByRow(PyScalar);

impl ScalarUdf for RowByRow {
    fn return_type(&self, args: &[DataType]) -> braid_plan::error::Result<DataType> {
        self.0.return_type(args)
    }
    fn call(&self, args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
        self.0.call(args)
    }
}

fn python(body: &str) -> Result<PyScalar> {
    Ok(braid_python::udf::compile(&FunctionDef {
        name: "f".into(),
        args: vec![("x".into(), DataType::Int64), ("y".into(), DataType::Int64)],
        returns: DataType::Int64,
        language: "python".into(),
        body: body.into(),
    })?)
}

#[derive(Serialize)]
struct Row {
    variant: String,
    workers: usize,
    seconds: f64,
    rows_per_second: f64,
    ns_per_row_over_sql: f64,
}

/// Runs the benchmark.
pub fn run(a: UdfArgs) -> Result<()> {
    std::fs::create_dir_all(&a.scratch)?;
    let input = a.scratch.join("rows.csv");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&input)?);
        writeln!(w, "k,x,y")?;
        let mut s: u64 = 7;
        for _ in 0..a.rows {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = s >> 16;
            writeln!(w, "{},{},{}", r % 100, (r >> 8) % 100_000, (r >> 30) % 1000)?;
        }
    }
    let head = "CREATE STREAM rows (k BIGINT, x BIGINT, y BIGINT) WITH (path = 'rows.csv');\n\
                CREATE SINK out WITH (sink = 'collect');\n";
    let with_f = format!("{head}INSERT INTO out SELECT k, sum(f(x, y)) AS s FROM rows GROUP BY k;");
    let plain =
        format!("{head}INSERT INTO out SELECT k, sum(x * 3 + y) AS s FROM rows GROUP BY k;");
    let row_fn = python("return x * 3 + y")?;
    let batched = python("return x * 3 + y")?;
    let vectorized = python("return [a * 3 + b for a, b in zip(x, y)]")?.vectorized();
    let fns: Vec<(&str, Option<Arc<dyn ScalarUdf>>)> = vec![
        ("SQL expression", None),
        ("Rust function", Some(Arc::new(RustF))),
        ("Python, a call per row", Some(Arc::new(RowByRow(row_fn)))),
        ("Python, batched", Some(Arc::new(batched))),
        ("Python, vectorized", Some(Arc::new(vectorized))),
    ];
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); 2]; fns.len()];
    let mut want: Option<Vec<Vec<Scalar>>> = None;
    for round in 0..a.repeat {
        for (wi, workers) in [1usize, 2].into_iter().enumerate() {
            for (vi, (name, f)) in fns.iter().enumerate() {
                let mut reg = Registry::with_builtins();
                let text = match f {
                    Some(f) => {
                        reg.add_scalar("f", f.clone());
                        &with_f
                    }
                    None => &plain,
                };
                let script = compile_script(text, &a.scratch, &reg)?;
                let job = script.jobs.first().context("no query")?;
                let cfg = RunConfig {
                    workers,
                    ..RunConfig::default()
                };
                let t = Instant::now();
                let r = runtime::run(&job.plan, &script.registry, &cfg)?;
                let secs = t.elapsed().as_secs_f64();
                let mut got: Vec<Vec<Scalar>> =
                    r.collected.iter().map(|o| o.values.clone()).collect();
                got.sort();
                match &want {
                    None => want = Some(got),
                    Some(w) if *w != got => bail!("{name} on {workers} workers: another output"),
                    Some(_) => {}
                }
                eprintln!("round {round}, {workers} workers, {name}: {secs:.3} s");
                times[vi][wi].push(secs);
            }
        }
    }
    let mut rows = Vec::new();
    for (wi, workers) in [1usize, 2].into_iter().enumerate() {
        let sql = median(times[0][wi].clone());
        for (vi, (name, _)) in fns.iter().enumerate() {
            let t = median(times[vi][wi].clone());
            rows.push(Row {
                variant: name.to_string(),
                workers,
                seconds: t,
                rows_per_second: a.rows as f64 / t,
                ns_per_row_over_sql: (t - sql) * 1e9 / a.rows as f64,
            });
        }
    }
    std::fs::create_dir_all(&a.out)?;
    write_csv(&a.out.join("udf.csv"), rows.iter())?;
    let table = markdown_table(
        &[
            ("function", Align::Left),
            ("workers", Align::Right),
            ("seconds", Align::Right),
            ("M rows/s", Align::Right),
            ("ns per row over the SQL expression", Align::Right),
        ],
        rows.iter()
            .map(|r| {
                vec![
                    r.variant.clone(),
                    r.workers.to_string(),
                    format!("{:.3}", r.seconds),
                    format!("{:.2}", r.rows_per_second / 1e6),
                    format!("{:.0}", r.ns_per_row_over_sql),
                ]
            })
            .collect(),
    );
    let md = format!(
        "# Scalar functions: cost per row, Rust against Python\n\n\
         `SELECT k, sum(f(x, y)) FROM rows GROUP BY k` over {} rows (100 keys), \
         `f(x, y) = x * 3 + y` written as a SQL expression, a Rust function \
         (`Registry::add_scalar`) and a Python function (`CREATE FUNCTION ... LANGUAGE \
         python`'s compiled body, in the interpreter embedded in the process): called a \
         row at a time (the interpreter's lock taken per call, as Braid did before \
         batching), batched (the lock taken once per batch, the function called per \
         row) and vectorized (`register_function(..., vectorized=True)`: one call per \
         batch with a list per argument). Median of {} rounds, the variants alternating; \
         every output equal to the SQL expression's.\n\n\
         ```\ncargo run --release -p braid-bench -- udf --rows {} --repeat {}\n```\n\n{table}\n",
        a.rows, a.repeat, a.rows, a.repeat
    );
    std::fs::write(a.out.join("udf.md"), md)?;
    println!("{table}");
    Ok(())
}
