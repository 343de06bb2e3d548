//! `braid-bench server`: the running system.
//!
//! - **Ingest**: rows/s into a stream with one running query, over the wire (`COPY`
//!   with the real `psql` and `INSERT ... VALUES` batches), acknowledged once durable;
//!   and how long until the query has read them all.
//! - **Fan-out**: 1, 10 and 100 subscribers, each with its own filter, on one stream
//!   (in-process: the live session's subscriptions, no wire).
//! - **Latency**: end to end from append to a subscriber, p50 and p99, at 10% and 80%
//!   of the fan-out run's 1-subscriber rate (in-process).
//! - **Memory per idle query**: resident memory added by 100 idle queries.
//!
//! ```text
//! cargo run --release -p braid-bench -- server
//! ```

use crate::plot::{Chart, Series};
use crate::report::{markdown_table, round, write_csv, Align};
use anyhow::{bail, Context, Result};
use braid_exec::live::ingest::{Format, Ingest};
use braid_exec::live::{LiveSession, Outcome, Subscription};
use braid_plan::function::Registry;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Options of `braid-bench server`.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Rows per ingest and fan-out run.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Engine worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Runs per measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds per latency run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Where the report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    out: PathBuf,
}

#[derive(serde::Serialize)]
struct Row {
    measure: String,
    setting: String,
    value: f64,
    unit: String,
}

fn row(measure: &str, setting: &str, value: f64, unit: &str) -> Row {
    Row {
        measure: measure.into(),
        setting: setting.into(),
        value,
        unit: unit.into(),
    }
}

