//! Bad input: malformed CSV records (file and TCP) are counted per source with line,
//! column and reason, written to the reject file, never crash a run and never cost a
//! good row; `strict` turns the first one into `Error::Input`.
//!
//! Every test compares the engine's output with the reference interpreter run over the
//! good rows only (held in memory), so a lost, duplicated or corrupted good row fails.

use braid_exec::error::Error;
use braid_exec::runtime::{run, RunConfig, RunReport};
use braid_exec::source::{ReadOptions, Reject, Rejects};
use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::expr::Expr;
use braid_plan::function::Registry;
use braid_plan::output::OutRow;
use braid_plan::plan::{MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_plan::reference;
use braid_plan::types::{DataType, Field, Schema};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `time int64, key int64, v int64, name string`, event time `time`.
fn schema() -> Schema {
    Schema::new(vec![
        Field::new("time", DataType::Int64),
        Field::new("key", DataType::Int64),
        Field::new("v", DataType::Int64),
        Field::new("name", DataType::String),
    ])
    .with_event_time("time")
    .expect("int64 time")
}

/// A good row as the parser must produce it.
#[derive(Clone, Debug)]
struct Good(i64, i64, i64, String);

fn good(t: i64, k: i64, v: i64, name: &str) -> Good {
    Good(t, k, v, name.to_string())
}

fn batch_of(rows: &[Good]) -> Batch {
    let mut b = Batch::new(4);
    for (i, Good(t, k, v, name)) in rows.iter().enumerate() {
        b.push(
            RowKey {
                seq: i as u64,
                lane: 0,
            },
            &[
                Value::Int(*t),
                Value::Int(*k),
                Value::Int(*v),
                Value::Str(name),
            ],
        );
    }
    b
}

/// source -> split on `key` over 4 partitions (rows with v = 60 broadcast) -> identity
/// -> merge -> collect. Small windows and epochs so that the input spans many of both.
fn plan_over(spec: SourceSpec, merge: MergeKind) -> Plan {
    let s = schema();
    let mut p = Plan::source("bad", spec, s.clone());
    if let Plan::Source(src) = &mut p {
        src.window = 3;
        src.epoch = 2;
    }
    p.split(
        4,
        Route::Expr {
            expr: Expr::col(&s, "key").expect("key"),
            when: None,
        },
        Some(Expr::col(&s, "v").expect("v").eq(Expr::int(60))),
        Strategy::Autosplit,
    )
    .map("identity")
    .merge(merge)
    .sink(SinkSpec::Collect)
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "braid-test-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("write test input");
}

fn config(workers: usize, strict: bool, reject_file: Option<PathBuf>, clients: usize) -> RunConfig {
    RunConfig {
        workers,
        read: ReadOptions {
            strict,
            reject_file,
            tcp_clients: clients,
            // Files read in shares of a few lines each (with more than one worker).
            chunk_bytes: 64,
            // Reader threads or not as the process's cores say: 1 worker on a reader
            // thread, 2 and 4 inline on a 2-core machine.
            reader_threads: None,
        },
        ..RunConfig::default()
    }
}

fn sorted(mut v: Vec<OutRow>) -> Vec<OutRow> {
    v.sort();
    v
}

/// Runs `spec` with both merges and checks the output against the reference over
/// `good`; returns the union run's report.
fn run_and_compare(spec: &SourceSpec, good: &[Good], cfg: &RunConfig, what: &str) -> RunReport {
    let reg = Registry::with_builtins();
    let good = batch_of(good);
    let mut union_report = None;
    for merge in [MergeKind::TimeOrdered, MergeKind::Union] {
        let p = plan_over(spec.clone(), merge.clone());
        let expected = reference::run(&p, &reg, &good).expect("reference runs");
        // The same good rows through the engine from memory: the parser must match it.
        let mem = plan_over(SourceSpec::Memory(Arc::new(good.clone())), merge.clone());
        let from_memory = run(&mem, &reg, cfg).expect("memory run").collected;
        let report = run(&p, &reg, cfg).unwrap_or_else(|e| panic!("{what}: run failed: {e}"));
        if merge == MergeKind::TimeOrdered {
            assert_eq!(report.collected, expected, "{what}: time-ordered output");
            assert_eq!(from_memory, expected, "{what}: memory source, time-ordered");
        } else {
            assert_eq!(
                sorted(report.collected.clone()),
                sorted(expected),
                "{what}: union output"
            );
            union_report = Some(report);
        }
    }
    union_report.expect("union ran")
}

fn rejects_of<'a>(report: &'a RunReport, what: &str) -> &'a Rejects {
    assert_eq!(report.rejects.len(), 1, "{what}: one source, one report");
    let r = &report.rejects[0];
    assert_eq!(r.source, "bad", "{what}: reject report names the source");
    r
}

