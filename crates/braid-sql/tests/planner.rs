//! The planner keeps every part of a query: nothing written is dropped on the way to the
//! logical plan.

use braid_plan::function::Registry;
use braid_sql::{compile_script, explain_stages};
use std::path::Path;

const HEAD: &str = "
CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT) WITH (path = 'calls.csv', event_time = 'start');
CREATE STREAM texts (sender BIGINT, receiver BIGINT, start BIGINT, dur BIGINT) WITH (path = 'texts.csv', event_time = 'start');
CREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');
";

/// A join after a subquery that is itself a join of two count windows (`LAST`) is
/// planned; it was once dropped without a word.
#[test]
fn a_join_after_a_count_window_subquery_is_kept() {
    let dir = std::env::temp_dir().join(format!("braid-sql-planner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    std::fs::write(dir.join("watch.csv"), "1,5\n").expect("table");
    let query = "SELECT s.caller FROM (SELECT * FROM LAST(calls, 3) JOIN LAST(texts, 3) \
                 ON caller = sender) s JOIN watch ON s.caller = watch.number;";
    let script = compile_script(
        &format!("{HEAD}{query}"),
        Path::new(&dir),
        &Registry::with_builtins(),
    )
    .unwrap_or_else(|e| panic!("compiles: {e}"));
    let text = explain_stages(&script.jobs[0]);
    assert!(text.contains("Lookup table watch"), "{text}");
    assert!(text.contains("Join last 3 x last 3 rows"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
