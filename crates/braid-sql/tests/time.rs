//! Time as SQL writes it, refused where it would be a guess: INTERVAL on a stream that
//! declares no time unit, an INTERVAL that is not a whole number of the unit, lengths
//! without a fixed size; window table functions Braid does not build (SESSION, one
//! without GROUP BY, in a join) refused by name at their place; CUMULATE planned.

use braid_plan::function::Registry;
use braid_sql::compile_script;

/// Line 1: a stream in seconds; line 2: one without a unit; line 3: one in ms.
const HEAD: &str = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT) WITH (path = 'calls.csv', event_time = 'start', time_unit = 's');
CREATE STREAM plain (caller BIGINT, start BIGINT) WITH (path = 'plain.csv', event_time = 'start');
CREATE STREAM fine (caller BIGINT, start BIGINT) WITH (path = 'fine.csv', event_time = 'start', time_unit = 'ms');
";

fn error(text: &str) -> String {
    match compile_script(text, &std::env::temp_dir(), &Registry::with_builtins()) {
        Ok(_) => panic!("compiled, but should be refused: {text}"),
        Err(e) => e.to_string(),
    }
}

/// `query` (line 4) is refused with `what`, at the first `word` of the query (an
/// INTERVAL's error points at its value: sqlparser's span of it).
fn refused(query: &str, what: &str, word: &str) {
    let e = error(&format!("{HEAD}{query}"));
    assert!(e.contains(what), "{query}\n  expected `{what}` in:\n{e}");
    let col = query.find(word).unwrap_or_else(|| panic!("no {word}")) + 1;
    let at = format!("at line 4, column {col}:");
    assert!(e.contains(&at), "{query}\n  expected `{at}` in:\n{e}");
}

