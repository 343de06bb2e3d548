//! The dashboard and /metrics: the page loaded in a real headless Chromium while rows
//! flow (`py/dashboard_check.py`, Playwright), and /metrics read by Prometheus's own
//! parser (`py/metrics_check.py`, prometheus_client), its figures checked against the
//! rows inserted here and against SHOW QUERIES. `.ci/run` installs Chromium, Playwright
//! and prometheus_client.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::Server;

fn server(name: &str, workers: usize) -> Server {
    Server::with(name, workers, |c| {
        c.http = Some("127.0.0.1:0".parse().unwrap())
    })
}

fn script(name: &str) -> String {
    format!("{}/tests/py/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// POSTs a CSV batch to the stream over plain HTTP/1.1; the answer's body.
fn post(at: std::net::SocketAddr, stream: &str, body: &str) -> String {
    let mut c = std::net::TcpStream::connect(at).expect("connect");
    write!(
        c,
        "POST /streams/{stream} HTTP/1.1\r\nHost: braid\r\nContent-Type: text/csv\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    answer
}

/// The samples /metrics has, as Prometheus's parser reads them: `name{labels}` -> value.
fn metrics(at: std::net::SocketAddr) -> BTreeMap<String, f64> {
    let out = Command::new("python3")
        .arg(script("metrics_check.py"))
        .arg(format!("http://{at}/metrics"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.parse().expect("a number")))
        .collect()
}

#[test]
fn metrics_parse_as_prometheus_text_and_agree_with_what_ran() {
    for workers in [1, 2] {
        let s = server(&format!("metrics{workers}"), workers);
        let at = s.http.expect("the HTTP listener");
        s.psql_ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)");
        s.psql_ok(
            "CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur FROM calls WHERE dur > 100",
        );
        let rows: Vec<(i64, i64, i64)> = (0..300).map(|i| (i % 7, (i * 37) % 200, i)).collect();
        let v: Vec<String> = rows
            .iter()
            .map(|(a, b, c)| format!("({a},{b},{c})"))
            .collect();
        s.psql_ok(&format!("INSERT INTO calls VALUES {}", v.join(",")));
        // Two malformed lines (a bad number, a field too many) among three good ones
        // (empty fields are NULLs).
        let batch = "1,150,300\nx,1,1\n2,10,301\n3,,\n4,190,302,9\n";
        let answer = post(at, "calls", batch);
        assert!(
            answer.contains("\"rows\":3") && answer.contains("\"rejected\":2"),
            "{answer}"
        );
        let total = rows.len() as f64 + 3.0;
        let long = rows.iter().filter(|r| r.1 > 100).count() as f64 + 1.0;
        // Wait until the query has read every row.
        let start = Instant::now();
        let shown = loop {
            let q = s.psql_ok("SHOW QUERIES");
            let cols: Vec<String> = q
                .lines()
                .next()
                .unwrap_or("")
                .split(',')
                .map(String::from)
                .collect();
            if cols.get(2).and_then(|c| c.parse::<f64>().ok()) == Some(total)
                && cols.get(3).and_then(|c| c.parse::<f64>().ok()) == Some(long)
            {
                break cols;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "SHOW QUERIES: {q}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // A windowed query and a row that comes after its window closed: one late row.
        // (A time unit, so that the idle stream's time moves with the clock and the late
        // row's epoch ends; without one a windowed query's time moves with rows only.)
        s.psql_ok(
            "CREATE STREAM ev (k BIGINT, t BIGINT) WITH (event_time = 't', time_unit = 'ms')",
        );
        s.psql_ok("CREATE MATERIALIZED VIEW per_k AS SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(t, 100)",
        );
        // A view under a latency constraint (query 3): its rows' latencies are measured.
        s.psql_ok("SET max_latency = '200ms'; CREATE MATERIALIZED VIEW held AS SELECT caller, dur FROM calls WHERE dur > 150; SET max_latency = 'off'",
        );
        let ev: Vec<String> = (0..1000).map(|t| format!("({},{t})", t % 3)).collect();
        s.psql_ok(&format!("INSERT INTO ev VALUES {}", ev.join(",")));
        std::thread::sleep(Duration::from_millis(300)); // the idle stream's time moves on
        s.psql_ok("INSERT INTO ev VALUES (1, 5)");
        let start = Instant::now();
        let m = loop {
            let m = metrics(at);
            if m.get("braid_query_late_rows_total{query=2}") == Some(&1.0) {
                break m;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no late row in {m:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let get = |k: &str| {
            m.get(k)
                .copied()
                .unwrap_or_else(|| panic!("no {k} in {m:?}"))
        };
        assert_eq!(get("braid_stream_rows_total{stream=calls}"), total);
        assert_eq!(get("braid_stream_malformed_rows_total{stream=calls}"), 2.0);
        // Bytes producers sent: the HTTP batch (INSERT's literals are no producer's).
        assert_eq!(
            get("braid_stream_ingested_bytes_total{stream=calls}"),
            batch.len() as f64
        );
        assert_eq!(get("braid_stream_rows_total{stream=long_calls}"), long);
        assert_eq!(
            get("braid_query_rows_in_total{query=1}").to_string(),
            shown[2]
        );
        assert_eq!(
            get("braid_query_rows_out_total{query=1}").to_string(),
            shown[3]
        );
        assert_eq!(get("braid_query_running{query=1}"), 1.0);
        assert_eq!(get("braid_query_late_rows_total{query=1}"), 0.0);
        // Latency: a histogram over the epochs the query completed; cumulative buckets.
        let count = get("braid_query_latency_seconds_count{query=1}");
        assert!(count > 0.0, "{m:?}");
        assert_eq!(
            get("braid_query_latency_seconds_bucket{le=+Inf,query=1}"),
            count
        );
        let buckets: Vec<f64> = ["0.001", "0.01", "0.1", "1", "10"]
            .iter()
            .map(|le| {
                get(&format!(
                    "braid_query_latency_seconds_bucket{{le={le},query=1}}"
                ))
            })
            .collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        // Each plan node's latency: a median and a 99th percentile, in that order.
        let split = |q: &str| {
            let key =
                format!("braid_node_latency_seconds{{kind=Split,node=1,quantile={q},query=1}}");
            get(&key)
        };
        assert!(split("0.5") <= split("0.99"), "{m:?}");
        assert_eq!(get("braid_stream_queued_rows{stream=calls}"), 0.0);
        assert_eq!(get("braid_workers{}"), workers as f64);
        // The constraint, and the quantiles of its rows' latencies (met: a median no
        // more than the 99th percentile, that no more than the constraint).
        assert_eq!(get("braid_query_latency_constraint_seconds{query=3}"), 0.2);
        assert!(!m.contains_key("braid_query_latency_constraint_seconds{query=1}"));
        let row = |q: &str| {
            get(&format!(
                "braid_query_row_latency_seconds{{quantile={q},query=3}}"
            ))
        };
        assert!(row("0.5") <= row("0.99") && row("0.99") <= 0.2, "{m:?}");
        // The profiler's figures: every box of the plan, its time and rows.
        let busy: f64 = m
            .iter()
            .filter(|(k, _)| {
                k.starts_with("braid_node_busy_seconds_total{") && k.contains("query=1")
            })
            .map(|(_, v)| v)
            .sum();
        assert!(busy > 0.0, "no busy time in {m:?}");
        let merged: Vec<f64> = m
            .iter()
            .filter(|(k, _)| {
                k.starts_with("braid_node_rows_out_total{kind=Merge,") && k.contains("query=1")
            })
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(merged, [long], "{m:?}");
    }
}

#[test]
fn the_dashboard_shows_the_running_query_in_a_real_browser() {
    let s = server("dashboard", 2);
    let at = s.http.expect("the HTTP listener");
    s.psql_ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start', time_unit = 'ms')");
    s.psql_ok("CREATE MATERIALIZED VIEW per_caller AS SELECT caller, count(*) AS n FROM calls GROUP BY caller, TUMBLE(start, 1000)");
    // A view under a latency constraint (query 2): its card shows its rows' latencies.
    s.psql_ok("SET max_latency = '200ms'; CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur FROM calls WHERE dur > 100");
    // Rows flow while the page is open: a batch every 50 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let feeder = std::thread::spawn(move || {
        let mut i = 0i64;
        while !flag.load(Ordering::Relaxed) {
            let body: String = (i..i + 200)
                .map(|k| format!("{},{},{}\n", k % 13, k % 200, k))
                .collect();
            post(at, "calls", &body);
            i += 200;
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // The count runs in two phases (two stages): Source, then per stage a Split, a Map
    // box per worker and a Merge, then the Sink.
    let shot = std::env::var("BRAID_DASHBOARD_SCREENSHOT").ok();
    let mut c = Command::new("python3");
    c.arg(script("dashboard_check.py"))
        .arg(format!("http://{at}/"))
        .arg("10");
    if let Some(path) = &shot {
        c.arg(path);
    }
    let out = c.output().expect("python3 runs");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
