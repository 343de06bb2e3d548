//! `braid run --dashboard`: while a paced run goes, its dashboard serves the run's
//! query (its plan as boxes, its counters, what the profiler measured) and /metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn get(addr: &str, path: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).expect("connect to the dashboard");
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: braid\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn a_run_serves_its_dashboard_while_it_runs() {
    let out = std::env::temp_dir().join(format!("braid-dashboard-run-{}.csv", std::process::id()));
    // 500,000 rows at 100,000 per event-time second, paced at real time: 5 s.
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args([
            "run",
            "--tuples",
            "500000",
            "--speed",
            "1",
            "--workers",
            "2",
            "--parts",
            "8",
        ])
        .args([
            "--function",
            "identity",
            "--dashboard",
            "127.0.0.1:0",
            "--output",
        ])
        .arg(&out)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("braid starts");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no dashboard address in {line:?}"))
        .to_string();
    let start = Instant::now();
    let snapshot = loop {
        let body = get(&addr, "/api/snapshot");
        let s: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let q = &s["queries"][0];
        // Running, with rows in and an operator's time measured (on a loaded machine
        // the first snapshots may come before any operator has run).
        let timed = q["graph"]
            .as_array()
            .is_some_and(|g| g.iter().any(|n| n["nanos"].as_u64().unwrap_or(0) > 0));
        if q["state"] == "running" && q["rows_in"].as_u64().unwrap_or(0) > 0 && timed {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let graph = snapshot["queries"][0]["graph"].as_array().unwrap().clone();
    let kinds: Vec<&str> = graph.iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Source", "Split", "Map", "Map", "Merge", "Sink"]);
    assert!(
        graph.iter().any(|n| n["nanos"].as_u64().unwrap_or(0) > 0),
        "{graph:?}"
    );
    let metrics = get(&addr, "/metrics");
    assert!(
        metrics.contains("braid_query_rows_in_total{query=\"1\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE braid_node_busy_seconds_total counter"),
        "{metrics}"
    );
    let page = get(&addr, "/");
    assert!(page.contains("/assets/cytoscape.min.js"), "{page}");
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_file(&out);
}
