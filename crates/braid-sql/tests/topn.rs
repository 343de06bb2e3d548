//! Window top-N as planned: a TopN node over the windowed aggregate, `rownum` a BIGINT
//! column after the aggregate's; the forms Braid does not build refused by name at
//! their place.

use braid_plan::function::Registry;
use braid_sql::compile_script;

const HEAD: &str = "CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT) WITH (path = 'calls.csv', event_time = 'start', epoch = 10);\n";

const AGG: &str = "(SELECT window_start, window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller)";

fn compile(query: &str) -> Result<braid_sql::Script, String> {
    compile_script(
        &format!("{HEAD}{query};"),
        &std::env::temp_dir(),
        &Registry::with_builtins(),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn a_window_top_n_is_a_top_n_node() {
    let q = format!("SELECT caller, rownum FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC, caller) AS rownum FROM {AGG}) WHERE rownum <= 3 AND n > 1");
    let s = compile(&q).expect("compiles");
    let plan = s.jobs[0].logical.as_ref().expect("logical").to_string();
    assert!(
        plan.contains("TopN 3 per [window_start, window_end] by [n DESC, caller]"),
        "{plan}"
    );
    assert!(plan.contains("Filter (n > 1)"), "{plan}");
    let schema = s.jobs[0]
        .logical
        .as_ref()
        .expect("logical")
        .schema()
        .clone();
    assert_eq!(schema.fields[1].name, "rownum");
    // Aliases on both subqueries qualify their columns.
    let q = format!("SELECT t.caller FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a.window_start, a.window_end ORDER BY a.n DESC) AS r FROM {AGG} AS a) AS t WHERE t.r <= 1");
    let s = compile(&q).expect("compiles with aliases");
    let plan = s.jobs[0].logical.as_ref().expect("logical").to_string();
    assert!(
        plan.contains("TopN 1 per [window_start, window_end] by [n DESC]"),
        "{plan}"
    );
}

#[test]
fn top_n_forms_not_built_are_refused_by_name() {
    let top = |over: &str, filter: &str| {
        format!("SELECT * FROM (SELECT *, ROW_NUMBER() OVER ({over}) AS rownum FROM {AGG}) WHERE {filter}")
    };
    let cases = [
        (top("PARTITION BY window_start, window_end ORDER BY n + 1", "rownum <= 2"), "an expression in OVER", "n + 1"),
        (top("PARTITION BY window_end ORDER BY n", "rownum <= 2"), "PARTITION BY window_start, window_end", "ROW_NUMBER"),
        (top("PARTITION BY window_start, window_end ORDER BY n ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "rownum <= 2"), "without a frame", "ROW_NUMBER"),
        (top("PARTITION BY window_start, window_end ORDER BY n NULLS FIRST", "rownum <= 2"), "NULLS FIRST", "n NULLS"),
        // Without the rownum <= N filter it is a window function, refused at OVER.
        (top("PARTITION BY window_start, window_end ORDER BY n", "rownum > 2"), "OVER", "OVER"),
    ];
    for (q, what, word) in cases {
        let e = compile(&q).err().unwrap_or_else(|| panic!("compiled: {q}"));
        assert!(e.contains(what), "{q}: {e}");
        let at = format!("at line 2, column {}:", q.find(word).expect("word") + 1);
        assert!(e.contains(&at), "{q}: expected {at} in {e}");
    }
}