/// Runs every measurement and writes `server.md`, `server.csv` and the fan-out plot.
pub fn run(a: ServerArgs) -> Result<()> {
    let mut rows = Vec::new();
    let scratch = std::env::temp_dir().join(format!("braid-bench-server-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let csv = scratch.join("events.csv");
    write_events(&csv, a.rows)?;

    // First, while the process has not yet held (and kept) the memory of big runs.
    let bar = crate::report::bar(5, "stages");
    let stage = |what: &str| {
        bar.set_message(what.to_string());
        crate::report::say(&bar, &format!("{what} ..."));
    };
    stage("memory per idle query");
    let (filter_kb, window_kb) = idle_memory(&a)?;
    bar.inc(1);
    stage("ingest over the wire");
    rows.extend(ingest(&a, &csv, &scratch)?);
    bar.inc(1);
    stage("fan-out, a query each");
    let fan = fan_out(&a, false)?;
    bar.inc(1);
    stage("fan-out, postfilters");
    let post = fan_out(&a, true)?;
    bar.inc(1);
    let one = fan.iter().find(|f| f.0 == 1).map_or(0.0, |f| f.1);
    for (what, f) in [
        ("fan-out, a query each (SELECT ... WHERE)", &fan),
        ("fan-out, postfilters (SUBSCRIBE ... WHERE)", &post),
    ] {
        rows.extend(
            f.iter()
                .map(|&(k, r)| row(what, &format!("{k} subscribers"), round(r, 0), "rows/s")),
        );
    }
    stage("latency");
    for share in [0.1, 0.8] {
        let (p50, p99, achieved) = latency(&a, one * share)?;
        let setting = format!("{:.0}% ({:.0} rows/s)", share * 100.0, achieved);
        rows.push(row("latency p50", &setting, round(p50, 2), "ms"));
        rows.push(row("latency p99", &setting, round(p99, 2), "ms"));
    }
    rows.push(row(
        "memory per idle query",
        "filter",
        round(filter_kb, 0),
        "KB",
    ));
    rows.push(row(
        "memory per idle query",
        "windowed aggregate",
        round(window_kb, 0),
        "KB",
    ));
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&scratch);

    std::fs::create_dir_all(&a.out)?;
    write_csv(&a.out.join("server.csv"), &rows)?;
    let chart = Chart {
        title: format!(
            "Fan-out: ingest rate with k filtering subscribers ({} workers)",
            a.workers
        ),
        x_label: "subscribers".into(),
        y_label: "rows/s ingested and delivered".into(),
        log_x: true,
        log_y: false,
        series: vec![
            Series::line(
                "a query each (SELECT ... WHERE)",
                fan.iter().map(|&(k, r)| (k as f64, r)).collect(),
            ),
            Series::line(
                "postfilters (SUBSCRIBE ... WHERE)",
                post.iter().map(|&(k, r)| (k as f64, r)).collect(),
            ),
        ],
        hlines: Vec::new(),
    };
    chart.write_svg(&a.out.join("server-fanout.svg"), 640, 400)?;
    let table = markdown_table(
        &[
            ("measure", Align::Left),
            ("setting", Align::Left),
            ("value", Align::Right),
            ("unit", Align::Left),
        ],
        rows.iter()
            .map(|r| {
                vec![
                    r.measure.clone(),
                    r.setting.clone(),
                    r.value.to_string(),
                    r.unit.clone(),
                ]
            })
            .collect(),
    );
    let md = format!(
        "# The running system (`braid server`)\n\n\
         Command: `cargo run --release -p braid-bench -- server --rows {} --workers {} --runs {}` \
         (medians of {} runs; one sitting; machine load before: {}).\n\n{table}\n\
         ![fan-out](server-fanout.svg)\n\n{}",
        a.rows,
        a.workers,
        a.runs,
        a.runs,
        crate::host::loadavg(),
        NOTES
    );
    std::fs::write(a.out.join("server.md"), md)?;
    println!("{table}");
    Ok(())
}

const NOTES: &str = "## What each line measures\n\n\
- **ingest COPY**: `psql \\copy events FROM file` into a stream read by one running \
query (`CREATE MATERIALIZED VIEW ... WHERE v % 10 = 0`), rows per second until the \
COPY is acknowledged (every row written and synced to the stream's log). **query \
caught up**: rows per second until `SHOW QUERIES` says the query has read them all.\n\
- **ingest INSERT**: `INSERT INTO events VALUES` with 1,000 rows per statement, sent \
by one psql session.\n\
- **ingest TCP**: producers on the stream's TCP port (`listen`), each sending its share \
of the same rows as CSV lines and reading its acknowledgements; rows per second until \
every producer has its `done` (every row written and synced).\n\
- **fan-out, postfilters**: k subscribers of the stream itself, \
`SUBSCRIBE TO events WHERE k % k = i`, each filter applied as its subscriber reads the \
log (no dataflow per subscriber).\n\
- **fan-out, a query each**: k private queries (`SELECT k, v, t FROM events WHERE k % k = i`), each \
subscriber getting 1/k of the rows; rows per second from the first append until every \
subscriber has read all its rows. In-process (the live session's subscriptions, no \
wire); ingest by the COPY parser (`Ingest`, CSV lines) in chunks of 10,000 rows.\n\
- **latency**: a producer thread appends batches of 100 rows at the given rate, each \
row stamped with its append time; a subscriber of `SELECT ... WHERE v % 2 = 0` \
measures receive time minus stamp. Idle engine workers park for up to 2 ms, which is \
the latency floor at low rates.\n\
- **memory per idle query**: resident memory (`/proc/self/statm`) added by 100 queries \
over an empty stream, divided by 100, measured first in the process (before the big \
runs, whose freed memory the allocator keeps).\n";

/// Sends `lines` to a stream's TCP port, shuts down its side, and reads the
/// acknowledgements until `done` (which must count every line).
fn tcp_produce(addr: &str, lines: &[&[u8]]) -> Result<()> {
    use std::io::{BufRead, BufReader};
    let mut c = std::net::TcpStream::connect(addr)?;
    let reader = c.try_clone()?;
    let acks = std::thread::spawn(move || -> Result<String> {
        let mut last = String::new();
        for line in BufReader::new(reader).lines() {
            last = line?;
            if last.starts_with("done") {
                break;
            }
        }
        Ok(last)
    });
    let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut c);
    for l in lines {
        w.write_all(l)?;
    }
    w.flush()?;
    drop(w);
    c.shutdown(std::net::Shutdown::Write)?;
    let done = acks
        .join()
        .map_err(|_| anyhow::anyhow!("the ack reader panicked"))??;
    if done != format!("done {} 0", lines.len()) {
        bail!("a TCP producer sent {} lines and got {done:?}", lines.len());
    }
    Ok(())
}

