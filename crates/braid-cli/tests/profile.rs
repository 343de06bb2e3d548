//! `braid run --profile` prints each operator's time on each worker, the workers' busy
//! time and the hottest partitions; `braid explain --analyze` prints the plan EXPLAIN
//! prints with what each node measured.

use std::process::Command;

fn braid(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .output()
        .expect("braid runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "braid failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).to_string(), stderr)
}

/// A query built from flags: 20 000 generator rows over 4 partitions by one splitter,
/// output discarded.
const QUERY: &[&str] = &[
    "--tuples",
    "20000",
    "--parts",
    "4",
    "--strategy",
    "fsplit",
    "--workers",
    "2",
    "--output",
    "discard",
];

/// The cells of the table rows of `text` whose first cell is `first`.
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() > 2 && cells[1] == first)
        .map(|cells| cells[1..cells.len() - 1].to_vec())
        .collect()
}

#[test]
fn run_profile_prints_operators_workers_and_partitions() {
    let (_, err) = braid(&[&["run", "--profile"][..], QUERY].concat());
    assert!(
        err.contains("braid: profile: time in each operator on each worker"),
        "{err}"
    );
    // operator, timely operator, worker, activations, ms, busy %, rows out
    for (node, timely) in [
        ("Sink", "Sink(discard)"),
        ("Map: count", "Map(count)"),
        ("Split: q = 4", "Fsplit"),
        ("Source: input", "Input"),
    ] {
        let lines = rows(&err, node);
        let workers: Vec<&str> = lines.iter().map(|r| r[2]).collect();
        assert_eq!(workers, ["0", "1"], "{node}\n{err}");
        assert!(lines.iter().all(|r| r[1] == timely), "{node}\n{err}");
        assert!(
            lines.iter().any(|r| r[3].parse::<u64>().unwrap() > 0),
            "{err}"
        );
    }
    // The source's rows on both workers add up to the input.
    let source: u64 = rows(&err, "Source: input")
        .iter()
        .map(|r| r[6].parse::<u64>().unwrap())
        .sum();
    assert_eq!(source, 20_000, "{err}");
    let workers = rows(&err, "0").len() + rows(&err, "1").len();
    assert!(workers >= 2, "{err}");
    // Every partition of the one stage, with its rows.
    assert!(
        err.contains("the 4 partition(s) with the most time, of 4"),
        "{err}"
    );
    let parts: u64 = rows(&err, "1")
        .iter()
        .filter(|r| r.len() == 5)
        .map(|r| r[2].parse::<u64>().unwrap())
        .sum();
    assert_eq!(parts, 20_000, "{err}");
}

#[test]
fn no_profile_without_the_flag() {
    let (_, err) = braid(&[&["run"][..], QUERY].concat());
    assert!(!err.contains("profile"), "{err}");
}

#[test]
fn explain_analyze_annotates_the_plan() {
    let (plan, _) = braid(&[&["explain"][..], QUERY].concat());
    let (analyzed, _) = braid(&[&["explain", "--analyze"][..], QUERY].concat());
    // The plan EXPLAIN prints, each node with a line of what it measured below it.
    let kept: Vec<&str> = analyzed
        .lines()
        .filter(|l| !l.trim_start().starts_with("measured:"))
        .collect();
    assert_eq!(kept, plan.lines().collect::<Vec<_>>());
    let notes: Vec<&str> = analyzed
        .lines()
        .filter(|l| l.trim_start().starts_with("measured:"))
        .collect();
    assert_eq!(notes.len(), 5, "{analyzed}");
    assert!(
        notes[2].contains("rows in 20000, rows out 8,"),
        "{analyzed}"
    );
    assert!(notes[4].contains("rows out 20000,"), "{analyzed}");
}
