//! `braid shell` and `braid run script.sql` as a user runs them: statements piped into the
//! shell stream their rows to standard output, plans show with EXPLAIN, errors say where
//! and what, and the shell goes on after an error.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs `braid shell --workers 2` in `dir` with `HOME` at `home`, typing `input`.
pub(crate) fn run_shell(dir: &Path, home: &Path, input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["shell", "--workers", "2"])
        .current_dir(dir)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("braid shell starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("shell ends")
}

#[test]
fn shell_runs_statements_and_reports_errors() {
    let home = std::env::temp_dir().join(format!("braid-shell-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("home");
    let input = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)\n\
                 WITH (path = 'data/calls.csv', event_time = 'start', epoch = 60);\n\
                 SELECT nope FROM calls;\n\
                 SELECT count(*) AS n\n  FROM calls GROUP BY TUMBLE(start, 100000);\n\
                 EXPLAIN SELECT caller FROM calls WHERE dur > 100;\n\
                 \\q\n";
    let out = run_shell(&examples(), &home, input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The error names the line and column, the unknown column and what exists.
    assert!(
        stderr.contains("no column `nope`; columns are calls.caller"),
        "{stderr}"
    );
    // The count of all calls streams to the screen: one row, the number of data lines.
    let rows = std::fs::read_to_string(examples().join("data/calls.csv"))
        .expect("calls")
        .lines()
        .count()
        - 1;
    assert!(
        stdout.lines().any(|l| l.trim() == rows.to_string()),
        "{stdout}"
    );
    assert!(stdout.contains("== physical plan =="), "{stdout}");
    assert!(home.join(".braid_history").exists(), "history is kept");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn run_script_writes_results_and_explain_names_the_stages() {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["run", "grep.sql", "--workers", "2"])
        .current_dir(examples())
        .output()
        .expect("braid run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut want: Vec<String> = Vec::new();
    for (level, word) in [(1, " WARN "), (2, " ERROR ")] {
        let mut n = 0;
        for part in 0..4 {
            let text =
                std::fs::read_to_string(examples().join(format!("data/logs/part-{part}.log")))
                    .expect("log");
            n += text.lines().filter(|l| l.contains(word)).count();
        }
        want.push(format!("{level},{n}"));
    }
    let mut got: Vec<String> = stdout.lines().map(|l| l.to_string()).collect();
    got.sort();
    assert_eq!(got, want);
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["explain", "calls_and_texts.sql", "--workers", "2"])
        .current_dir(examples())
        .output()
        .expect("braid explain");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stage 1: hash") && text.contains("stage 2: hash"),
        "{text}"
    );
}

#[test]
fn explain_analyze_runs_the_query_and_annotates_its_plan() {
    let home = std::env::temp_dir().join(format!("braid-shell-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("home");
    let input = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)\n\
                 WITH (path = 'data/calls.csv', event_time = 'start', epoch = 60);\n\
                 explain  ANALYZE SELECT caller FROM calls WHERE dur > 100;\n\
                 \\q\n";
    let out = run_shell(&examples(), &home, input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The query ran (its report), and its plan came with what each node measured.
    assert!(stderr.contains("rows in"), "{stderr}");
    let source = stdout.find("Source: calls").expect("the plan");
    let note = &stdout[source..];
    assert!(note.contains("measured: rows out "), "{stdout}");
    assert!(stdout.contains("Map: query1"), "{stdout}");
    assert!(stdout.matches("measured:").count() >= 4, "{stdout}");
}
