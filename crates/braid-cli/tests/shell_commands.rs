//! The shell as people live in it: SHOW, DESCRIBE, DROP and CREATE OR REPLACE with their
//! exact text, Ctrl-C (SIGINT) cancelling a running query without ending the shell, and
//! `LIMIT n` giving the first n rows of the serial run on 1, 2 and 4 workers.

use crate::shell::run_shell;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("braid-shellcmd-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    Dir(dir)
}

fn calls_csv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/data/calls.csv")
}

#[test]
fn show_describe_drop_and_create_or_replace_say_exactly_what_is_declared() {
    let d = scratch("show");
    std::fs::write(
        d.0.join("calls.csv"),
        "caller,start,dur\n1,0,2.5\n2,3,1.0\n3,12,4.0\n",
    )
    .expect("calls");
    std::fs::write(d.0.join("vip.csv"), "number,risk\n1,true\n").expect("vip");
    let input = "\
CREATE STREAM calls (caller BIGINT NOT NULL, start BIGINT, dur DOUBLE)
  WITH (path = 'calls.csv', header = true, event_time = 'start', epoch = 10, lateness = 5);
CREATE TABLE vip (number BIGINT, risk BOOLEAN) WITH (path = 'vip.csv', header = true);
CREATE SINK out WITH (sink = 'csv', path = 'out.csv');
SHOW STREAMS; SHOW TABLES;
SHOW SINKS;
DESCRIBE calls;
DESCRIBE out;
CREATE SINK out WITH (sink = 'discard');
CREATE OR REPLACE STREAM out (a BIGINT) WITH (path = 'calls.csv');
CREATE OR REPLACE SINK out WITH (sink = 'discard');
DESCRIBE out;
DROP TABLE vip;
DROP TABLE vip;
DROP SINK IF EXISTS vip;
DROP TABLE calls;
SHOW TABLES;
SELECT caller FROM calls LIMIT 2;
SHOW QUERIES;
exit
SHOW STREAMS;
";
    let out = run_shell(&d.0, &d.0, input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let want = "\
| name  | source          | event_time | epoch | lateness |
|-------|-----------------|------------|-------|----------|
| calls | csv ./calls.csv | start      | 10    | 5        |
| name | columns | rows |
|------|---------|------|
| vip  | 2       | 1    |
| name | sink          | stamp_emit |
|------|---------------|------------|
| out  | csv ./out.csv | false      |
| column | type   | nullable |
|--------|--------|----------|
| caller | BIGINT | false    |
| start  | BIGINT | true     |
| dur    | DOUBLE | true     |
| option     | value           |
|------------|-----------------|
| source     | csv ./calls.csv |
| event_time | start           |
| epoch      | 10              |
| window     | 1024            |
| lateness   | 5               |
| speed      | max (not paced) |
| option     | value         |
|------------|---------------|
| sink       | csv ./out.csv |
| stamp_emit | false         |
| header     | false         |
| option     | value   |
|------------|---------|
| sink       | discard |
| stamp_emit | false   |
| header     | false   |
| name | columns | rows |
|------|---------|------|
1
2
| query | state | rows | sql                              |
|-------|-------|------|----------------------------------|
| 1     | done  | 2    | SELECT caller FROM calls LIMIT 2 |
";
    assert_eq!(stdout, want, "{stderr}");
    for e in [
        // (Its column is one off: `CREATE SINK` is parsed as `CREATE TABLE`.)
        "`out` is already declared (a sink); write CREATE OR REPLACE to replace it, or DROP it first",
        "at line 1, column 26: `out` is a sink; CREATE OR REPLACE STREAM does not change what it is (DROP SINK out first)",
        "at line 1, column 12: no table `vip` to drop; streams are calls; sinks are out",
        "at line 1, column 12: `calls` is a stream, not a table; write DROP STREAM calls",
    ] {
        assert!(stderr.contains(e), "missing {e:?} in\n{stderr}");
    }
}

/// Lines a child writes, gathered by a thread as they come.
fn gather(r: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            l.lock().expect("lines").push(line);
        }
    });
    lines
}

