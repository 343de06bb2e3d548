//! Golden tests of the query language: every script in `examples/` and
//! `crates/braid-cli/tests/golden/` ends with its expected logical, optimized and
//! physical plans (or its expected error) as a comment block. Regenerate them with
//!
//! ```text
//! BRAID_BLESS=1 cargo test -p braid-cli --test tests golden
//! ```

use braid_plan::function::Registry;
use braid_sql::{compile_script, explain};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MARK: &str =
    "-- EXPECTED (regenerate: BRAID_BLESS=1 cargo test -p braid-cli --test tests golden)";

fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    let empty = std::env::temp_dir().join(format!("braid-golden-{}.csv", std::process::id()));
    std::fs::write(&empty, "").expect("empty history");
    let (tolls, _) = linear_road::history::TollHistory::load(&empty).expect("empty tolls");
    let _ = std::fs::remove_file(&empty);
    let sink = linear_road::app::OutputSink::create(None, None).expect("sink");
    linear_road::app::register(
        &mut r,
        Arc::new(tolls),
        Arc::new(linear_road::history::SegmentHistory::empty()),
        Arc::new(sink),
    );
    trips::app::register(
        &mut r,
        trips::tg::TgConfig::default(),
        None,
        trips::app::Adapt::default(),
    );
    r
}

fn scripts() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in [root.join("../../examples"), root.join("tests/golden")] {
        for e in std::fs::read_dir(&dir).expect("script dir").flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sql") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// What the script compiles to, as text: each query's plans, or the error.
fn render(path: &Path, text: &str, registry: &Registry) -> String {
    let base = path.parent().expect("dir");
    let out = match compile_script(text, base, registry) {
        Err(e) => format!("error: {e}\n"),
        Ok(script) => {
            let mut s = String::new();
            for (i, job) in script.jobs.iter().enumerate() {
                s += &format!("query {}\n", i + 1);
                s += &explain(job, &script.registry, 2);
            }
            s
        }
    };
    // Paths are shown relative to the script's directory.
    out.replace(&format!("{}/", base.display()), "")
}

#[test]
fn golden_plans_and_errors() {
    let registry = registry();
    let bless = std::env::var_os("BRAID_BLESS").is_some();
    let mut failures = Vec::new();
    for path in scripts() {
        let all = std::fs::read_to_string(&path).expect("script");
        let (text, expected) = match all.find(MARK) {
            Some(i) => (&all[..i], Some(&all[i + MARK.len()..])),
            None => (&all[..], None),
        };
        let got = render(&path, text, &registry);
        let as_comment: String = got
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "--\n".to_string()
                } else {
                    format!("-- {l}\n")
                }
            })
            .collect();
        if bless {
            let new = format!(
                "{}{MARK}\n{as_comment}",
                text.trim_end().to_string() + "\n\n"
            );
            std::fs::write(&path, new).expect("bless");
            continue;
        }
        match expected {
            None => failures.push(format!("{}: no expected block; run with BRAID_BLESS=1", path.display())),
            Some(e) if e.trim_start_matches('\n') != as_comment => failures.push(format!(
                "{}: plans differ from the expected block (BRAID_BLESS=1 regenerates).\n--- got:\n{got}",
                path.display()
            )),
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
