//! The live session: streams that live in Braid, queries installed and dropped while
//! others run, subscribers, and time that moves when data does not. Expected rows are
//! computed here from the inserted values (by hand or by a plain Rust loop), not by
//! Braid's operators; each test runs on 1, 2 and 4 workers.

use braid_exec::live::{LiveSession, Outcome, Subscription};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use std::time::{Duration, Instant};

pub(crate) fn session(workers: usize) -> LiveSession {
    LiveSession::new(
        &Registry::with_builtins(),
        workers,
        None,
        std::path::Path::new("."),
    )
    .unwrap()
}

/// Runs `text`, which must succeed; returns its outcomes.
fn run(s: &mut LiveSession, text: &str) -> Vec<Outcome> {
    s.execute(text)
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{text}: {e}")))
        .collect()
}

pub(crate) fn subscription(s: &mut LiveSession, text: &str) -> Subscription {
    match run(s, text).pop() {
        Some(Outcome::Rows(sub, _)) => sub,
        _ => panic!("{text}: no rows outcome"),
    }
}

/// The error `text` gives, which must fail.
fn refused(s: &mut LiveSession, text: &str) -> braid_exec::error::Error {
    s.execute(text)
        .into_iter()
        .find_map(|r| r.err())
        .unwrap_or_else(|| panic!("{text}: not refused"))
}

/// A subscriber to `calls` with `caller = 3` gets exactly its rows of `n` inserted.
fn caller_3_gets_its_rows(s: &mut LiveSession, n: i64) {
    let mut sub = subscription(s, "SELECT caller, dur, start FROM calls WHERE caller = 3");
    let rows = calls(n);
    run(s, &format!("INSERT INTO calls VALUES {}", values(&rows)));
    let want: Vec<Vec<i64>> = rows
        .iter()
        .filter(|r| r.0 == 3)
        .map(|&(a, b, c)| vec![a, b, c])
        .collect();
    assert_eq!(read(&mut sub, want.len(), Duration::from_secs(10)), want);
}

/// The lines of the listing `text` gives (EXPLAIN, SHOW).
fn listing(s: &mut LiveSession, text: &str) -> Vec<String> {
    match run(s, text).pop() {
        Some(Outcome::Listing(l)) => l.rows.into_iter().map(|r| r.join("")).collect(),
        _ => panic!("{text}: no listing"),
    }
}