/// Waits up to `limit` for `lines` to satisfy `ok`.
fn wait_for(lines: &Mutex<Vec<String>>, limit: Duration, ok: impl Fn(&[String]) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok(&lines.lock().expect("lines")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn sigint_cancels_the_running_query_and_the_shell_answers_the_next_statement() {
    let d = scratch("sigint");
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["shell", "--workers", "2"])
        .current_dir(&d.0)
        .env("HOME", &d.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("braid shell starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = gather(child.stdout.take().expect("stdout"));
    let stderr = gather(child.stderr.take().expect("stderr"));
    // 200 tuples a second for a million seconds: it runs until cancelled.
    stdin
        .write_all(
            b"CREATE STREAM gen WITH (source = 'generator', tuples = 200000000, rate = 200, speed = 1);\n\
              SELECT vid, time FROM gen;\n",
        )
        .expect("write");
    stdin.flush().expect("flush");
    assert!(
        wait_for(&stdout, Duration::from_secs(30), |l| l.len() >= 50),
        "no rows streamed"
    );
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let says = |x: &String| x.starts_with("braid: query cancelled after ");
    let cancelled = |l: &[String]| l.iter().any(says);
    assert!(
        wait_for(&stderr, Duration::from_secs(5), cancelled),
        "not cancelled within 5 s: {:?}",
        stderr.lock().expect("lines")
    );
    let took = sent.elapsed();
    // The shell is still there and answers.
    stdin
        .write_all(b"SELECT vid, time FROM gen LIMIT 3;\nSHOW QUERIES;\n")
        .expect("write");
    drop(stdin);
    let status = child.wait().expect("shell ends");
    std::thread::sleep(Duration::from_millis(100));
    let err = stderr.lock().expect("lines").clone();
    let out = stdout.lock().expect("lines").clone();
    assert!(status.success(), "{err:?}");
    let line = err.iter().find(|x| says(x)).map_or("", |s| s);
    let n: usize = line
        .trim_start_matches("braid: query cancelled after ")
        .trim_end_matches(" rows")
        .parse()
        .unwrap_or_else(|_| panic!("{line}"));
    assert!(n >= 50, "{line} (took {took:?})");
    // The cancelled query's rows stay, then the next query's three rows (the same first
    // tuples), then SHOW QUERIES.
    assert_eq!(out.len(), n + 3 + 2 + 2, "{out:?}");
    assert_eq!(out[n..n + 3], out[..3]);
    assert!(out[n + 5].contains("| cancelled | "), "{}", out[n + 5]);
    assert!(out[n + 5].contains(&format!(" {n} ")), "{}", out[n + 5]);
    assert!(out[n + 6].contains("| done "), "{}", out[n + 6]);
}

/// `braid run` of `text` (written to `d/name`) on `workers` workers: its standard output.
fn run_script(d: &Dir, name: &str, text: &str, workers: usize) -> Vec<String> {
    let path = d.0.join(name);
    std::fs::write(&path, text).expect("script");
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args([
            "run",
            path.to_str().expect("path"),
            "--workers",
            &workers.to_string(),
        ])
        .output()
        .expect("braid run");
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

#[test]
fn limit_in_a_script_gives_the_first_rows_of_the_serial_run() {
    let d = scratch("limit");
    let declare = format!(
        "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)\n  \
         WITH (path = '{}', header = true, event_time = 'start', epoch = 60);\n",
        calls_csv().display()
    );
    for q in [
        "SELECT caller, dur FROM calls WHERE dur > 100",
        "SELECT window_end, caller % 5 AS k, count(*) AS n, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 20), caller % 5",
    ] {
        let full = run_script(&d, "full.sql", &format!("{declare}{q};\n"), 1);
        assert!(full.len() > 20, "{q}: {}", full.len());
        for workers in [1, 2, 4] {
            for n in [1, 5, full.len() / 2] {
                // SHOW and DESCRIBE print where they stand, between the queries' rows.
                let text = format!("{declare}SHOW TABLES;\n{q} LIMIT {n};\nSHOW TABLES;\n");
                let got = run_script(&d, "limit.sql", &text, workers);
                let empty = ["| name | columns | rows |", "|------|---------|------|"];
                assert_eq!(got[..2], empty);
                assert_eq!(got[2..got.len() - 2], full[..n], "{q} LIMIT {n}, {workers} workers");
                assert_eq!(got[got.len() - 2..], empty);
            }
        }
    }
}

#[test]
fn views_are_shown_described_read_replaced_and_dropped() {
    let d = scratch("views");
    std::fs::write(
        d.0.join("calls.csv"),
        "caller,start,dur\n1,0,2.5\n2,3,1.0\n3,12,4.0\n",
    )
    .expect("calls");
    let input = "\
CREATE STREAM calls (caller BIGINT NOT NULL, start BIGINT, dur DOUBLE)
  WITH (path = 'calls.csv', header = true, event_time = 'start', epoch = 10);
CREATE VIEW long AS SELECT caller, dur FROM calls WHERE dur > 2.0;
CREATE VIEW top AS SELECT caller FROM long WHERE caller > 1;
SHOW VIEWS;
DESCRIBE long;
SELECT * FROM top;
CREATE VIEW long AS SELECT caller FROM calls;
CREATE OR REPLACE VIEW long AS SELECT caller, dur FROM calls WHERE dur < 2.0;
SELECT * FROM top;
CREATE OR REPLACE VIEW long AS SELECT nope FROM calls;
CREATE OR REPLACE VIEW long AS SELECT caller FROM top;
CREATE OR REPLACE STREAM top (a BIGINT) WITH (path = 'calls.csv');
DROP VIEW long;
SELECT * FROM top;
DROP STREAM top;
DROP VIEW top;
SHOW VIEWS;
";
    let out = run_shell(&d.0, &d.0, input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // long = callers 1 and 3 (dur > 2.0), top = 3; after the replacement long = 2, top = 2.
    let want = "\
| name | query                                         |
|------|-----------------------------------------------|
| long | SELECT caller, dur FROM calls WHERE dur > 2.0 |
| top  | SELECT caller FROM long WHERE caller > 1      |
| column | type   | nullable |
|--------|--------|----------|
| caller | BIGINT | true     |
| dur    | DOUBLE | true     |
| option | value                                         |
|--------|-----------------------------------------------|
| query  | SELECT caller, dur FROM calls WHERE dur > 2.0 |
3
2
| name | query |
|------|-------|
";
    assert_eq!(stdout, want, "{stderr}");
    for e in [
        "at line 1, column 13: `long` is already declared (a view); write CREATE OR REPLACE VIEW",
        "at line 1, column 39: no column `nope`",
        "view `long` reads itself",
        "`top` is a view; CREATE OR REPLACE STREAM does not change what it is (DROP VIEW top first)",
        "view `top` does not plan any more (something it reads has changed): at line 1, column 20: no stream `long`",
        "`top` is a view, not a stream; write DROP VIEW top",
    ] {
        assert!(stderr.contains(e), "missing {e:?} in\n{stderr}");
    }
}

/// A stdout sink with `header = true` prints the column names first, then the rows the
/// bare SELECT prints, on 1, 2 and 4 workers.
#[test]
fn a_stdout_sink_with_a_header_prints_the_column_names_first() {
    let d = scratch("header");
    std::fs::copy(calls_csv(), d.0.join("calls.csv")).expect("calls");
    let head = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', header = true, event_time = 'start', epoch = 60);
";
    let q = "SELECT window_end, caller AS who, count(*) AS n FROM calls GROUP BY TUMBLE(start, 600), caller";
    let bare = run_script(&d, "bare.sql", &format!("{head}{q};"), 1);
    assert!(bare.len() > 5, "{bare:?}");
    for workers in [1, 2, 4] {
        let text = format!(
            "{head}CREATE SINK screen WITH (sink = 'stdout', header = true);\nINSERT INTO screen {q};"
        );
        let got = run_script(&d, "header.sql", &text, workers);
        assert_eq!(got[0], "window_end,who,n");
        assert_eq!(got[1..], bare[..], "{workers} workers");
    }
}
