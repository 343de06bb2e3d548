//! What Braid does not implement is refused by name, at its place in the text, never
//! run as something else: window functions (`OVER`), the parts of an aggregate call
//! sqlparser accepts for some dialect (`WITHIN GROUP`, `IGNORE NULLS`, `ORDER BY` or
//! `WHERE` inside the call, `FILTER` on a function that is not an aggregate, `DISTINCT`
//! where nothing honours it), types Braid would store as a near type (`DECIMAL` as a
//! float, `INT` as 64 bits), and `HOP` windows with gaps. Also: quoted option values
//! (Flink's DDL) are read as the numbers and booleans they spell, and a parse error at
//! the end of the text points there.

use braid_plan::function::Registry;
use braid_sql::compile_script;
use std::path::PathBuf;

const HEAD: &str = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT) WITH (path = 'calls.csv', event_time = 'start', epoch = 10);\n";

fn dir() -> PathBuf {
    std::env::temp_dir()
}

/// The logical plan of the first query of the script `text`, as EXPLAIN prints it.
fn logical_plan(text: &str) -> String {
    let s = compile_script(text, &dir(), &Registry::with_builtins()).expect("compiles");
    s.jobs[0]
        .logical
        .as_ref()
        .expect("logical plan")
        .to_string()
}

/// The error of `HEAD` then `query` (on line 2).
fn error(query: &str) -> String {
    let text = format!("{HEAD}{query}");
    match compile_script(&text, &dir(), &Registry::with_builtins()) {
        Ok(_) => panic!("compiled, but should be refused: {query}"),
        Err(e) => e.to_string(),
    }
}

/// The 1-based column of the first `word` in `query` (as line 2 of the script).
fn column_of(query: &str, word: &str) -> usize {
    query
        .find(word)
        .unwrap_or_else(|| panic!("no {word} in {query}"))
        + 1
}

/// `query` is refused with a message containing `what`, at line 2, at the first
/// `word` of the query.
fn refused(query: &str, what: &str, word: &str) {
    let e = error(query);
    assert!(e.contains(what), "{query}\n  expected `{what}` in:\n{e}");
    let at = format!("at line 2, column {}:", column_of(query, word));
    assert!(e.contains(&at), "{query}\n  expected `{at}` in:\n{e}");
}

#[test]
fn window_functions_are_refused_at_over() {
    let cases = [
        ("SELECT caller, sum(dur) OVER (PARTITION BY caller) FROM calls", "sum"),
        ("SELECT count(*) OVER () AS n FROM calls", "count"),
        ("SELECT row_number() OVER (ORDER BY start) AS r FROM calls", "row_number"),
        ("SELECT RANK() OVER (PARTITION BY caller ORDER BY dur) FROM calls", "RANK"),
        ("SELECT lag(dur) OVER (ORDER BY start) FROM calls", "lag"),
        ("SELECT caller FROM calls WHERE lag(dur) OVER (ORDER BY start) > 1", "lag"),
        (
            "SELECT window_end, caller, avg(dur) OVER (PARTITION BY caller) FROM calls GROUP BY TUMBLE(start, 10), caller",
            "avg",
        ),
        (
            "SELECT caller, max(dur) FILTER (WHERE dur > 1) OVER (PARTITION BY caller) FROM calls",
            "max",
        ),
    ];
    for (q, name) in cases {
        refused(
            q,
            &format!(
                "not supported: at line 2, column {}: window function `{name}(...) OVER (...)` (over-aggregations)",
                column_of(q, "OVER")
            ),
            "OVER",
        );
    }
}