/// `rows` rows of `k,v,t` (k in 0..1000).
fn write_events(path: &Path, rows: u64) -> Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..rows {
        writeln!(f, "{},{},{}", i % 1000, (i * 7919) % 100_000, i)?;
    }
    f.flush()?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    crate::measure::median(std::mem::take(&mut v))
}

/// COPY and INSERT over the wire.
fn ingest(a: &ServerArgs, csv: &Path, scratch: &Path) -> Result<Vec<Row>> {
    let (mut copy, mut caught, mut insert) = (Vec::new(), Vec::new(), Vec::new());
    let mut tcp = [Vec::new(), Vec::new()];
    for run in 0..a.runs {
        let config = braid_server::ServerConfig {
            listen: "127.0.0.1:0".parse()?,
            workers: a.workers,
            data: Some(scratch.join(format!("data{run}"))),
            ..Default::default()
        };
        let server = braid_server::start(&config, &Registry::with_builtins())?;
        let port = server.addr.port().to_string();
        let psql = |sql: &str| -> Result<String> {
            let out = Command::new("psql")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "braid",
                    "-X",
                    "-A",
                    "-t",
                    "-F",
                    ",",
                    "-c",
                    sql,
                ])
                .output()
                .context("running psql")?;
            if !out.status.success() {
                bail!("{sql}: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(String::from_utf8_lossy(&out.stdout).to_string())
        };
        psql("CREATE STREAM events (k BIGINT, v BIGINT, t BIGINT)")?;
        psql("CREATE MATERIALIZED VIEW tens AS SELECT k, v FROM events WHERE v % 10 = 0")?;
        let start = Instant::now();
        psql(&format!(
            "\\copy events FROM '{}' WITH (FORMAT csv)",
            csv.display()
        ))?;
        copy.push(a.rows as f64 / start.elapsed().as_secs_f64());
        loop {
            let q = psql("SHOW QUERIES")?;
            let read: u64 = q
                .lines()
                .next()
                .and_then(|l| l.split(',').nth(2))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if read >= a.rows {
                break;
            }
            if start.elapsed() > Duration::from_secs(600) {
                bail!("the query did not catch up: {q}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        caught.push(a.rows as f64 / start.elapsed().as_secs_f64());
        // INSERT: 100 statements of 1,000 rows in one session.
        let script = scratch.join("insert.sql");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&script)?);
        for s in 0..100u64 {
            let values: Vec<String> = (0..1000u64)
                .map(|i| format!("({},{},{})", i % 1000, i, s * 1000 + i))
                .collect();
            writeln!(f, "INSERT INTO events VALUES {};", values.join(","))?;
        }
        f.flush()?;
        drop(f);
        let start = Instant::now();
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "braid",
                "-X",
                "-q",
                "-f",
            ])
            .arg(&script)
            .output()?;
        if !out.status.success() {
            bail!("INSERT script: {}", String::from_utf8_lossy(&out.stderr));
        }
        insert.push(100_000.0 / start.elapsed().as_secs_f64());
        // TCP producers: 1 and 4 at once, each sending its share of the CSV file and
        // reading its acknowledgements, until `done`.
        for (k, producers) in [(0, 1usize), (1, 4)] {
            let name = format!("tcp{producers}");
            psql(&format!("CREATE STREAM {name} (k BIGINT, v BIGINT, t BIGINT) WITH (listen = '127.0.0.1:0', format = 'csv')"))?;
            let feeds = psql("SHOW FEEDS")?;
            let addr = feeds
                .lines()
                .find(|l| l.starts_with(&format!("{name},")))
                .and_then(|l| l.split(',').nth(1))
                .and_then(|f| f.strip_prefix("listen "))
                .context("the stream's listen address in SHOW FEEDS")?
                .to_string();
            let data = std::fs::read(csv)?;
            let lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
            let per = lines.len().div_ceil(producers);
            let start = Instant::now();
            std::thread::scope(|scope| -> Result<()> {
                let mut handles = Vec::new();
                for part in lines.chunks(per) {
                    let addr = addr.clone();
                    handles.push(scope.spawn(move || tcp_produce(&addr, part)));
                }
                for h in handles {
                    h.join()
                        .map_err(|_| anyhow::anyhow!("a producer panicked"))??;
                }
                Ok(())
            })?;
            tcp[k].push(a.rows as f64 / start.elapsed().as_secs_f64());
        }
        server.stop();
    }
    Ok(vec![
        row(
            "ingest COPY (acknowledged, durable)",
            "1 query",
            round(median(copy), 0),
            "rows/s",
        ),
        row(
            "ingest COPY, query caught up",
            "1 query",
            round(median(caught), 0),
            "rows/s",
        ),
        row(
            "ingest INSERT (1,000 rows per statement)",
            "1 query",
            round(median(insert), 0),
            "rows/s",
        ),
        row(
            "ingest TCP (acknowledged, durable)",
            "1 producer",
            round(median(tcp[0].clone()), 0),
            "rows/s",
        ),
        row(
            "ingest TCP (acknowledged, durable)",
            "4 producers",
            round(median(tcp[1].clone()), 0),
            "rows/s",
        ),
    ])
}

