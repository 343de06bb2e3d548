//! What `SHOW STREAMS | SINKS | TABLES` and `DESCRIBE name` list: tables of text the
//! caller lays out (the CLI aligns them), built from the catalog.

use super::{Catalog, SinkDef, StreamDef, TableDef};
use braid_plan::error::{Error, Result};
use braid_plan::plan::{Pace, SinkSpec, Source, SourceSpec};
use braid_plan::types::Schema;

/// A table of text: a header and rows of as many cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Column names.
    pub header: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<String>>,
}

impl Listing {
    fn new(header: &[&str]) -> Listing {
        Listing {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

impl Catalog {
    /// `SHOW STREAMS`: one row per stream.
    pub fn show_streams(&self) -> Listing {
        let mut l = Listing::new(&["name", "source", "event_time", "epoch", "lateness"]);
        for s in self.streams.values() {
            l.row(vec![
                s.name.clone(),
                source_text(&s.source),
                event_time(&s.source.schema),
                s.source.epoch.to_string(),
                s.lateness.to_string(),
            ]);
        }
        l
    }

    /// `SHOW SINKS`: one row per sink.
    pub fn show_sinks(&self) -> Listing {
        let mut l = Listing::new(&["name", "sink", "stamp_emit"]);
        for s in self.sinks.values() {
            l.row(vec![
                s.name.clone(),
                sink_text(&s.spec),
                s.stamp_emit.to_string(),
            ]);
        }
        l
    }

    /// `SHOW TABLES`: one row per table.
    pub fn show_tables(&self) -> Listing {
        let mut l = Listing::new(&["name", "columns", "rows"]);
        for t in self.tables.values() {
            l.row(vec![
                t.name.clone(),
                t.schema.fields.len().to_string(),
                t.rows.len().to_string(),
            ]);
        }
        l
    }

    /// `SHOW VIEWS`: one row per view.
    pub fn show_views(&self) -> Listing {
        let mut l = Listing::new(&["name", "query"]);
        for v in self.views.values() {
            l.row(vec![v.name.clone(), v.sql.clone()]);
        }
        l
    }

    /// `DESCRIBE name`: the columns (of a stream or table), then the options.
    pub fn describe(&self, name: &str) -> Result<Vec<Listing>> {
        let key = name.to_ascii_lowercase();
        if let Some(s) = self.streams.get(&key) {
            return Ok(vec![columns(&s.source.schema), stream_options(s)]);
        }
        if let Some(t) = self.tables.get(&key) {
            return Ok(vec![columns(&t.schema), table_options(t)]);
        }
        if let Some(s) = self.sinks.get(&key) {
            return Ok(vec![sink_options(s)]);
        }
        Err(Error::Plan(format!(
            "no stream, table, sink or view `{name}`; {}",
            self.names()
        )))
    }

    /// What is declared, for an error about a name that is not.
    pub fn names(&self) -> String {
        let kinds = [
            (
                "streams",
                self.streams
                    .values()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>(),
            ),
            (
                "tables",
                self.tables.values().map(|t| t.name.clone()).collect(),
            ),
            (
                "sinks",
                self.sinks.values().map(|s| s.name.clone()).collect(),
            ),
            (
                "views",
                self.views.values().map(|v| v.name.clone()).collect(),
            ),
        ];
        let parts: Vec<String> = kinds
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k} are {}", v.join(", ")))
            .collect();
        match parts.is_empty() {
            true => "nothing is declared (declare one with CREATE)".into(),
            false => parts.join("; "),
        }
    }
}

/// The columns of a stream, table or view: name, SQL type, nullability.
pub(crate) fn columns(schema: &Schema) -> Listing {
    let mut l = Listing::new(&["column", "type", "nullable"]);
    for f in &schema.fields {
        l.row(vec![f.name.clone(), f.sql_type(), f.nullable.to_string()]);
    }
    l
}

fn stream_options(s: &StreamDef) -> Listing {
    let src = &s.source;
    let mut l = Listing::new(&["option", "value"]);
    let mut opt = |k: &str, v: String| l.row(vec![k.into(), v]);
    opt("source", source_text(src));
    opt("event_time", event_time(&src.schema));
    opt("epoch", src.epoch.to_string());
    opt("window", src.window.to_string());
    opt("lateness", s.lateness.to_string());
    opt(
        "speed",
        match src.pace {
            Pace::Max => "max (not paced)".into(),
            Pace::EventTime {
                units_per_second,
                speed,
            } => format!("{speed} ({units_per_second} event-time units per second)"),
        },
    );
    l
}

fn table_options(t: &TableDef) -> Listing {
    let mut l = Listing::new(&["option", "value"]);
    l.row(vec!["rows".into(), t.rows.len().to_string()]);
    l
}

fn sink_options(s: &SinkDef) -> Listing {
    let mut l = Listing::new(&["option", "value"]);
    l.row(vec!["sink".into(), sink_text(&s.spec)]);
    l.row(vec!["stamp_emit".into(), s.stamp_emit.to_string()]);
    l.row(vec!["header".into(), s.header.to_string()]);
    l
}

fn event_time(schema: &Schema) -> String {
    schema
        .event_time
        .map_or("(none)".into(), |c| schema.fields[c].name.clone())
}

/// What a source reads, in a few words.
fn source_text(s: &Source) -> String {
    match &s.spec {
        SourceSpec::Csv { path, .. } => format!("csv {}", path.display()),
        SourceSpec::Binary { path } => format!("binary {}", path.display()),
        SourceSpec::JsonLines { path, .. } => format!("json lines {}", path.display()),
        SourceSpec::Columnar { path, format } => format!("{format} {}", path.display()),
        SourceSpec::Stdin => "stdin".into(),
        SourceSpec::Tcp { addr } => format!("tcp {addr}"),
        SourceSpec::Generator(g) => {
            format!("generator ({} tuples, {} per second)", g.tuples, g.rate)
        }
        SourceSpec::Memory(b) => format!("memory ({} rows)", b.len()),
        SourceSpec::Native(n) => format!("native {n}"),
        SourceSpec::Kafka(k) => format!("kafka {}/{}", k.bootstrap, k.topic),
        SourceSpec::Interleave(kids) => match kids.first() {
            Some(k) => format!("{} files, first {}", kids.len(), source_text(k)),
            None => "no files".into(),
        },
        SourceSpec::Late { .. } => "late rows".into(),
    }
}

/// Where a sink writes, in a few words.
fn sink_text(s: &SinkSpec) -> String {
    match s {
        SinkSpec::Stdout => "stdout".into(),
        SinkSpec::File(p) => format!("csv {}", p.display()),
        SinkSpec::Tcp(a) => format!("tcp {a}"),
        SinkSpec::Discard => "discard".into(),
        SinkSpec::Native(n) => format!("native {n}"),
        SinkSpec::Collect => "collect".into(),
        SinkSpec::Kafka(k) => format!("kafka {}/{}", k.bootstrap, k.topic),
        SinkSpec::Columnar(p, format) => format!("{format} {}", p.display()),
    }
}
