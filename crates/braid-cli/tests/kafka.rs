//! Kafka sources and sinks against a real broker: Apache Kafka in KRaft mode, its jars
//! from Maven Central (`.ci/run` copies them to `target/kafka/libs` with mvn; found
//! through `BRAID_KAFKA_LIBS`, else there), a Java child each test starts and kills
//! when it ends, passed or not. Without the jars these tests fail, saying how to get
//! them. Records are produced and consumed with librdkafka, the standard C client.
//!
//! - a windowed SQL query over a topic of 3 partitions (CSV, and JSON with a nested
//!   field) equals the same query over the file the records came from, on 1, 2 and 4
//!   workers, and on 2 processes (`--launch 2`) of 1 and 2 workers;
//! - a Kafka sink holds exactly the rows of the file sink, each message one row;
//! - killed with SIGKILL at random moments and resumed from its checkpoints (which
//!   keep each partition's offset), a run over a topic writes the uninterrupted run's
//!   output byte for byte, on 1 and 2 workers;
//! - a Kafka sink under checkpoints (transactions committed with each checkpoint, the
//!   last committed epoch recorded in the same transaction) holds every row exactly
//!   once after runs killed at random moments and recovered, on 1 and 2 workers;
//! - malformed records are counted and reported with their partition and offset,
//!   `--on-error fail` stops at the first, and a missing topic is an error naming it.

use crate::free_port;
use crate::recovery::{
    crash_until_done, int_rows, reference, run_script, write_calls_and_texts, Job, Kills, Rng,
    Scratch, WINDOWED,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The broker's jars: `BRAID_KAFKA_LIBS`, else `target/kafka/libs`.
fn libs() -> PathBuf {
    let dir = match std::env::var_os("BRAID_KAFKA_LIBS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kafka/libs"),
    };
    let has_broker = std::fs::read_dir(&dir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13"))
    });
    assert!(
        has_broker,
        "Apache Kafka's jars are not in {} (the Kafka tests run against a real broker): get them \
         as .ci/run does, with `mvn -f .ci/kafka/pom.xml dependency:copy-dependencies \
         -DoutputDirectory=target/kafka/libs`, or point BRAID_KAFKA_LIBS at them; the broker \
         runs on Java 17 (`java` on the PATH)",
        dir.display()
    );
    dir
}

/// A running single-node Kafka (broker and controller), killed on drop.
struct Broker {
    child: Child,
    bootstrap: String,
    data: Scratch,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Broker {
    fn start(name: &str) -> Broker {
        let libs = libs();
        let data = Scratch::new(&format!("kafka-broker-{name}"));
        let (port, controller) = (free_port(), free_port());
        let conf = data.0.join("server.properties");
        std::fs::write(
            &conf,
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions=3\n\
                 offsets.topic.replication.factor=1\n\
                 offsets.topic.num.partitions=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 transaction.state.log.num.partitions=1\n\
                 group.initial.rebalance.delay.ms=0\n",
                data.0.join("log").display()
            ),
        )
        .expect("broker configuration");
        let classpath = format!("{}/*", libs.display());
        let java = |args: &[&str]| {
            let mut c = Command::new("java");
            c.args(["-Xmx512m", "-Xss1m", "-cp", &classpath]).args(args);
            c
        };
        let format = java(&[
            "kafka.tools.StorageTool",
            "format",
            "-t",
            "MkU3OEVBNTcwNTJENDM2Qk",
            "-c",
            conf.to_str().expect("path"),
        ])
        .output()
        .expect("running `java` (Kafka's storage tool)");
        assert!(
            format.status.success(),
            "formatting Kafka's storage: {}{}",
            String::from_utf8_lossy(&format.stdout),
            String::from_utf8_lossy(&format.stderr)
        );
        let log = data.0.join("broker.log");
        let child = java(&["kafka.Kafka", conf.to_str().expect("path")])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(data.0.join("broker.err")).expect("log"))
            .spawn()
            .expect("starting Kafka (`java kafka.Kafka`)");
        let mut broker = Broker {
            child,
            bootstrap: format!("127.0.0.1:{port}"),
            data,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = broker.child.try_wait().expect("wait") {
                panic!(
                    "Kafka stopped ({status}): {}{}",
                    std::fs::read_to_string(&log).unwrap_or_default(),
                    std::fs::read_to_string(broker.data.0.join("broker.err")).unwrap_or_default()
                );
            }
            // Up once it answers a metadata request.
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                let c = broker.consumer();
                if c.fetch_metadata(None, Duration::from_secs(5)).is_ok() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "Kafka did not start within 90 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        broker
    }

