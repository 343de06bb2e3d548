//! The library session as an embedding program uses it: statements compiled as they
//! come, queries run in order, a query over `LATE(sink)` run inside the job of the query
//! writing to `sink`, reports returned as data, and refusals that leave the session as
//! it was.

use crate::sql::sorted_ints;
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_plan::function::Registry;
use std::path::{Path, PathBuf};

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Calls at start 0, 10, ..., 190 (caller = start / 10 % 3), then two calls at start 5,
/// far behind the lateness of 20: a tumbling window refuses both.
fn calls(tag: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("braid-session-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let mut text = String::from("caller,start,dur\n");
    for i in 0..20 {
        text += &format!("{},{},{}\n", i % 3, i * 10, i);
    }
    text += "7,5,100\n8,5,200\n";
    std::fs::write(dir.join("calls.csv"), text).expect("calls");
    Dir(dir)
}

const DECLARE: &str = "
CREATE STREAM calls (caller BIGINT, start BIGINT, dur BIGINT)
  WITH (path = 'calls.csv', header = true, event_time = 'start', epoch = 10, lateness = 20);
CREATE SINK counts WITH (sink = 'collect');
CREATE SINK refused WITH (sink = 'collect');
SET partitions = 4;
";

const COUNTS: &str =
    "INSERT INTO counts SELECT window_end, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50);";

/// `COUNTS`' rows (sorted) over the streams `declare` declares, run on one worker.
fn counts_on_one_worker(declare: &str, dir: &Path) -> Vec<Vec<i64>> {
    let mut s = session(1);
    s.compile(declare, dir).expect("declarations");
    s.compile(COUNTS, dir).expect("query");
    let r = s.run_pending().expect("runs");
    sorted_ints(&r[0].run.collected)
}

fn session(workers: usize) -> Session {
    session_with(RunConfig {
        workers,
        ..RunConfig::default()
    })
}

/// A session with the built-in functions, run as `config` says.
fn session_with(config: RunConfig) -> Session {
    Session::new(&Registry::with_builtins(), config)
}

#[test]
fn a_session_runs_queries_and_their_late_readers_in_one_job() {
    let dir = calls("late");
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        s.compile(DECLARE, &dir.0).expect("declarations");
        let added = s
            .compile(
                &format!("{COUNTS}\nINSERT INTO refused SELECT caller, dur FROM LATE(counts);"),
                &dir.0,
            )
            .expect("queries");
        assert_eq!(added, vec![0, 1]);
        let reports = s.run_pending().expect("runs");
        // One job: the reader ran in the dataflow of the query it reads.
        assert_eq!(reports.len(), 1, "{workers} workers");
        let r = &reports[0];
        assert_eq!(r.query, 0);
        assert_eq!(r.run.rows_in, 22);
        // Windows [0, 50) .. [150, 200): 5 calls each; the two calls at 5 are late.
        assert_eq!(
            sorted_ints(&r.run.collected),
            vec![vec![50, 5], vec![100, 5], vec![150, 5], vec![200, 5]]
        );
        assert_eq!(
            sorted_ints(&r.run.collected_late[0]),
            vec![vec![7, 100], vec![8, 200]]
        );
        assert_eq!(r.late.len(), 1);
        assert_eq!(r.late[0].query, 0);
        assert_eq!(r.late[0].rows, 2);
        assert!(r.late[0].read_as_stream && r.late[0].shared_job);
        assert!(s.run_pending().expect("nothing left").is_empty());
    }
}

#[test]
fn a_late_reader_after_its_query_ran_is_refused_and_nothing_changes() {
    let dir = calls("refused");
    let mut s = session(2);
    s.compile(DECLARE, &dir.0).expect("declarations");
    s.compile(COUNTS, &dir.0).expect("query");
    assert_eq!(s.run_pending().expect("runs").len(), 1);
    let plan_before = format!("{:?}", s.script().jobs[0].plan);
    let e = s
        .compile("INSERT INTO refused SELECT * FROM LATE(counts);", &dir.0)
        .expect_err("its late rows are gone");
    assert!(e.to_string().contains("query 1 has already run"), "{e}");
    assert_eq!(s.script().jobs.len(), 1);
    assert_eq!(format!("{:?}", s.script().jobs[0].plan), plan_before);
    assert!(s.run_pending().expect("nothing to run").is_empty());
}