/// An expected reject: line, column and a part of the reason.
type Bad = (u64, u64, String);

/// The mixed file: its bytes, good rows and expected rejects.
fn mixed_input() -> (Vec<u8>, Vec<Good>, Vec<Bad>) {
    let mut f: Vec<u8> = Vec::new();
    let mut goods = Vec::new();
    let mut bad: Vec<Bad> = Vec::new();
    let huge_digits = "9".repeat(5 << 20);
    let big_name = "y".repeat(300_000);
    // 1
    f.extend_from_slice(b"0,1,10,alpha\n");
    goods.push(good(0, 1, 10, "alpha"));
    // 2
    f.extend_from_slice(b"1,2,20,beta\n");
    goods.push(good(1, 2, 20, "beta"));
    // 3: blank lines are skipped, not rejected
    f.extend_from_slice(b"\n");
    // 4: too few fields
    f.extend_from_slice(b"1,3,30\n");
    bad.push((4, 0, "expected 4 fields, found 3".into()));
    // 5: non-numeric text in an int64 column (`2,4,` is 4 bytes: column 5)
    f.extend_from_slice(b"2,4,abc,gamma\n");
    bad.push((5, 5, "field `v`: \"abc\" is not an int64".into()));
    // 6: too many fields
    f.extend_from_slice(b"2,5,50,delta,extra\n");
    bad.push((6, 0, "expected 4 fields, found 5".into()));
    // 7
    f.extend_from_slice(b"3,6,60,eps\n");
    goods.push(good(3, 6, 60, "eps"));
    // 8: a 5 MB number
    f.extend_from_slice(format!("3,7,{huge_digits},huge\n").as_bytes());
    bad.push((
        8,
        5,
        format!("field `v`: \"{}\" is not an int64", "9".repeat(40)),
    ));
    // 9: invalid UTF-8 in an int64 column
    f.extend_from_slice(b"4,8,\xff\xfe,x\n");
    bad.push((
        9,
        5,
        "field `v`: bytes are not UTF-8, expected int64".into(),
    ));
    // 10: invalid UTF-8 in a string column (`4,9,90,` is 7 bytes: column 8)
    f.extend_from_slice(b"4,9,90,\xc3\x28bad\n");
    bad.push((
        10,
        8,
        "field `name`: bytes are not UTF-8, expected string".into(),
    ));
    // 11: event time goes back
    f.extend_from_slice(b"1,10,100,late\n");
    bad.push((
        11,
        1,
        "event time 1 is before the previous record's 3".into(),
    ));
    // 12: a line of spaces only counts as blank
    f.extend_from_slice(b"   \n");
    // 13: quoted string with a comma, spaces around numbers
    f.extend_from_slice(b"5, 11 ,110,\"quoted, name\"\n");
    goods.push(good(5, 11, 110, "quoted, name"));
    // 14: empty int64
    f.extend_from_slice(b"6,12,,nullv\n");
    bad.push((14, 6, "field `v`: empty, expected int64".into()));
    // 15: CRLF line end
    f.extend_from_slice(b"7,14,140,zeta\r\n");
    goods.push(good(7, 14, 140, "zeta"));
    // 16: a huge but valid line
    f.extend_from_slice(format!("7,15,150,{big_name}\n").as_bytes());
    goods.push(good(7, 15, 150, &big_name));
    // 17: negative numbers, later epoch
    f.extend_from_slice(b"9,-3,-7,neg\n");
    goods.push(good(9, -3, -7, "neg"));
    // 18: a quoted number
    f.extend_from_slice(b"9,17,\"170\",x\n");
    goods.push(good(9, 17, 170, "x"));
    // 19: an unclosed quote costs only its own line (`9,18,180,` is 9 bytes)
    f.extend_from_slice(b"9,18,180,\"open\n");
    bad.push((19, 10, "quoted field is not closed on its line".into()));
    // 20: text after a closing quote
    f.extend_from_slice(b"9,19,190,\"a\"b\n");
    bad.push((20, 13, "text after a closing `\"`".into()));
    // 21, 22: more blank lines
    f.extend_from_slice(b"\n\r\n");
    // 23
    f.extend_from_slice(b"9,20,200,last good\n");
    goods.push(good(9, 20, 200, "last good"));
    // 24: truncated last line (no newline, fewer fields)
    f.extend_from_slice(b"10,16,");
    bad.push((24, 0, "expected 4 fields, found 3".into()));
    (f, goods, bad)
}

