//! What a script declares: streams (`CREATE STREAM`), tables (`CREATE TABLE`), sinks
//! (`CREATE SINK`) and settings (`SET`).
//!
//! The catalog is the bottom of the crate: it knows sources and sinks, nothing of
//! planning. `declare` builds definitions from `WITH (...)` options; `settings`
//! holds what `SET` changes.

mod declare;
mod settings;
mod show;

pub use declare::{sink, stream, table, Options};
pub use settings::{duration, set, Cut, MergeMode, Settings};
pub(crate) use show::columns;
pub use show::Listing;

use braid_plan::batch::Batch;
use braid_plan::error::{Error, Result};
use braid_plan::plan::{SinkSpec, Source};
use braid_plan::types::Schema;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A declared stream.
#[derive(Clone, Debug)]
pub struct StreamDef {
    /// Name.
    pub name: String,
    /// The physical source (schema, epoch, window, pacing).
    pub source: Source,
    /// Allowed lateness in event-time units.
    pub lateness: i64,
    /// The unit of the event time, when declared (`time_unit`): what INTERVAL converts
    /// to.
    pub time_unit: Option<braid_plan::time::TimeUnit>,
    /// How producers reach a stream that lives in Braid besides INSERT and COPY.
    pub feeds: Feeds,
}

/// The producers of a stream that lives in Braid, from its options: TCP clients
/// (`listen`) and a growing file (`tail`), writing CSV or JSON lines (`format`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Feeds {
    /// Accept TCP producers at this address (`listen = '127.0.0.1:7001'`, or a port).
    pub listen: Option<std::net::SocketAddr>,
    /// Follow this file as it grows (`tail = 'path.csv'`).
    pub tail: Option<std::path::PathBuf>,
    /// The lines are JSON objects (`format = 'json'`); CSV otherwise.
    pub json: bool,
    /// The first line (of the file, of each TCP producer) is a header (`header`).
    pub header: bool,
    /// How much of the stream its log keeps (`retention`); all of it when `None`.
    pub retention: Option<Retention>,
}

/// How much of a stream that lives in Braid its log keeps (`WITH (retention = ...)`):
/// rows older than this go once no reader needs them (a query still reading them, or
/// a query's last committed checkpoint that would read them again). A query or
/// subscriber that starts later reads from the oldest row kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// The newest rows, this many (`retention = 100000`, or `'100000 rows'`).
    Rows(u64),
    /// The rows that came within this long (`retention = '10m'`: `s`, `m`, `h`, `d`).
    For(std::time::Duration),
}

/// A declared table: rows loaded when the script is compiled, joined by lookup.
#[derive(Debug)]
pub struct TableDef {
    /// Name.
    pub name: String,
    /// Columns.
    pub schema: Schema,
    /// The rows.
    pub rows: Arc<Batch>,
}

/// A declared sink.
#[derive(Clone, Debug)]
pub struct SinkDef {
    /// Name.
    pub name: String,
    /// Where rows go.
    pub spec: SinkSpec,
    /// Append each line's emit time.
    pub stamp_emit: bool,
    /// Write the column names first (`header = true`; stdout, csv and tcp sinks).
    pub header: bool,
    /// A latency constraint on the queries writing here (`max_latency = '10ms'`), or
    /// the script's `SET max_latency` when they run.
    pub max_latency: Option<std::time::Duration>,
    /// The part of the plan the constraint covers, when not all of it: from the source
    /// to this operator's input (`latency_to = 'query1'` or `'Map(query1)'`, `'Merge'`).
    pub latency_to: Option<String>,
    /// Where that part begins, when not at the source: this operator's input
    /// (`latency_from`, named as `latency_to`).
    pub latency_from: Option<String>,
}

/// A declared view (`CREATE VIEW name AS query`): a named query, planned where a query
/// names it as if its text were written there as a subquery.
#[derive(Clone, Debug)]
pub struct ViewDef {
    /// Name.
    pub name: String,
    /// The query's text (as sqlparser prints it; errors found where it is used point
    /// into it).
    pub sql: String,
    /// The query, parsed from `sql`.
    pub query: sqlparser::ast::Query,
}

/// Everything declared so far.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Streams by lower-case name.
    pub streams: BTreeMap<String, StreamDef>,
    /// Tables by lower-case name.
    pub tables: BTreeMap<String, Arc<TableDef>>,
    /// Sinks by lower-case name.
    pub sinks: BTreeMap<String, SinkDef>,
    /// Views by lower-case name.
    pub views: BTreeMap<String, ViewDef>,
    /// Settings.
    pub settings: Settings,
    /// Late-row streams by lower-case sink name: `LATE(sink)` reads the rows that the
    /// query writing to `sink` refused as late.
    pub late: BTreeMap<String, LateStream>,
    /// Streams live in Braid (the server): a stream declared without a source or path
    /// is a log that `INSERT`, `COPY` and queries append to (`source = 'log'`).
    pub live: bool,
}