#[test]
fn explain_keeps_no_query_and_a_file_error_names_the_file() {
    let dir = calls("explain");
    let mut s = session(2);
    s.compile(DECLARE, &dir.0).expect("declarations");
    let text = s
        .explain_statements(COUNTS, &dir.0, false)
        .expect("explains");
    assert!(text.contains("== physical plan =="), "{text}");
    assert!(text.contains("Aggregate window=TUMBLE(50)"), "{text}");
    assert!(s.script().jobs.is_empty());
    assert!(s.run_pending().expect("nothing to run").is_empty());
    let bad = dir.0.join("bad.sql");
    std::fs::write(
        &bad,
        "CREATE STREAM s (a BIGINT) WITH (path = 'x.csv');\nSELECT nope FROM s;\n",
    )
    .expect("script");
    let e = s.compile_file(&bad).expect_err("no column nope");
    let text = e.to_string();
    assert!(text.starts_with(&format!("{}: ", bad.display())), "{text}");
    assert!(
        text.contains("line 2") && text.contains("no column `nope`"),
        "{text}"
    );
    let _ = Path::new(&dir.0);
}

/// Paper V's rates from SQL: `SET desired_rate` makes the split that reads the stream
/// keep up with it (eq. 6: parasplit with p from one splitter's rate, which the session
/// measures when `SET splitter_rate` does not give it); EXPLAIN says which and with
/// what rates; the results are those of the query without the setting. A later stage's
/// split keeps no rate; a splitter rate alone is refused.
#[test]
fn a_desired_rate_in_sql_chooses_the_split_that_keeps_up() {
    let dir = calls("rate");
    let reference = counts_on_one_worker(DECLARE, &dir.0);
    for workers in [1, 2] {
        // No rate: the least work. A desired rate far above what one splitter does:
        // the fastest shape (on 2 workers parasplit, with as many splitters as eq. 6
        // allows).
        let mut s = session(workers);
        s.compile(DECLARE, &dir.0).expect("declarations");
        let plain = s
            .explain_statements(COUNTS, &dir.0, false)
            .expect("explain");
        let first = |text: &str| {
            text.lines()
                .rfind(|l| l.contains("autosplit chose"))
                .expect("an autosplit line")
                .to_string()
        };
        assert!(first(&plain).contains("no desired rate"), "{plain}");
        s.compile("SET desired_rate = '1e12';", &dir.0)
            .expect("set");
        let fast = s
            .explain_statements(COUNTS, &dir.0, false)
            .expect("explain");
        let line = first(&fast);
        assert!(
            line.contains("none keeps up with 1000000000000 rows/s (one splitter: "),
            "{line}"
        );
        // The split's costs were measured on the file's rows (all 22 of them; the
        // query has no broadcast): the line before the reason says so.
        let costs = fast
            .lines()
            .rfind(|l| l.contains("costs measured"))
            .unwrap_or_else(|| panic!("no measured costs: {fast}"));
        assert!(
            costs.contains(
                "costs measured on the input's first 22 rows: b = 0, a = cc / (cp + ce) = "
            ),
            "{costs}"
        );
        match workers {
            // One thread splits whatever the shape: the least work, one splitter.
            1 => assert!(line.contains("chose fsplit"), "{line}"),
            _ => {
                let p: u32 = line
                    .split("chose parasplit p = ")
                    .nth(1)
                    .and_then(|t| t.split(' ').next())
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_else(|| panic!("parasplit: {line}"));
                // Eq. 6 asks for millions; no more than the 4 partitions.
                assert_eq!(p, 4, "{line}");
            }
        }
        // Only the split over the source has a rate (the first autosplit line is the
        // last stage's, between stages).
        let lines: Vec<&str> = fast
            .lines()
            .filter(|l| l.contains("autosplit chose"))
            .collect();
        assert!(
            lines[..lines.len() - 1]
                .iter()
                .all(|l| l.contains("no desired rate")),
            "{fast}"
        );
        // Given, the splitter's rate is taken as it is: 1 row/s per splitter and a
        // desired 1e12 ask for the most splitters eq. 6 gives.
        s.compile("SET splitter_rate = 1000;", &dir.0).expect("set");
        let given = s
            .explain_statements(COUNTS, &dir.0, false)
            .expect("explain");
        assert!(
            first(&given).contains("(one splitter: 1000 rows/s)"),
            "{given}"
        );
        // The query runs with it, to the same results.
        s.compile("SET splitter_rate = 'off';", &dir.0)
            .expect("set");
        s.compile(COUNTS, &dir.0).expect("query");
        let r = s.run_pending().expect("runs");
        assert_eq!(
            sorted_ints(&r[0].run.collected),
            reference,
            "{workers} workers"
        );
    }
    // On several processes each would measure its own rate (and choose its own p):
    // refused by name without the splitter rate.
    let mut s = session_with(RunConfig {
        workers: 1,
        processes: 2,
        ..RunConfig::default()
    });
    s.compile(DECLARE, &dir.0).expect("declarations");
    s.compile("SET desired_rate = 1000000;", &dir.0)
        .expect("set");
    let e = s
        .explain_statements(COUNTS, &dir.0, false)
        .expect_err("each process would measure its own");
    assert!(
        e.to_string()
            .contains("SET desired_rate on several processes needs SET splitter_rate"),
        "{e}"
    );
    let mut s = session(2);
    s.compile(DECLARE, &dir.0).expect("declarations");
    let e = s
        .compile(&format!("SET splitter_rate = 1000;\n{COUNTS}"), &dir.0)
        .expect_err("a splitter rate alone");
    assert!(
        e.to_string()
            .contains("SET splitter_rate serves SET desired_rate"),
        "{e}"
    );
    let e = s
        .compile("SET desired_rate = 'fast';", &dir.0)
        .expect_err("not a rate");
    assert!(
        e.to_string()
            .contains("expected a positive number of rows per second"),
        "{e}"
    );
}