fn check_rejects(r: &Rejects, bad: &[Bad], what: &str) {
    assert_eq!(r.count, bad.len() as u64, "{what}: reject count: {r}");
    let got: Vec<(u64, u64)> = r.first.iter().map(|x| (x.line, x.column)).collect();
    let want: Vec<(u64, u64)> = bad.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(got, want, "{what}: reject lines and columns: {r}");
    for (Reject { line, reason, .. }, (_, _, part)) in r.first.iter().zip(bad) {
        assert!(
            reason.contains(part.as_str()),
            "{what}: line {line}: reason {reason:?} should contain {part:?}"
        );
    }
}

#[test]
fn malformed_csv_records_are_counted_and_good_rows_kept() {
    let dir = TempDir::new("mixed");
    let (bytes, goods, bad) = mixed_input();
    let input = dir.path("in.csv");
    write_file(&input, &bytes);
    let spec = SourceSpec::Csv {
        path: input,
        header: false,
    };
    for workers in [1, 2] {
        let rej = dir.path(&format!("rejects-{workers}.tsv"));
        let what = format!("{workers} worker(s)");
        let report = run_and_compare(
            &spec,
            &goods,
            &config(workers, false, Some(rej.clone()), 1),
            &what,
        );
        assert_eq!(report.rows_in, goods.len() as u64, "{what}: rows in");
        check_rejects(rejects_of(&report, &what), &bad, &what);
        // Display: one line per reject, with line and column.
        let shown = rejects_of(&report, &what).to_string();
        assert!(shown.starts_with("bad: 11 malformed record(s)"), "{shown}");
        assert!(shown.contains("line 5, column 5: field `v`"), "{shown}");
        assert!(shown.contains("line 4: expected 4 fields"), "{shown}");

        // The reject file: `line<TAB>column<TAB>reason<TAB>text`, in line order (each
        // of the two runs per worker count appends its own set).
        let text = String::from_utf8(std::fs::read(&rej).expect("reject file")).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 * bad.len(), "{what}: reject file:\n{text}");
        let expect_text: [&str; 11] = [
            "1,3,30",
            "2,4,abc,gamma",
            "2,5,50,delta,extra",
            "3,7,9999999999",
            "4,8,\u{fffd}\u{fffd},x",
            "4,9,90,\u{fffd}(bad",
            "1,10,100,late",
            "6,12,,nullv",
            "9,18,180,\"open",
            "9,19,190,\"a\"b",
            "10,16,",
        ];
        for run in 0..2 {
            for (i, ((l, c, part), t)) in bad.iter().zip(expect_text).enumerate() {
                let fields: Vec<&str> = lines[run * bad.len() + i].splitn(4, '\t').collect();
                assert_eq!(fields.len(), 4, "{what}: reject line {:?}", fields);
                assert_eq!(fields[0], l.to_string(), "{what}: line number");
                assert_eq!(fields[1], c.to_string(), "{what}: column");
                assert!(
                    fields[2].contains(part.as_str()),
                    "{what}: reason {:?}",
                    fields[2]
                );
                assert!(
                    fields[3].starts_with(t),
                    "{what}: text {:?} should start with {t:?}",
                    &fields[3][..fields[3].len().min(80)]
                );
                assert!(fields[3].len() <= 4096 * 3, "{what}: huge texts are cut");
            }
        }
    }
}

