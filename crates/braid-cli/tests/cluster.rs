//! Cluster mode: the same plan over 2 processes on loopback (timely cluster mode,
//! `--processes 2 --process-index I --hosts FILE`) writes the same output as 1 process.
//!
//! Every process is killed if the run does not end within [`TIMEOUT`] or as soon as one
//! of them fails (a lone timely process waits for its peers forever).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "braid-cli-test-{what}-{}-{}",
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

/// Child processes, killed when dropped (a panicking test leaves none behind).
struct Children(Vec<(Child, PathBuf)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (c, _) in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn stderr_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// How a set of processes ended.
enum Outcome {
    /// All exited with status 0; their stderr texts.
    Ok(Vec<String>),
    /// One failed or time ran out: what happened, with every stderr.
    Failed(String),
}

/// Starts one `braid` per argument list (stderr to a file each) and waits for all,
/// killing the rest when one fails or [`TIMEOUT`] passes.
fn run_all(dir: &TempDir, tag: &str, arg_lists: &[Vec<String>]) -> Outcome {
    let mut kids = Children(Vec::new());
    for (i, args) in arg_lists.iter().enumerate() {
        let err_path = dir.path(&format!("{tag}-stderr-{i}.txt"));
        let err = std::fs::File::create(&err_path).expect("create stderr file");
        let child = Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start braid");
        kids.0.push((child, err_path));
    }
    let deadline = Instant::now() + TIMEOUT;
    let mut done = vec![false; kids.0.len()];
    while done.iter().any(|d| !d) {
        for (i, (c, err)) in kids.0.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            match c.try_wait().expect("wait for braid") {
                Some(status) if status.success() => done[i] = true,
                Some(status) => {
                    let why = format!("process {i} failed ({status}):\n{}", stderr_of(err));
                    drop(kids); // kills the others
                    return Outcome::Failed(why);
                }
                None => {}
            }
        }
        if Instant::now() > deadline {
            let errs: Vec<String> = kids.0.iter().map(|(_, e)| stderr_of(e)).collect();
            drop(kids);
            return Outcome::Failed(format!(
                "timed out after {TIMEOUT:?}; stderr:\n{}",
                errs.join("\n---\n")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Outcome::Ok(kids.0.iter().map(|(_, e)| stderr_of(e)).collect())
}

/// Two distinct free loopback ports.
fn free_ports() -> [u16; 2] {
    [crate::free_port(), crate::free_port()]
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Runs `args` (a `braid run` without `--output`) in one process and in two, and
/// returns both outputs and the stderr texts of the two-process run.
fn one_and_two(dir: &TempDir, tag: &str, args: &[&str]) -> (String, String, Vec<String>) {
    let one = dir.path(&format!("{tag}-one.csv"));
    let mut a = strings(args);
    a.extend(strings(&["--output", &one.to_string_lossy()]));
    match run_all(dir, &format!("{tag}-one"), &[a]) {
        Outcome::Ok(_) => {}
        Outcome::Failed(why) => panic!("{tag}: 1-process run: {why}"),
    }
    let two = dir.path(&format!("{tag}-two.csv"));
    let mut a = strings(args);
    a.extend(strings(&["--output", &two.to_string_lossy()]));
    let errs = on_two(dir, tag, &a);
    let read = |p: &Path| std::fs::read_to_string(p).expect("output file");
    (read(&one), read(&two), errs)
}

/// Runs `args` (a `braid run`) as processes 0 and 1 of a loopback cluster; their
/// stderr texts.
fn on_two(dir: &TempDir, tag: &str, args: &[String]) -> Vec<String> {
    // A port taken between choosing and binding it is the only retried failure.
    let mut attempt = 0;
    loop {
        attempt += 1;
        let hosts = dir.path(&format!("{tag}-hosts-{attempt}"));
        let [p0, p1] = free_ports();
        std::fs::write(&hosts, format!("127.0.0.1:{p0}\n127.0.0.1:{p1}\n")).expect("hosts");
        let lists: Vec<Vec<String>> = (0..2)
            .map(|i| {
                let mut a = args.to_vec();
                a.extend(strings(&[
                    "--processes",
                    "2",
                    "--process-index",
                    &i.to_string(),
                    "--hosts",
                    &hosts.to_string_lossy(),
                ]));
                a
            })
            .collect();
        match run_all(dir, &format!("{tag}-two-{attempt}"), &lists) {
            Outcome::Ok(errs) => return errs,
            Outcome::Failed(why) if attempt < 3 && why.contains("in use") => continue,
            Outcome::Failed(why) => panic!("{tag}: 2-process run: {why}"),
        }
    }
}

/// The rows a process read, from its summary line.
fn rows_in(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("braid: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary line in {stderr:?}"))
}

fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort_unstable();
    v
}

/// Generator input, identity on 16 partitions with broadcast, time-ordered merge: the
/// output sequence is the serial one, so two processes must write the identical file.
#[test]
fn two_processes_write_what_one_writes_time_ordered() {
    let dir = TempDir::new("ordered");
    let (one, two, _) = one_and_two(
        &dir,
        "ordered",
        &[
            "run",
            "--tuples",
            "20000",
            "--parts",
            "16",
            "--route",
            "xway",
            "--broadcast",
            "type = 2",
            "--broadcast-fraction",
            "0.01",
            "--function",
            "identity",
            "--merge",
            "ordered",
            "--window",
            "256",
        ],
    );
    assert!(one.lines().count() > 20000, "broadcast rows are copied");
    assert_eq!(one, two, "time-ordered output of 2 processes");
}

/// Two workers per process, union merge of per-partition counts (order may differ, so
/// the sorted lines are compared), for a tree (exptree), parasplit and
/// fsplit: windows are shared between the workers of a process and copied between
/// processes.
#[test]
fn two_processes_two_workers_each_union() {
    for strategy in ["exptree", "parasplit", "fsplit"] {
        let dir = TempDir::new("union");
        let (one, two, errs) = one_and_two(
            &dir,
            "union",
            &[
                "run",
                "--tuples",
                "20000",
                "--parts",
                "8",
                "--route",
                "xway",
                "--when",
                "type = 0",
                "--broadcast",
                "type = 2",
                "--function",
                "count",
                "--merge",
                "union",
                "--workers",
                "2",
                "--strategy",
                strategy,
            ],
        );
        assert!(!one.is_empty());
        assert_eq!(
            sorted_lines(&one),
            sorted_lines(&two),
            "union output, {strategy}"
        );
        // The generator's windows are dealt to all 4 workers: both processes read some.
        let (a, b) = (rows_in(&errs[0]), rows_in(&errs[1]));
        assert!(a > 0 && b > 0, "both processes read: {a} + {b}");
        assert_eq!(a + b, 20000, "every tuple read once");
    }
}

/// A CSV file is read in shares by both processes (chunks of 1000 bytes, dealt to the
/// two workers in turn); the output is the one process's, every row is read once, the
/// malformed lines are reported once, by process 0, with their lines and columns, and
/// the reject file lists them in file order, as serial reading does.
#[test]
fn two_processes_read_a_csv_file_in_shares() {
    let dir = TempDir::new("csv");
    let input = dir.path("in.csv");
    let rejects = dir.path("rejects.tsv");
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!("{},{},{}\n", i / 100, i % 7, i));
        if [1234, 2100, 2950].contains(&i) {
            text.push_str(&format!("12,not a number {i},1\n"));
        }
    }
    std::fs::write(&input, text).expect("write input");
    let (one, two, errs) = one_and_two(
        &dir,
        "csv",
        &[
            "run",
            "--csv",
            &input.to_string_lossy(),
            "--schema",
            "time int64, key int64, v int64",
            "--event-time",
            "time",
            "--parts",
            "4",
            "--route",
            "key",
            "--function",
            "identity",
            "--merge",
            "ordered",
            "--chunk-bytes",
            "1000",
            "--rejects",
            &rejects.to_string_lossy(),
        ],
    );
    assert_eq!(one.lines().count(), 3000);
    assert_eq!(one, two, "time-ordered output of 2 processes");
    let (a, b) = (rows_in(&errs[0]), rows_in(&errs[1]));
    assert!(a > 0 && b > 0, "both processes read: {a} + {b}");
    assert_eq!(a + b, 3000, "every row read once");
    assert!(
        errs[0].contains("input: 3 malformed record(s)")
            && errs[0].contains("line 1236, column 4: field `key`")
            && errs[0]
                .contains("line 2103, column 1: event time 12 is before the previous record's 21")
            && errs[0]
                .contains("line 2954, column 1: event time 12 is before the previous record's 29"),
        "process 0 reports the rejects:\n{}",
        errs[0]
    );
    // Both runs appended to the reject file: the one process's lines, then the two
    // processes', the same lines in the same (file) order.
    let file = std::fs::read_to_string(&rejects).expect("reject file");
    let lines: Vec<&str> = file.lines().collect();
    assert_eq!(lines.len(), 6, "{file}");
    assert_eq!(lines[..3], lines[3..], "{file}");
    assert!(lines[0].starts_with("1236\t4\t") && lines[2].starts_with("2954\t1\t"));
    assert!(
        !errs[1].contains("malformed"),
        "process 1 reports no reject of its own:\n{}",
        errs[1]
    );
}

/// A query under a latency constraint on two processes (one worker reads, as on one;
/// the stamps count from the system clock, so a window stamped on one process is
/// measured on the other; the paced source's schedule starts once the processes are
/// connected): the output of one process, and process 0 reports the latency its sink
/// measured against the constraint.
#[test]
fn two_processes_run_a_query_under_a_latency_constraint() {
    let dir = TempDir::new("latency");
    let input = dir.path("calls.csv");
    let mut text = String::from("caller,start,dur\n");
    for i in 0..20_000u64 {
        text.push_str(&format!("{},{},{}\n", (i * 7919) % 101, i / 10, i % 600));
    }
    std::fs::write(&input, text).expect("write input");
    let script = |out: &Path| {
        format!(
            "SET max_latency = '20ms';
SET partitions = 4;
CREATE STREAM calls (caller BIGINT NOT NULL, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{}', event_time = 'start', epoch = 10, speed = 4000);
CREATE SINK out WITH (sink = 'csv', path = '{}');
INSERT INTO out SELECT window_end, caller, count(*) AS n, sum(dur) AS total
FROM calls GROUP BY TUMBLE(start, 100), caller;",
            input.display(),
            out.display()
        )
    };
    let (one, two) = (dir.path("one.csv"), dir.path("two.csv"));
    std::fs::write(dir.path("one.sql"), script(&one)).expect("script");
    std::fs::write(dir.path("two.sql"), script(&two)).expect("script");
    let sql = |name: &str| dir.path(name).to_string_lossy().to_string();
    match run_all(&dir, "latency-one", &[strings(&["run", &sql("one.sql")])]) {
        Outcome::Ok(_) => {}
        Outcome::Failed(why) => panic!("1-process run: {why}"),
    }
    let errs = on_two(&dir, "latency", &strings(&["run", &sql("two.sql")]));
    let read = |p: &Path| std::fs::read_to_string(p).expect("output file");
    let (one, two) = (read(&one), read(&two));
    assert!(
        one.lines().count() > 1000,
        "too little output to test anything"
    );
    assert_eq!(one, two, "the output of 2 processes under the constraint");
    assert!(errs[0].contains("max_latency 20ms"), "{}", errs[0]);
}

/// A stream of several files without an event time on two processes: each reads its
/// own files (file k on worker k mod 2), and the time-ordered output is the one
/// process's, byte for byte.
#[test]
fn two_processes_read_a_file_each_of_a_stream_of_files() {
    let dir = TempDir::new("files");
    let logs = dir.path("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut total = 0;
    for f in 0..4u64 {
        let mut text = String::new();
        for i in 0..(500 + 300 * f) {
            text.push_str(&format!("{},{}\n", (i * 7 + f) % 11, i));
            total += 1;
        }
        std::fs::write(logs.join(format!("part-{f}.csv")), text).expect("file");
    }
    let script = |out: &str| {
        let path = dir.path(&format!("{out}.sql"));
        std::fs::write(
            &path,
            format!(
                "SET partitions = 4;
CREATE STREAM logs (k BIGINT NOT NULL, i BIGINT NOT NULL) WITH (path = '{}/*.csv', header = false, epoch = 64);
CREATE SINK out WITH (sink = 'csv', path = '{}');
INSERT INTO out SELECT k, i FROM logs WHERE i % 3 = 1;",
                logs.display(),
                dir.path(&format!("{out}.csv")).display()
            ),
        )
        .expect("script");
        path.to_string_lossy().into_owned()
    };
    match run_all(&dir, "files-one", &[strings(&["run", &script("one")])]) {
        Outcome::Ok(_) => {}
        Outcome::Failed(why) => panic!("1-process run: {why}"),
    }
    let errs = on_two(&dir, "files", &strings(&["run", &script("two")]));
    let read = |p: PathBuf| std::fs::read_to_string(p).expect("output file");
    let (one, two) = (read(dir.path("one.csv")), read(dir.path("two.csv")));
    assert!(one.lines().count() > 500, "{one}");
    assert_eq!(one, two, "output of 2 processes");
    let (a, b) = (rows_in(&errs[0]), rows_in(&errs[1]));
    // Process 0 reads files 0 and 2 (500 + 1,100 rows), process 1 files 1 and 3.
    assert_eq!(
        (a, b, a + b),
        (1_600, 2_200, total),
        "rows each process read"
    );
}

/// The wrong answers an independent engine found (a window over an outer interval
/// join emitted twice, negative event times late, a table trimming text), on one
/// process and on two, against the answers worked by hand.
#[test]
fn two_processes_answer_the_cases_an_independent_engine_found() {
    let dir = TempDir::new("found");
    let data = |name: &str, text: &str| {
        let p = dir.path(name);
        std::fs::write(&p, text).expect("data");
        p.display().to_string()
    };
    let a = data("a.csv", "ts,k\n1,k1\n8,k1\n30,k2\n");
    let b = data("b.csv", "ts,k\n10,k3\n12,k1\n30,k3\n");
    let d = data("d.csv", "ts,s\n-15,\"  padded  \"\n-5,\n5,\"\"\n12,x\n");
    let pad = data("pad.csv", "k,v\n\"  padded  \",7\n\"\",8\n");
    let cases = [
        (
            "ojoin",
            format!(
                "CREATE STREAM oa (ts BIGINT NOT NULL, k TEXT) WITH (path = '{a}', header = true, event_time = 'ts');
CREATE STREAM ob (ts BIGINT NOT NULL, k TEXT) WITH (path = '{b}', header = true, event_time = 'ts');
SELECT window_end, count(*) AS n, count(ob.k) AS matched FROM oa LEFT JOIN ob
  ON oa.k = ob.k AND ob.ts BETWEEN oa.ts AND oa.ts + 5 GROUP BY TUMBLE(oa.ts, 10)"
            ),
            vec!["10,2,1", "40,1,0"],
        ),
        (
            "negative",
            format!(
                "CREATE STREAM d (ts BIGINT NOT NULL, s TEXT) WITH (path = '{d}', header = true, event_time = 'ts', epoch = 10);
SELECT window_end, count(*) AS n FROM d GROUP BY TUMBLE(ts, 10)"
            ),
            vec!["-10,1", "0,1", "10,1", "20,1"],
        ),
        (
            "padded",
            format!(
                "CREATE STREAM d (ts BIGINT NOT NULL, s TEXT) WITH (path = '{d}', header = true, event_time = 'ts', epoch = 10);
CREATE TABLE pad (k TEXT, v BIGINT) WITH (path = '{pad}', header = true);
SELECT d.ts, p.v FROM d JOIN pad p ON d.s = p.k"
            ),
            vec!["-15,7", "5,8"],
        ),
    ];
    for (tag, query, want) in cases {
        let script = |out: &str| {
            let path = dir.path(&format!("{tag}-{out}.sql"));
            let sink = dir.path(&format!("{tag}-{out}.csv"));
            let (decls, select) = query.rsplit_once(";\n").expect("declarations");
            let text = format!(
                "SET partitions = 4;\n{decls};\nCREATE SINK out WITH (sink = 'csv', path = '{}');\nINSERT INTO out {select};",
                sink.display()
            );
            std::fs::write(&path, text).expect("script");
            path.to_string_lossy().into_owned()
        };
        let args = |out: &str| strings(&["run", &script(out), "--workers", "2"]);
        match run_all(&dir, &format!("{tag}-one"), &[args("one")]) {
            Outcome::Ok(_) => {}
            Outcome::Failed(why) => panic!("{tag}: 1-process run: {why}"),
        }
        on_two(&dir, tag, &args("two"));
        for out in ["one", "two"] {
            let text = std::fs::read_to_string(dir.path(&format!("{tag}-{out}.csv")))
                .expect("output file");
            let mut got: Vec<&str> = text
                .lines()
                .filter(|l| !l.contains("window_end") && !l.starts_with("ts"))
                .collect();
            got.sort_unstable();
            let mut want = want.clone();
            want.sort_unstable();
            assert_eq!(got, want, "{tag}, {out} process(es): {text}");
        }
    }
}