    fn consumer(&self) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", "braid-test")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .expect("a consumer")
    }

    /// Produces `records` (partition, payload) to `topic` (made with 3 partitions on
    /// first use), in order, and waits until all are written.
    fn produce(&self, topic: &str, records: &[(i32, String)]) {
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("linger.ms", "5")
            .set("enable.idempotence", "true")
            .create()
            .expect("a producer");
        for (part, payload) in records {
            loop {
                match p.send(
                    BaseRecord::<(), str>::to(topic)
                        .partition(*part)
                        .payload(payload),
                ) {
                    Ok(()) => break,
                    Err((e, _)) => {
                        assert!(
                            matches!(
                                e,
                                rdkafka::error::KafkaError::MessageProduction(
                                    rdkafka::types::RDKafkaErrorCode::QueueFull
                                )
                            ),
                            "producing to {topic}: {e}"
                        );
                        p.poll(Duration::from_millis(20));
                    }
                }
            }
        }
        p.flush(Duration::from_secs(60))
            .expect("flushing the producer");
    }

    /// Every committed message of `topic`, partition by partition.
    fn consume_all(&self, topic: &str) -> Vec<String> {
        let c = self.consumer();
        let md = c
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .expect("metadata");
        let parts = md.topics()[0].partitions().len() as i32;
        let mut out = Vec::new();
        for p in 0..parts {
            let (low, high) = c
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .expect("watermarks");
            if high <= low {
                continue;
            }
            let mut list = rdkafka::TopicPartitionList::new();
            list.add_partition_offset(topic, p, rdkafka::Offset::Offset(low))
                .expect("offset");
            c.assign(&list).expect("assign");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match c.poll(Duration::from_millis(200)) {
                    Some(Ok(m)) => {
                        out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into());
                        if m.offset() + 1 >= high {
                            break;
                        }
                    }
                    Some(Err(e)) => panic!("consuming {topic}: {e}"),
                    // Transaction markers take offsets too: the end may have none.
                    None if c.position().ok().and_then(|l| {
                        l.find_partition(topic, p).and_then(|e| match e.offset() {
                            rdkafka::Offset::Offset(o) => Some(o),
                            _ => None,
                        })
                    }) >= Some(high) =>
                    {
                        break
                    }
                    None => assert!(Instant::now() < deadline, "{topic}: records missing"),
                }
            }
        }
        out
    }
}

const CALLS: &str = "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)";

/// A script: `calls` read with `with`, the windowed query written to `sink`.
fn script(dir: &Path, name: &str, with: &str, sink: &str) -> PathBuf {
    let path = dir.join(format!("{name}.sql"));
    let text = format!(
        "SET partitions = 8;\n{CALLS}\n  WITH ({with}, event_time = 'start', epoch = 60);\nCREATE SINK out WITH ({sink});\n{WINDOWED}\n"
    );
    std::fs::write(&path, text).expect("script");
    path
}