#[test]
fn call_syntax_braid_ignores_is_refused() {
    refused(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY dur) FROM calls",
        "`percentile_cont(...) WITHIN GROUP (ORDER BY ...)` (ordered-set aggregates)",
        "WITHIN",
    );
    refused(
        "SELECT window_end, sum(dur) WITHIN GROUP (ORDER BY dur) FROM calls GROUP BY TUMBLE(start, 10)",
        "`sum(...) WITHIN GROUP",
        "WITHIN",
    );
    refused(
        "SELECT window_end, max(dur IGNORE NULLS) FROM calls GROUP BY TUMBLE(start, 10)",
        "`IGNORE NULLS` in a call of `max`",
        "IGNORE",
    );
    refused(
        "SELECT window_end, min(dur RESPECT NULLS) FROM calls GROUP BY TUMBLE(start, 10)",
        "`RESPECT NULLS` in a call of `min`",
        "RESPECT",
    );
    refused(
        "SELECT window_end, max(dur ORDER BY start) FROM calls GROUP BY TUMBLE(start, 10)",
        "ORDER BY inside `max(...)`",
        "ORDER",
    );
    refused(
        "SELECT window_end, count(* WHERE dur > 5) FROM calls GROUP BY TUMBLE(start, 10)",
        "`count(... WHERE ...)`; write `count(...) FILTER (WHERE ...)`",
        "dur > 5",
    );
    refused(
        "SELECT window_end, sum(dur LIMIT 3) FROM calls GROUP BY TUMBLE(start, 10)",
        "in a call of `sum`",
        "sum",
    );
    refused(
        "SELECT abs(dur) FILTER (WHERE dur > 1) FROM calls",
        "FILTER (WHERE ...) on `abs(...)`",
        "FILTER",
    );
    refused(
        "SELECT abs(DISTINCT dur) FROM calls",
        "DISTINCT in a call of `abs`",
        "abs",
    );
    refused(
        "SELECT window_end, count(*) FROM calls GROUP BY TUMBLE(DISTINCT start, 10)",
        "DISTINCT in a call of `TUMBLE`",
        "TUMBLE",
    );
    refused(
        "SELECT window_end, count(*) FROM calls GROUP BY TUMBLE(start, 10) FILTER (WHERE dur > 1)",
        "FILTER (WHERE ...) on `TUMBLE(...)`",
        "FILTER",
    );
    refused(
        "SELECT window_end, count(*) FROM calls GROUP BY TUMBLE(start, size => 10)",
        "argument `size => 10` of TUMBLE",
        "size",
    );
    refused(
        "SELECT window_end, sum(DISTINCT dur) FROM calls GROUP BY TUMBLE(start, 10)",
        "DISTINCT in sum",
        "sum",
    );
    refused(
        "SELECT window_end, max(DISTINCT dur) FROM calls GROUP BY TUMBLE(start, 10)",
        "DISTINCT in max",
        "max",
    );
    refused(
        "SELECT window_end, count(*) FILTER (WHERE dur) FROM calls GROUP BY TUMBLE(start, 10)",
        "FILTER (WHERE ...) needs a bool condition, found int64",
        "dur)",
    );
}

#[test]
fn aggregate_filter_is_planned() {
    let text = format!(
        "{HEAD}SELECT window_end, count(*) FILTER (WHERE dur > 100) AS long, count(DISTINCT callee) FILTER (WHERE dur > 1) AS peers, count(*) AS n FROM calls GROUP BY TUMBLE(start, 100)"
    );
    let plan = logical_plan(&text);
    assert!(
        plan.contains(
            "aggs=[count(*) FILTER (WHERE (dur > 100)), count(DISTINCT callee) FILTER (WHERE (dur > 1)), count(*)]"
        ),
        "{plan}"
    );
}