#[test]
fn header_line_counts_in_line_numbers() {
    let dir = TempDir::new("header");
    let input = dir.path("in.csv");
    write_file(&input, b"time,key,v,name\n0,1,1,a\n1,2,x,b\n2,3,3,c\n");
    let spec = SourceSpec::Csv {
        path: input,
        header: true,
    };
    let goods = [good(0, 1, 1, "a"), good(2, 3, 3, "c")];
    let report = run_and_compare(&spec, &goods, &config(2, false, None, 1), "header");
    check_rejects(
        rejects_of(&report, "header"),
        &[(3, 5, "\"x\" is not an int64".into())],
        "header",
    );
}

#[test]
fn empty_and_all_bad_inputs_end_cleanly() {
    let dir = TempDir::new("empty");
    for (name, bytes, bad) in [
        ("empty", &b""[..], 0u64),
        ("blank", &b"\n\n  \n"[..], 0),
        ("all-bad", &b"a,b,c,d\n\xff\n1,2\n"[..], 3),
    ] {
        let input = dir.path(name);
        write_file(&input, bytes);
        let spec = SourceSpec::Csv {
            path: input,
            header: false,
        };
        for workers in [1, 2] {
            let report = run_and_compare(&spec, &[], &config(workers, false, None, 1), name);
            assert_eq!(rejects_of(&report, name).count, bad, "{name}");
            assert_eq!(report.rows_in, 0, "{name}");
        }
    }
}

