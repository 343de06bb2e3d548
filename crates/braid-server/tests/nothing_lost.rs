//! Nothing lost, nothing altered, driven by a real client (psycopg 3, which `.ci/run`
//! installs): random rows through every way in (INSERT literals and parameters, COPY csv
//! and text, a TCP producer, HTTP) come back identical through SELECT and SUBSCRIBE;
//! transactions (psycopg's default mode), INSERT's expressions, in-order rows after a
//! pause, and an aggregate that would never answer refused (tests/py/nothing_lost.py,
//! which checks every answer against values it made itself). Then a view declared after
//! an ad-hoc SELECT survives a kill and restart of the server.

mod common;

use common::Server;
use std::time::{Duration, Instant};

/// A free loopback port (for the stream's TCP producer).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn rows_come_back_as_they_went_in_through_every_way_in() {
    for (workers, seed) in [(1, 1), (2, 2)] {
        let server = Server::with(&format!("lost-{workers}"), workers, |c| {
            c.http = Some("127.0.0.1:0".parse().unwrap())
        });
        let http = server.http.expect("an HTTP listener").port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/nothing_lost.py");
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .args([server.port, http, free_port(), seed].map(|n| n.to_string()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        // A lost row leaves a SELECT ... LIMIT waiting: the session is stopped then.
        let start = Instant::now();
        while child.try_wait().expect("waits").is_none() {
            if start.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                panic!("{workers} workers: the session did not end in 120 s (a row lost?)");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().expect("its output");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.trim() == "ok",
            "{workers} workers: {stdout}{stderr}"
        );
    }
}

/// A view declared after an ad-hoc SELECT (which used up a query number) is brought back
/// by a restart from its checkpoint, with its rows: its checkpoint's fingerprint does not
/// depend on the query's number. (The server stops here without a clean shutdown of the
/// view: what a kill leaves, the checkpoint and the logs.)
#[test]
fn a_view_declared_after_an_ad_hoc_select_survives_a_restart() {
    let run = |s: &Server, sql: &str| s.psql_ok(sql).trim().to_string();
    let mut s = Server::start("view-after-select", 2);
    run(
        &s,
        "CREATE STREAM s (t BIGINT NOT NULL, v BIGINT) WITH (event_time = 't', time_unit = 's')",
    );
    run(&s, "INSERT INTO s VALUES (1, 1)");
    assert_eq!(run(&s, "SELECT t, v FROM s LIMIT 1"), "1,1");
    run(
        &s,
        "CREATE MATERIALIZED VIEW win AS SELECT window_end, count(*) AS n FROM s GROUP BY TUMBLE(t, 10)",
    );
    run(&s, "INSERT INTO s VALUES (15, 1), (25, 2)");
    assert_eq!(
        run(&s, "SELECT window_end, n FROM win LIMIT 2"),
        "10,1\n20,1"
    );
    // At least one checkpoint of the view (every second by default).
    std::thread::sleep(Duration::from_millis(2500));
    let dir = s.dir.clone();
    if let Some(r) = s.running.take() {
        r.stop();
    }
    let s2 = Server::with("view-after-select-again", 2, |c| c.data = Some(dir.clone()));
    let streams = run(&s2, "SHOW STREAMS");
    assert!(streams.contains("win,"), "the view is back: {streams}");
    assert_eq!(
        run(&s2, "SELECT window_end, n FROM win LIMIT 2"),
        "10,1\n20,1",
        "its rows, none lost or repeated"
    );
}
