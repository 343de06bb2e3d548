//! The server driven by the real `psql` (Debian's postgresql-client; `.ci/run`
//! installs it): scripted sessions that create streams and views, subscribe, insert
//! from other connections and read the pushed rows. Expected rows are computed here
//! from the inserted values, not by Braid.

use std::io::Write;

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::Server;

impl Server {
    /// Runs `sql` in a new connection; its output (stdout and stderr) and status.
    fn run(&self, sql: &str) -> Output {
        self.psql()
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("psql runs (install postgresql-client)")
    }

    /// Runs `sql`, which must succeed; its standard output.
    fn ok(&self, sql: &str) -> String {
        let out = self.run(sql);
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Waits (at most 10 s) until SHOW QUERIES holds `what`, else fails saying `why`.
    fn until_queries_show(&self, what: &str, why: &str) {
        let start = Instant::now();
        loop {
            let queries = self.ok("SHOW QUERIES");
            if queries.contains(what) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{why}: {queries}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits for `child` (at most `timeout`); its stdout lines.
fn lines_of(mut child: Child, timeout: Duration) -> Vec<String> {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > timeout {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "a subscriber did not finish in {timeout:?}; it printed {:?} {:?}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// Picks the rows a subscriber's filter keeps.
type Pick = dyn Fn(&(i64, i64, i64)) -> bool;

/// Calls: (caller, dur, start).
fn calls(n: i64) -> Vec<(i64, i64, i64)> {
    (0..n).map(|i| (i % 5, (i * 37) % 200, i * 3)).collect()
}

fn values(rows: &[(i64, i64, i64)]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|(a, b, c)| format!("({a},{b},{c})"))
        .collect();
    v.join(",")
}

#[test]
fn three_subscribers_with_different_filters_each_get_exactly_their_rows() {
    for workers in [1, 2, 4] {
        let s = Server::start(&format!("filters{workers}"), workers);
        s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')");
        let rows = calls(150);
        let filters = ["caller = 1", "dur > 150", "caller = 3 AND dur < 100"];
        let pick: [&Pick; 3] = [&|r| r.0 == 1, &|r| r.1 > 150, &|r| r.0 == 3 && r.1 < 100];
        let mut subscribers = Vec::new();
        for (f, p) in filters.iter().zip(pick) {
            let want: Vec<String> = rows
                .iter()
                .filter(|r| p(r))
                .map(|r| format!("{},{},{}", r.0, r.1, r.2))
                .collect();
            let sql = format!(
                "SELECT caller, dur, start FROM calls WHERE {f} LIMIT {}",
                want.len()
            );
            subscribers.push((s.spawn(&sql), want));
        }
        // Inserted from other connections, in three parts, while the subscribers wait.
        for part in rows.chunks(50) {
            s.ok(&format!("INSERT INTO calls VALUES {}", values(part)));
        }
        for (child, want) in subscribers {
            assert_eq!(
                lines_of(child, Duration::from_secs(30)),
                want,
                "{workers} workers"
            );
        }
    }
}

#[test]
fn a_view_over_a_view_and_a_drop_while_others_run() {
    let s = Server::start("views", 2);
    s.ok(
        "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')",
    );
    s.ok("CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur, start FROM calls WHERE dur > 100");
    s.ok("CREATE STREAM very_long AS SELECT caller, dur FROM long_calls WHERE dur > 180");
    s.ok("CREATE STREAM by_one AS SELECT caller, dur FROM calls WHERE caller = 1");
    let rows = calls(200);
    s.ok(&format!(
        "INSERT INTO calls VALUES {}",
        values(&rows[..100])
    ));
    // Dropping what a running query reads is refused, with the reason.
    let refused = s.run("DROP MATERIALIZED VIEW long_calls");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("read by running queries 2"));
    s.ok("DROP STREAM very_long");
    s.ok(&format!(
        "INSERT INTO calls VALUES {}",
        values(&rows[100..])
    ));
    let want: Vec<String> = rows
        .iter()
        .filter(|r| r.0 == 1)
        .map(|r| format!("{},{}", r.0, r.1))
        .collect();
    // CSV as asked (it was the text format, tab-separated, until the COPY's options
    // were read), with its header line.
    let sub = s.spawn(&format!(
        "COPY (SELECT caller, dur FROM by_one LIMIT {}) TO STDOUT WITH (FORMAT csv, HEADER)",
        want.len()
    ));
    let got = lines_of(sub, Duration::from_secs(30));
    let want: Vec<String> = std::iter::once("caller,dur".to_string())
        .chain(want)
        .collect();
    assert_eq!(got, want);
    let queries = s.ok("SHOW QUERIES");
    let states: Vec<&str> = queries
        .lines()
        .map(|l| l.split(',').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(&states[..3], ["running", "dropped", "running"], "{queries}");
}

#[test]
fn copy_from_eight_producers_at_once_takes_every_good_row_once_and_counts_the_bad() {
    let s = Server::start("copy", 2);
    s.ok("CREATE STREAM events (producer BIGINT, n BIGINT)");
    let mut producers = Vec::new();
    for p in 0..8i64 {
        let mut child = s
            .psql()
            .args(["-c", "\\copy events FROM STDIN WITH (FORMAT csv)"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut data = String::new();
        for n in 0..500 {
            data.push_str(&format!("{p},{n}\n"));
            if p == 7 && n % 100 == 0 {
                data.push_str("garbage,line\n"); // producer 7 also sends garbage
            }
        }
        let mut stdin = child.stdin.take().unwrap();
        producers.push(std::thread::spawn(move || {
            stdin.write_all(data.as_bytes()).unwrap();
            drop(stdin);
            child.wait_with_output().unwrap()
        }));
    }
    for (p, h) in producers.into_iter().enumerate() {
        let out = h.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.contains("COPY 500"),
            "producer {p}: {stdout} {stderr}"
        );
        if p == 7 {
            assert!(stderr.contains("5 malformed rows skipped"), "{stderr}");
            assert!(
                stderr.contains("column producer: \"garbage\" is not an int64"),
                "{stderr}"
            );
        } else {
            assert!(!stderr.contains("malformed"), "{stderr}");
        }
    }
    // Every good row exactly once: 4000 rows, each (producer, n) once.
    let rows = s.ok("SELECT producer, n FROM events LIMIT 4000");
    let mut got: Vec<&str> = rows.lines().collect();
    got.sort();
    let mut want: Vec<String> = (0..8)
        .flat_map(|p| (0..500).map(move |n| format!("{p},{n}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn errors_carry_sqlstate_and_position() {
    let s = Server::start("errors", 1);
    s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)");
    let out = s
        .psql()
        .args(["-v", "VERBOSITY=verbose", "-c", "SELECT nope FROM calls"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ERROR:  42000"), "{err}");
    assert!(err.contains("no column `nope`"), "{err}");
    // psql draws the cursor from the position: under `nope` (column 8).
    assert!(
        err.contains("LINE 1: SELECT nope FROM calls\n               ^"),
        "{err}"
    );
    let out = s
        .psql()
        .args([
            "-v",
            "VERBOSITY=verbose",
            "-c",
            "SELECT sum(dur) OVER (PARTITION BY caller) FROM calls",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERROR:  0A000"));
    // One client's error leaves the others and the server as they were.
    assert_eq!(
        s.ok("INSERT INTO calls VALUES (1, 2, 3)").trim(),
        "INSERT 0 1"
    );
}

#[test]
fn a_trickled_row_reaches_its_subscriber_without_later_data() {
    let s = Server::start("trickle", 2);
    s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start', time_unit = 'ms')");
    let sub = s.spawn(
        "SELECT caller, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 1000), caller LIMIT 2",
    );
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    s.ok("INSERT INTO calls VALUES (1, 5, 100), (2, 7, 200), (1, 3, 900)");
    let mut got = lines_of(sub, Duration::from_secs(30));
    got.sort();
    assert_eq!(got, ["1,8", "2,7"]);
    // The window [0, 1000 ms) closes by the heartbeat about 100 ms of event time after
    // the last row: well within a second (the measured latency is in the benchmarks).
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// A client that subscribes and then never reads, speaking the protocol by hand.
fn stuck_subscriber(port: u16, sql: &str) -> std::net::TcpStream {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = b"\0\x03\0\0user\0braid\0\0";
    c.write_all(&((body.len() + 4) as u32).to_be_bytes())
        .unwrap();
    c.write_all(body).unwrap();
    // Read until ReadyForQuery ('Z').
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(2).any(|w| w == b"Z\0") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed during startup");
        seen.extend_from_slice(&buf[..n]);
    }
    let mut q = vec![b'Q'];
    q.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
    q.extend_from_slice(sql.as_bytes());
    q.push(0);
    c.write_all(&q).unwrap();
    c
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected_and_its_query_dropped() {
    use std::io::Read;
    let s = Server::with("slow", 2, |c| {
        c.max_lag = 5_000;
        c.slow = Duration::from_millis(500);
    });
    s.ok("CREATE STREAM s (a BIGINT, b VARCHAR)");
    let mut stuck = stuck_subscriber(s.port, "COPY (SELECT a, b FROM s) TO STDOUT");
    // 200k rows of about 60 bytes: far more than the socket buffers hold.
    let mut copy = s
        .psql()
        .args(["-c", "\\copy s FROM STDIN WITH (FORMAT csv)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pad = "x".repeat(50);
    let data: String = (0..200_000).map(|i| format!("{i},{pad}\n")).collect();
    copy.stdin
        .take()
        .unwrap()
        .write_all(data.as_bytes())
        .unwrap();
    assert!(copy.wait().unwrap().success());
    // The subscriber's query ends (dropped with its subscription); the server goes on.
    let start = Instant::now();
    loop {
        let q = s.ok("SHOW QUERIES");
        if q.lines().next().is_some_and(|l| l.starts_with("1,ended")) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{q}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.ok("SELECT a FROM s WHERE a = 5 LIMIT 1").trim(), "5");
    // What the stuck client finds once it reads: its rows so far, then the reason.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut all = Vec::new();
    let _ = stuck.read_to_end(&mut all);
    let text = String::from_utf8_lossy(&all);
    assert!(
        text.contains("reads too slowly"),
        "{} bytes, no reason",
        all.len()
    );
}

#[test]
fn a_password_lets_in_who_knows_it() {
    let s = Server::with("password", 1, |c| c.password = Some("s3cret".into()));
    let out = s
        .psql()
        .env("PGPASSWORD", "s3cret")
        .args(["-c", "SHOW STREAMS"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s
        .psql()
        .env("PGPASSWORD", "wrong")
        .args(["-c", "SHOW STREAMS"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Password authentication failed"), "{err}");
}

#[test]
fn a_client_that_goes_away_takes_its_query_with_it() {
    let s = Server::start("gone", 2);
    s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)");
    s.ok("CREATE MATERIALIZED VIEW all_calls AS SELECT caller, dur FROM calls");
    // A subscriber's own query, with no rows coming: the client is killed.
    let mut sub = s.spawn("SELECT caller FROM calls WHERE dur > 1000");
    s.until_queries_show(
        "running,0,0,0,subscriber",
        "the subscriber's query never ran",
    );
    sub.kill().unwrap();
    sub.wait().unwrap();
    // The keepalive finds the connection gone; the query ends, the view runs on.
    let start = Instant::now();
    loop {
        let q = s.ok("SHOW QUERIES");
        let states: Vec<&str> = q
            .lines()
            .map(|l| l.split(',').nth(1).unwrap_or(""))
            .collect();
        if states == ["running", "ended"] {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{q}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        s.ok("INSERT INTO calls VALUES (1, 2, 3)").trim(),
        "INSERT 0 1"
    );
    assert_eq!(
        s.ok("SELECT caller, dur FROM all_calls LIMIT 1").trim(),
        "1,2"
    );
}

/// psql's Ctrl-C (SIGINT) sends the protocol's cancel request on a connection of its
/// own: the running statement stops with 57014, its private query ends, and the
/// server and the other clients go on.
#[test]
fn ctrl_c_in_psql_cancels_the_running_statement() {
    let s = Server::start("cancel", 2);
    s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)");
    let mut sub = s
        .psql()
        .args(["-v", "VERBOSITY=verbose", "-c", "SELECT caller FROM calls"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql runs");
    s.until_queries_show("running,0,0,0,subscriber", "the statement never ran");
    let killed = std::process::Command::new("kill")
        .args(["-INT", &sub.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let start = Instant::now();
    while sub.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(15) {
            sub.kill().expect("kill");
            panic!("psql went on after Ctrl-C: the cancel request was not taken");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = sub.wait_with_output().expect("psql ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("57014") && err.contains("canceling statement due to user request"),
        "{err}"
    );
    s.until_queries_show(
        "ended,0,0,0,subscriber",
        "the canceled statement's query did not end",
    );
    assert_eq!(
        s.ok("INSERT INTO calls VALUES (1, 2, 3)").trim(),
        "INSERT 0 1"
    );
}

/// What a client asks of a catalog finds what was declared: SHOW VIEWS lists the
/// materialized views beside the views; a value not of its column's type is SQLSTATE
/// 22P02 (invalid_text_representation), as in PostgreSQL.
#[test]
fn show_views_lists_materialized_views_and_bad_values_are_22p02() {
    let s = Server::start("views", 1);
    s.ok("CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)");
    s.ok("CREATE MATERIALIZED VIEW long_calls AS SELECT caller FROM calls WHERE dur > 60");
    s.ok("CREATE STREAM copied AS SELECT caller FROM calls");
    assert_eq!(
        s.ok("SHOW VIEWS").trim(),
        "long_calls,SELECT caller FROM calls WHERE dur > 60"
    );
    s.ok("DROP MATERIALIZED VIEW long_calls");
    assert_eq!(s.ok("SHOW VIEWS").trim(), "");
    // A query into a sink names the sink (not a debug print of where it writes).
    s.ok("CREATE SINK gone WITH (sink = 'discard')");
    s.ok("INSERT INTO gone SELECT caller FROM calls");
    let queries = s.ok("SHOW QUERIES");
    assert!(queries.contains(",sink gone,"), "{queries}");
    for bad in [
        "INSERT INTO calls VALUES ('abc', 1, 2)",
        "INSERT INTO calls VALUES (9223372036854775807 + 1, 1, 2)",
    ] {
        let out = s
            .psql()
            .args(["-v", "VERBOSITY=verbose", "-c", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ERROR:  22P02"), "{bad}: {err}");
        assert!(err.contains("row 1, column caller"), "{bad}: {err}");
    }
}

/// What drivers send around their statements is answered as PostgreSQL 16 answers it:
/// `SELECT 1`, `SELECT version()`, `SHOW server_version`, a client's own `SET`
/// (kept for that client), and a setting that would change what values mean refused.
#[test]
fn what_drivers_ask_at_connect_is_answered() {
    let s = Server::start("drivers", 1);
    assert_eq!(s.ok("SELECT 1").trim(), "1");
    assert!(s.ok("SELECT version()").starts_with("PostgreSQL 16"));
    assert_eq!(s.ok("SHOW server_version").trim(), "16.0");
    assert_eq!(s.ok("SHOW client_encoding").trim(), "UTF8");
    let out = s
        .psql()
        .args([
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "SET application_name = 'grafana'",
            "-c",
            "SET extra_float_digits = 3",
            "-c",
            "SHOW application_name",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("grafana"));
    // Another connection has its own.
    assert_eq!(s.ok("SHOW application_name").trim(), "");
    let out = s.run("SET TimeZone = 'Europe/Paris'");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Braid keeps timezone at UTC"));
    // Braid's own settings are still the session's.
    assert_eq!(s.ok("SET partitions = 4").trim(), "SET");
}