fn int(v: &Scalar) -> i64 {
    match v {
        Scalar::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

/// Reads `sub` until it has `n` rows (or `timeout` passes); the rows as ints.
fn read(sub: &mut Subscription, n: usize, timeout: Duration) -> Vec<Vec<i64>> {
    let start = Instant::now();
    let mut rows = Vec::new();
    while rows.len() < n && start.elapsed() < timeout {
        match sub.try_next() {
            Ok(b) => rows.extend(
                b.rows()
                    .map(|r| r.to_scalars().iter().map(int).collect::<Vec<_>>()),
            ),
            Err(true) => break,
            Err(false) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    rows
}

fn values(rows: &[(i64, i64, i64)]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|(a, b, c)| format!("({a}, {b}, {c})"))
        .collect();
    v.join(", ")
}

/// Calls: (caller, dur, start).
fn calls(n: i64) -> Vec<(i64, i64, i64)> {
    (0..n).map(|i| (i % 7, (i * 37) % 200, i * 3)).collect()
}

#[test]
fn three_subscribers_with_their_own_filters_get_exactly_their_rows() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        run(&mut s, "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')");
        let mut subs: Vec<Subscription> = [0, 3, 5]
            .iter()
            .map(|k| {
                subscription(
                    &mut s,
                    &format!("SELECT caller, dur, start FROM calls WHERE caller = {k}"),
                )
            })
            .collect();
        let rows = calls(300);
        // In three inserts, so the queries see the stream grow while they run.
        for part in rows.chunks(100) {
            run(
                &mut s,
                &format!("INSERT INTO calls VALUES {}", values(part)),
            );
        }
        for (sub, k) in subs.iter_mut().zip([0, 3, 5]) {
            let want: Vec<Vec<i64>> = rows
                .iter()
                .filter(|r| r.0 == k)
                .map(|&(a, b, c)| vec![a, b, c])
                .collect();
            let got = read(sub, want.len(), Duration::from_secs(10));
            assert_eq!(got, want, "caller {k} on {workers} workers");
        }
    }
}

#[test]
fn a_view_over_a_view_and_dropping_one_query_leaves_the_others_running() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        run(&mut s, "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')");
        run(&mut s, "CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur, start FROM calls WHERE dur > 100");
        run(
            &mut s,
            "CREATE STREAM very_long AS SELECT caller, dur, start FROM long_calls WHERE dur > 150",
        );
        let mut other = subscription(
            &mut s,
            "SELECT caller, dur, start FROM calls WHERE caller = 1",
        );
        let mut very = subscription(&mut s, "SUBSCRIBE TO very_long");
        let rows = calls(200);
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(&rows[..100])),
        );
        let want_very: Vec<Vec<i64>> = rows
            .iter()
            .filter(|r| r.1 > 150)
            .map(|&(a, b, c)| vec![a, b, c])
            .collect();
        let first = want_very.iter().filter(|r| r[2] < 300).count();
        assert_eq!(
            read(&mut very, first, Duration::from_secs(10)),
            want_very[..first],
            "{workers} workers"
        );
        // Dropping the view chain's readers is refused while a query reads it.
        let refused = s.execute("DROP MATERIALIZED VIEW long_calls");
        assert!(refused.last().unwrap().is_err());
        // Drop the last view; the other query keeps running and sees the rest.
        drop(very);
        run(&mut s, "DROP STREAM very_long");
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(&rows[100..])),
        );
        let want: Vec<Vec<i64>> = rows
            .iter()
            .filter(|r| r.0 == 1)
            .map(|&(a, b, c)| vec![a, b, c])
            .collect();
        assert_eq!(
            read(&mut other, want.len(), Duration::from_secs(10)),
            want,
            "{workers} workers"
        );
        let listing = match run(&mut s, "SHOW QUERIES").pop() {
            Some(Outcome::Listing(l)) => l,
            _ => panic!("no listing"),
        };
        let states: Vec<&str> = listing.rows.iter().map(|r| r[1].as_str()).collect();
        assert_eq!(
            states,
            ["running", "dropped", "running"],
            "{workers} workers"
        );
    }
}

#[test]
fn a_trickled_row_closes_its_window_without_later_data() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        run(
            &mut s,
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start', time_unit = 'ms')",
        );
        let mut sums = subscription(
            &mut s,
            "SELECT caller, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 1000), caller LIMIT 2",
        );
        run(
            &mut s,
            "INSERT INTO calls VALUES (1, 5, 10), (2, 7, 20), (1, 3, 90)",
        );
        // No later row comes: the heartbeat moves time past 1000 ms of event time.
        let start = Instant::now();
        let mut got = read(&mut sums, 2, Duration::from_secs(5));
        let took = start.elapsed();
        got.sort();
        assert_eq!(got, vec![vec![1, 8], vec![2, 7]], "{workers} workers");
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
}

#[test]
fn copy_lines_count_bad_rows_and_keep_good_ones() {
    let mut s = session(2);
    run(
        &mut s,
        "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)",
    );
    let mut all = subscription(&mut s, "SUBSCRIBE TO calls");
    let Some(Outcome::CopyIn(mut ingest)) =
        run(&mut s, "COPY calls FROM STDIN WITH (FORMAT csv)").pop()
    else {
        panic!("no copy");
    };
    // A line cut across two sends, a line with a bad value, one with too few fields.
    ingest.push(b"1,2,3\n4,5").unwrap();
    ingest.push(b",6\n7,x,9\n10,11\n12,13,14").unwrap();
    ingest.finish().unwrap();
    assert_eq!(ingest.rows, 3);
    assert_eq!(ingest.rejected, 2);
    assert_eq!((ingest.rejects[0].line, ingest.rejects[0].column), (3, 2));
    assert_eq!(ingest.rejects[1].line, 4);
    let got = read(&mut all, 3, Duration::from_secs(5));
    assert_eq!(got, vec![vec![1, 2, 3], vec![4, 5, 6], vec![12, 13, 14]]);
}

/// A scalar function that panics on 13 (a bug in user code).
struct Boom;

impl braid_plan::expr::ScalarUdf for Boom {
    fn return_type(
        &self,
        _: &[braid_plan::types::DataType],
    ) -> braid_plan::error::Result<braid_plan::types::DataType> {
        Ok(braid_plan::types::DataType::Int64)
    }

