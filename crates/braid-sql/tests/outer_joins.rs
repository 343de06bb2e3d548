//! Outer joins as planned: the padded side's columns nullable, the event time of the
//! preserved side (none for FULL), EXPLAIN naming the kind; and what is not built
//! refused by name at its place (RIGHT or FULL JOIN with a table, outer count-window
//! joins, USING, NATURAL, CROSS).

use braid_plan::function::Registry;
use braid_sql::compile_script;

const HEAD: &str = "CREATE STREAM calls (caller BIGINT NOT NULL, start BIGINT NOT NULL) WITH (path = 'c.csv', event_time = 'start', epoch = 10); CREATE STREAM texts (sender BIGINT NOT NULL, ts BIGINT NOT NULL) WITH (path = 't.csv', event_time = 'ts', epoch = 10);\n";

fn compile(query: &str) -> Result<braid_sql::Script, String> {
    let dir = std::env::temp_dir().join(format!("braid-outer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("w.csv"), "number,risk\n1,2\n").expect("table");
    let text = format!(
        "{HEAD}CREATE TABLE w (number BIGINT NOT NULL, risk BIGINT NOT NULL) WITH (path = 'w.csv');\n{query};"
    );
    compile_script(&text, &dir, &Registry::with_builtins()).map_err(|e| e.to_string())
}

const ON: &str = "ON c.caller = t.sender AND t.ts BETWEEN c.start - 5 AND c.start + 5";

#[test]
fn outer_joins_pad_the_other_side() {
    for (kind, nullable, time, label) in [
        (
            "JOIN",
            [false, false, false, false],
            Some(1),
            "Join right.time",
        ),
        (
            "LEFT JOIN",
            [false, false, true, true],
            Some(1),
            "Join (left outer)",
        ),
        (
            "RIGHT OUTER JOIN",
            [true, true, false, false],
            Some(3),
            "Join (right outer)",
        ),
        (
            "FULL JOIN",
            [true, true, true, true],
            None,
            "Join (full outer)",
        ),
    ] {
        let s = compile(&format!("SELECT * FROM calls c {kind} texts t {ON}")).expect(kind);
        let logical = s.jobs[0].logical.as_ref().expect("logical");
        let join = match logical {
            j @ braid_sql::logical::Logical::Join { .. } => j,
            other => other.children()[0],
        };
        let schema = join.schema();
        let got: Vec<bool> = schema.fields.iter().map(|f| f.nullable).collect();
        assert_eq!(got, nullable, "{kind}");
        assert_eq!(schema.event_time, time, "{kind}");
        assert!(
            join.describe().starts_with(label),
            "{kind}: {}",
            join.describe()
        );
    }
    let s = compile("SELECT * FROM calls c LEFT JOIN w ON c.caller = w.number").expect("lookup");
    let plan = s.jobs[0].logical.as_ref().expect("logical").to_string();
    assert!(plan.contains("Lookup (left outer) table w"), "{plan}");
}

#[test]
fn outer_joins_not_built_are_refused_by_name() {
    let cases = [
        (
            "SELECT * FROM calls c RIGHT JOIN w ON c.caller = w.number",
            "RIGHT or FULL JOIN with a table",
            "w ON",
        ),
        (
            "SELECT * FROM calls c FULL JOIN w ON c.caller = w.number",
            "RIGHT or FULL JOIN with a table",
            "w ON",
        ),
        (
            "SELECT * FROM LAST(calls, 3) c LEFT JOIN LAST(texts, 3) t ON c.caller = t.sender",
            "an outer join of count windows",
            "LAST(texts",
        ),
        (
            "SELECT * FROM calls c JOIN texts t USING (caller)",
            "JOIN ... USING",
            "texts t",
        ),
        (
            "SELECT * FROM calls c NATURAL JOIN texts t",
            "NATURAL JOIN",
            "texts t",
        ),
        (
            "SELECT * FROM calls c CROSS JOIN texts t",
            "CROSS JOIN",
            "texts t",
        ),
    ];
    for (q, what, word) in cases {
        let e = compile(q).err().unwrap_or_else(|| panic!("compiled: {q}"));
        assert!(e.contains(what), "{q}: {e}");
        let at = format!("at line 3, column {}:", q.find(word).expect("word") + 1);
        assert!(e.contains(&at), "{q}: expected {at} in {e}");
    }
}
