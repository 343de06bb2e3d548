//! Restoring a checkpoint onto other worker counts: a windowed SQL query checkpointed
//! on 2 workers and stopped halfway (its file output then holds rows past the last
//! commit) resumes on 1, 2 and 4 workers with output byte for byte the uninterrupted
//! run's; another partition count is refused by name, as is another query.

use braid_exec::checkpoint::{latest, CheckpointConfig};
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_exec::source::Counters;
use braid_plan::function::Registry;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn script(dir: &Path, partitions: u32, key: u32) -> String {
    let d = dir.display();
    format!(
        "SET partitions = {partitions};
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT window_end, caller % {key} AS k, count(*) AS n, sum(dur) AS total
FROM calls GROUP BY TUMBLE(start, 100), caller % {key};"
    )
}

/// Runs the script's query to its end (or until `stop_at` rows were read) on `workers`;
/// the rows it read and the malformed lines it reported.
fn run(
    dir: &Path,
    text: &str,
    workers: usize,
    checkpoint: Option<CheckpointConfig>,
    stop_at: Option<u64>,
) -> braid_exec::error::Result<(u64, u64)> {
    let counters = Arc::new(Counters::default());
    // Stopped once it has read `stop_at` rows and committed a checkpoint.
    let committed = checkpoint
        .as_ref()
        .map(|c| c.dir.join("query-0").join("LATEST"));
    let config = RunConfig {
        workers,
        checkpoint,
        counters: Some(counters.clone()),
        ..RunConfig::default()
    };
    let mut session = Session::new(&Registry::with_builtins(), config);
    session.compile(text, dir)?;
    let cancel = session.cancel_handle();
    let watcher = stop_at.map(|n| {
        std::thread::spawn(move || {
            while counters.rows_in.load(Ordering::Relaxed) < n
                || committed.as_ref().is_some_and(|c| !c.exists())
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            cancel.cancel();
        })
    });
    let report = session.run_next().expect("a query")?;
    if let Some(w) = watcher {
        w.join().expect("watcher");
    }
    assert_eq!(
        report.run.cancelled,
        stop_at.is_some(),
        "the run was to be stopped halfway, after a checkpoint"
    );
    let rejects = report.run.rejects.iter().map(|r| r.count).sum();
    Ok((report.run.rows_in, rejects))
}

#[test]
fn restore_onto_other_worker_counts() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("braid-ckpt-rescale-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).expect("scratch");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..400_000u64 {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
        calls += &format!("{},{},{},{}\n", x % 997, x % 13, i / 4, x % 600);
        // Malformed lines all along: a resumed run reports them as the whole run does.
        if i % 9_999 == 0 {
            calls += "12,x,y\n";
        }
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let text = script(&dir.0, 8, 50);
    let out = dir.0.join("out.csv");
    let whole = run(&dir.0, &text, 1, None, None).expect("uninterrupted run");
    assert_eq!(whole, (400_000, 41));
    let want = std::fs::read(&out).expect("output");
    assert!(want.len() > 100_000, "too little output to test anything");

    // Checkpointed on 2 workers, stopped halfway.
    let ck = dir.0.join("ck");
    let config = |dir: &Path, recover| CheckpointConfig {
        dir: dir.to_path_buf(),
        interval: Duration::from_millis(1),
        recover,
        backend: None,
    };
    run(&dir.0, &text, 2, Some(config(&ck, false)), Some(200_000)).expect("stopped run");
    let taken = latest(&ck.join("query-0"))
        .expect("manifest")
        .expect("a checkpoint");
    assert_eq!(taken.workers, 2);
    assert!(taken.epoch > 0);
    let partial = std::fs::read(&out).expect("partial output");
    // The source resumes at the file offset the checkpoint kept (not from the start).
    let kept = walk(&ck).into_iter().any(|p| p.ends_with("source-0.bin"));
    assert!(kept, "no source position in the checkpoint");
    assert!(partial.len() < want.len());

    let copy = |to: &Path| {
        let from = ck.join("query-0");
        let to = to.join("query-0");
        std::fs::create_dir_all(&to).expect("copy");
        for e in walk(&from) {
            let rel = e.strip_prefix(&from).expect("relative");
            if e.is_dir() {
                std::fs::create_dir_all(to.join(rel)).expect("copy dir");
            } else {
                std::fs::create_dir_all(to.join(rel).parent().expect("parent")).expect("dir");
                std::fs::copy(&e, to.join(rel)).expect("copy file");
            }
        }
    };
    for workers in [1, 2, 4] {
        let at = dir.0.join(format!("ck-{workers}"));
        copy(&at);
        std::fs::write(&out, &partial).expect("partial output back");
        let resumed =
            run(&dir.0, &text, workers, Some(config(&at, true)), None).expect("resumed run");
        assert_eq!(resumed, whole, "rows read and malformed lines reported");

        let got = std::fs::read(&out).expect("output");
        assert!(
            got == want,
            "resumed on {workers} workers from epoch {}: {} bytes, the uninterrupted run {}",
            taken.epoch,
            got.len(),
            want.len()
        );
    }

    // Another partition count, and another query, are refused by name.
    let at = dir.0.join("ck-q16");
    copy(&at);
    let e = run(
        &dir.0,
        &script(&dir.0, 16, 50),
        2,
        Some(config(&at, true)),
        None,
    )
    .expect_err("q = 16 refused");
    assert!(e.to_string().contains("other partition counts"), "{e}");
    let e = run(
        &dir.0,
        &script(&dir.0, 8, 49),
        2,
        Some(config(&at, true)),
        None,
    )
    .expect_err("another query refused");
    assert!(e.to_string().contains("another plan"), "{e}");
}

/// A run started over with checkpoints (`recover: false`) in a directory where an
/// earlier run had finished, stopped halfway, resumes the query: the earlier run's
/// `DONE` does not make the resume skip it (which left the output cut short).
#[test]
fn a_fresh_start_forgets_an_earlier_finished_run() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("braid-ckpt-fresh-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).expect("scratch");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..400_000u64 {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
        calls += &format!("{},{},{},{}\n", x % 997, x % 13, i / 4, x % 600);
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let text = script(&dir.0, 8, 50);
    let out = dir.0.join("out.csv");
    let ck = dir.0.join("ck");
    let config = |recover| CheckpointConfig {
        dir: ck.clone(),
        interval: Duration::from_millis(1),
        recover,
        backend: None,
    };
    run(&dir.0, &text, 2, Some(config(false)), None).expect("a finished run");
    let want = std::fs::read(&out).expect("output");
    assert!(ck.join("query-0").join("DONE").exists());
    run(&dir.0, &text, 2, Some(config(false)), Some(200_000)).expect("stopped run");
    assert!(std::fs::read(&out).expect("partial").len() < want.len());
    run(&dir.0, &text, 2, Some(config(true)), None).expect("resumed run");
    assert!(
        std::fs::read(&out).expect("output") == want,
        "the resumed output differs from the finished run's"
    );
}

/// Every path under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
