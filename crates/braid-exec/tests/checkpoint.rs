//! Restoring a checkpoint onto other worker counts and partition counts: a windowed SQL
//! query checkpointed on 2 workers and stopped halfway (its file output then holds rows
//! past the last commit) resumes on 1, 2 and 4 workers with output byte for byte the
//! uninterrupted run's; SQL queries of every keyed operator checkpointed at q = 8 resume
//! at q = 16, 4 and 3 alike; a function whose state is not kept by key is refused
//! another q by name, as is another query.

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

impl Scratch {
    /// An empty directory `braid-<name>-<pid>` under the temporary directory.
    fn fresh(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("braid-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Scratch(dir)
    }
}

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

thread_local! {
    /// `RunConfig::chain_alternate` of the runs [`run`] makes on this test's thread.
    static CHAIN_ALTERNATE: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs the script's query to its end (or until `stop_at` rows were read) on `workers`;
/// the rows it read and the malformed lines it reported.
fn run(
    dir: &Path,
    text: &str,
    workers: usize,
    checkpoint: Option<CheckpointConfig>,
    stop_at: Option<u64>,
) -> braid_exec::error::Result<(u64, u64, u64)> {
    let counters = Arc::new(Counters::default());
    // Stopped once it has read `stop_at` rows and committed a checkpoint.
    let committed = checkpoint
        .as_ref()
        .map(|c| c.dir.join("query-0").join("LATEST"));
    let config = RunConfig {
        workers,
        checkpoint,
        counters: Some(counters.clone()),
        chain_alternate: CHAIN_ALTERNATE.with(std::cell::Cell::get),
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
    let late = report.late.iter().map(|l| l.rows).sum();
    Ok((report.run.rows_in, rejects, late))
}

#[test]
fn restore_onto_other_worker_counts() {
    let dir = Scratch::fresh("ckpt-rescale");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..400_000u64 {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
        // Late rows all along (their windows closed long before): a resumed run
        // counts them as the whole run does.
        let t = if i % 1_009 == 500 {
            (i / 4).saturating_sub(400)
        } else {
            i / 4
        };
        calls += &format!("{},{},{},{}\n", x % 997, x % 13, t, x % 600);
        // Malformed lines all along: a resumed run reports them as the whole run does.
        if i % 9_999 == 0 {
            calls += "12,x,y\n";
        }
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let text = script(&dir.0, 8, 50);
    let out = dir.0.join("out.csv");
    let whole = run(&dir.0, &text, 1, None, None).expect("uninterrupted run");
    assert_eq!((whole.0, whole.1), (400_000, 41));
    assert!(whole.2 > 300, "late rows: {}", whole.2);
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
        assert_eq!(
            resumed, whole,
            "rows read, malformed lines and late rows reported"
        );

        let got = std::fs::read(&out).expect("output");
        assert!(
            got == want,
            "resumed on {workers} workers from epoch {}: {} bytes, the uninterrupted run {} (the stopped run left {} bytes); {}",
            taken.epoch,
            got.len(),
            want.len(),
            partial.len(),
            first_difference(&got, &want)
        );
    }

    // Another query is refused by name.
    let at = dir.0.join("ck-other");
    copy(&at);
    let e = run(
        &dir.0,
        &script(&dir.0, 8, 49),
        2,
        Some(config(&at, true)),
        None,
    )
    .expect_err("another query refused");
    // By the plan's fingerprint, or (when the plans differ only inside a stage's
    // query, as a two-phase aggregate's round-robin stage does) by the query's own.
    let e = e.to_string();
    assert!(
        e.contains("another plan") || e.contains("it is of another query"),
        "{e}"
    );
}

/// Where two outputs first differ, by line, with a few lines of each from there (a
/// failure names what was written twice or lost, not only the lengths).
fn first_difference(got: &[u8], want: &[u8]) -> String {
    let (g, w): (Vec<&[u8]>, Vec<&[u8]>) = (
        got.split(|&b| b == b'\n').collect(),
        want.split(|&b| b == b'\n').collect(),
    );
    let Some(at) = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)) else {
        return "no line differs".into();
    };
    let show = |v: &[&[u8]]| -> Vec<String> {
        v.iter()
            .skip(at)
            .take(6)
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect()
    };
    format!(
        "first difference at line {}: got {:?}, want {:?}",
        at + 1,
        show(&g),
        show(&w)
    )
}

/// `dir/calls.csv`: `rows` calls, four per time unit, their callers, callees and
/// durations scrambled by a multiplicative hash of the row number.
fn write_scrambled_calls(dir: &Path, rows: u64) {
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..rows {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
        calls += &format!("{},{},{},{}\n", x % 997, x % 13, i / 4, x % 600);
    }
    std::fs::write(dir.join("calls.csv"), calls).expect("calls");
}

/// A run started over with checkpoints (`recover: false`) in a directory where an
/// earlier run had finished, stopped halfway, resumes the query: the earlier run's
/// `DONE` does not make the resume skip it (which left the output cut short).
#[test]
fn a_fresh_start_forgets_an_earlier_finished_run() {
    let dir = Scratch::fresh("ckpt-fresh");
    write_scrambled_calls(&dir.0, 400_000);
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
    let got = std::fs::read(&out).expect("output");
    if got != want {
        // Which line first differs, and how many lines each has, for a diagnosis.
        let (g, w) = (
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
        );
        let at = g.lines().zip(w.lines()).position(|(a, b)| a != b);
        panic!(
            "the resumed output differs from the finished run's: {} lines against {}, first difference at line {:?}: {:?} against {:?}",
            g.lines().count(),
            w.lines().count(),
            at.map(|i| i + 1),
            at.and_then(|i| g.lines().nth(i)),
            at.and_then(|i| w.lines().nth(i)),
        );
    }
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

/// Checkpoints every 5 ms (a few dozen in a stopped run), or, resuming, every second
/// (each commit syncs its files: one per epoch would make the test slow).
fn config(dir: &Path, recover: bool) -> CheckpointConfig {
    CheckpointConfig {
        dir: dir.to_path_buf(),
        interval: Duration::from_millis(if recover { 1000 } else { 5 }),
        recover,
        backend: None,
    }
}

/// Copies checkpoint directory `from` (its `query-0`) to `to`.
fn copy_checkpoint(from: &Path, to: &Path) {
    let from = from.join("query-0");
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
}

/// `rows` calls (some a little late, within the lateness, one in 1009 too late) and a
/// text for every third,
/// keyed by 211 subscribers; a malformed call line every `malformed` rows, if given.
fn write_calls_and_texts(dir: &Path, rows: u64, malformed: Option<u64>) {
    let (mut calls, mut texts) = (
        String::from("caller,callee,start,dur\n"),
        String::from("sender,start,len\n"),
    );
    for i in 0..rows {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
        // Some a little late (within the lateness), some too late (counted as late).
        let t = match i % 1_009 {
            500 => (i / 4).saturating_sub(700),
            _ => (i / 4).saturating_sub(x % 3),
        };
        calls += &format!("{},{},{},{}\n", x % 211, x % 13, t, x % 600);
        if i % 3 == 0 {
            texts += &format!("{},{},{}\n", (x >> 7) % 211, i / 4, x % 160);
        }
        if malformed.is_some_and(|m| i % m == 0) {
            calls += "7,x,y\n";
        }
    }
    std::fs::write(dir.join("calls.csv"), calls).expect("calls");
    std::fs::write(dir.join("texts.csv"), texts).expect("texts");
}

/// Two streams and a query over them, at `partitions`.
fn keyed_script(dir: &Path, partitions: u32, query: &str) -> String {
    let d = dir.display();
    format!(
        "SET partitions = {partitions};
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 10, lateness = 4);
CREATE STREAM texts (sender BIGINT NOT NULL, start BIGINT NOT NULL, len BIGINT)
  WITH (path = '{d}/texts.csv', event_time = 'start', epoch = 10, lateness = 4);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out {query};"
    )
}

#[test]
fn restore_onto_other_partition_counts() {
    let dir = Scratch::fresh("ckpt-requeue");
    write_calls_and_texts(&dir.0, 120_000, None);
    let queries = [
        ("tumble", "SELECT window_end, caller % 50 AS k, count(*) AS n, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 100), caller % 50"),
        ("hop, a float key", "SELECT window_start, window_end, dur * 0.5 AS half, count(*) AS n, max(caller) AS top FROM calls GROUP BY HOP(start, 40, 120), dur * 0.5"),
        ("session", "SELECT window_start, window_end, caller, count(*) AS n, sum(dur) AS total FROM calls GROUP BY SESSION(start, 30), caller"),
        ("interval join", "SELECT c.caller, c.start, t.start AS sent, c.dur, t.len FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 3 AND c.start + 3"),
        ("left join, aggregated", "SELECT window_end, c.caller, count(*) AS n, count(t.len) AS met, sum(t.len) AS total FROM calls c LEFT JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 2 AND c.start + 2 GROUP BY TUMBLE(c.start, 200), c.caller"),
    ];
    let out = dir.0.join("out.csv");
    for (name, query) in queries {
        let text = keyed_script(&dir.0, 8, query);
        let whole = run(&dir.0, &text, 2, None, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = std::fs::read(&out).expect("output");
        assert!(
            want.len() > 20_000,
            "{name}: too little output to test anything"
        );
        let (taken, partial) = stopped_halfway(&dir.0, &text, name);
        assert!(taken.partitions.contains(&8), "{name}: {taken:?}");
        for (q, workers) in [(16, 1), (16, 2), (16, 4), (4, 2), (3, 4)] {
            let text = keyed_script(&dir.0, q, query);
            let what = format!(
                "{name} at q = {q} on {workers} workers, from epoch {}",
                taken.epoch
            );
            resumes_as_whole(&dir.0, &text, workers, &partial, (whole, &want), &what);
        }
    }
}

/// Runs the first query of `text` on 2 workers with checkpoints (into `dir/ck`) until
/// it has read 60,000 rows and committed one; the last checkpoint, and the output as
/// it stood.
fn stopped_halfway(
    dir: &Path,
    text: &str,
    name: &str,
) -> (braid_exec::checkpoint::Manifest, Vec<u8>) {
    let ck = dir.join("ck");
    let _ = std::fs::remove_dir_all(&ck);
    run(dir, text, 2, Some(config(&ck, false)), Some(60_000))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let taken = latest(&ck.join("query-0"))
        .expect("manifest")
        .expect("a checkpoint");
    (
        taken,
        std::fs::read(dir.join("out.csv")).expect("partial output"),
    )
}

/// Resumes the first query of `text` on `workers` from a copy of `dir/ck` (see
/// [`stopped_halfway`]), its output put back to `partial`: the rows, malformed lines
/// and late rows, and the output, are the uninterrupted run's (`whole`, `want`).
fn resumes_as_whole(
    dir: &Path,
    text: &str,
    workers: usize,
    partial: &[u8],
    (whole, want): ((u64, u64, u64), &[u8]),
    what: &str,
) {
    let at = dir.join("ck-resumed");
    let _ = std::fs::remove_dir_all(&at);
    copy_checkpoint(&dir.join("ck"), &at);
    let out = dir.join("out.csv");
    std::fs::write(&out, partial).expect("partial output back");
    let resumed = run(dir, text, workers, Some(config(&at, true)), None)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(resumed, whole, "{what}: rows, malformed lines, late rows");
    let got = std::fs::read(&out).expect("output");
    assert!(got == want, "{what}: {}", first_difference(&got, want));
}

/// Under a latency constraint timely's time counts ticks within epochs, and a
/// checkpoint's barrier is held at its epoch's last tick: a constrained query stopped
/// halfway resumes on 1 and 2 workers with the output, rows, malformed lines and late
/// rows of the uninterrupted run (which are those of the run without the constraint).
#[test]
fn a_query_under_a_latency_constraint_resumes_from_its_checkpoint() {
    let dir = Scratch::fresh("ckpt-latency");
    write_calls_and_texts(&dir.0, 120_000, Some(9_999));
    let out = dir.0.join("out.csv");
    let queries = [
        ("tumble", "SELECT window_end, caller % 50 AS k, count(*) AS n, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 100), caller % 50"),
        ("two stages", "SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 6 AND c.start + 6 GROUP BY TUMBLE(c.start, 600), c.dur / 60"),
    ];
    for (name, query) in queries {
        let plain = keyed_script(&dir.0, 8, query);
        let whole = run(&dir.0, &plain, 2, None, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = std::fs::read(&out).expect("output");
        assert!(
            want.len() > 5_000,
            "{name}: too little output to test anything"
        );
        let text = format!("SET max_latency = '50ms';\n{plain}");
        let constrained =
            run(&dir.0, &text, 2, None, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(constrained, whole, "{name} under the constraint");
        assert!(
            std::fs::read(&out).expect("output") == want,
            "{name}: the constrained run's output"
        );
        let (taken, partial) = stopped_halfway(&dir.0, &text, name);
        for workers in [1, 2] {
            let what = format!(
                "{name} resumed on {workers} workers from epoch {}",
                taken.epoch
            );
            resumes_as_whole(&dir.0, &text, workers, &partial, (whole, &want), &what);
        }
    }
}

/// Stages chained onto worker 0 and split in turn every epoch (their partitions' state
/// handed over between workers at each switch) write checkpoints that hold each
/// partition once, wherever it was: a constrained two-stage query stopped halfway
/// resumes on 1 and 2 workers, switching on, with the uninterrupted run's output.
#[test]
fn stages_chained_and_split_in_turn_resume_from_their_checkpoint() {
    let dir = Scratch::fresh("ckpt-chained");
    write_calls_and_texts(&dir.0, 120_000, None);
    let out = dir.0.join("out.csv");
    let query = "SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 6 AND c.start + 6 GROUP BY TUMBLE(c.start, 600), c.dur / 60";
    let plain = keyed_script(&dir.0, 8, query);
    let whole = run(&dir.0, &plain, 2, None, None).expect("uninterrupted run");
    let want = std::fs::read(&out).expect("output");
    assert!(want.len() > 5_000, "too little output to test anything");
    let text = format!("SET max_latency = '50ms';\n{plain}");
    CHAIN_ALTERNATE.with(|c| c.set(Some(1)));
    let alternating = run(&dir.0, &text, 2, None, None).expect("alternating run");
    assert_eq!(alternating, whole, "chained and split in turn");
    assert!(
        std::fs::read(&out).expect("output") == want,
        "the alternating run's output"
    );
    let (taken, partial) = stopped_halfway(&dir.0, &text, "alternating");
    // Resumed at epoch `c + 1`: switching every epoch, and switching every `c + 1`
    // epochs, whose first switch (to split: the run begins chained) comes at the
    // resume epoch itself, recorded only once the resumed run's first window is split.
    let resume = taken.epoch + 1;
    for (workers, every) in [(1, 1), (2, 1), (2, resume)] {
        CHAIN_ALTERNATE.with(|c| c.set(Some(every)));
        let what = format!(
            "resumed on {workers} workers from epoch {}, switching every {every} epochs",
            taken.epoch
        );
        resumes_as_whole(&dir.0, &text, workers, &partial, (whole, &want), &what);
    }
    CHAIN_ALTERNATE.with(|c| c.set(None));
}

/// A function whose state is not kept by key (`count`: rows per partition) cannot be
/// restored with another q: refused by name.
#[test]
fn another_q_is_refused_for_state_not_kept_by_key() {
    let dir = Scratch::fresh("ckpt-count-q");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..50_000u64 {
        calls += &format!("{},{},{},{}\n", i % 97, i % 13, i / 4, i % 600);
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let text = |q: u32| {
        let d = dir.0.display();
        format!(
            "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT * FROM PARALLEL(calls, partitions => {q}, route => caller, apply => count);"
        )
    };
    let ck = dir.0.join("ck");
    run(&dir.0, &text(8), 2, Some(config(&ck, false)), Some(25_000)).expect("stopped run");
    let e = run(&dir.0, &text(16), 2, Some(config(&ck, true)), None)
        .expect_err("count at q = 16 refused");
    let e = e.to_string();
    assert!(
        e.contains("other partition counts") && e.contains("`count`"),
        "{e}"
    );
    // The same q restores.
    run(&dir.0, &text(8), 2, Some(config(&ck, true)), None).expect("count at q = 8");
}

/// Live rescaling: while a query runs, its partition count goes from 8 to 16, then to
/// 3, then one partition moves to another worker; the output is byte for byte the
/// uninterrupted run's, with or without checkpoints asked for.
#[test]
fn live_rescale_keeps_the_output() {
    let dir = Scratch::fresh("live-rescale");
    write_calls_and_texts(&dir.0, 300_000, Some(29_999));
    let out = dir.0.join("out.csv");
    let queries = [
        ("hop", "SELECT window_start, window_end, caller % 40 AS k, count(*) AS n, sum(dur) AS total FROM calls GROUP BY HOP(start, 40, 120), caller % 40"),
        ("left join, aggregated", "SELECT window_end, c.caller, count(*) AS n, count(t.len) AS met, sum(t.len) AS total FROM calls c LEFT JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 2 AND c.start + 2 GROUP BY TUMBLE(c.start, 200), c.caller"),
        ("two stages", "SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 6 AND c.start + 6 GROUP BY TUMBLE(c.start, 600), c.dur / 60"),
    ];
    for (name, query) in queries {
        let text = keyed_script(&dir.0, 8, query);
        let whole = run(&dir.0, &text, 2, None, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = std::fs::read(&out).expect("output");
        for (workers, checkpoints) in [(2, false), (4, true), (1, false)] {
            let checkpoint = checkpoints.then(|| CheckpointConfig {
                dir: dir.0.join("ck-live"),
                interval: Duration::from_millis(50),
                recover: false,
                backend: None,
            });
            rescale_three_times(&dir.0, name, &text, workers, checkpoint, whole, &want);
        }
    }
}

/// Runs the first query of `text` on `workers` (with `checkpoint`), asking in turn for
/// 16 partitions, 3, and a move of partition 1 to the last worker, each once the run
/// has read another 60,000 rows: every request is taken up, and the rows, rejects and
/// late rows are `whole`'s and the output `want`.
fn rescale_three_times(
    dir: &Path,
    name: &str,
    text: &str,
    workers: usize,
    checkpoint: Option<CheckpointConfig>,
    whole: (u64, u64, u64),
    want: &[u8],
) -> braid_exec::session::QueryReport {
    use braid_exec::rescale::{Request, Rescaler};
    let counters = Arc::new(Counters::default());
    let rescaler = Rescaler::new();
    let config = RunConfig {
        workers,
        counters: Some(counters.clone()),
        rescale: Some(rescaler.clone()),
        checkpoint,
        ..RunConfig::default()
    };
    let mut session = Session::new(&Registry::with_builtins(), config);
    session.compile(text, dir).expect("compiles");
    let steps = [
        Request::Partitions(16),
        Request::Partitions(3),
        Request::Move {
            stage: 1,
            partition: 1,
            worker: (workers - 1) as u32,
        },
    ];
    let asker = ask_in_turn(&rescaler, counters, steps.into(), 60_000);
    let report = session
        .run_next()
        .expect("a query")
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    asker.join().expect("asker");
    let done = rescaler.done();
    assert_eq!(rescaler.refused(), Vec::<String>::new(), "{name}");
    assert_eq!(done.len(), 3, "{name} on {workers} workers: {done:?}");
    assert!(done[0].partitions.iter().all(|&q| q == 16), "{name}");
    assert!(done[1].partitions.iter().all(|&q| q == 3), "{name}");
    assert!(done.windows(2).all(|w| w[0].epoch < w[1].epoch), "{done:?}");
    let rejects: u64 = report.run.rejects.iter().map(|r| r.count).sum();
    let late: u64 = report.late.iter().map(|l| l.rows).sum();
    assert_eq!(
        (report.run.rows_in, rejects, late),
        whole,
        "{name}: rows, rejects and late rows"
    );
    let got = std::fs::read(dir.join("out.csv")).expect("output");
    assert!(
        got == want,
        "{name}: rescaled live on {workers} workers ({done:?}): {}",
        first_difference(&got, want)
    );
    report
}

/// Live rescaling under a latency constraint (timely's time in ticks within epochs;
/// the fence holds the inputs at the first tick after the rescale's epoch): a two-stage
/// query goes to 16 partitions, then 3, then a partition moves, and its output is the
/// unconstrained, unrescaled run's.
#[test]
fn live_rescale_under_a_latency_constraint_keeps_the_output() {
    let dir = Scratch::fresh("live-rescale-latency");
    write_calls_and_texts(&dir.0, 300_000, Some(29_999));
    let query = "SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 6 AND c.start + 6 GROUP BY TUMBLE(c.start, 600), c.dur / 60";
    let plain = keyed_script(&dir.0, 8, query);
    let whole = run(&dir.0, &plain, 2, None, None).expect("uninterrupted run");
    let want = std::fs::read(dir.0.join("out.csv")).expect("output");
    let text = format!("SET max_latency = '50ms';\n{plain}");
    for workers in [2, 4] {
        let report = rescale_three_times(
            &dir.0,
            "under the constraint",
            &text,
            workers,
            None,
            whole,
            &want,
        );
        assert!(report.run.latency.is_some(), "the constraint's stamps");
    }
}

/// Automatic rescaling: a costly function whose rows all go to the two partitions of
/// worker 0 (of 4 partitions on 2 workers) keeps that worker busy and the other idle;
/// the run moves one of them to worker 1 on its own, once, and its output is the output
/// of a run that does not.
#[test]
fn a_busy_worker_sheds_a_partition_on_its_own() {
    use braid_exec::rescale::{Auto, Rescaler};
    let dir = Scratch::fresh("auto-rescale");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..120_000u64 {
        // Callers 0 and 2 mod 4: partitions 0 and 2, both on worker 0.
        calls += &format!(
            "{},{},{},{}\n",
            (i % 2) * 2 + 4 * (i % 50),
            i % 13,
            i / 40,
            i
        );
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let d = dir.0.display();
    let text = format!(
        "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT * FROM PARALLEL(calls, partitions => 4, route => caller, apply => spin);"
    );
    let mut registry = Registry::with_builtins();
    registry.add_function("spin", Arc::new(braid_plan::function::Spin(25_000)));
    let sorted = || sorted_lines(&dir.0.join("out.csv"));
    let go = |auto, rescaler| run_on_two(&registry, &text, &dir.0, auto, rescaler);
    go(None, None);
    let want = sorted();
    assert!(want.len() > 500, "too little output to test anything");
    let rescaler = Rescaler::new();
    let report = go(Some(Auto::above(0.3)), Some(rescaler.clone()));
    let done = rescaler.done();
    assert_eq!(rescaler.refused(), Vec::<String>::new());
    assert_eq!(done.len(), 1, "one move evens the load: {done:?}");
    assert_eq!(done[0].partitions, vec![4]);
    assert_eq!(report.run.rescales, done);
    assert_eq!(
        sorted(),
        want,
        "the output of the run that moved a partition"
    );
}

/// The lines of `path`, sorted.
/// Asks for each of `steps` in turn on a thread of its own: step `k` once the run has
/// read `every * (k + 1)` rows and the steps before are done; it gives up at the first
/// refusal (the test then reports it).
fn ask_in_turn(
    rescaler: &braid_exec::rescale::Rescaler,
    counters: Arc<Counters>,
    steps: Vec<braid_exec::rescale::Request>,
    every: u64,
) -> std::thread::JoinHandle<()> {
    let rescaler = rescaler.clone();
    std::thread::spawn(move || {
        for (k, step) in steps.into_iter().enumerate() {
            while counters.rows_in.load(Ordering::Relaxed) < every * (k as u64 + 1)
                || rescaler.done().len() < k
            {
                if !rescaler.refused().is_empty() {
                    return;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            rescaler.request(step);
        }
    })
}

fn sorted_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .expect("output")
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// Runs the first query of script `text` on 2 workers, with `auto` rescaling and
/// `rescaler` if given.
fn run_on_two(
    registry: &Registry,
    text: &str,
    dir: &Path,
    auto: Option<braid_exec::rescale::Auto>,
    rescaler: Option<braid_exec::rescale::Rescaler>,
) -> braid_exec::session::QueryReport {
    let config = RunConfig {
        workers: 2,
        auto_rescale: auto,
        rescale: rescaler,
        ..RunConfig::default()
    };
    let mut session = Session::new(registry, config);
    session.compile(text, dir).expect("compiles");
    session.run_next().expect("a query").expect("runs")
}

/// Spins about 4 µs, then gives its argument back: a costly scalar function.
struct Slow;

impl braid_plan::expr::ScalarUdf for Slow {
    fn return_type(
        &self,
        _args: &[braid_plan::types::DataType],
    ) -> braid_plan::error::Result<braid_plan::types::DataType> {
        Ok(braid_plan::types::DataType::Int64)
    }

    fn call(
        &self,
        args: &[braid_plan::batch::Value<'_>],
    ) -> Result<braid_plan::batch::Scalar, String> {
        let mut x = match args.first() {
            Some(braid_plan::batch::Value::Int(x)) => *x,
            _ => 0,
        };
        let until = std::time::Instant::now() + Duration::from_micros(4);
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x);
        }
        Ok(braid_plan::batch::Scalar::Int(x))
    }
}

/// Every caller of a grouped query hashes to partition 0 of 2: one worker does all the
/// work, and moving its one partition would only move the load. The automatic
/// rescaler doubles the partition count (the callers spread over partitions 0 and 2,
/// both on worker 0), then moves one of them to the idle worker; the output is the
/// output of the run that changed nothing. (One-phase: a two-phase aggregate would
/// spread the callers' rows over both partitions from the start.)
#[test]
fn a_hot_partition_is_split_on_its_own() {
    use braid_exec::rescale::{Auto, Rescaler};
    let dir = Scratch::fresh("auto-split");
    let route =
        |c: i64| braid_plan::expr::hash_values([braid_plan::batch::Value::Int(c)]).rem_euclid(4);
    let callers: Vec<i64> = (0..).filter(|&c| route(c) % 2 == 0).take(40).collect();
    assert!(callers.iter().any(|&c| route(c) == 0) && callers.iter().any(|&c| route(c) == 2));
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..400_000u64 {
        let c = callers[i as usize % callers.len()];
        calls += &format!("{c},{},{},{}\n", i % 13, i / 40, i % 1000);
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let d = dir.0.display();
    let text = format!(
        "SET partitions = 2; SET aggregate = 'one_phase';
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT window_end, caller, count(*) AS n, sum(slow(dur)) AS total
FROM calls GROUP BY TUMBLE(start, 1000), caller;"
    );
    let mut registry = Registry::with_builtins();
    registry.add_scalar("slow", Arc::new(Slow));
    let sorted = || sorted_lines(&dir.0.join("out.csv"));
    let go = |auto, rescaler| run_on_two(&registry, &text, &dir.0, auto, rescaler);
    go(None, None);
    let want = sorted();
    assert!(want.len() > 300, "too little output to test anything");
    let rescaler = Rescaler::new();
    let auto = Auto {
        threshold: 0.3,
        period: Duration::from_millis(100),
        patience: 2,
    };
    let report = go(Some(auto), Some(rescaler.clone()));
    let done = rescaler.done();
    eprintln!("automatic rescales: {done:?}");
    assert_eq!(rescaler.refused(), Vec::<String>::new());
    assert!(
        done.len() >= 2 && done[0].partitions == vec![4],
        "a split to 4 partitions, then a move: {done:?}"
    );
    assert_eq!(report.run.rescales, done);
    assert_eq!(
        sorted(),
        want,
        "the output of the run that split a partition"
    );
}

/// A file of late rows is not cut back to a checkpoint: a run with checkpoints refuses
/// `late_path` by name instead of losing or repeating rows in it.
#[test]
fn late_path_is_refused_with_checkpoints() {
    let dir = Scratch::fresh("late-ck");
    write_calls_and_texts(&dir.0, 1_000, None);
    let d = dir.0.display();
    let text = format!(
        "SET late_path = '{d}/late.csv';\n{}",
        keyed_script(&dir.0, 4, "SELECT window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 100), caller")
    );
    let e = run(
        &dir.0,
        &text,
        2,
        Some(config(&dir.0.join("ck"), false)),
        None,
    )
    .expect_err("late_path refused");
    assert!(e.to_string().contains("late_path"), "{e}");
    // Without checkpoints it runs, and counts what it writes.
    let (_, _, late) = run(&dir.0, &text, 2, None, None).expect("runs");
    assert!(late > 0);
}

/// A binary batch file resumes at the window the checkpoint left it at (its byte
/// offset, windows and rows before), not from its start: the resumed output is the
/// uninterrupted run's, and the rows read are counted whole.
#[test]
fn a_binary_file_resumes_where_the_checkpoint_left_it() {
    use braid_plan::types::{DataType, Field, Schema};
    let dir = Scratch::fresh("ckpt-bin");
    write_calls_and_texts(&dir.0, 200_000, None);
    let schema = Schema::new(vec![
        Field::new("caller", DataType::Int64),
        Field::nullable("callee", DataType::Int64),
        Field::new("start", DataType::Int64),
        Field::nullable("dur", DataType::Int64),
    ])
    .with_event_time("start")
    .expect("event time");
    let source = braid_plan::plan::Source {
        name: "calls".into(),
        spec: braid_plan::plan::SourceSpec::Csv {
            path: dir.0.join("calls.csv"),
            header: true,
        },
        schema,
        epoch: 10,
        window: 1024,
        pace: braid_plan::plan::Pace::Max,
        out_of_order: true,
        shed: None,
    };
    let bin = dir.0.join("calls.bin");
    braid_exec::source::binary::convert(
        &source,
        &bin,
        &braid_exec::source::ReadOptions::default(),
        &Registry::with_builtins(),
    )
    .expect("converted");
    let d = dir.0.display();
    let text = format!(
        "SET partitions = 8;
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (source = 'binary', path = '{d}/calls.bin', event_time = 'start', epoch = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT window_end, caller % 50 AS k, count(*) AS n, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 100), caller % 50;"
    );
    let out = dir.0.join("out.csv");
    let whole = run(&dir.0, &text, 2, None, None).expect("uninterrupted run");
    let want = std::fs::read(&out).expect("output");
    let ck = dir.0.join("ck");
    run(&dir.0, &text, 2, Some(config(&ck, false)), Some(100_000)).expect("stopped run");
    let kept = walk(&ck).into_iter().any(|p| p.ends_with("source-0.bin"));
    assert!(kept, "no source position in the checkpoint");
    let resumed = run(&dir.0, &text, 4, Some(config(&ck, true)), None).expect("resumed run");
    assert_eq!(resumed, whole, "rows read, malformed lines, late rows");
    assert!(
        std::fs::read(&out).expect("output") == want,
        "the resumed output differs"
    );
}

/// The worker threads of a running query change: 2, then 4, then 1 (every partition
/// placed anew), then its partition count too; the output is the uninterrupted run's,
/// and so are the rows, malformed lines and late rows it reports.
#[test]
fn a_running_query_changes_its_worker_threads() {
    use braid_exec::rescale::{Request, Rescaler};
    let dir = Scratch::fresh("live-threads");
    write_calls_and_texts(&dir.0, 300_000, Some(29_999));
    let out = dir.0.join("out.csv");
    let query = "SELECT window_end, c.caller, count(*) AS n, count(t.len) AS met, sum(t.len) AS total FROM calls c LEFT JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 2 AND c.start + 2 GROUP BY TUMBLE(c.start, 200), c.caller";
    let text = keyed_script(&dir.0, 8, query);
    let whole = run(&dir.0, &text, 2, None, None).expect("uninterrupted run");
    let want = std::fs::read(&out).expect("output");
    let counters = Arc::new(Counters::default());
    let rescaler = Rescaler::new();
    let config = RunConfig {
        workers: 2,
        counters: Some(counters.clone()),
        rescale: Some(rescaler.clone()),
        ..RunConfig::default()
    };
    let mut session = Session::new(&Registry::with_builtins(), config);
    session.compile(&text, &dir.0).expect("compiles");
    let steps = [
        Request::Workers(4),
        Request::Workers(1),
        Request::Partitions(5),
        Request::Workers(3),
    ];
    let asker = ask_in_turn(&rescaler, counters, steps.into(), 50_000);
    let report = session.run_next().expect("a query").expect("runs");
    asker.join().expect("asker");
    let done = rescaler.done();
    eprintln!("rescales: {done:?}");
    assert_eq!(rescaler.refused(), Vec::<String>::new());
    assert_eq!(done.len(), 4, "{done:?}");
    assert!(done[2].partitions.iter().all(|&q| q == 5), "{done:?}");
    let threads: Vec<usize> = done.iter().map(|d| d.workers).collect();
    assert_eq!(threads, vec![4, 1, 1, 3], "{done:?}");
    let rejects: u64 = report.run.rejects.iter().map(|r| r.count).sum();
    let late: u64 = report.late.iter().map(|l| l.rows).sum();
    assert_eq!(
        (report.run.rows_in, rejects, late),
        whole,
        "rows, rejects, late rows"
    );
    let got = std::fs::read(&out).expect("output");
    assert!(
        got == want,
        "threads changed live ({done:?}): {} bytes, the uninterrupted run {}",
        got.len(),
        want.len()
    );
}

/// A stream of several files without an event time is read a whole file per worker
/// (rows numbered by file). Checkpointed on 2 workers and stopped halfway, it resumes
/// on 1, 2, 3 and 4 workers (files then read by other workers than before: worker 0
/// resumes the files it read from their places, every other file is read again from its
/// start and the epochs already in the checkpoint are dropped) with the output of the
/// uninterrupted run on 1 worker, and the same rows and malformed lines reported.
#[test]
fn files_read_a_file_per_worker_resume_on_other_worker_counts() {
    let dir = Scratch::fresh("ckpt-files");
    let logs = dir.0.join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    // Five files of different lengths (one empty), malformed lines in two of them.
    for (f, rows) in [
        (0u64, 90_000u64),
        (1, 40_000),
        (2, 0),
        (3, 120_000),
        (4, 65_000),
    ] {
        let mut text = String::new();
        for i in 0..rows {
            let x = (i + 7 * f).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 35;
            text += &format!("{},{}\n", x % 1_000, i);
            if f % 2 == 1 && i % 7_919 == 3 {
                text += "oops,\n";
            }
        }
        std::fs::write(logs.join(format!("part-{f}.csv")), text).expect("file");
    }
    let d = dir.0.display();
    let text = format!(
        "SET partitions = 6;
CREATE STREAM logs (x BIGINT NOT NULL, i BIGINT NOT NULL)
  WITH (path = '{d}/logs/*.csv', header = false, epoch = 50);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT i, x FROM logs WHERE x % 17 = 3;"
    );
    let out = dir.0.join("out.csv");
    let whole = run(&dir.0, &text, 1, None, None).expect("uninterrupted run");
    assert_eq!(
        (whole.0, whole.1),
        (315_000, 6 + 16),
        "rows and malformed lines"
    );
    let want = std::fs::read(&out).expect("output");
    assert!(want.len() > 100_000, "too little output to test anything");
    let two = run(&dir.0, &text, 2, None, None).expect("run on 2 workers");
    assert_eq!(two, whole);
    assert!(
        std::fs::read(&out).expect("output") == want,
        "2 workers differ"
    );

    let ck = dir.0.join("ck");
    run(&dir.0, &text, 2, Some(config(&ck, false)), Some(150_000)).expect("stopped run");
    let taken = latest(&ck.join("query-0"))
        .expect("manifest")
        .expect("a checkpoint");
    assert!(taken.epoch > 0);
    assert!(walk(&ck).into_iter().any(|p| p.ends_with("source-0.bin")));
    let partial = std::fs::read(&out).expect("partial output");
    assert!(partial.len() < want.len());
    for workers in [1, 2, 3, 4] {
        let at = dir.0.join(format!("ck-{workers}"));
        copy_checkpoint(&ck, &at);
        std::fs::write(&out, &partial).expect("partial output back");
        let resumed =
            run(&dir.0, &text, workers, Some(config(&at, true)), None).expect("resumed run");
        assert_eq!(
            resumed, whole,
            "{workers} workers: rows read, malformed lines"
        );
        let got = std::fs::read(&out).expect("output");
        assert!(
            got == want,
            "resumed on {workers} workers from epoch {}: {}",
            taken.epoch,
            first_difference(&got, &want)
        );
    }
}

/// A worker's checkpoint barriers may still be open after its rows' input has ended
/// (their frontier trails the rows' across workers): a `Map` finishes only once both
/// have ended, after the epochs still waiting for a barrier, or their windows were
/// closed at the end of the input, a second time (an intermittent failure of the test
/// above, made certain here by holding the barriers open).
#[test]
fn a_map_finishes_after_the_barriers_end() {
    let dir = Scratch::fresh("ckpt-linger");
    write_scrambled_calls(&dir.0, 40_000);
    let text = script(&dir.0, 8, 50);
    let out = dir.0.join("out.csv");
    run(&dir.0, &text, 1, None, None).expect("a run without checkpoints");
    let want = std::fs::read(&out).expect("output");
    assert_eq!(want.iter().filter(|&&b| b == b'\n').count(), 5_000);
    for workers in [1, 2, 4] {
        let _ = std::fs::remove_dir_all(dir.0.join("ck"));
        let config = RunConfig {
            workers,
            checkpoint: Some(CheckpointConfig {
                dir: dir.0.join("ck"),
                interval: Duration::from_millis(1),
                recover: false,
                backend: None,
            }),
            barriers_linger: Some(Duration::from_millis(100)),
            ..RunConfig::default()
        };
        let mut session = Session::new(&Registry::with_builtins(), config);
        session.compile(&text, &dir.0).expect("compiles");
        session.run_next().expect("a query").expect("runs");
        let got = std::fs::read(&out).expect("output");
        assert!(
            got == want,
            "{workers} workers: {}",
            first_difference(&got, &want)
        );
    }
}