fn session(a: &ServerArgs) -> Result<LiveSession> {
    Ok(LiveSession::new(
        &Registry::with_builtins(),
        a.workers,
        None,
        Path::new("."),
    )?)
}

fn execute(s: &mut LiveSession, sql: &str) -> Result<Outcome> {
    match s.execute(sql).pop() {
        Some(Ok(o)) => Ok(o),
        Some(Err(e)) => bail!("{sql}: {e}"),
        None => bail!("{sql}: nothing ran"),
    }
}

fn subscribe(s: &mut LiveSession, sql: &str) -> Result<Subscription> {
    match execute(s, sql)? {
        Outcome::Rows(sub, _) => Ok(sub),
        _ => bail!("{sql}: no rows"),
    }
}

/// CSV text of rows `from..to` of the events.
fn chunk(from: u64, to: u64, stamp: Option<u64>) -> String {
    let mut s = String::with_capacity(((to - from) * 20) as usize);
    for i in from..to {
        let t = stamp.unwrap_or(i);
        s.push_str(&format!("{},{},{}\n", i % 1000, (i * 7919) % 100_000, t));
    }
    s
}

/// Ingest rate with k subscribers, for k = 1, 10, 100: each a query of its own
/// (`SELECT ... WHERE`), or, with `postfilter`, a reader of the stream with its filter
/// applied as it reads (`SUBSCRIBE TO events WHERE ...`).
fn fan_out(a: &ServerArgs, postfilter: bool) -> Result<Vec<(usize, f64)>> {
    let mut out = Vec::new();
    for k in [1usize, 10, 100] {
        let mut runs = Vec::new();
        for _ in 0..a.runs {
            let mut s = session(a)?;
            execute(
                &mut s,
                "CREATE STREAM events (k BIGINT, v BIGINT, t BIGINT)",
            )?;
            let mut subs = Vec::new();
            for i in 0..k {
                let sql = match (k, postfilter) {
                    (1, false) => "SELECT k, v, t FROM events".to_string(),
                    (1, true) => "SUBSCRIBE TO events".to_string(),
                    (_, false) => format!("SELECT k, v, t FROM events WHERE k % {k} = {i}"),
                    (_, true) => format!("SUBSCRIBE TO events WHERE k % {k} = {i}"),
                };
                subs.push(subscribe(&mut s, &sql)?);
            }
            let log = s.log("events").context("the stream's log")?.clone();
            let start = Instant::now();
            let rows = a.rows;
            let producer = std::thread::spawn(move || -> Result<()> {
                let mut ingest = Ingest::new(log, Format::Csv, false);
                let mut i = 0;
                while i < rows {
                    let to = (i + 10_000).min(rows);
                    ingest.push(chunk(i, to, None).as_bytes())?;
                    i = to;
                }
                Ok(())
            });
            let mut read = 0u64;
            while read < a.rows {
                let mut got = false;
                for sub in subs.iter_mut() {
                    while let Ok(b) = sub.try_next() {
                        read += b.len() as u64;
                        got = true;
                    }
                }
                if !got {
                    std::thread::sleep(Duration::from_micros(200));
                }
                if start.elapsed() > Duration::from_secs(600) {
                    bail!("fan-out to {k}: {read} of {} rows after 600 s", a.rows);
                }
            }
            producer
                .join()
                .map_err(|_| anyhow::anyhow!("the producer panicked"))??;
            runs.push(a.rows as f64 / start.elapsed().as_secs_f64());
        }
        out.push((k, median(runs)));
    }
    Ok(out)
}

