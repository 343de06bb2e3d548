//! Stopping a query early: a [`braid_exec::cancel::Cancel`] called from another thread
//! ends the running query promptly with a prefix of its output, and `LIMIT n` writes
//! exactly the first `n` rows of the serial run, then stops reading (1, 2, 4 workers).

use braid_exec::runtime::RunConfig;
use braid_exec::session::{QueryState, Session};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use std::path::Path;
use std::time::{Duration, Instant};

fn session(workers: usize) -> Session {
    Session::new(
        &Registry::with_builtins(),
        RunConfig {
            workers,
            ..RunConfig::default()
        },
    )
}

/// Runs `query` (writing to the collect sink `out`) over the generator stream `gen`
/// declared with `with`; returns the report's rows, `rows_in` and whether it was
/// cancelled.
fn collect(workers: usize, with: &str, query: &str) -> (Vec<Vec<Scalar>>, u64, bool) {
    let mut s = session(workers);
    let text = format!(
        "CREATE STREAM gen WITH (source = 'generator', {with});\n\
         CREATE SINK out WITH (sink = 'collect');\n{query}"
    );
    s.compile(&text, Path::new(".")).expect("compiles");
    let r = s.run_next().expect("a query").expect("runs");
    assert_eq!(r.run.rows_out as usize, r.run.collected.len());
    let rows = r.run.collected.into_iter().map(|r| r.values).collect();
    (rows, r.run.rows_in, r.run.cancelled)
}

#[test]
fn a_query_cancelled_from_another_thread_ends_promptly_with_a_prefix_of_its_output() {
    // The serial output of the first 5000 tuples: the reference for every prefix.
    let (full, _, _) = collect(
        1,
        "tuples = 5000, rate = 2000",
        "INSERT INTO out SELECT vid, time, xway FROM gen;",
    );
    assert_eq!(full.len(), 5000);
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        // Paced at 2000 tuples per second of a stream that would last 100 000 seconds.
        s.compile(
            "CREATE STREAM gen WITH (source = 'generator', tuples = 200000000, rate = 2000, speed = 1);
             CREATE SINK out WITH (sink = 'collect');
             INSERT INTO out SELECT vid, time, xway FROM gen;
             INSERT INTO out SELECT vid, time, xway FROM gen LIMIT 3;
             INSERT INTO out SELECT xway, count(*) AS n FROM gen GROUP BY xway;",
            Path::new("."),
        )
        .expect("compiles");
        let r = cancelled_run(&mut s, workers, Duration::from_millis(700));
        let got: Vec<Vec<Scalar>> = r.run.collected.into_iter().map(|r| r.values).collect();
        assert_eq!(got.len() as u64, r.run.rows_out);
        assert!(
            !got.is_empty() && got.len() < full.len(),
            "{workers} workers: {} rows",
            got.len()
        );
        assert_eq!(got, full[..got.len()], "{workers} workers: not a prefix");
        let rows = got.len() as u64;
        assert_eq!(s.query_states()[0].2, QueryState::Cancelled { rows });
        // The handle stays; the next query is not cancelled by the last one's cancel.
        let r = s.run_next().expect("a second query").expect("runs");
        assert!(!r.run.cancelled);
        let got: Vec<Vec<Scalar>> = r.run.collected.into_iter().map(|r| r.values).collect();
        assert_eq!(got, full[..3]);
        assert_eq!(s.query_states()[1].2, QueryState::Done { rows: 3 });
        // An aggregate over the whole input has no row before its end: cancelled, it
        // writes none (not the counts of the input read so far).
        let r = cancelled_run(&mut s, workers, Duration::from_millis(700));
        assert_eq!(r.run.collected.len(), 0, "{workers} workers");
        assert!(r.run.rows_in > 0);
    }
}

/// Runs the session's next query, cancelling it from another thread after `wait`;
/// checks that it stopped within 3 s of the cancel.
fn cancelled_run(
    s: &mut Session,
    workers: usize,
    wait: Duration,
) -> braid_exec::session::QueryReport {
    let cancel = s.cancel_handle();
    let t = std::thread::spawn(move || {
        std::thread::sleep(wait);
        cancel.cancel();
        Instant::now()
    });
    let r = s.run_next().expect("a query").expect("runs");
    let stopped = Instant::now();
    let cancelled_at = t.join().expect("canceller");
    assert!(r.run.cancelled, "{workers} workers");
    let lag = stopped.duration_since(cancelled_at);
    assert!(
        lag < Duration::from_secs(3),
        "{workers} workers: took {lag:?} to stop"
    );
    r
}

