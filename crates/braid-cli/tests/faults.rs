//! `braid run --on-error skip|fail` on a query whose values cannot all be computed:
//! skipping prints the other rows and reports the skipped ones on standard error (exit
//! 0); failing stops with the first fault as the error (exit 1); `--strict` is the same
//! as `--on-error fail`. A fault names its row's line, past blank and malformed lines.

use std::process::Command;

fn braid(dir: &std::path::Path, flags: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("run")
        .arg(dir.join("q.sql"))
        .args(flags)
        .output()
        .expect("run braid");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn on_error_skip_reports_and_fail_stops() {
    let dir = std::env::temp_dir().join(format!("braid-cli-faults-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("t.csv"),
        "a,b,s\n1,2,3\n\n1,2\n2,0,4\n3,5,abc\n0,1,7\n",
    )
    .expect("csv");
    std::fs::write(
        dir.join("q.sql"),
        "CREATE STREAM t (a BIGINT, b BIGINT, s TEXT) WITH (path = 't.csv', header = true);\n\
         SELECT a, 10 / b AS q, CAST(s AS BIGINT) AS c FROM t;\n",
    )
    .expect("sql");
    for workers in ["1", "2"] {
        let (code, out, err) = braid(&dir, &["--workers", workers]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "1,5,3\n0,10,7\n");
        assert!(
            err.contains("braid: query1: 2 row(s) skipped on runtime faults")
                && err.contains("project, row 2 of t (line 5): division by zero in `(10 / b)` (10 / 0)")
                && err.contains(
                    "project, row 3 of t (line 6): cannot cast to bigint in `CAST(s AS int64)` ('abc')"
                ),
            "{err}"
        );
    }
    // Failing stops at the first error of either kind: here the malformed line.
    let (code, _, err) = braid(&dir, &["--on-error", "fail"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("t: line 4, column 0: expected 3 fields, found 2"),
        "{err}"
    );
    std::fs::write(dir.join("t.csv"), "a,b,s\n1,2,3\n\n2,0,4\n3,5,abc\n0,1,7\n").expect("csv");
    for flags in [&["--on-error", "fail"][..], &["--strict"][..]] {
        let (code, out, err) = braid(&dir, flags);
        assert_eq!(code, 1, "{flags:?}: {err}");
        // A failed run writes nothing from the epoch of the fault on (here the only
        // one).
        assert_eq!(out, "", "{flags:?}");
        assert!(
            err.contains(
                "query1: project, row 2 of t (line 4): division by zero in `(10 / b)` (10 / 0) \
                 (--on-error skip would skip the row)"
            ),
            "{flags:?}: {err}"
        );
    }
    let (code, _, err) = braid(&dir, &["--on-error", "maybe"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'maybe'") && err.contains("skip") && err.contains("fail"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