#[test]
fn types_braid_would_store_as_others_are_refused() {
    let column = |ty: &str, what: &str| {
        let text = format!("CREATE STREAM s (a BIGINT, amount {ty}) WITH (path = 's.csv');");
        let e = match compile_script(&text, &dir(), &Registry::with_builtins()) {
            Ok(_) => panic!("column of type {ty} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&format!(
                "not supported: at line 1, column 28: column `amount` of type {what}"
            )),
            "{ty}: {e}"
        );
    };
    column(
        "DECIMAL(10,2)",
        "DECIMAL(10,2) (exact decimals); write DOUBLE for an approximate number or BIGINT",
    );
    column("NUMERIC", "NUMERIC (exact decimals)");
    column("DEC(5)", "DEC(5) (exact decimals)");
    column(
        "INT",
        "INT (Braid's integers are 64-bit and signed); write BIGINT",
    );
    column("INTEGER", "INTEGER (Braid's integers");
    column("SMALLINT", "SMALLINT (Braid's integers");
    column("TINYINT", "TINYINT (Braid's integers");
    column("BIGINT UNSIGNED", "BIGINT UNSIGNED (Braid's integers");
    column(
        "FLOAT",
        "FLOAT (Braid's floating-point numbers are 64-bit); write DOUBLE",
    );
    column("REAL", "REAL (Braid's floating-point");
    column(
        "VARCHAR(10)",
        "VARCHAR(10) (Braid's strings have no length limit or padding)",
    );
    column("CHAR(3)", "CHAR(3) (Braid's strings");
    column(
        "TIMESTAMP(9)",
        "TIMESTAMP(9) (Braid keeps microseconds); write TIMESTAMP or TIMESTAMP(6)",
    );
    column(
        "TIME",
        "type TIME; types are BIGINT, DOUBLE, BOOLEAN, TEXT (or STRING, VARCHAR), TIMESTAMP",
    );
    // The types Braid has, under their usual names.
    for ty in [
        "BIGINT",
        "INT64",
        "DOUBLE",
        "DOUBLE PRECISION",
        "FLOAT64",
        "FLOAT8",
        "BOOLEAN",
        "BOOL",
        "TEXT",
        "STRING",
        "VARCHAR",
        "TIMESTAMP",
        "TIMESTAMP(3)",
        "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMPTZ",
        "DATE",
    ] {
        let text = format!("CREATE STREAM s (a BIGINT, b {ty}) WITH (path = 's.csv');");
        compile_script(&text, &dir(), &Registry::with_builtins())
            .unwrap_or_else(|e| panic!("{ty}: {e}"));
    }
    // CAST targets.
    refused(
        "SELECT CAST(dur AS DECIMAL(10,2)) AS d FROM calls",
        "not supported: at line 2, column 20: CAST to DECIMAL(10,2) (exact decimals)",
        "DECIMAL",
    );
    refused(
        "SELECT caller FROM calls WHERE CAST(dur AS NUMERIC) > 1",
        "CAST to NUMERIC (exact decimals)",
        "NUMERIC",
    );
    refused(
        "SELECT CAST(dur AS INT) AS d FROM calls",
        "CAST to INT (Braid's integers",
        "INT",
    );
    refused(
        "SELECT CAST(dur AS REAL) AS d FROM calls",
        "CAST to REAL (Braid's floating-point",
        "REAL",
    );
    for ty in ["BIGINT", "DOUBLE", "BOOLEAN", "INT64", "FLOAT64", "BOOL"] {
        let text = format!("{HEAD}SELECT CAST(dur AS {ty}) AS d FROM calls");
        compile_script(&text, &dir(), &Registry::with_builtins())
            .unwrap_or_else(|e| panic!("{ty}: {e}"));
    }
}

#[test]
fn hop_takes_slide_then_size() {
    let text = format!(
        "{HEAD}SELECT window_start, window_end, count(*) AS n FROM calls GROUP BY HOP(start, 20, 60)"
    );
    let plan = logical_plan(&text);
    assert!(plan.contains("window=HOP(slide 20, size 60)"), "{plan}");
    refused(
        "SELECT window_end, count(*) AS n FROM calls GROUP BY HOP(start, 60, 20)",
        "HOP's slide 60 is larger than its size 20: the windows would leave gaps",
        "HOP",
    );
    // A slide equal to the size is a tumbling window.
    let text = format!("{HEAD}SELECT window_end, count(*) FROM calls GROUP BY HOP(start, 30, 30)");
    compile_script(&text, &dir(), &Registry::with_builtins()).expect("slide = size");
}