/// The calls of `dir/calls.csv` as records for 3 partitions (by caller, so each
/// partition's event times stay in order), as CSV lines or JSON objects with `dur`
/// nested (`{"call": {"dur": ...}}`) and partition 0's padded.
fn records(dir: &Path, json: bool) -> Vec<(i32, String)> {
    let text = std::fs::read_to_string(dir.join("calls.csv")).expect("calls");
    let pad = "x".repeat(3000);
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let part = (f[0].parse::<i64>().expect("caller") % 3) as i32;
            let payload = match json {
                false => l.to_string(),
                // Partition 0's records are long (a key no column reads): a fetch
                // brings far fewer of them than of the others', so the partitions'
                // event times drift apart as they are read.
                true => format!(
                    r#"{{"caller": {}, "callee": {}, "start": {}, "call": {{"dur": {}, "kind": "voice"}}, "pad": "{}"}}"#,
                    f[0],
                    f[1],
                    f[2],
                    f[3],
                    if part == 0 { pad.as_str() } else { "" }
                ),
            };
            (part, payload)
        })
        .collect()
}

/// Fails with the row counts and the first difference when `got` is not `expected`.
fn same_rows(got: &[Vec<i64>], expected: &[Vec<i64>], what: &str) {
    if got != expected {
        let at = got.iter().zip(expected).position(|(g, e)| g != e);
        let first = at.map(|i| format!("row {i}: {:?}, the file's {:?}", got[i], expected[i]));
        panic!(
            "{what}: {} rows, the file's query {}; first difference: {}",
            got.len(),
            expected.len(),
            first.unwrap_or_else(|| "one is a prefix of the other".into())
        );
    }
}

#[test]
fn a_topic_reads_as_the_file_it_came_from_and_a_sink_writes_its_rows() {
    let broker = Broker::start("roundtrip");
    let scratch = Scratch::new("kafka-roundtrip");
    let dir = &scratch.0;
    write_calls_and_texts(dir, 30_000);
    let d = dir.display();
    let b = &broker.bootstrap;
    // The reference: the same query over the file.
    let file = script(
        dir,
        "file",
        &format!("path = '{d}/calls.csv'"),
        &format!("sink = 'csv', path = '{d}/file.csv'"),
    );
    let (ok, err) = run_script(&file, 1, &[]);
    assert!(ok, "{err}");
    let expected = int_rows(&std::fs::read(dir.join("file.csv")).expect("output"));
    assert!(expected.len() > 100, "{} rows", expected.len());

    broker.produce("calls_csv", &records(dir, false));
    broker.produce("calls_json", &records(dir, true));
    let sources = [
        ("csv", format!("connector = 'kafka', bootstrap = '{b}', topic = 'calls_csv', format = 'csv', stop = 'latest'")),
        ("json", format!("source = 'kafka', bootstrap = '{b}', topic = 'calls_json', format = 'json', paths = 'dur = call.dur', stop = 'latest'")),
    ];
    for (format, with) in &sources {
        for workers in [1, 2, 4] {
            let out = format!("{d}/{format}-{workers}.csv");
            let s = script(
                dir,
                &format!("{format}{workers}"),
                with,
                &format!("sink = 'csv', path = '{out}'"),
            );
            let (ok, err) = run_script(&s, workers, &[]);
            assert!(ok, "{format} on {workers} workers: {err}");
            assert!(
                !err.contains("malformed"),
                "{format} on {workers} workers: {err}"
            );
            let got = int_rows(&std::fs::read(&out).expect("output"));
            same_rows(
                &got,
                &expected,
                &format!("the {format} topic on {workers} workers"),
            );
        }
    }
    // Two processes (a local cluster): each reads its workers' share of the partitions.
    for workers in [1, 2] {
        let out = format!("{d}/cluster-{workers}.csv");
        let s = script(
            dir,
            &format!("cluster{workers}"),
            &sources[0].1,
            &format!("sink = 'csv', path = '{out}'"),
        );
        let (ok, err) = run_script(&s, workers, &["--launch", "2"]);
        assert!(ok, "2 processes of {workers} workers: {err}");
        let got = int_rows(&std::fs::read(&out).expect("output"));
        same_rows(
            &got,
            &expected,
            &format!("the csv topic on 2 processes of {workers} workers"),
        );
    }

    // The file's query to a Kafka sink: one JSON object per row, nothing else.
    let s = script(
        dir,
        "sink",
        &format!("path = '{d}/calls.csv'"),
        &format!("sink = 'kafka', bootstrap = '{b}', topic = 'out', format = 'json'"),
    );
    let (ok, err) = run_script(&s, 2, &[]);
    assert!(ok, "{err}");
    let mut got: Vec<Vec<i64>> = broker
        .consume_all("out")
        .iter()
        .map(|m| {
            let v: serde_json::Value = serde_json::from_str(m).expect("a JSON message");
            ["window_end", "k", "n", "total"]
                .iter()
                .map(|c| v[c].as_i64().unwrap_or_else(|| panic!("{c} in {m}")))
                .collect()
        })
        .collect();
    got.sort();
    same_rows(&got, &expected, "the Kafka sink");
}

