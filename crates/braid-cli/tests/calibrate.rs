//! `braid run --calibrate`: a script run with its partitions placed by measured cost
//! writes the same output and the same late rows as without, and says what it measured.

use std::path::PathBuf;
use std::process::Command;

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-cli-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Calls with a few rows behind the watermark (late), keys skewed toward caller 0.
fn write_calls(path: &std::path::Path) {
    let mut text = String::from("caller,start,dur\n");
    let mut t = 0i64;
    for i in 0..3000i64 {
        t += i % 3;
        let caller = if i % 4 == 0 { i % 13 } else { 0 };
        // Every 97th row goes back 500 time units: beyond the lateness of 20.
        let start = if i % 97 == 50 { (t - 500).max(0) } else { t };
        text.push_str(&format!("{caller},{start},{}\n", i % 300));
    }
    std::fs::write(path, text).expect("write calls");
}

/// Runs `braid run q.sql --workers 2` in `dir` with `extra` flags: its standard output,
/// the late-row file `late.csv` and its standard error.
pub(crate) fn run(dir: &std::path::Path, extra: &[&str]) -> (String, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("run")
        .arg(dir.join("q.sql"))
        .args(["--workers", "2"])
        .args(extra)
        .output()
        .expect("braid runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "braid failed: {stderr}");
    let late = std::fs::read_to_string(dir.join("late.csv")).expect("late file");
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        late,
        stderr,
    )
}

#[test]
fn calibrated_run_gives_the_same_output_and_late_rows() {
    let dir = temp_dir();
    write_calls(&dir.join("calls.csv"));
    std::fs::write(
        dir.join("q.sql"),
        "CREATE STREAM calls (caller BIGINT, start BIGINT, dur BIGINT) \
           WITH (path = 'calls.csv', event_time = 'start', epoch = 10, window = 32, lateness = 20);\n\
         SET partitions = 8;\n\
         SET late_path = 'late.csv';\n\
         SELECT window_end, caller, count(*) AS n, sum(dur) AS d FROM calls \
           GROUP BY TUMBLE(start, 100), caller;\n",
    )
    .expect("write script");
    let (plain, late_plain, _) = run(&dir, &[]);
    let (placed, late_placed, stderr) = run(&dir, &["--calibrate", "1000"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(plain.lines().count() > 10, "{plain}");
    assert!(
        late_plain.lines().count() > 5,
        "too few late rows to check: {late_plain}"
    );
    assert_eq!(placed, plain);
    // The calibration's own late rows are forgotten: the file holds the real run's
    // (written by both workers, in no fixed order).
    let sorted = |s: &str| {
        let mut v: Vec<String> = s.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&late_placed), sorted(&late_plain));
    assert!(stderr.contains("calibration on the first"), "{stderr}");
    assert!(stderr.contains("work per worker"), "{stderr}");
}
