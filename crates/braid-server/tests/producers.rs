//! Producers beyond INSERT and COPY, over real sockets: concurrent TCP producers of one
//! stream (one reset mid-line, one sending garbage), HTTP POST batches (HTTP/1.1
//! spoken by hand), and a tailed file. Expected rows and counts are computed here from
//! what the test sent; rows are read back with the real `psql` and from the stream's
//! log file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

mod common;
use common::Server;

/// A server that also takes HTTP batches.
fn server(name: &str, workers: usize) -> Server {
    Server::with(&format!("prod-{name}"), workers, |c| {
        c.http = Some("127.0.0.1:0".parse().unwrap())
    })
}

impl Server {
    fn http(&self) -> SocketAddr {
        self.running.as_ref().unwrap().http.unwrap()
    }

    /// Runs `sql` in a new psql connection (at most `timeout`); must succeed; its
    /// output lines (`,`-separated, unaligned).
    fn ok_within(&self, sql: &str, timeout: Duration) -> Vec<String> {
        let mut child = self.spawn(sql);
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > timeout {
                let _ = child.kill();
                panic!("{sql}: no answer in {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines().map(String::from).collect()
    }

    fn ok(&self, sql: &str) -> Vec<String> {
        self.ok_within(sql, Duration::from_secs(30))
    }

    /// `stream`'s row of SHOW FEEDS: stream, from, format, producers, rows, rejected,
    /// first_rejected.
    fn feed(&self, stream: &str) -> Vec<String> {
        let rows = self.ok("SHOW FEEDS");
        let row = rows.iter().find(|r| r.starts_with(&format!("{stream},")));
        let row = row.unwrap_or_else(|| panic!("SHOW FEEDS has no {stream}: {rows:?}"));
        row.splitn(7, ',').map(String::from).collect()
    }

    /// Waits until `stream`'s producers have made `rows` rows and `rejected` rejects.
    fn wait_feed(&self, stream: &str, rows: u64, rejected: u64) {
        let start = Instant::now();
        loop {
            let f = self.feed(stream);
            if f[4] == rows.to_string() && f[5] == rejected.to_string() {
                return;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "{stream}: {f:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The lines of `stream`'s durable log file.
    fn log_lines(&self, stream: &str) -> Vec<String> {
        let path = self.dir.join("streams").join(format!("{stream}.csv"));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().map(String::from).collect()
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Rows per TCP producer.
const N: usize = 400;

/// What producer `p` sends: its rows `p,i` as lines, with a garbage line after every
/// 37th row for producer 6; and the lines (1-based) that are garbage.
fn lines_of_producer(p: usize) -> (String, Vec<u64>) {
    let (mut text, mut bad, mut line) = (String::new(), Vec::new(), 0u64);
    for i in 0..N {
        text += &format!("{p},{i}\n");
        line += 1;
        if p == 6 && i % 37 == 5 {
            text += if i % 2 == 0 {
                "oops\n"
            } else {
                "1,not a number\n"
            };
            line += 1;
            bad.push(line);
        }
    }
    if p == 0 {
        text.pop(); // the last line has no newline: taken at a clean shutdown
    }
    (text, bad)
}

/// Sends `text` in cuts of 1 to 97 bytes (lines split across sends).
fn send_in_cuts(stream: &mut TcpStream, text: &[u8], p: usize) {
    let mut at = 0;
    let mut k = p;
    while at < text.len() {
        k = (k * 31 + 7) % 97;
        let end = (at + k + 1).min(text.len());
        stream.write_all(&text[at..end]).unwrap();
        at = end;
        if k % 13 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Reads acknowledgement lines until one says `ok <rows> ...` with at least `rows`;
/// checks that every acknowledged row of producer `p` is in the log file by then.
fn wait_ack(acks: &mut BufReader<TcpStream>, rows: usize, server: &Server, p: usize) {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            acks.read_line(&mut line).unwrap() > 0,
            "no ack of {rows} rows"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], "ok", "{line}");
        let acked: usize = words[1].parse().unwrap();
        let prefix = format!("{p},");
        let durable = server
            .log_lines("s")
            .iter()
            .filter(|l| l.starts_with(&prefix))
            .count();
        assert!(
            durable >= acked,
            "producer {p}: {acked} acknowledged, {durable} in the log"
        );
        if acked >= rows {
            return;
        }
    }
}

#[test]
fn concurrent_tcp_producers_each_row_once_bad_lines_counted() {
    let server = server("tcp", 2);
    server.ok("CREATE STREAM s (a BIGINT, b BIGINT) WITH (listen = '127.0.0.1:0')");
    let from = server.feed("s")[1].clone();
    let addr: SocketAddr = from.strip_prefix("listen ").unwrap().parse().unwrap();
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let server = &server;
            let (text, bad) = lines_of_producer(p);
            move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                // A missing acknowledgement fails the test rather than hanging it.
                stream
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                let mut acks = BufReader::new(stream.try_clone().unwrap());
                send_in_cuts(&mut stream, text.as_bytes(), p);
                if p == 7 {
                    // Everything acknowledged, then a cut line and a reset.
                    wait_ack(&mut acks, N, server, p);
                    stream.write_all(b"7,99999").unwrap();
                    std::thread::sleep(Duration::from_millis(100));
                    socket2::SockRef::from(&stream)
                        .set_linger(Some(Duration::ZERO))
                        .unwrap();
                    return;
                }
                if p == 0 {
                    wait_ack(&mut acks, N - 1, server, p);
                }
                stream.shutdown(Shutdown::Write).unwrap();
                let mut rest = String::new();
                acks.read_to_string(&mut rest).unwrap();
                let last: Vec<&str> = rest.lines().skip_while(|l| l.starts_with("ok ")).collect();
                assert_eq!(last[0], format!("done {N} {}", bad.len()), "producer {p}");
                let lines: Vec<String> = bad
                    .iter()
                    .take(10)
                    .map(|l| format!("line {l} column "))
                    .collect();
                assert_eq!(last.len(), 1 + lines.len(), "producer {p}: {last:?}");
                for (got, want) in last[1..].iter().zip(&lines) {
                    assert!(got.starts_with(want), "producer {p}: {got} for {want}");
                }
            }
        })
        .collect();
    std::thread::scope(|s| {
        for p in producers {
            s.spawn(p);
        }
    });
    let bad = lines_of_producer(6).1.len() as u64;
    // The reset producer's cut line is dropped and counted too.
    server.wait_feed("s", 8 * N as u64, bad + 1);
    let want: Vec<String> = (0..8)
        .flat_map(|p| (0..N).map(move |i| format!("{p},{i}")))
        .collect();
    let want = sorted(want);
    assert_eq!(sorted(server.log_lines("s")), want, "the log file");
    let sql = format!("SELECT a, b FROM s LIMIT {}", want.len());
    assert_eq!(sorted(server.ok(&sql)), want, "read back by a query");
    // DROP STREAM stops the listener.
    server.ok("DROP STREAM s");
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening after DROP"
    );
}

/// One HTTP/1.1 request; the status and the body.
fn post(at: SocketAddr, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(at).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {at}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.trim().to_string();
    (status, body)
}

#[test]
fn http_post_csv_and_json_batches() {
    let server = server("http", 2);
    server.ok("CREATE STREAM h (a BIGINT, s TEXT)");
    let at = server.http();
    let csv = b"a,s\n1,x\nbad,y\n2,\"z, quoted\"\n3,w";
    let (status, body) = post(at, "/streams/h", "text/csv; header=present", csv);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["rows"].as_u64(), v["rejected"].as_u64()),
        (Some(3), Some(1)),
        "{body}"
    );
    let r = &v["rejects"][0];
    assert_eq!(
        (r["line"].as_u64(), r["column"].as_u64()),
        (Some(3), Some(1)),
        "{body}"
    );
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("\"bad\" is not an int64"),
        "{body}"
    );
    // The rows are durable when the answer comes.
    assert_eq!(server.log_lines("h").len(), 3);

    let json = b"{\"a\": 4, \"s\": \"v\"}\n{\"a\": \"no\"}\n{\"A\": 5}\n{\"a\": 6, \"t\": 1}\n";
    let (status, body) = post(at, "/streams/H", "application/x-ndjson", json);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["rows"].as_u64(), v["rejected"].as_u64()),
        (Some(2), Some(2)),
        "{body}"
    );
    let lines: Vec<_> = (0..2).map(|i| v["rejects"][i]["line"].as_u64()).collect();
    assert_eq!(lines, [Some(2), Some(4)], "{body}");

    let (status, body) = post(at, "/streams/nope", "text/csv", b"1,x\n");
    assert_eq!(status, 404);
    assert!(body.contains("no stream named `nope`"), "{body}");
    let (status, body) = post(at, "/streams/h", "text/csv", b"7,\xff\xfe\n");
    assert_eq!(status, 400);
    assert!(body.contains("not UTF-8"), "{body}");
    let (status, body) = post(at, "/streams/h", "text/plain", b"7,x\n");
    assert_eq!(status, 415, "{body}");
    let (status, _) = post(at, "/elsewhere", "text/csv", b"7,x\n");
    assert_eq!(status, 404);

    let want = ["1,x", "2,z, quoted", "3,w", "4,v", "5,"].map(String::from);
    assert_eq!(sorted(server.ok("SELECT a, s FROM h LIMIT 5")), want);
    assert_eq!(
        server.log_lines("h").len(),
        5,
        "nothing from the refused posts"
    );
}