#[test]
fn malformed_records_are_counted_with_partition_and_offset() {
    let broker = Broker::start("bad");
    let scratch = Scratch::new("kafka-bad");
    let dir = &scratch.0;
    let d = dir.display();
    let b = &broker.bootstrap;
    // Partition 1's record at offset 1 and partition 2's at offset 0 are no rows.
    let good = |c: i64, t: i64| format!("{c},7,{t},30");
    let records = vec![
        (0, good(3, 1)),
        (1, good(4, 2)),
        (1, "4,7,x,30".to_string()),
        (2, "5,7".to_string()),
        (2, good(5, 4)),
        (0, good(6, 700)),
    ];
    broker.produce("bad", &records);
    let s = script(
        dir,
        "bad",
        &format!("source = 'kafka', bootstrap = '{b}', topic = 'bad', stop = 'latest'"),
        &format!("sink = 'csv', path = '{d}/out.csv'"),
    );
    let (ok, err) = run_script(&s, 2, &[]);
    assert!(ok, "{err}");
    assert!(err.contains("2 malformed record(s)"), "{err}");
    assert!(
        err.contains("partition 1, offset 1: field `start`"),
        "{err}"
    );
    assert!(
        err.contains("partition 2, offset 0: expected 4 fields, found 2"),
        "{err}"
    );
    let rows = int_rows(&std::fs::read(dir.join("out.csv")).expect("output"));
    // Window [0, 600): callers 3, 4, 5 (k = caller % 100), one call each; 6 in [600, 1200).
    let n: i64 = rows.iter().map(|r| r[2]).sum();
    assert_eq!(n, 4, "{rows:?}");

    let (ok, err) = run_script(&s, 1, &["--on-error", "fail"]);
    assert!(!ok, "a malformed record under --on-error fail: {err}");
    assert!(err.contains("offset"), "{err}");

    let s = script(
        dir,
        "missing",
        &format!("source = 'kafka', bootstrap = '{b}', topic = 'nowhere', stop = 'latest'"),
        "sink = 'discard'",
    );
    let (ok, err) = run_script(&s, 1, &[]);
    assert!(!ok && err.contains("nowhere"), "{err}");
}

#[test]
fn a_run_over_a_topic_resumes_from_its_checkpoints_after_kills() {
    let broker = Broker::start("recover");
    let scratch = Scratch::new("kafka-recover");
    let dir = &scratch.0;
    write_calls_and_texts(dir, 60_000);
    broker.produce("calls", &records(dir, false));
    let b = &broker.bootstrap;
    let d = dir.display();
    let s = script(
        dir,
        "recover",
        &format!("source = 'kafka', bootstrap = '{b}', topic = 'calls', stop = 'latest'"),
        &format!("sink = 'csv', path = '{d}/out.csv'"),
    );
    let job = Job {
        name: "kafka",
        args: vec![s.display().to_string()],
        output: dir.join("out.csv"),
        ordered: true,
    };
    let (want, took) = reference(&job, dir);
    assert!(want.len() > 1000, "{} bytes", want.len());
    let mut rng = Rng(0x006b_6166_6b61);
    let mut tally = Kills::default();
    for workers in [1, 2] {
        let span = took + Duration::from_millis(100);
        let outputs = crash_until_done(&job, workers, 1, 4, span, &mut rng, &mut tally, &[]);
        for got in outputs {
            assert!(
                got == want,
                "{workers} worker(s): the recovered output ({} bytes) differs from the uninterrupted run's ({} bytes)",
                got.len(),
                want.len()
            );
        }
    }
    assert!(tally.total >= 8 && tally.resumed > 0, "{tally:?}");
}

