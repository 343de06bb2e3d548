//! Errors in statements with Braid's own words (`CREATE [OR REPLACE] STREAM|SINK`,
//! `DROP STREAM|SINK`) point at the user's text: the column counts the characters the
//! user wrote, on the line of the error, whatever word sqlparser was handed instead.
//! The expected columns are counted by hand.

use braid_plan::function::Registry;
use braid_sql::compile_script;

/// The error of compiling `text`.
fn error(text: &str) -> String {
    match compile_script(text, &std::env::temp_dir(), &Registry::with_builtins()) {
        Ok(_) => panic!("compiled, but should fail: {text}"),
        Err(e) => e.to_string(),
    }
}

/// `text` fails with `what` at `line`, `column`, and the caret under that column.
fn fails_at(text: &str, line: usize, column: usize, what: &str) {
    let e = error(text);
    let at = format!("line {line}, column {column}:");
    assert!(e.contains(&at), "{text}\n  expected `{at}` in:\n{e}");
    assert!(e.contains(what), "{text}\n  expected `{what}` in:\n{e}");
    let caret = format!("\n  {}^", " ".repeat(column - 1));
    assert!(
        e.contains(&caret),
        "{text}\n  caret not under column {column}:\n{e}"
    );
}

const STREAM: &str = "CREATE STREAM calls (caller BIGINT, start BIGINT) WITH (path = 'calls.csv', event_time = 'start');\n";

#[test]
fn errors_after_create_sink_point_at_the_users_column() {
    // A planning error (an option that is no literal), at `x`.
    fails_at(
        "CREATE SINK out WITH (sink = 'collect', window = x + 1);",
        1,
        50,
        "option `window` needs a literal value",
    );
    // A parse error of sqlparser, at `'collect'`.
    fails_at(
        "CREATE SINK out WITH (sink 'collect');",
        1,
        28,
        "found: 'collect'",
    );
    fails_at(
        "CREATE OR REPLACE SINK out WITH (sink = 'collect', window = x + 1);",
        1,
        61,
        "option `window` needs a literal value",
    );
    // Two SINKs before the error on its line.
    fails_at(
        "CREATE SINK a WITH (sink = 'collect'); CREATE SINK b WITH (sink = 'collect', window = x + 1);",
        1,
        87,
        "option `window` needs a literal value",
    );
    // A query after a sink on the same line.
    fails_at(
        &format!("{STREAM}CREATE SINK o WITH (sink = 'collect'); INSERT INTO o SELECT nosuch FROM calls;"),
        2,
        61,
        "no column `nosuch`",
    );
    // A SINK on the line before does not move the error.
    fails_at(
        &format!("{STREAM}CREATE SINK o WITH (sink = 'collect');\nINSERT INTO o SELECT nosuch FROM calls;"),
        3,
        22,
        "no column `nosuch`",
    );
}

#[test]
fn errors_after_drop_and_create_stream_point_at_the_users_column() {
    fails_at("DROP SINK nosuch;", 1, 11, "nosuch");
    fails_at("DROP STREAM nosuch;", 1, 13, "nosuch");
    fails_at(
        "CREATE STREAM s (a INT) WITH (path = 'x.csv');",
        1,
        18,
        "column `a` of type INT",
    );
    fails_at(
        "CREATE OR REPLACE STREAM s (a BIGINT) WITH (path = 'x.csv', epoch = e + 1);",
        1,
        69,
        "option `epoch` needs a literal value",
    );
}