/// Strict mode: a file of good lines with one bad line in the middle stops with
/// `Error::Input` naming the line, column, offending text and expectation; the same file
/// without `strict` loses only that line.
#[test]
fn strict_mode_names_line_column_text_and_expectation() {
    let dir = TempDir::new("strict");
    let head = "0,1,10,a\n1,2,20,b\n";
    let tail = "5,3,30,c\n6,4,40,d\n";
    let goods = [
        good(0, 1, 10, "a"),
        good(1, 2, 20, "b"),
        good(5, 3, 30, "c"),
        good(6, 4, 40, "d"),
    ];
    // (bad line, column, parts the message must contain)
    let cases: Vec<(Vec<u8>, u64, Vec<&str>)> = vec![
        (
            b"2,5,abc,x".to_vec(),
            5,
            vec!["\"abc\"", "int64", "2,5,abc,x"],
        ),
        (
            b"2,5,7".to_vec(),
            0,
            vec!["expected 4 fields, found 3", "2,5,7"],
        ),
        (
            b"2,5,7,x,y".to_vec(),
            0,
            vec!["expected 4 fields, found 5", "2,5,7,x,y"],
        ),
        (b"2,5,\xff,x".to_vec(), 5, vec!["not UTF-8", "int64"]),
        (b"2,5,7,\xffz".to_vec(), 7, vec!["not UTF-8", "string"]),
        (
            b"0,5,7,x".to_vec(),
            1,
            vec!["event time 0", "previous record's 1", "0,5,7,x"],
        ),
        (b"2,5,,x".to_vec(), 5, vec!["empty", "int64"]),
        (
            format!("2,5,{},x", "1".repeat(3 << 20)).into_bytes(),
            5,
            vec!["is not an int64", "1111111111"],
        ),
    ];
    for (i, (line, column, parts)) in cases.into_iter().enumerate() {
        let mut bytes = head.as_bytes().to_vec();
        bytes.extend_from_slice(&line);
        bytes.push(b'\n');
        bytes.extend_from_slice(tail.as_bytes());
        let input = dir.path(&format!("case{i}.csv"));
        write_file(&input, &bytes);
        let spec = SourceSpec::Csv {
            path: input,
            header: false,
        };
        let what = format!(
            "case {i} ({:?})",
            String::from_utf8_lossy(&line[..line.len().min(20)])
        );
        for workers in [1, 2] {
            let p = plan_over(spec.clone(), MergeKind::Union);
            match run(
                &p,
                &Registry::with_builtins(),
                &config(workers, true, None, 1),
            ) {
                Err(Error::Input {
                    source_name,
                    line: l,
                    column: c,
                    message,
                }) => {
                    assert_eq!(source_name, "bad", "{what}");
                    assert_eq!(l, 3, "{what}: line");
                    assert_eq!(c, column, "{what}: column");
                    for part in &parts {
                        assert!(
                            message.contains(part),
                            "{what}: {message:?} should contain {part:?}"
                        );
                    }
                    assert!(
                        message.len() < 1000,
                        "{what}: message is short: {} bytes",
                        message.len()
                    );
                    let shown = Error::Input {
                        source_name,
                        line: l,
                        column: c,
                        message,
                    }
                    .to_string();
                    assert!(
                        shown.starts_with(&format!("bad: line 3, column {column}: ")),
                        "{shown}"
                    );
                }
                Err(e) => panic!("{what}: expected Error::Input, got {e}"),
                Ok(_) => panic!("{what}: strict run succeeded"),
            }
            let report = run_and_compare(&spec, &goods, &config(workers, false, None, 1), &what);
            let r = rejects_of(&report, &what);
            assert_eq!(r.count, 1, "{what}: {r}");
            assert_eq!((r.first[0].line, r.first[0].column), (3, column), "{what}");
        }
    }
}

/// A free loopback port (bound, read and released; the run binds it again).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

/// Connects to `addr`, retrying while the run is starting up.
fn connect(addr: &str) -> std::net::TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("cannot connect to {addr}: {e}"),
        }
    }
}

/// Runs a TCP-source plan in a thread while `clients` send their bytes one after the
/// other, each disconnecting when done; fails (rather than hangs) after 60 s.
fn run_tcp(
    merge: MergeKind,
    workers: usize,
    strict: bool,
    clients: &[&[u8]],
) -> Result<RunReport, Error> {
    let addr = format!("127.0.0.1:{}", free_port());
    let p = plan_over(SourceSpec::Tcp { addr: addr.clone() }, merge);
    let cfg = config(workers, strict, None, clients.len());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(&p, &Registry::with_builtins(), &cfg));
    });
    for bytes in clients {
        let mut s = connect(&addr);
        // The server may stop reading early (strict mode): write errors are fine then.
        if s.write_all(bytes).is_err() && !strict {
            panic!("client could not send");
        }
        drop(s); // disconnect, possibly mid-line
    }
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the TCP run ends within 60 s")
}