#[test]
fn quoted_option_values_read_as_numbers_and_booleans() {
    let text = "CREATE STREAM s (a BIGINT, t BIGINT) WITH ('source' = 'csv', 'path' = 's.csv', 'header' = 'true', 'event_time' = 't', 'epoch' = '60', 'lateness' = '5', 'window' = '64', 'speed' = '2.5');\n\
                SET partitions = '4';\n\
                SELECT window_end, count(*) FROM s GROUP BY TUMBLE(t, 60);";
    let s = compile_script(text, &dir(), &Registry::with_builtins()).expect("quoted options");
    let source = s.jobs[0].plan.leaf_source();
    assert_eq!(source.epoch, 60);
    assert_eq!(source.window, 64);
    assert_eq!(s.catalog.settings.partitions, 4);
    let bad = |opts: &str, what: &str| {
        let text = format!(
            "CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv', event_time = 't', {opts});"
        );
        let e = match compile_script(&text, &dir(), &Registry::with_builtins()) {
            Ok(_) => panic!("accepted {opts}"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(what), "{opts}: {e}");
    };
    bad(
        "'epoch' = 'sixty'",
        "option `epoch` of stream `s` must be an integer, found 'sixty'",
    );
    bad(
        "header = 'yes'",
        "option `header` of stream `s` must be true or false, found 'yes'",
    );
    bad(
        "speed = 'fast'",
        "option `speed` of stream `s` must be a number, found 'fast'",
    );
    bad(
        "epoch = '6.5'",
        "option `epoch` of stream `s` must be an integer, found '6.5'",
    );
}

#[test]
fn a_parse_error_at_the_end_points_after_the_last_token() {
    let text =
        "CREATE STREAM s (a BIGINT, t BIGINT) WITH (path = 's.csv');\nSELECT a FROM s WHERE\n\n";
    let e = match compile_script(text, &dir(), &Registry::with_builtins()) {
        Ok(_) => panic!("parsed"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("parse error at line 2, column 22: Expected: an expression, found: the end of the input"),
        "{e}"
    );
    let e = braid_sql::expr::parse_expr("a +", &braid_plan::types::Schema::ints(&["a"]))
        .expect_err("incomplete")
        .to_string();
    assert!(e.contains("at line 1, column 4"), "{e}");
}

#[test]
fn clauses_a_stream_query_would_ignore_are_refused() {
    refused(
        "SELECT * EXCEPT (dur) FROM calls",
        "`* EXCEPT ...`; list the columns",
        "EXCEPT",
    );
    refused(
        "SELECT * EXCLUDE (dur) FROM calls",
        "`* EXCLUDE ...`; list the columns",
        "EXCLUDE",
    );
    refused(
        "SELECT caller FROM calls QUALIFY caller > 1",
        "QUALIFY in a stream query",
        "QUALIFY",
    );
    refused(
        "SELECT TOP 5 caller FROM calls",
        "SELECT TOP in a stream query",
        "TOP",
    );
    refused(
        "SELECT caller FROM calls SORT BY caller",
        "SORT BY in a stream query",
        "SORT",
    );
    refused(
        "SELECT caller FROM calls |> WHERE caller > 1",
        "pipe operators (`|>`) on a stream",
        "SELECT",
    );
    refused(
        "SELECT c.x FROM calls AS c(x, y, z, w)",
        "column aliases `c(x, y, z, w)` in FROM",
        "calls",
    );
    refused(
        "SELECT caller FROM calls TABLESAMPLE BERNOULLI (10)",
        "TABLESAMPLE in FROM",
        "calls",
    );
}

#[test]
fn limit_is_taken_only_as_limit_n_of_a_whole_query() {
    let cases = [
        (
            "SELECT caller FROM calls LIMIT 2 OFFSET 1",
            "OFFSET on a stream",
            "2 OFFSET",
        ),
        (
            "SELECT caller FROM calls LIMIT 1, 2",
            "OFFSET on a stream",
            "1, 2",
        ),
        (
            "SELECT caller FROM calls LIMIT 2.5",
            "LIMIT other than a whole number",
            "2.5",
        ),
        (
            "SELECT a FROM (SELECT caller AS a FROM calls LIMIT 2) AS s",
            "LIMIT inside a subquery",
            "2) AS",
        ),
        (
            "SELECT caller FROM calls ORDER BY caller LIMIT 2",
            "ORDER BY on a stream",
            "caller LIMIT",
        ),
    ];
    for (q, what, word) in cases {
        refused(q, what, word);
    }
    // A whole query's LIMIT n stops its sink after n rows; EXPLAIN says so.
    let s = compile_script(
        &format!("{HEAD}SELECT caller FROM calls LIMIT 3;"),
        &dir(),
        &Registry::with_builtins(),
    )
    .expect("compiles");
    match &s.jobs[0].plan {
        braid_plan::plan::Plan::Sink(sink) => assert_eq!(sink.limit, Some(3)),
        other => panic!("a sink, found {}", other.name()),
    }
}

#[test]
fn ctes_are_refused_by_name_where_braid_does_not_build_them() {
    refused(
        "WITH RECURSIVE r AS (SELECT caller FROM calls) SELECT * FROM r",
        "WITH RECURSIVE",
        "RECURSIVE",
    );
    refused(
        "WITH r (a) AS (SELECT caller FROM calls) SELECT * FROM r",
        "column names after the CTE's name",
        "r (a)",
    );
    refused(
        "WITH r AS (SELECT caller FROM calls), r AS (SELECT dur FROM calls) SELECT * FROM r",
        "WITH names `r` twice",
        "r AS (SELECT dur",
    );
    refused(
        "WITH r AS (SELECT caller FROM calls) INSERT INTO x SELECT * FROM r",
        "write INSERT INTO sink WITH ... SELECT",
        "INSERT",
    );
    // An error in a CTE that is never read is still reported, where it is.
    refused(
        "WITH r AS (SELECT nope FROM calls) SELECT caller FROM calls",
        "no column `nope`",
        "nope",
    );
    // A CTE is not in scope outside the query that declares it.
    refused(
        "SELECT * FROM (WITH r AS (SELECT caller FROM calls) SELECT * FROM r) AS a JOIN r ON a.caller = r.caller",
        "no stream `r`",
        "r ON",
    );
}

/// A CTE is planned as the subquery it names: the same logical plan.
#[test]
fn a_cte_plans_as_its_subquery() {
    let with = logical_plan(&format!(
        "{HEAD}WITH w AS (SELECT caller, start FROM calls WHERE dur > 5) SELECT caller, count(*) AS n FROM w GROUP BY TUMBLE(start, 10), caller;"
    ));
    let sub = logical_plan(&format!(
        "{HEAD}SELECT caller, count(*) AS n FROM (SELECT caller, start FROM calls WHERE dur > 5) AS w GROUP BY TUMBLE(start, 10), caller;"
    ));
    assert_eq!(with, sub);
}

#[test]
fn a_wrong_view_is_refused_when_it_is_created() {
    refused(
        "CREATE VIEW v AS SELECT caller FROM calls WHERE nope > 1",
        "no column `nope`",
        "nope",
    );
    refused(
        "CREATE VIEW v AS SELECT caller FROM calls LIMIT 3",
        "LIMIT inside a subquery",
        "3",
    );
    refused(
        "CREATE MATERIALIZED VIEW v AS SELECT caller FROM calls",
        "CREATE MATERIALIZED VIEW",
        "v AS",
    );
    refused(
        "CREATE VIEW v (a) AS SELECT caller FROM calls",
        "column names after the view's name",
        "v (a)",
    );
    refused(
        "CREATE VIEW calls AS SELECT 1 AS a FROM calls",
        "`calls` is already declared (a stream)",
        "calls AS",
    );
    refused(
        "CREATE VIEW v AS SELECT * FROM LAST(v, 3) AS a JOIN LAST(calls, 3) AS b ON a.caller = b.caller",
        "no stream `v`",
        "LAST(v",
    );
}

/// A view is planned as the subquery it names: the same logical plan.
#[test]
fn a_view_plans_as_its_subquery() {
    let view = logical_plan(&format!(
        "{HEAD}CREATE VIEW w AS SELECT caller, start FROM calls WHERE dur > 5;\nSELECT caller, count(*) AS n FROM w GROUP BY TUMBLE(start, 10), caller;"
    ));
    let sub = logical_plan(&format!(
        "{HEAD}SELECT caller, count(*) AS n FROM (SELECT caller, start FROM calls WHERE dur > 5) AS w GROUP BY TUMBLE(start, 10), caller;"
    ));
    assert_eq!(view, sub);
}

#[test]
fn distinct_forms_braid_does_not_build_are_refused() {
    refused(
        "SELECT DISTINCT ON (caller) caller, dur FROM calls",
        "SELECT DISTINCT ON (...)",
        "DISTINCT",
    );
    refused("SELECT DISTINCT * FROM calls", "SELECT DISTINCT *", "*");
}

const TEXTS: &str = "CREATE STREAM texts (sender BIGINT, start BIGINT) WITH (path = 'texts.csv', event_time = 'start', epoch = 10);\nCREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');\n";

/// The error of `HEAD`, `TEXTS`, then `query` (on line 4).
fn error_with_texts(query: &str) -> String {
    let d = std::env::temp_dir().join(format!("braid-comma-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    std::fs::write(d.join("watch.csv"), "1,2\n").expect("watch");
    let text = format!("{HEAD}{TEXTS}{query}");
    let r = compile_script(&text, &d, &Registry::with_builtins());
    let _ = std::fs::remove_dir_all(&d);
    match r {
        Ok(s) => s.jobs[0].logical.as_ref().expect("logical").to_string(),
        Err(e) => e.to_string(),
    }
}

/// A comma join plans exactly as the JOIN ... ON with the conditions naming the later
/// relation; a relation no condition joins is refused where it stands.
#[test]
fn comma_joins_plan_as_join_on_or_are_refused() {
    let comma = error_with_texts(
        "SELECT c.caller, t.start FROM calls c, texts t, watch w WHERE c.caller = t.sender AND c.dur > 3 AND t.start BETWEEN c.start - 2 AND c.start + 2 AND w.number = t.sender",
    );
    let join = error_with_texts(
        "SELECT c.caller, t.start FROM calls c JOIN texts t ON c.caller = t.sender AND t.start BETWEEN c.start - 2 AND c.start + 2 JOIN watch w ON w.number = t.sender WHERE c.dur > 3",
    );
    assert!(comma.contains("Join"), "{comma}");
    assert_eq!(comma, join);
    let cases = [
        (
            "SELECT * FROM calls c, texts t WHERE c.dur > 3",
            "a cross product of two streams is not built",
            "texts t",
        ),
        (
            "SELECT * FROM calls c, texts t WHERE c.caller = t.sender",
            "a join of two streams needs a window",
            "c.caller = t.sender",
        ),
        (
            "SELECT * FROM calls c, watch w WHERE w.risk > c.dur",
            "a join with table `watch` needs an equality",
            "w.risk",
        ),
        (
            "SELECT * FROM calls c, watch w WHERE c.dur > 1",
            "no condition in WHERE joins table `watch`",
            "watch w",
        ),
        (
            "SELECT * FROM calls c JOIN watch w ON c.caller = w.number, texts t WHERE c.caller = t.sender",
            "JOIN in a comma list",
            "watch w",
        ),
        (
            "SELECT * FROM calls c, texts t WHERE caller = sender AND t.start BETWEEN c.start - 1 AND c.start + 1 AND start = 1",
            "column `start` is ambiguous",
            "start = 1",
        ),
    ];
    for (q, what, word) in cases {
        let e = error_with_texts(q);
        assert!(e.contains(what), "{q}\n  expected `{what}` in:\n{e}");
        let at = format!("at line 4, column {}:", column_of(q, word));
        assert!(e.contains(&at), "{q}\n  expected `{at}` in:\n{e}");
    }
}

#[test]
fn a_header_on_a_sink_that_writes_no_text_is_refused() {
    // (Where on the line a CREATE SINK error points is statement.rs's business.)
    let e = error("CREATE SINK s WITH (sink = 'collect', header = true)");
    assert!(e.contains("at line 2, column "), "{e}");
    assert!(
        e.contains("sink `s` writes no text: `header` is an option of stdout, csv and tcp sinks"),
        "{e}"
    );
}
