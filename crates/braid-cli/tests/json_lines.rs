//! A file of JSON lines as a stream (`format = 'json'`): the windowed query over it
//! equals the same query over the CSV file it was written from, on 1, 2 and 4 workers,
//! with columns found by name (any case) and by path, keys no column reads ignored;
//! malformed lines are counted and reported with their line and column, and
//! `--on-error fail` stops at the first; a run killed and recovered from its
//! checkpoints writes the uninterrupted run's output.

use crate::recovery::{
    int_rows, kill_and_recover, run_script, write_calls_and_texts, Scratch, WINDOWED,
};
use std::path::Path;

fn script(dir: &Path, name: &str, with: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.sql"));
    let text = format!(
        "SET partitions = 8;
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH ({with}, event_time = 'start', epoch = 60);
CREATE SINK out WITH (sink = 'csv', path = '{}/{name}.csv');
{WINDOWED}
",
        dir.display()
    );
    std::fs::write(&path, text).expect("script");
    path
}

#[test]
fn json_lines_read_as_the_csv_they_came_from_and_bad_lines_are_reported() {
    let scratch = Scratch::new("json-lines");
    let dir = &scratch.0;
    write_calls_and_texts(dir, 200_000);
    let csv = std::fs::read_to_string(dir.join("calls.csv")).expect("calls");
    let mut json = String::new();
    // (line, column) of each bad line written, 1-based.
    let mut bad = Vec::new();
    for (i, l) in csv.lines().skip(1).enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        json += &format!(
            "{{\"CALLER\": {}, \"callee\": {}, \"start\": {}, \"call\": {{\"dur\": [{}, 0]}}, \"note\": \"x\"}}\n",
            f[0], f[1], f[2], f[3]
        );
        if i % 10_000 == 5000 {
            let n = json.lines().count() as u64;
            match (i / 10_000) % 4 {
                0 => {
                    json += "{\"caller\": 1, \"start\": \n";
                    bad.push((n + 1, 0, "not JSON"));
                }
                1 => {
                    json += &format!("{{\"caller\": \"x\", \"start\": {}}}\n", f[2]);
                    bad.push((n + 1, 1, "column caller: a JSON string, expected int64"));
                }
                2 => {
                    json += "[1, 2]\n";
                    bad.push((n + 1, 0, "a JSON array, expected an object"));
                }
                _ => {
                    json += &format!("{{\"callee\": 1, \"start\": {}}}\n", f[2]);
                    bad.push((
                        n + 1,
                        1,
                        "column caller: missing, expected int64 (NOT NULL)",
                    ));
                }
            }
        }
    }
    std::fs::write(dir.join("calls.jsonl"), json).expect("json lines");
    let d = dir.display();
    let (ok, err) = run_script(
        &script(dir, "file", &format!("path = '{d}/calls.csv'")),
        1,
        &[],
    );
    assert!(ok, "{err}");
    let expected = int_rows(&std::fs::read(dir.join("file.csv")).expect("output"));
    let with = format!("path = '{d}/calls.jsonl', format = 'json', paths = 'dur = call.dur[0]'");
    let mut took = std::time::Duration::ZERO;
    for workers in [1, 2, 4] {
        let s = script(dir, &format!("json{workers}"), &with);
        let t = std::time::Instant::now();
        let (ok, err) = run_script(&s, workers, &[]);
        if workers == 2 {
            took = t.elapsed();
        }
        assert!(ok, "{err}");
        let got = int_rows(&std::fs::read(dir.join(format!("json{workers}.csv"))).expect("output"));
        assert!(
            got == expected,
            "JSON lines on {workers} workers: {} rows, the CSV's {}",
            got.len(),
            expected.len()
        );
        assert!(
            err.contains(&format!("{} malformed record(s)", bad.len())),
            "{err}"
        );
        for (line, column, reason) in bad.iter().take(3) {
            let at = match column {
                0 => format!("line {line}: {reason}"),
                c => format!("line {line}, column {c}: {reason}"),
            };
            assert!(err.contains(&at), "{at} not in: {err}");
        }
    }
    let s = script(dir, "strict", &with);
    let (ok, err) = run_script(&s, 1, &["--on-error", "fail"]);
    assert!(!ok, "{err}");
    assert!(err.contains(&format!("line {}", bad[0].0)), "{err}");

    // Killed while it runs, recovered from its checkpoints: the uninterrupted output.
    let s = script(dir, "recovered", &with);
    let ck = dir.join("ck");
    let kills = kill_and_recover(&s, &ck, took, "20ms");
    assert!(
        kills > 0 && ck.join("query-0/LATEST").exists(),
        "{kills} kills"
    );
    let got = int_rows(&std::fs::read(dir.join("recovered.csv")).expect("output"));
    assert!(
        got == expected,
        "recovered after {kills} kills: {} rows, the CSV's {}",
        got.len(),
        expected.len()
    );
}