/// p50 and p99 latency (ms) and the achieved rate at `rate` rows/s.
fn latency(a: &ServerArgs, rate: f64) -> Result<(f64, f64, f64)> {
    let mut s = session(a)?;
    execute(
        &mut s,
        "CREATE STREAM events (k BIGINT, v BIGINT, t BIGINT)",
    )?;
    let mut sub = subscribe(&mut s, "SELECT k, v, t FROM events WHERE v % 2 = 0")?;
    let log = s.log("events").context("the stream's log")?.clone();
    let origin = Instant::now();
    let seconds = a.seconds;
    let producer = std::thread::spawn(move || -> Result<u64> {
        let mut ingest = Ingest::new(log, Format::Csv, false);
        let mut sent = 0u64;
        let end = Duration::from_secs(seconds);
        while origin.elapsed() < end {
            // Batches of 100 rows, each when the rate says it is due.
            let due = Duration::from_secs_f64(sent as f64 / rate.max(1.0));
            if let Some(wait) = due.checked_sub(origin.elapsed()) {
                std::thread::sleep(wait);
            }
            let stamp = origin.elapsed().as_micros() as u64;
            ingest.push(chunk(sent, sent + 100, Some(stamp)).as_bytes())?;
            sent += 100;
        }
        Ok(sent)
    });
    let mut lat = Vec::new();
    let stop = Duration::from_secs(a.seconds + 2);
    while origin.elapsed() < stop {
        match sub.try_next() {
            Ok(b) => {
                let now = origin.elapsed().as_micros() as i64;
                for r in b.rows() {
                    if let Some(t) = r.int(2) {
                        lat.push((now - t) as f64 / 1000.0);
                    }
                }
            }
            Err(_) => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    let sent = producer
        .join()
        .map_err(|_| anyhow::anyhow!("the producer panicked"))??;
    if lat.is_empty() {
        bail!("no rows reached the subscriber");
    }
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    Ok((q(0.5), q(0.99), sent as f64 / a.seconds as f64))
}

/// Resident memory now, in KB.
fn rss_kb() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4.0)
}

/// KB added per idle filter query and per idle windowed aggregate (100 of each).
fn idle_memory(a: &ServerArgs) -> Result<(f64, f64)> {
    let mut s = session(a)?;
    execute(
        &mut s,
        "CREATE STREAM events (k BIGINT, v BIGINT, t BIGINT) WITH (event_time = 't')",
    )?;
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_kb();
    for i in 0..100 {
        execute(
            &mut s,
            &format!("CREATE MATERIALIZED VIEW f{i} AS SELECT k, v FROM events WHERE v = {i}"),
        )?;
    }
    std::thread::sleep(Duration::from_millis(500));
    let filters = rss_kb();
    for i in 0..100 {
        execute(
            &mut s,
            &format!("CREATE MATERIALIZED VIEW w{i} AS SELECT k, sum(v) AS total FROM events WHERE v > {i} GROUP BY TUMBLE(t, 1000), k"),
        )?;
    }
    std::thread::sleep(Duration::from_millis(500));
    let windows = rss_kb();
    Ok(((filters - before) / 100.0, (windows - filters) / 100.0))
}
