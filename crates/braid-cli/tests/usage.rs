//! The command line's contract with a user: exit code 0 when all went well, 1 for an
//! error of a query or its data, 2 for a usage error; a flag that does not apply to
//! what is run is refused by name with the reason; a closed standard output ends the
//! program quietly; a failed write of the output fails the run.

use std::io::Read;
use std::process::{Command, Stdio};

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs `braid args` in the examples directory: exit code, stdout, stderr.
fn braid(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .current_dir(examples())
        .output()
        .expect("braid runs");
    (
        out.status.code().expect("exited, not killed by a signal"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flags_that_do_not_apply_are_refused_by_name() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "grep.sql", "--output", "x.csv"], "--output does not apply here: a script declares"),
        (&["run", "grep.sql", "--merge", "ordered"], "--merge does not apply here"),
        (&["run", "grep.sql", "--parts", "8"], "--parts does not apply here"),
        (&["run", "grep.sql", "--strategy", "fsplit"], "--strategy does not apply here"),
        (&["run", "grep.sql", "--speed", "2"], "--speed does not apply here"),
        (&["run", "grep.sql", "--window", "64"], "--window does not apply here"),
        (&["run", "grep.sql", "--epoch", "5"], "--epoch does not apply here"),
        (&["run", "grep.sql", "--desired-rate", "1000"], "--desired-rate does not apply here"),
        (&["explain", "grep.sql", "--progress"], "--progress does not apply here"),
        (&["run", "--tuples", "10", "--lrb-history", "."], "--lrb-history does not apply here"),
        (&["run", "--csv", "data/calls.csv", "--schema", "a int64", "--route", "a", "--tuples", "5"], "--tuples does not apply here: it sets up the built-in generator, and the input is --csv"),
        (&["run", "--tuples", "10", "--splitter-rate", "5"], "--splitter-rate does not apply here: it serves --desired-rate"),
        (&["convert", "--csv", "data/calls.csv", "--schema", "a int64", "--to", "x.bin", "--workers", "2"], "--workers does not apply here: convert reads"),
        (&["shell", "--route", "a"], "--route does not apply here"),
        (&["run", "--workers", "0"], "invalid value '0' for '--workers"),
        (&["run", "--parts", "0"], "invalid value '0' for '--parts"),
        (&["run", "--csv", "x", "--schema", "a int64 b int64"], "expected `name type` (columns separated by commas)"),
        (&["run", "--csv", "-", "--header", "--schema", "a int64"], "--header: standard input"),
    ];
    for (args, says) in cases {
        let (code, _, stderr) = braid(args);
        assert_eq!(code, 2, "braid {args:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "braid {args:?} should say {says:?}: {stderr}"
        );
    }
}

#[test]
fn errors_of_queries_and_data_exit_with_1() {
    let dir = std::env::temp_dir().join(format!("braid-usage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let script = dir.join("bad.sql");
    std::fs::write(
        &script,
        "CREATE STREAM s (a BIGINT) WITH (path = 's.csv');\nSELECT b FROM s;\n",
    )
    .expect("script");
    let (code, _, stderr) = braid(&["run", script.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("bad.sql: ") && stderr.contains("line 2"),
        "{stderr}"
    );
    // The output device is full: the run fails instead of reporting success.
    let (code, _, stderr) = braid(&["run", "--tuples", "100000", "--output", "/dev/full"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `braid ... | head -1`: the reader goes away after one line, and braid ends with 0 and
/// nothing on stderr, for EXPLAIN (written by the CLI) and for query output (written by
/// the engine's sink).
#[test]
fn a_closed_pipe_ends_quietly() {
    for args in [
        &["explain", "fraud.sql"][..],
        &[
            "run",
            "--tuples",
            "2000000",
            "--parts",
            "512",
            "--function",
            "identity",
        ][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(args)
            .current_dir(examples())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("braid starts");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 16];
        stdout.read_exact(&mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("braid ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "braid {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "braid {args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "braid {args:?}: {stderr}");
    }
}
