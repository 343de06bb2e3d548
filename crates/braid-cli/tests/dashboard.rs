//! `braid run --dashboard`: while a paced run goes, its dashboard serves the run's
//! query (its plan as boxes, its counters, what the profiler measured) and /metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStderr, Command, Stdio};
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

/// Starts `braid` with `args` (which ask for a dashboard on port 0): the child, its
/// standard error after the first line (kept open), and the dashboard's address, which
/// that line gives.
fn start_with_dashboard<I, S>(args: I) -> (Child, BufReader<ChildStderr>, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
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
    (child, err, addr)
}

#[test]
fn a_run_serves_its_dashboard_while_it_runs() {
    let out = std::env::temp_dir().join(format!("braid-dashboard-run-{}.csv", std::process::id()));
    // 500,000 rows at 100,000 per event-time second, paced at real time: 5 s.
    let (mut child, _err, addr) = start_with_dashboard(
        [
            "run",
            "--tuples",
            "500000",
            "--speed",
            "1",
            "--workers",
            "2",
            "--parts",
            "8",
            "--function",
            "identity",
            "--dashboard",
            "127.0.0.1:0",
            "--output",
        ]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([out.as_os_str()]),
    );
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

/// A run under a latency constraint (`SET max_latency`) shows the constraint and its
/// rows' latencies in its dashboard's snapshot, as the server does for a live query,
/// and rescales live (here to one worker thread) as any other run.
#[test]
fn a_run_under_a_constraint_shows_its_rows_latencies() {
    let dir = std::env::temp_dir().join(format!("braid-dashboard-qos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("q.sql");
    // 40,000 rows at 10,000 per event-time second, paced at real time: 4 s.
    std::fs::write(
        &script,
        "SET max_latency = '100ms';
CREATE STREAM lr WITH (source = 'generator', tuples = 40000, rate = 10000, keys = 4, seed = 7, speed = 1);
CREATE SINK none WITH (sink = 'discard');
INSERT INTO none SELECT vid, spd FROM lr WHERE spd > 10;",
    )
    .unwrap();
    let (mut child, _err, addr) = start_with_dashboard(
        [std::ffi::OsStr::new("run"), script.as_os_str()]
            .into_iter()
            .chain(
                ["--workers", "2", "--dashboard", "127.0.0.1:0"]
                    .iter()
                    .map(std::ffi::OsStr::new),
            ),
    );
    let start = Instant::now();
    let q = loop {
        let body = get(&addr, "/api/snapshot");
        let s: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let q = s["queries"][0].clone();
        if q["row_latency_ms"].is_array() {
            break q;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // A live rescale to one worker thread.
    let mut c = std::net::TcpStream::connect(&addr).expect("connect to the dashboard");
    write!(
        c,
        "POST /api/rescale?workers=1 HTTP/1.1\r\nHost: braid\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    let rescales = loop {
        let r = get(&addr, "/api/rescale");
        if r.contains("\"epoch\"") || r.contains("\"refused\":[\"") {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{answer}\n{r}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        rescales.contains("\"request\":\"1 worker threads per process\"")
            && rescales.contains("\"workers\":1"),
        "{answer}\n{rescales}"
    );
    assert_eq!(q["constraint_ms"].as_f64(), Some(100.0), "{q}");
    let r: Vec<f64> = q["row_latency_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(r.len() == 2 && 0.0 <= r[0] && r[0] <= r[1], "{q}");
}