/// The late rows of a query, as a stream another query reads in the same dataflow.
#[derive(Clone, Debug)]
pub struct LateStream {
    /// The stream (its source is a [`braid_plan::plan::SourceSpec::Late`]).
    pub def: StreamDef,
    /// The job whose dataflow makes the rows (which of its plans: the source's
    /// [`braid_plan::plan::SourceSpec::Late`]).
    pub job: usize,
    /// Several queries write to the sink, so `LATE(sink)` would not name one.
    pub ambiguous: bool,
}

impl Catalog {
    /// A stream by name; the error lists the streams (and says if it is a table).
    pub fn stream(&self, name: &str) -> Result<&StreamDef> {
        let key = name.to_ascii_lowercase();
        if let Some(s) = self.streams.get(&key) {
            return Ok(s);
        }
        if let Some(sink) = key.strip_prefix("late(").and_then(|k| k.strip_suffix(')')) {
            return self.late_stream(sink).map(|l| &l.def);
        }
        if self.views.contains_key(&key) {
            return Err(Error::Plan(format!(
                "`{name}` is a view; a view is read in FROM, not as LAST(...) or LATE(...)"
            )));
        }
        if self.tables.contains_key(&key) {
            return Err(Error::Plan(format!(
                "`{name}` is a table; tables can only be joined to a stream (FROM stream JOIN {name} ON ...)"
            )));
        }
        Err(Error::Plan(format!(
            "no stream `{name}`; streams are {}",
            list(self.streams.keys())
        )))
    }

    /// The late rows of the query writing to `sink`, for `LATE(sink)`.
    pub fn late_stream(&self, sink: &str) -> Result<&LateStream> {
        let key = sink.to_ascii_lowercase();
        match self.late.get(&key) {
            Some(l) if l.ambiguous => Err(Error::Plan(format!(
                "LATE({sink}): several queries write to sink `{sink}`; give the one whose late rows you want a sink of its own"
            ))),
            Some(l) => Ok(l),
            None if self.sinks.contains_key(&key) => Err(Error::Plan(format!(
                "LATE({sink}): no earlier query writing to sink `{sink}` can refuse a row as late (only time windows and stream joins do){}",
                if self.late.is_empty() {
                    String::new()
                } else {
                    format!("; queries with late rows write to {}", list(self.late.keys()))
                }
            ))),
            None => Err(Error::Plan(format!(
                "LATE({sink}): no sink `{sink}`; LATE names the sink of an earlier INSERT INTO query{}",
                if self.late.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", list(self.late.keys()))
                }
            ))),
        }
    }

    /// A sink by name.
    pub fn sink(&self, name: &str) -> Result<&SinkDef> {
        self.sinks.get(&name.to_ascii_lowercase()).ok_or_else(|| {
            Error::Plan(format!(
                "no sink `{name}`; sinks are {}",
                list(self.sinks.keys())
            ))
        })
    }
}

/// What CREATE and DROP name: a stream, a table or a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `STREAM`.
    Stream,
    /// `TABLE`.
    Table,
    /// `SINK`.
    Sink,
    /// `VIEW`.
    View,
}

impl Kind {
    /// The word, lower case.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Stream => "stream",
            Kind::Table => "table",
            Kind::Sink => "sink",
            Kind::View => "view",
        }
    }
}

impl Catalog {
    /// What `name` is declared as, if anything.
    pub fn kind_of(&self, name: &str) -> Option<Kind> {
        let key = name.to_ascii_lowercase();
        if self.streams.contains_key(&key) {
            Some(Kind::Stream)
        } else if self.tables.contains_key(&key) {
            Some(Kind::Table)
        } else if self.sinks.contains_key(&key) {
            Some(Kind::Sink)
        } else if self.views.contains_key(&key) {
            Some(Kind::View)
        } else {
            None
        }
    }

    /// `DROP kind [IF EXISTS] name`. Queries compiled before keep what they read and
    /// write (their plans hold it); later ones no longer see the name, and a dropped
    /// sink's late rows are no longer `LATE(name)`.
    pub fn drop(&mut self, kind: Kind, name: &str, if_exists: bool) -> Result<()> {
        let key = name.to_ascii_lowercase();
        match self.kind_of(name) {
            Some(k) if k == kind => {}
            None if if_exists => return Ok(()),
            Some(other) => {
                return Err(Error::Plan(format!(
                    "`{name}` is a {}, not a {}; write DROP {} {name}",
                    other.word(),
                    kind.word(),
                    other.word().to_ascii_uppercase()
                )))
            }
            None => {
                return Err(Error::Plan(format!(
                    "no {} `{name}` to drop; {}",
                    kind.word(),
                    self.names()
                )))
            }
        }
        match kind {
            Kind::Stream => drop(self.streams.remove(&key)),
            Kind::Table => drop(self.tables.remove(&key)),
            Kind::View => drop(self.views.remove(&key)),
            Kind::Sink => {
                self.sinks.remove(&key);
                self.late.remove(&key);
            }
        }
        Ok(())
    }
}

fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = names.map(|s| s.as_str()).collect();
    if v.is_empty() {
        "none (declare one with CREATE)".into()
    } else {
        v.join(", ")
    }
}