fn logical(query: &str) -> String {
    let text = format!("{HEAD}{query}");
    let s = compile_script(&text, &std::env::temp_dir(), &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    s.jobs[0].logical.as_ref().expect("logical").to_string()
}

#[test]
fn intervals_convert_exactly_or_are_refused() {
    // Converted to the stream's unit.
    let q = |s: &str| format!("SELECT caller FROM fine WHERE start > {s}");
    for (iv, ms) in [
        ("INTERVAL '5' SECOND", 5_000),
        ("INTERVAL '1' MINUTE", 60_000),
        ("INTERVAL '1 minute'", 60_000),
        ("INTERVAL '2' HOUR", 7_200_000),
        ("INTERVAL '1' DAY", 86_400_000),
        ("INTERVAL '100' MILLISECOND", 100),
        ("INTERVAL '1 hour 30 minutes'", 5_400_000),
        ("INTERVAL '0.25' SECOND", 250),
    ] {
        let plan = logical(&q(iv));
        assert!(plan.contains(&format!("start > {ms}")), "{iv}: {plan}");
    }
    refused(
        "SELECT caller FROM plain WHERE start > INTERVAL '5' SECOND",
        "declare it: WITH (event_time = '...', time_unit = ",
        "'5'",
    );
    refused(
        "SELECT caller FROM calls WHERE start > INTERVAL '1' MILLISECOND",
        "is not a whole number of the stream's time unit (s)",
        "'1'",
    );
    refused(
        "SELECT caller FROM calls WHERE start > INTERVAL '1' MONTH",
        "MONTH has no fixed length",
        "'1'",
    );
    refused(
        "SELECT caller FROM calls WHERE start > INTERVAL '1 fortnight'",
        "unknown unit `fortnight`",
        "'1 fortnight'",
    );
    refused(
        "SELECT c.caller FROM calls AS c JOIN fine AS f ON c.caller = f.caller AND f.start BETWEEN c.start AND c.start + INTERVAL '1' SECOND",
        "INTERVAL over streams of different time units: `calls` is in s, `fine` in ms",
        "'1'",
    );
    refused(
        "SELECT window_end, count(*) AS n FROM plain GROUP BY TUMBLE(start, INTERVAL '1' MINUTE)",
        "INTERVAL needs the time unit of stream `plain`",
        "'1'",
    );
}

#[test]
fn stream_time_options_are_checked() {
    let e = error("CREATE STREAM s (t BIGINT) WITH (path = 'x.csv', time_unit = 'ms');");
    assert!(
        e.contains("time_unit is the unit of the event-time column"),
        "{e}"
    );
    let e = error("CREATE STREAM s (t BIGINT) WITH (path = 'x.csv', event_time = 't', time_unit = 'minutes');");
    assert!(e.contains("write 's', 'ms', 'us' or 'ns'"), "{e}");
    let e = error(
        "CREATE STREAM s (t BIGINT) WITH (path = 'x.csv', event_time = 't', epoch = '1 minute');",
    );
    assert!(e.contains("declares no time unit"), "{e}");
    let e = error("CREATE STREAM s (t BIGINT) WITH (path = 'x.csv', event_time = 't', time_unit = 's', lateness = '1500 ms');");
    assert!(e.contains("not a whole number"), "{e}");
}

#[test]
fn window_table_functions_plan_as_group_by_windows() {
    let tvf = logical("SELECT window_start, caller, count(*) AS n FROM TABLE(TUMBLE(TABLE calls, DESCRIPTOR(start), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, caller");
    let plain = logical(
        "SELECT window_start, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 60), caller",
    );
    assert_eq!(tvf, plain);
    assert!(tvf.contains("window=TUMBLE(60) keys=[caller]"), "{tvf}");
    let cumulate = logical("SELECT window_end, count(*) AS n FROM TABLE(CUMULATE(TABLE calls, DESCRIPTOR(start), INTERVAL '10' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end");
    assert!(
        cumulate.contains("window=CUMULATE(step 10, size 60) keys=[]"),
        "{cumulate}"
    );
    let session = logical("SELECT window_start, window_end, count(*) AS n FROM TABLE(SESSION(TABLE calls, DESCRIPTOR(start), INTERVAL '10' SECOND)) GROUP BY window_start, window_end");
    assert_eq!(
        session,
        logical(
            "SELECT window_start, window_end, count(*) AS n FROM calls GROUP BY SESSION(start, 10)"
        )
    );
    assert!(session.contains("window=SESSION(10) keys=[]"), "{session}");
}

#[test]
fn window_table_functions_braid_lacks_are_refused() {
    refused(
        "SELECT window_end, count(*) AS n FROM TABLE(CUMULATE(TABLE calls, DESCRIPTOR(start), INTERVAL '25' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
        "CUMULATE's size 60 is not a multiple of its step 25",
        "CUMULATE",
    );
    for partitioned in [
        "SELECT window_end, count(*) AS n FROM TABLE(SESSION(TABLE calls, PARTITION BY caller, DESCRIPTOR(start), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        "SELECT window_end, count(*) AS n FROM TABLE(SESSION(TABLE calls PARTITION BY caller, DESCRIPTOR(start), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, caller",
    ] {
        refused(
            partitioned,
            "PARTITION BY in the SESSION window table function",
            "PARTITION",
        );
    }
    refused(
        "SELECT window_end, count(*) AS n FROM TABLE(SESSION(TABLE calls, DESCRIPTOR(start), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, caller",
        "GROUP BY keys over the SESSION window table function",
        "caller",
    );
    refused(
        "SELECT window_end, count(*) AS n FROM SESSION(calls, start, 10) GROUP BY window_start, window_end",
        "the SESSION window table function in RisingWave's form",
        "SESSION",
    );
    refused(
        "SELECT caller, window_start FROM TUMBLE(calls, start, 60)",
        "a window table function without GROUP BY",
        "TUMBLE",
    );
    refused(
        "SELECT caller, count(*) AS n FROM TUMBLE(calls, start, 60) GROUP BY caller",
        "groups by its window: GROUP BY window_start, window_end, keys",
        "SELECT",
    );
    refused(
        "SELECT c.caller FROM calls AS c JOIN TUMBLE(calls, start, 60) AS w ON c.caller = w.caller GROUP BY window_start, window_end, c.caller",
        "a window table function in a join",
        "TUMBLE",
    );
    refused(
        "SELECT window_end, count(*) AS n FROM TABLE(TUMBLE(TABLE calls, start, 60)) GROUP BY window_start, window_end",
        "names its time column with DESCRIPTOR(column)",
        "start",
    );
    refused(
        "SELECT window_end, count(*) AS n FROM TUMBLE(calls, dur, 60) GROUP BY window_start, window_end",
        "windows are over the stream's event time",
        "dur",
    );
    refused(
        "SELECT window_end, count(*) AS n FROM TUMBLE(calls, start, 60) GROUP BY window_start, window_end, TUMBLE(start, 10)",
        "GROUP BY has two windows",
        "TUMBLE(start, 10)",
    );
}

/// Line 1: a stream with a timestamp event time and a date; the query is on line 2.
const STAMPED: &str = "CREATE STREAM s (n BIGINT, ts TIMESTAMP(3), tz TIMESTAMPTZ, d DATE, f DOUBLE) WITH (path = 's.csv', event_time = 'ts');\n";

/// `query` over STAMPED is refused with `what` at line 2, at the first `word`.
fn stamped_refused(query: &str, what: &str, word: &str) {
    let e = error(&format!("{STAMPED}{query}"));
    assert!(e.contains(what), "{query}\n  expected `{what}` in:\n{e}");
    let col = query.find(word).unwrap_or_else(|| panic!("no {word}")) + 1;
    let at = format!("at line 2, column {col}:");
    assert!(e.contains(&at), "{query}\n  expected `{at}` in:\n{e}");
}

fn stamped_plan(query: &str) -> String {
    let text = format!("{STAMPED}{query}");
    let s = compile_script(&text, &std::env::temp_dir(), &Registry::with_builtins())
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    s.jobs[0].logical.as_ref().expect("logical").to_string()
}

#[test]
fn timestamps_take_intervals_in_microseconds() {
    let p = stamped_plan(
        "SELECT ts + INTERVAL '1' SECOND AS a FROM s WHERE ts > TIMESTAMP '1970-01-01 00:00:01'",
    );
    assert!(p.contains("(ts + 1000000)"), "{p}");
    assert!(p.contains("CAST(1000000 AS timestamp)"), "{p}");
    let p = stamped_plan(
        "SELECT window_end, count(*) AS c FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
    );
    assert!(p.contains("TUMBLE(60000000)"), "{p}");
    assert!(p.contains("Project window_end"), "{p}");
    let p = stamped_plan("SELECT CAST(d AS TIMESTAMP) AS t FROM s");
    assert!(p.contains("86400000000"), "{p}");
}

#[test]
fn time_types_refuse_what_would_be_a_guess() {
    stamped_refused(
        "SELECT ts + 5 AS x FROM s",
        "a timestamp takes an INTERVAL",
        "ts",
    );
    stamped_refused(
        "SELECT ts - ts AS x FROM s",
        "cannot combine timestamp and timestamp",
        "ts",
    );
    stamped_refused(
        "SELECT ts FROM s WHERE ts > 5",
        "cannot combine timestamp and int64",
        "ts >",
    );
    stamped_refused(
        "SELECT ts FROM s WHERE ts = tz",
        "cannot combine timestamp and timestamptz",
        "ts =",
    );
    stamped_refused(
        "SELECT d + INTERVAL '1' DAY AS x FROM s",
        "DATE arithmetic",
        "'1'",
    );
    stamped_refused(
        "SELECT CAST(ts AS DATE) AS x FROM s",
        "CAST from timestamp to date",
        "ts AS",
    );
    stamped_refused(
        "SELECT CAST(f AS TIMESTAMP) AS x FROM s",
        "CAST from float64 to timestamp",
        "f AS",
    );
    stamped_refused(
        "SELECT CAST(ts AS BOOLEAN) AS x FROM s",
        "CAST from timestamp to bool",
        "ts AS",
    );
    stamped_refused(
        "SELECT n FROM s WHERE ts > TIMESTAMP '2026-11-24 25:00'",
        "is not a timestamp, YYYY-MM-DD HH:MM:SS",
        "'2026",
    );
    stamped_refused(
        "SELECT sum(ts) AS x FROM s",
        "sum needs a number, found timestamp",
        "sum",
    );
    for (q, name) in [
        ("SELECT NOW() AS x FROM s", "NOW"),
        ("SELECT PROCTIME() AS x FROM s", "PROCTIME"),
        (
            "SELECT n FROM s WHERE ts < CURRENT_TIMESTAMP",
            "CURRENT_TIMESTAMP",
        ),
    ] {
        stamped_refused(q, &format!("{name}: processing time (the clock)"), name);
    }
    let e = error(
        "CREATE STREAM s (ts TIMESTAMP) WITH (path = 's.csv', event_time = 'ts', time_unit = 's');",
    );
    assert!(
        e.contains("a timestamp event time counts microseconds, not s"),
        "{e}"
    );
    let e = error("CREATE STREAM s (d DATE) WITH (path = 's.csv', event_time = 'd');");
    assert!(e.contains("expected int64 or a timestamp"), "{e}");
}

#[test]
fn watermark_spells_event_time_and_lateness() {
    let lateness = |cols: &str, opts: &str| {
        let text = format!("CREATE STREAM s ({cols}) WITH (path = 's.csv'{opts});");
        let s = compile_script(&text, &std::env::temp_dir(), &Registry::with_builtins())
            .unwrap_or_else(|e| panic!("{cols}: {e}"));
        let def = &s.catalog.streams["s"];
        let et = def
            .source
            .schema
            .event_time
            .map(|i| def.source.schema.fields[i].name.clone());
        (et, def.lateness)
    };
    let ts = "n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND";
    assert_eq!(lateness(ts, ""), (Some("ts".into()), 5_000_000));
    let first = "WATERMARK FOR t AS t - INTERVAL '2' MINUTE, n BIGINT, t BIGINT";
    assert_eq!(
        lateness(first, ", time_unit = 's'"),
        (Some("t".into()), 120)
    );
    assert_eq!(
        lateness("t BIGINT, WATERMARK FOR t AS t - 7", ""),
        (Some("t".into()), 7)
    );
    assert_eq!(
        lateness("t BIGINT, WATERMARK FOR t AS t", ""),
        (Some("t".into()), 0)
    );
    for (cols, opts, what) in [
        (
            "t BIGINT, WATERMARK FOR t AS t - INTERVAL '5' SECOND",
            "",
            "declares no time unit",
        ),
        (
            "t BIGINT, WATERMARK FOR t AS t - INTERVAL '1' MONTH",
            ", time_unit = 's'",
            "MONTH has no fixed length",
        ),
        (
            "t BIGINT, WATERMARK FOR t AS t + 5",
            "",
            "the event time minus a fixed delay",
        ),
        (
            "t BIGINT, WATERMARK FOR t AS t - 5",
            ", lateness = 3",
            "write one",
        ),
        (
            "t BIGINT, u BIGINT, WATERMARK FOR t AS t - 5",
            ", event_time = 'u'",
            "the watermark is on the event-time column",
        ),
    ] {
        let text = format!("CREATE STREAM s ({cols}) WITH (path = 's.csv'{opts});");
        let e = error(&text);
        assert!(e.contains(what), "{cols}: {e}");
        assert!(e.contains("at line 1, column"), "{cols}: {e}");
    }
}