    fn call(&self, args: &[braid_plan::batch::Value<'_>]) -> Result<Scalar, String> {
        match args[0] {
            braid_plan::batch::Value::Int(13) => panic!("boom on 13"),
            braid_plan::batch::Value::Int(v) => Ok(Scalar::Int(v)),
            _ => Ok(Scalar::Null),
        }
    }
}

#[test]
fn a_panicking_query_function_fails_that_query_only() {
    for (workers, query) in [
        (1, "SELECT caller, boom(dur) AS b FROM calls"),
        (2, "SELECT caller, boom(dur) AS b FROM calls"),
        (2, "SELECT caller FROM calls WHERE boom(dur) > 0"),
    ] {
        let mut registry = Registry::with_builtins();
        registry.add_scalar("boom", std::sync::Arc::new(Boom));
        let mut s = LiveSession::new(&registry, workers, None, std::path::Path::new(".")).unwrap();
        run(
            &mut s,
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)",
        );
        let mut bad = subscription(&mut s, query);
        let mut good = subscription(
            &mut s,
            "SELECT caller, dur, start FROM calls WHERE caller > 1",
        );
        run(
            &mut s,
            "INSERT INTO calls VALUES (1, 5, 0), (2, 13, 1), (3, 7, 2)",
        );
        // The bad query fails with the panic's message; its subscriber's stream ends.
        let start = Instant::now();
        while sub_open(&mut bad) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let e = bad.error().unwrap_or_default();
        assert!(
            e.contains("boom on 13"),
            "{query} on {workers} workers: {e:?}"
        );
        // The other query, and the session, go on.
        run(&mut s, "INSERT INTO calls VALUES (4, 1, 3)");
        let got = read(&mut good, 3, Duration::from_secs(10));
        assert_eq!(
            got,
            vec![vec![2, 13, 1], vec![3, 7, 2], vec![4, 1, 3]],
            "{query} on {workers} workers"
        );
    }
}

/// Whether `sub`'s stream is still open (reading what is there).
fn sub_open(sub: &mut Subscription) -> bool {
    loop {
        match sub.try_next() {
            Ok(_) => continue,
            Err(ended) => return !ended,
        }
    }
}

#[test]
fn subscribers_postfilters_apply_as_they_read_and_a_fault_ends_only_theirs() {
    for workers in [1, 2] {
        let mut s = session(workers);
        run(
            &mut s,
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)",
        );
        let mut threes = subscription(&mut s, "SUBSCRIBE TO calls WHERE caller = 3 AND dur < 150");
        let mut faulty = subscription(&mut s, "SUBSCRIBE calls WHERE 100 / (dur - 74) > 0");
        let rows = calls(200);
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(&rows)),
        );
        let want: Vec<Vec<i64>> = rows
            .iter()
            .filter(|r| r.0 == 3 && r.1 < 150)
            .map(|&(a, b, c)| vec![a, b, c])
            .collect();
        assert_eq!(read(&mut threes, want.len(), Duration::from_secs(10)), want);
        // dur = 74 divides by zero: the subscription ends with the fault, naming the
        // filter and the row; the rows before it were delivered.
        let before: Vec<Vec<i64>> = rows
            .iter()
            .take_while(|r| r.1 != 74)
            .filter(|r| 100 / (r.1 - 74) > 0)
            .map(|&(a, b, c)| vec![a, b, c])
            .collect();
        assert_eq!(
            read(&mut faulty, before.len() + 1, Duration::from_secs(2)),
            before
        );
        let e = faulty.error().unwrap_or_default();
        assert!(
            e.contains("100 / (dur - 74)") && e.contains("division by zero"),
            "{e}"
        );
    }
    let mut s = session(1);
    run(
        &mut s,
        "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)",
    );
    let refused = s.execute("SUBSCRIBE TO calls WHERE nope > 1");
    assert!(matches!(refused.last(), Some(Err(e)) if e.to_string().contains("nope")));
}