/// `SET window = 'auto'` (Paper V's W by doubling): trial runs measure the query at
/// W = 64, 128, ... and keep the last W whose doubling gained at least 0.15 %; the query
/// then runs (and EXPLAIN shows it) at that W, to the results it has at its declared W.
/// Refused with checkpoints and in the server (a live stream is read once).
#[test]
fn a_window_by_doubling_is_measured_and_run_with() {
    let dir = calls("window");
    // The declared window, 3 rows, is never one the doubling can choose.
    let declare = DECLARE.replace("lateness = 20)", "lateness = 20, window = 3)");
    let reference = counts_on_one_worker(&declare, &dir.0);
    for workers in [1, 2] {
        let mut s = session(workers);
        s.compile(&declare, &dir.0).expect("declarations");
        s.compile("SET window = 'auto';", &dir.0).expect("set");
        let text = s
            .explain_statements(COUNTS, &dir.0, false)
            .expect("explain");
        let shown: usize = text
            .lines()
            .find_map(|l| l.split("physical window W = ").nth(1))
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(text.contains("-- W by doubling (Paper V"), "{text}");
        assert!(text.contains(&format!("chosen W = {shown}")), "{text}");
        s.compile(COUNTS, &dir.0).expect("query");
        let r = s.run_pending().expect("runs");
        let t = r[0].window.as_ref().expect("a window tuned");
        let ws: Vec<usize> = t.measured.iter().map(|m| m.0).collect();
        assert_eq!(ws[0], 64, "{t:?}");
        assert!(ws.windows(2).all(|p| p[1] == 2 * p[0]), "{t:?}");
        // Every doubling up to the chosen W gained at least 0.15 %; the one after it
        // (if any was tried) did not.
        let at = ws
            .iter()
            .position(|&w| w == t.chosen)
            .expect("chosen was measured");
        let gain = |k: usize| t.measured[k].1 / t.measured[k - 1].1 - 1.0;
        assert!((1..=at).all(|k| gain(k) >= 0.0015), "{t:?}");
        if at + 1 < ws.len() {
            assert!(gain(at + 1) < 0.0015, "{t:?}");
        }
        assert_eq!(
            sorted_ints(&r[0].run.collected),
            reference,
            "{workers} workers"
        );
    }
    // With checkpoints a resumed run must read the checkpoint's W: refused.
    let mut s = session_with(RunConfig {
        checkpoint: Some(braid_exec::checkpoint::CheckpointConfig {
            dir: dir.0.join("checkpoints"),
            interval: std::time::Duration::from_secs(1),
            recover: false,
            backend: None,
        }),
        ..RunConfig::default()
    });
    s.compile(&declare, &dir.0).expect("declarations");
    s.compile(&format!("SET window = 'auto';\n{COUNTS}"), &dir.0)
        .expect("compiles");
    let e = s.run_pending().expect_err("refused");
    assert!(
        e.to_string()
            .contains("SET window = 'auto' with checkpoints"),
        "{e}"
    );
    let e = s
        .compile("SET window = 'big';", &dir.0)
        .expect_err("not a window");
    assert!(e.to_string().contains("expected 'auto'"), "{e}");
}