/// The rows of `messages` (CSV lines of integers), sorted.
fn csv_messages(messages: &[String]) -> Vec<Vec<i64>> {
    let mut rows: Vec<Vec<i64>> = messages
        .iter()
        .map(|m| {
            m.split(',')
                .map(|x| x.parse().expect("an integer"))
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn a_kafka_sink_under_checkpoints_holds_each_row_once_after_kills() {
    let broker = Broker::start("exactly-once");
    let scratch = Scratch::new("kafka-exactly-once");
    let dir = &scratch.0;
    write_calls_and_texts(dir, 60_000);
    broker.produce("calls", &records(dir, false));
    let (b, d) = (&broker.bootstrap, dir.display());
    let file = script(
        dir,
        "file",
        &format!("path = '{d}/calls.csv'"),
        &format!("sink = 'csv', path = '{d}/file.csv'"),
    );
    let (ok, err) = run_script(&file, 1, &[]);
    assert!(ok, "{err}");
    let expected = int_rows(&std::fs::read(dir.join("file.csv")).expect("output"));
    let source = format!("source = 'kafka', bootstrap = '{b}', topic = 'calls', stop = 'latest'");
    // Uninterrupted, into its own topic: how long a run takes.
    let whole = script(
        dir,
        "whole",
        &source,
        &format!("sink = 'kafka', bootstrap = '{b}', topic = 'whole'"),
    );
    let t = Instant::now();
    let ck = dir.join("ck-whole").display().to_string();
    let (ok, err) = run_script(
        &whole,
        2,
        &["--checkpoint", &ck, "--checkpoint-interval", "30ms"],
    );
    assert!(ok, "{err}");
    let span = t.elapsed() + Duration::from_millis(100);
    same_rows(
        &csv_messages(&broker.consume_all("whole")),
        &expected,
        "the uninterrupted run's topic",
    );
    let mut rng = Rng(0x00e0_0e0e);
    let (mut kills, mut resumed) = (0, 0);
    for workers in [1usize, 2] {
        // A run that ends before its first kill tests nothing about kills: under a
        // loaded machine the measured span can be several times a later run's, so
        // such a run is repeated into a fresh topic (at most three times).
        for attempt in 0..3 {
            let topic = format!("out{workers}-{attempt}");
            let s = script(
                dir,
                &topic,
                &source,
                &format!("sink = 'kafka', bootstrap = '{b}', topic = '{topic}'"),
            );
            let ck = dir.join(format!("ck-{workers}-{attempt}"));
            let latest = ck.join("query-0/LATEST");
            let before = kills;
            for run in 0..=4 {
                let mut c = Command::new(env!("CARGO_BIN_EXE_braid"));
                c.arg("run")
                    .arg(&s)
                    .args(["--workers", &workers.to_string()]);
                c.arg(if run == 0 {
                    "--checkpoint"
                } else {
                    "--recover"
                })
                .arg(&ck);
                c.args(["--checkpoint-interval", "30ms"]);
                let mut child = c
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("braid");
                if run < 4 {
                    // The first run is killed a random time after its first
                    // checkpoint (so a resumption from one is sure to be tried), the
                    // later ones a random time after they start.
                    if run == 0 {
                        while !latest.exists() && child.try_wait().expect("wait").is_none() {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    let range = if run == 0 { span / 4 } else { span };
                    let until =
                        Instant::now() + Duration::from_micros(rng.below(range.as_micros() as u64));
                    while Instant::now() < until && child.try_wait().expect("wait").is_none() {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    if child.try_wait().expect("wait").is_none() {
                        child.kill().expect("kill -9");
                        child.wait().expect("reap");
                        kills += 1;
                        // A script's query checkpoints into DIR/query-0.
                        resumed += usize::from(latest.exists());
                        continue;
                    }
                }
                let out = child.wait_with_output().expect("braid");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                if run < 4 {
                    break; // it ended before its kill: done
                }
            }
            let got = csv_messages(&broker.consume_all(&topic));
            same_rows(
                &got,
                &expected,
                &format!("the topic after kills on {workers} worker(s), attempt {attempt}"),
            );
            if kills > before {
                break;
            }
        }
        // A crash right after a transaction commits, before its checkpoint is durable
        // (the third commit), and right after the commit at the end of input (its
        // last epochs are the end's): the recovered run makes those epochs again from
        // the checkpoint before, and must not write them twice.
        for when in ["3", "end"] {
            let topic = format!("cut{workers}{when}");
            let sink = format!("sink = 'kafka', bootstrap = '{b}', topic = '{topic}'");
            let s = script(dir, &topic, &source, &sink);
            let ck = dir.join(format!("ck-cut-{workers}-{when}"));
            let out = Command::new(env!("CARGO_BIN_EXE_braid"))
                .arg("run")
                .arg(&s)
                .args(["--workers", &workers.to_string(), "--checkpoint"])
                .arg(&ck)
                .args(["--checkpoint-interval", "30ms"])
                .env("BRAID_CRASH_AFTER_KAFKA_COMMITS", when)
                .output()
                .expect("braid");
            assert!(
                !out.status.success(),
                "the run did not abort after commit {when}"
            );
            let ck = ck.display().to_string();
            let (ok, err) = run_script(
                &s,
                workers,
                &["--recover", &ck, "--checkpoint-interval", "30ms"],
            );
            assert!(ok, "{err}");
            let got = csv_messages(&broker.consume_all(&topic));
            let what = format!("the topic after a crash after commit {when}, {workers} worker(s)");
            same_rows(&got, &expected, &what);
        }
    }
    assert!(
        kills >= 1 && resumed > 0,
        "{kills} kills, {resumed} after a checkpoint"
    );
}

/// `braid server` reads a topic as a stream (read for as long as the server runs): a
/// materialized view over it holds what the rows give, read with psql.
#[test]
fn the_server_reads_a_topic_into_a_view() {
    use crate::server_recovery::{psql, start};
    let broker = Broker::start("server");
    let scratch = Scratch::new("kafka-server");
    // (k, t): t = 0..300, k = t % 5, partition k % 3.
    let records: Vec<(i32, String)> = (0..300)
        .map(|t: i32| ((t % 5) % 3, format!("{},{t}", t % 5)))
        .collect();
    broker.produce("ev", &records);
    let port = crate::free_port();
    let _server = start(&scratch.0.join("data"), port, 2);
    let b = &broker.bootstrap;
    for sql in [
        format!(
            "CREATE STREAM ev (k BIGINT, t BIGINT) WITH (connector = 'kafka', bootstrap = '{b}', \
             topic = 'ev', format = 'csv', event_time = 't', epoch = 10)"
        ),
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, window_start \
         FROM TUMBLE(TABLE ev, t, 100) GROUP BY window_start, window_end, k"
            .to_string(),
    ] {
        psql(port, &sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // Windows [0, 100) and [100, 200) close once every partition has passed t = 200:
    // 5 keys each, 20 rows per key and window. (A SELECT in the server is continuous:
    // LIMIT ends it.)
    let got = psql(port, "SELECT k, n, window_start FROM v LIMIT 10").expect("SELECT");
    let mut got: Vec<&str> = got.lines().collect();
    got.sort();
    let mut want: Vec<String> = (0..5)
        .flat_map(|k| [format!("{k},20,0"), format!("{k},20,100")])
        .collect();
    want.sort();
    assert_eq!(got, want);
}