#[test]
fn tcp_client_disconnecting_mid_line_loses_only_that_line() {
    // Client 1: good lines, a non-numeric field (line 3), a 5 MB line (line 5), invalid
    // UTF-8 (line 6), then a line cut off by the disconnect (line 8). Client 2: more lines.
    let mut first: Vec<u8> = b"0,1,10,a\n1,2,20,b\n1,3,x,bad\n2,4,40,c\n".to_vec();
    first.extend_from_slice(format!("2,5,7,{}\n", "z".repeat(5 << 20)).as_bytes());
    first.extend_from_slice(b"2,6,\xff,w\n3,7,8,\xc3\n3,5,5");
    let second: &[u8] = b"4,6,60,d\n\n5,7,70,e\n";
    let big = "z".repeat(5 << 20);
    let goods = [
        good(0, 1, 10, "a"),
        good(1, 2, 20, "b"),
        good(2, 4, 40, "c"),
        good(2, 5, 7, &big),
        good(4, 6, 60, "d"),
        good(5, 7, 70, "e"),
    ];
    // (line, column, reason part), in line order.
    let bad: [Bad; 4] = [
        (3, 5, "\"x\" is not an int64".into()),
        (6, 5, "bytes are not UTF-8, expected int64".into()),
        (7, 7, "bytes are not UTF-8, expected string".into()),
        (8, 0, "connection closed mid-line".into()),
    ];
    let reg = Registry::with_builtins();
    for workers in [1, 2] {
        for merge in [MergeKind::TimeOrdered, MergeKind::Union] {
            let what = format!("TCP, {workers} worker(s), {merge:?}");
            let p = plan_over(
                SourceSpec::Memory(Arc::new(batch_of(&goods))),
                merge.clone(),
            );
            let expected = reference::run(&p, &reg, &batch_of(&goods)).expect("reference");
            let report = run_tcp(merge.clone(), workers, false, &[&first, second])
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if merge == MergeKind::TimeOrdered {
                assert!(
                    report.collected == expected,
                    "{what}: time-ordered output differs"
                );
            } else {
                assert!(
                    sorted(report.collected.clone()) == sorted(expected),
                    "{what}: union output differs"
                );
            }
            assert_eq!(report.rows_in, goods.len() as u64, "{what}");
            check_rejects(rejects_of(&report, &what), &bad, &what);
        }
    }
}

#[test]
fn tcp_strict_mode_stops_at_the_first_bad_line() {
    let client: &[u8] = b"0,1,10,a\n1,2,zz,b\n2,4,40,c\n";
    match run_tcp(MergeKind::Union, 2, true, &[client]) {
        Err(Error::Input {
            line,
            column,
            message,
            ..
        }) => {
            assert_eq!((line, column), (2, 5));
            assert!(message.contains("\"zz\" is not an int64"), "{message}");
        }
        Err(e) => panic!("expected Error::Input, got {e}"),
        Ok(r) => panic!("strict TCP run succeeded: {:?}", r.rejects),
    }
}

#[test]
fn tcp_strict_mode_rejects_a_line_cut_by_a_disconnect() {
    let client: &[u8] = b"0,1,10,a\n1,2,20,b\n2,4,4";
    match run_tcp(MergeKind::Union, 1, true, &[client]) {
        Err(Error::Input { line, message, .. }) => {
            assert_eq!(line, 3);
            assert!(message.contains("connection closed mid-line"), "{message}");
            assert!(message.contains("2,4,4"), "{message}");
        }
        Err(e) => panic!("expected Error::Input, got {e}"),
        Ok(r) => panic!("strict TCP run succeeded: {:?}", r.rejects),
    }
}

/// A strict run stopped by a bad line ends even though its client stays connected (and
/// a second client never comes), and it lets go of the port.
#[test]
fn tcp_strict_stop_closes_the_listener_and_the_connection() {
    let addr = format!("127.0.0.1:{}", free_port());
    let p = plan_over(SourceSpec::Tcp { addr: addr.clone() }, MergeKind::Union);
    let cfg = config(2, true, None, 2);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(&p, &Registry::with_builtins(), &cfg));
    });
    let mut client = connect(&addr);
    client
        .write_all(b"0,1,10,a\n1,2,zz,b\n")
        .expect("client sends");
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Err(Error::Input { line, .. })) => assert_eq!(line, 2),
        Ok(other) => panic!("expected the strict error, got {other:?}"),
        Err(_) => panic!("the strict TCP run did not end within 60 s"),
    }
    // The reader thread notices within its poll interval and drops the listener.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::net::TcpListener::bind(&addr) {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("port still held 10 s after the run ended: {e}"),
        }
    }
    // And it closed the connection: the client reads end of stream.
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    let n = std::io::Read::read(&mut client, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "connection still open");
    drop(client);
}
