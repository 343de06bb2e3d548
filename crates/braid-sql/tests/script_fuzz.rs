//! Bad query text never panics the compiler: valid scripts covering most of the
//! language, mutated at random (tokens deleted, repeated, swapped or replaced by other
//! SQL words, text cut short), compile to a script or to an error, and every script
//! that compiles can be explained. Errors must name a position inside the text.

use braid_plan::function::Registry;
use braid_sql::{compile_script, explain};
use proptest::prelude::*;
use std::path::PathBuf;

const HEAD: &str = "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT) WITH (path = 'calls.csv', event_time = 'start', epoch = 10, lateness = 5);
CREATE STREAM texts (sender BIGINT, len BIGINT, start BIGINT) WITH (path = 'texts.csv', event_time = 'start', epoch = 10);
CREATE TABLE watch (number BIGINT, risk BIGINT) WITH (path = 'watch.csv');
CREATE SINK out WITH (sink = 'stdout');
";

/// Queries over the streams above, one feature or two each.
const QUERIES: &[&str] = &[
    "SET partitions = 6; INSERT INTO out SELECT caller, dur * 2 + 1 AS d FROM calls WHERE dur > 10 AND NOT (caller IN (1, 2, 3));",
    "SELECT window_end, caller, count(*) AS n, sum(dur), avg(dur), min(dur), max(dur), count(DISTINCT callee) FROM calls GROUP BY TUMBLE(start, 60), caller HAVING count(*) > 1;",
    "SELECT window_start, caller % 3 AS k, count(*) FROM calls GROUP BY HOP(start, 20, 60), caller % 3;",
    "SELECT caller, count(*) FROM calls GROUP BY SESSION(start, 30), caller;",
    "SELECT window_end, count(*) FILTER (WHERE dur > 100) AS long, sum(dur) FILTER (WHERE callee IS NOT NULL), count(DISTINCT callee) FILTER (WHERE dur > 5) FROM calls GROUP BY TUMBLE(start, 60);",
    "SELECT caller, max(dur) FROM calls GROUP BY ROWS(5), caller;",
    "SELECT c.caller, t.len FROM calls AS c JOIN texts AS t ON c.caller = t.sender AND t.start BETWEEN c.start - 5 AND c.start + 5;",
    "SELECT c.caller, t.sender FROM calls AS c JOIN texts AS t ON c.dur < t.len AND t.start BETWEEN c.start - 3 AND c.start + 3;",
    "SELECT a.caller, b.sender FROM LAST(calls, 5) AS a JOIN LAST(texts, 4) AS b ON a.dur < b.len;",
    "SELECT window_end, minutes, count(*) FROM (SELECT start, dur / 60 AS minutes, risk FROM calls JOIN watch ON calls.caller = watch.number) AS x WHERE risk > 1 GROUP BY TUMBLE(start, 60), minutes;",
    "SELECT caller AS k, start FROM calls UNION ALL SELECT sender AS k, start FROM texts;",
    "SELECT CASE WHEN dur > 100 THEN 'long' ELSE 'short' END AS kind, CAST(dur AS DOUBLE) / 2.0 AS half, coalesce(callee, 0), abs(-dur), length('x') FROM calls WHERE callee IS NOT NULL AND dur BETWEEN 1 AND 500;",
    "SET stages = 'operator'; SET merge = 'best_effort'; SELECT window_end, n, count(*) FROM (SELECT window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 10), caller) AS w GROUP BY TUMBLE(window_end, 100), n;",
    "SELECT * FROM PARALLEL(calls, partitions => 8, route => caller, broadcast => dur > 500, strategy => 'parasplit', apply => (SELECT caller, dur FROM calls WHERE dur > 3), merge => 'time');",
];

/// Words and symbols a mutation may put in.
const VOCAB: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "JOIN",
    "ON",
    "AND",
    "OR",
    "NOT",
    "AS",
    "(",
    ")",
    ",",
    ";",
    "*",
    "+",
    "-",
    "/",
    "%",
    "=",
    "<",
    "<>",
    ">=",
    "'",
    "''",
    "\"",
    "1",
    "0",
    "-1",
    "9223372036854775807",
    "1e999",
    "NULL",
    "TRUE",
    "calls",
    "texts",
    "watch",
    "caller",
    "start",
    "dur",
    "TUMBLE",
    "HOP",
    "SESSION",
    "ROWS",
    "LAST",
    "PARALLEL",
    "UNION",
    "ALL",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "CAST",
    "BIGINT",
    "count",
    "sum",
    "DISTINCT",
    "HAVING",
    "INSERT",
    "INTO",
    "CREATE",
    "STREAM",
    "TABLE",
    "SINK",
    "WITH",
    "SET",
    "partitions",
    "EXPLAIN",
    "é",
    "\u{0}",
    "--",
    "/*",
    "=>",
    "BETWEEN",
    "IN",
    "IS",
    "LIKE",
    "window_end",
];

/// Splits text into words and single symbols (quotes kept inside their word).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        if ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '\'' {
            cur.push(ch);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize),
    Repeat(usize),
    Swap(usize, usize),
    Replace(usize, usize),
    Insert(usize, usize),
    Cut(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Repeat),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Replace(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Insert(a, b)),
        any::<usize>().prop_map(Edit::Cut),
    ]
}

fn apply(mut toks: Vec<String>, edits: &[Edit]) -> String {
    for e in edits {
        let n = toks.len().max(1);
        match *e {
            Edit::Delete(i) if !toks.is_empty() => {
                toks.remove(i % n);
            }
            Edit::Repeat(i) if !toks.is_empty() => {
                let t = toks[i % n].clone();
                toks.insert(i % n, t);
            }
            Edit::Swap(a, b) if !toks.is_empty() => toks.swap(a % n, b % n),
            Edit::Replace(i, w) if !toks.is_empty() => toks[i % n] = VOCAB[w % VOCAB.len()].into(),
            Edit::Insert(i, w) => toks.insert(i % (toks.len() + 1), VOCAB[w % VOCAB.len()].into()),
            Edit::Cut(i) => toks.truncate(i % n),
            _ => {}
        }
    }
    toks.join(" ")
}

fn base_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-script-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("watch.csv"), "number,risk\n1,2\n3,4\n").expect("watch");
    std::fs::write(dir.join("calls.csv"), "caller,callee,start,dur\n1,2,3,4\n").expect("calls");
    std::fs::write(dir.join("texts.csv"), "sender,len,start\n1,2,3\n").expect("texts");
    dir
}

#[test]
fn every_base_query_compiles() {
    let dir = base_dir();
    let reg = Registry::with_builtins();
    for q in QUERIES {
        let text = format!("{HEAD}{q}");
        let script = compile_script(&text, &dir, &reg).unwrap_or_else(|e| panic!("{q}: {e}"));
        for job in &script.jobs {
            assert!(!explain(job, &script.registry, 2).is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_scripts_never_panic(
        q in 0..QUERIES.len(),
        edits in prop::collection::vec(edit(), 1..5),
        in_head in any::<bool>(),
    ) {
        let dir = base_dir();
        let reg = Registry::with_builtins();
        let text = if in_head {
            format!("{}{}", apply(tokens(HEAD), &edits), QUERIES[q])
        } else {
            format!("{HEAD}{}", apply(tokens(QUERIES[q]), &edits))
        };
        match compile_script(&text, &dir, &reg) {
            Ok(script) => {
                for job in &script.jobs {
                    prop_assert!(!explain(job, &script.registry, 2).is_empty());
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