#[test]
fn limit_writes_the_first_rows_of_the_serial_run_and_stops_reading() {
    let with = "tuples = 2000000, rate = 1000";
    let queries = [
        // Stateless: rows in input order.
        "SELECT vid, time, spd FROM gen WHERE spd > 50",
        // Windows closing per epoch, each epoch's rows in the merge's order.
        "SELECT window_end, xway, count(*) AS n, max(spd) AS top FROM gen GROUP BY TUMBLE(time, 7), xway",
    ];
    for q in queries {
        // Not the whole run: 200 000 tuples, far more than the limits need.
        let (full, _, _) = collect(
            1,
            "tuples = 200000, rate = 1000",
            &format!("INSERT INTO out {q};"),
        );
        assert!(full.len() > 100, "{q}: {} rows", full.len());
        for n in [0, 1, 7, full.len() / 2] {
            for workers in [1, 2, 4] {
                let (got, rows_in, cancelled) =
                    collect(workers, with, &format!("INSERT INTO out {q} LIMIT {n};"));
                assert!(!cancelled);
                assert_eq!(got, full[..n], "{q} LIMIT {n} on {workers} workers");
                // It stopped reading long before the end of its 2 M tuples.
                assert!(rows_in < 1_000_000, "{q} LIMIT {n}: read {rows_in} rows");
            }
        }
        // A limit the output never reaches: the whole output, not cut short.
        let (got, _, _) = collect(
            2,
            "tuples = 200000, rate = 1000",
            &format!("INSERT INTO out {q} LIMIT {};", full.len() + 1),
        );
        assert_eq!(got, full, "{q}");
    }
}

/// A cancel that comes while `SET window = 'auto'` is still measuring stops the trials
/// at once (the search keeps W = 64, its first) and the query's run with them.
#[test]
fn a_cancel_during_the_window_trials_stops_them_and_the_run() {
    let mut s = session(2);
    s.compile(
        "SET window = 'auto';\n\
         CREATE STREAM gen WITH (source = 'generator', tuples = 50000000, rate = 1000000);\n\
         CREATE SINK out WITH (sink = 'discard');\n\
         INSERT INTO out SELECT window_end, xway, count(*) AS n FROM gen GROUP BY TUMBLE(time, 7), xway;",
        Path::new("."),
    )
    .expect("compiles");
    // The cancel comes during the second of the three trials at W = 64 (each runs
    // 300 ms at most); without it the search would go on to W = 128 and beyond.
    let r = cancelled_run(&mut s, 2, Duration::from_millis(500));
    let t = r.window.expect("a window search");
    assert_eq!(t.chosen, 64, "{t:?}");
    assert_eq!(t.measured.len(), 1, "{t:?}");
    assert!(t.measured[0].1.is_nan(), "{t:?}");
}

/// A file of 50,000,000 rows of one BIGINT column `k` (100 MB): read whole, one run
/// of the splitter probe took about 1 s on the machine this was written on (the tests'
/// optimized build), a query over it about 2 s.
fn big_file(tag: &str) -> (crate::sql::Dir, std::path::PathBuf) {
    let dir = crate::sql::scratch(tag);
    let path = dir.0.join("big.csv");
    let mut text = String::from("k\n");
    text.push_str(&"1\n2\n3\n4\n5\n6\n7\n8\n".repeat(6_250_000));
    std::fs::write(&path, text).expect("writes the file");
    (dir, path)
}

/// Compiles, after `settings`, a count by `k` over [`big_file`] at `path`.
fn count_by_k(s: &mut Session, settings: &str, path: &Path) {
    s.compile(
        &format!(
            "{settings}CREATE STREAM t (k BIGINT) WITH (path = '{}');\n\
             CREATE SINK out WITH (sink = 'discard');\n\
             INSERT INTO out SELECT k, count(*) AS n FROM t GROUP BY k;",
            path.display()
        ),
        Path::new("."),
    )
    .expect("compiles");
}

/// Runs the session's next query, cancelling it 200 ms after it starts; checks that
/// it was cancelled and stopped within 1.5 s of the cancel (what it measures before it
/// runs stops too).
fn cancelled_early(s: &mut Session) {
    let cancel = s.cancel_handle();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        cancel.cancel();
        Instant::now()
    });
    let r = s.run_next().expect("a query").expect("runs");
    let lag = Instant::now().duration_since(t.join().expect("canceller"));
    assert!(r.run.cancelled);
    assert!(lag < Duration::from_millis(1500), "took {lag:?} to stop");
}

/// A cancel that comes while `SET desired_rate` measures one splitter's rate (before the
/// run) stops the measuring and the run: each probe run reads a file for at most 300 ms
/// and stops at a cancel, rather than reading the whole file three times (as it did:
/// about 3 s after the cancel on [`big_file`]).
#[test]
fn a_cancel_while_the_splitter_rate_is_measured_stops_it_and_the_run() {
    let (_dir, path) = big_file("cancel-probe");
    let mut s = session(2);
    count_by_k(&mut s, "SET desired_rate = 100000000;\n", &path);
    cancelled_early(&mut s);
}

/// So does a cancel during the calibration run (`--calibrate`, placing partitions by
/// measured cost), which would otherwise read all the rows it was given first.
#[test]
fn a_cancel_during_the_calibration_run_stops_it_and_the_run() {
    let (_dir, path) = big_file("cancel-calibrate");
    let mut s = session(2);
    s.set_calibration(Some(50_000_000));
    count_by_k(&mut s, "", &path);
    cancelled_early(&mut s);
}
