//! Late rows as a stream: `braid run` of a script whose later queries read `LATE(sink)`
//! runs them in the dataflow of the query writing to `sink`, and they see exactly the
//! rows that query counts and writes to `late_path`, with or without `--calibrate`.
//! The shell refuses a query over the late rows of a query that has already run.

use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-cli-late-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Calls where every 61st row goes back 400 time units: beyond the lateness of 20.
fn write_calls(path: &Path) {
    let mut text = String::from("caller,start,dur\n");
    let mut t = 0i64;
    for i in 0..4000i64 {
        t += i % 3;
        let start = if i % 61 == 30 { (t - 400).max(0) } else { t };
        text.push_str(&format!("{},{start},{}\n", i % 17, i % 300));
    }
    std::fs::write(path, text).expect("write calls");
}

const SCRIPT: &str = "\
CREATE STREAM calls (caller BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', event_time = 'start', epoch = 10, window = 32, lateness = 20);
CREATE SINK counts WITH (sink = 'csv', path = 'counts.csv');
CREATE SINK refused WITH (sink = 'csv', path = 'refused.csv');
SET partitions = 8;
SET late_path = 'late.csv';
INSERT INTO counts SELECT window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 100), caller;
INSERT INTO refused SELECT _operator, caller, start, dur FROM LATE(counts);
SELECT count(*) AS n FROM LATE(counts);
";

fn lines(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn late_rows_read_as_a_stream_are_the_rows_counted_late() {
    let dir = temp_dir("run");
    write_calls(&dir.join("calls.csv"));
    std::fs::write(dir.join("q.sql"), SCRIPT).expect("write script");
    let mut seen = Vec::new();
    for extra in [&[][..], &["--calibrate", "1500"][..]] {
        let (stdout, _, stderr) = crate::calibrate::run(&dir, extra);
        // One dataflow: one run report for the three queries.
        assert_eq!(stderr.matches("rows in").count(), 1, "{stderr}");
        let late = lines(&dir.join("late.csv"));
        assert!(late.len() > 20, "too few late rows to check: {late:?}");
        // The stream holds exactly the rows written to late_path (both without header).
        let refused = lines(&dir.join("refused.csv"));
        let refused: Vec<&String> = refused.iter().filter(|l| !l.starts_with('_')).collect();
        assert_eq!(refused.len(), late.len());
        for (a, b) in refused.iter().zip(&late) {
            assert_eq!(*a, b);
        }
        // The count over the same stream, printed to stdout.
        assert_eq!(stdout.trim(), late.len().to_string(), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{} late row(s) of query 1 (read by LATE(...)), written to {}",
                late.len(),
                dir.join("late.csv").display()
            )),
            "{stderr}"
        );
        seen.push((lines(&dir.join("counts.csv")), late));
    }
    assert_eq!(seen[0], seen[1], "calibrated run differs");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shell_refuses_late_rows_of_a_query_that_has_run() {
    let dir = temp_dir("shell");
    write_calls(&dir.join("calls.csv"));
    let input = "CREATE STREAM calls (caller BIGINT, start BIGINT, dur BIGINT)\n\
                 WITH (path = 'calls.csv', event_time = 'start', epoch = 10, lateness = 20);\n\
                 CREATE SINK a WITH (sink = 'discard');\n\
                 CREATE SINK b WITH (sink = 'discard');\n\
                 INSERT INTO a SELECT window_end, count(*) AS n FROM calls GROUP BY TUMBLE(start, 100);\n\
                 SELECT count(*) AS first FROM LATE(a);\n\
                 EXPLAIN SELECT count(*) AS n FROM LATE(b);\n\
                 INSERT INTO b SELECT window_end, count(*) AS n FROM calls GROUP BY TUMBLE(start, 100); \
                 SELECT count(*) AS second FROM LATE(b);\n\
                 \\q\n";
    let out = crate::shell::run_shell(&dir, &dir, input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("query 1 has already run, so its late rows cannot be read"),
        "{stderr}"
    );
    assert!(
        stderr.contains("LATE(b): no earlier query writing to sink `b`"),
        "{stderr}"
    );
    // Entered with its query, the count runs and prints what that query refused.
    let late = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("braid: ")?
                .split_once(" late row(s) of query 2")
        })
        .map(|(n, _)| n.to_string())
        .unwrap_or_else(|| panic!("no late count of query 2: {stderr}"));
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec![late.as_str()],
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