#[test]
fn explain_analyze_of_a_running_query_shows_what_each_node_measured() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        run(
            &mut s,
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)",
        );
        run(
            &mut s,
            "CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur FROM calls WHERE dur > 100",
        );
        let rows = calls(300);
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(&rows)),
        );
        let long = rows.iter().filter(|r| r.1 > 100).count();
        let mut sub = subscription(&mut s, "SUBSCRIBE TO long_calls");
        assert_eq!(read(&mut sub, long, Duration::from_secs(10)).len(), long);
        let lines = listing(&mut s, "EXPLAIN ANALYZE QUERY 1");
        let text = lines.join("\n");
        // The plan as EXPLAIN prints it, a `measured:` line under each node.
        for node in ["Sink:", "Merge:", "Map:", "Split:", "Source:"] {
            let at = lines
                .iter()
                .position(|l| l.trim_start().starts_with(node))
                .unwrap_or_else(|| panic!("no {node} in\n{text}"));
            assert!(
                lines[at + 1..].iter().any(|l| l.contains("measured:")),
                "{node} has no figures in\n{text}"
            );
        }
        // The source read every row; the merge put out the long calls.
        assert!(text.contains(&format!("rows out {}", rows.len())), "{text}");
        assert!(text.contains(&format!("rows out {long}")), "{text}");
        // Not a running query: refused by name.
        for bad in [
            "EXPLAIN ANALYZE SELECT * FROM calls",
            "EXPLAIN ANALYZE QUERY 9",
        ] {
            let e = s.execute(bad).pop().unwrap().err().expect("refused");
            assert!(e.to_string().contains("EXPLAIN ANALYZE"), "{e}");
        }
    }
}

/// A query in the live session under `SET max_latency`: its rows go as ticks within
/// epochs (worker 0 reads the stream alone), its subscriber gets exactly the rows it
/// gets without the constraint, and the stamps measure each row's latency against it.
#[test]
fn a_live_query_under_a_latency_constraint_gets_its_rows_and_measures_them() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        run(
            &mut s,
            // A time unit: the last window closes when the stream has been idle long
            // enough (event time moves with the clock); without one, time moves with
            // rows only for a windowed query, and it would wait for a later row.
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start', time_unit = 'ms', epoch = 50)",
        );
        let mut free = subscription(
            &mut s,
            "SELECT caller, dur, start FROM calls WHERE dur > 50",
        );
        run(&mut s, "SET max_latency = '200ms'");
        let mut held = subscription(
            &mut s,
            "SELECT caller, dur, start FROM calls WHERE dur > 50",
        );
        // Windows close at epochs: under the constraint they still close where they do
        // without it (the last one when the stream has been idle long enough).
        let mut counts = subscription(
            &mut s,
            "SELECT window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 300), caller",
        );
        let rows = calls(300);
        for part in rows.chunks(50) {
            run(
                &mut s,
                &format!("INSERT INTO calls VALUES {}", values(part)),
            );
        }
        let want: Vec<Vec<i64>> = rows
            .iter()
            .filter(|r| r.1 > 50)
            .map(|&(a, b, c)| vec![a, b, c])
            .collect();
        let mut a = read(&mut free, want.len(), Duration::from_secs(10));
        let b = read(&mut held, want.len(), Duration::from_secs(10));
        a.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(a, want_sorted, "without the constraint, {workers} workers");
        // One reader, ticks in order: the serial order.
        assert_eq!(b, want, "under the constraint, {workers} workers");
        // calls(300): start = 3 i, caller = i % 7; window k holds i in [100 k, 100 k + 100).
        let mut want_counts: Vec<Vec<i64>> = Vec::new();
        for k in 0..3i64 {
            for caller in 0..7i64 {
                let n = (100 * k..100 * k + 100).filter(|i| i % 7 == caller).count() as i64;
                want_counts.push(vec![300 * (k + 1), caller, n]);
            }
        }
        let mut got_counts = read(&mut counts, want_counts.len(), Duration::from_secs(10));
        got_counts.sort();
        assert_eq!(
            got_counts, want_counts,
            "windows under the constraint, {workers} workers"
        );
        let queries = s.queries();
        let free_q = queries[0].status.row_latency();
        assert!(free_q.is_none(), "no constraint: no stamps");
        let l = queries[1]
            .status
            .row_latency()
            .expect("stamps under a constraint");
        assert_eq!(l.constraint, Some(Duration::from_millis(200)));
        assert!(l.rows >= want.len() as u64, "{l:?}");
        let p99 = l.p99.expect("rows written");
        assert!(
            p99 <= Duration::from_millis(200),
            "{workers} workers: {l:?}"
        );
        // EXPLAIN ANALYZE of the running query says so, per operator.
        let text = listing(&mut s, "EXPLAIN ANALYZE QUERY 2").join("\n");
        assert!(
            text.contains("max_latency 200ms: met (p99)")
                && text.contains("  Map(query")
                && text.contains("queue before it p50"),
            "{text}"
        );
    }
}

