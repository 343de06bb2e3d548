//! The producers of a stream that lives in Braid (`listen`, `tail`, `format`,
//! `header`): read from its options, refused with a reason when wrong.

use braid_plan::function::Registry;
use braid_sql::catalog::Feeds;
use braid_sql::{add_statements, Script};
use std::path::Path;

fn declare(options: &str) -> Result<Feeds, String> {
    let mut script = Script {
        catalog: Default::default(),
        jobs: Vec::new(),
        registry: Registry::with_builtins(),
        shown: Vec::new(),
    };
    script.catalog.live = true;
    let text = format!("CREATE STREAM s (a BIGINT, b TEXT) {options};");
    add_statements(&mut script, &text, Path::new("/base")).map_err(|e| e.to_string())?;
    Ok(script.catalog.streams["s"].feeds.clone())
}

#[test]
fn listen_tail_format_header() {
    assert_eq!(declare("").unwrap(), Feeds::default());
    let f = declare("WITH (listen = 7001)").unwrap();
    assert_eq!(f.listen, Some("127.0.0.1:7001".parse().unwrap()));
    assert!(!f.json && !f.header && f.tail.is_none());
    let f = declare("WITH (listen = '7002', format = 'json')").unwrap();
    assert_eq!(f.listen, Some("127.0.0.1:7002".parse().unwrap()));
    assert!(f.json);
    let f = declare("WITH (listen = '0.0.0.0:7003')").unwrap();
    assert_eq!(f.listen, Some("0.0.0.0:7003".parse().unwrap()));
    let f = declare("WITH (tail = 'in/s.csv', format = 'CSV', header = true)").unwrap();
    assert_eq!(f.tail.as_deref(), Some(Path::new("/base/in/s.csv")));
    assert!(f.header && !f.json && f.listen.is_none());
}

#[test]
fn wrong_feed_options_are_refused() {
    let e = declare("WITH (listen = 'here')").unwrap_err();
    assert!(e.contains("listen = 'here' is not an address"), "{e}");
    let e = declare("WITH (listen = 7001, format = 'xml')").unwrap_err();
    assert!(e.contains("unknown format 'xml'"), "{e}");
    let e = declare("WITH (format = 'json')").unwrap_err();
    assert!(e.contains("give listen"), "{e}");
    let e = declare("WITH (tail = 'f', format = 'json', header = true)").unwrap_err();
    assert!(e.contains("JSON lines have no header"), "{e}");
    let e = declare("WITH (listen = 7001, port = 2)").unwrap_err();
    assert!(
        e.contains("unknown option `port`") && e.contains("listen"),
        "{e}"
    );
    // Only a stream that lives in Braid has producers.
    let e = declare("WITH (path = 'x.csv', listen = 7001)").unwrap_err();
    assert!(e.contains("unknown option `listen`"), "{e}");
}