#[test]
fn a_tailed_file_is_followed_as_it_grows_until_drop() {
    let server = server("tail", 1);
    let file = server.dir.join("in.csv");
    std::fs::create_dir_all(&server.dir).unwrap();
    let sql = format!(
        "CREATE STREAM t (a BIGINT, b TEXT) WITH (tail = '{}', header = true)",
        file.display()
    );
    server.ok(&sql);
    let append = |text: &str| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append("a,b\n1,x\n2,y\n3,");
    server.wait_feed("t", 2, 0);
    // The unfinished line waits for its newline.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(server.feed("t")[4], "2");
    append("z\nq,r\n4,w\n");
    server.wait_feed("t", 4, 1);
    for i in 5..25 {
        append(&format!("{i},s{i}\n"));
    }
    server.wait_feed("t", 24, 1);
    assert!(
        server.feed("t")[6].contains("line 5 column 1"),
        "{:?}",
        server.feed("t")
    );
    let mut want: Vec<String> = ["1,x", "2,y", "3,z", "4,w"].map(String::from).to_vec();
    want.extend((5..25).map(|i| format!("{i},s{i}")));
    assert_eq!(
        sorted(server.ok("SELECT a, b FROM t LIMIT 24")),
        sorted(want)
    );
    server.ok("DROP STREAM t");
    append("99,late\n");
    assert!(server.ok("SHOW FEEDS").is_empty());
}