/// A session with a data directory checkpoints its views, one under a latency
/// constraint too (timely's time counts ticks within epochs; a checkpoint's barrier is
/// held at its epoch's last tick): `ALTER ... SET PARALLELISM` takes it to 4
/// partitions, and after a restart its rows are the inserted rows that pass, each
/// once.
#[test]
fn a_durable_view_under_a_latency_constraint_checkpoints_and_comes_back() {
    let dir = crate::sql::scratch("live-latency-durable");
    let data = dir.0.join("data");
    let open = || {
        let mut s = LiveSession::new(&Registry::with_builtins(), 2, Some(&data), &dir.0).unwrap();
        let recovered = s.recover(Duration::from_millis(100)).unwrap();
        (s, recovered)
    };
    let rows = calls(200);
    let mut want: Vec<Vec<i64>> = rows
        .iter()
        .filter(|r| r.1 > 100)
        .map(|r| vec![r.0, r.1])
        .collect();
    want.sort();
    let (first, second) = rows.split_at(100);
    let long = first.iter().filter(|r| r.1 > 100).count();
    {
        let (mut s, _) = open();
        run(
            &mut s,
            "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')",
        );
        run(&mut s, "SET max_latency = '200ms'");
        run(
            &mut s,
            "CREATE MATERIALIZED VIEW long_calls AS SELECT caller, dur FROM calls WHERE dur > 100",
        );
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(first)),
        );
        let mut sub = subscription(&mut s, "SUBSCRIBE TO long_calls");
        assert_eq!(read(&mut sub, long, Duration::from_secs(10)).len(), long);
        run(
            &mut s,
            "ALTER MATERIALIZED VIEW long_calls SET PARALLELISM 4",
        );
        run(
            &mut s,
            &format!("INSERT INTO calls VALUES {}", values(second)),
        );
        let mut sub = subscription(&mut s, "SUBSCRIBE TO long_calls");
        let mut got = read(&mut sub, want.len(), Duration::from_secs(10));
        got.extend(read(&mut sub, 1, Duration::from_millis(300)));
        got.sort();
        assert_eq!(got, want, "before the restart");
    }
    let (mut s, recovered) = open();
    assert!(
        !recovered
            .notes
            .iter()
            .any(|n| n.contains("takes no checkpoints")),
        "{:?}",
        recovered.notes
    );
    let mut sub = subscription(&mut s, "SUBSCRIBE TO long_calls");
    let mut got = read(&mut sub, want.len() + 1, Duration::from_secs(2));
    got.sort();
    assert_eq!(got, want, "after the restart: each row once");
}

/// A live stream's rows cannot be read twice to measure one splitter: `SET
/// desired_rate` without `SET splitter_rate` is refused by name when the query is
/// installed; with it, the query runs with the shape it gives and its rows are right.
#[test]
fn a_desired_rate_on_a_live_stream_needs_the_splitter_rate() {
    let mut s = session(2);
    run(
        &mut s,
        "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')",
    );
    run(&mut s, "SET desired_rate = 50000000");
    let e = refused(
        &mut s,
        "SELECT caller, dur, start FROM calls WHERE caller = 3",
    );
    assert!(e.to_string().contains("SET splitter_rate"), "{e}");
    run(&mut s, "SET splitter_rate = 10000000");
    caller_3_gets_its_rows(&mut s, 300);
}

/// A live stream is read once: `SET window = 'auto'`, which chooses W by trial runs over
/// the input, is refused by name in the server, and the session keeps its settings.
#[test]
fn a_window_by_doubling_is_refused_on_live_streams() {
    let mut s = session(1);
    let e = refused(&mut s, "SET window = 'auto'");
    assert!(
        e.to_string().contains("SET window = 'auto' in the server"),
        "{e}"
    );
    run(
        &mut s,
        "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT) WITH (event_time = 'start')",
    );
    caller_3_gets_its_rows(&mut s, 30);
}
