//! Definitions from `CREATE STREAM/TABLE/SINK ... WITH (options)`: sources, sinks and
//! tables loaded from CSV.

use super::{Feeds, Retention, SinkDef, StreamDef, TableDef};
use crate::time::TimeUnit;
use braid_plan::batch::{Batch, RowKey, Scalar};
use braid_plan::error::{Error, Result};
use braid_plan::plan::{GeneratorSpec, Pace, SinkSpec, Source, SourceSpec};
use braid_plan::types::{DataType, Schema};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Option values of a `WITH (...)` clause.
pub struct Options {
    what: String,
    values: BTreeMap<String, Scalar>,
    used: Vec<String>,
}

impl Options {
    /// Options of `what` (for messages).
    pub fn new(what: &str, values: BTreeMap<String, Scalar>) -> Options {
        Options {
            what: what.to_string(),
            values,
            used: Vec::new(),
        }
    }

    /// A stream declared without `source` or `path` reads its log (`source = 'log'`):
    /// streams live in Braid.
    pub fn default_to_log(&mut self) {
        if !["source", "connector", "path"]
            .iter()
            .any(|k| self.values.contains_key(*k))
        {
            self.values
                .insert("source".into(), Scalar::Str("log".into()));
        }
    }

    fn take(&mut self, key: &str) -> Option<Scalar> {
        self.used.push(key.to_string());
        self.values.remove(key)
    }

    /// A string option.
    pub fn string(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some(Scalar::Str(s)) => Ok(Some(s)),
            Some(other) => Err(Error::Plan(format!(
                "option `{key}` of {} must be a quoted string, found {other}",
                self.what
            ))),
        }
    }

    /// An integer option: `60` or, as Flink's DDL writes it, `'60'`.
    pub fn int(&mut self, key: &str) -> Result<Option<i64>> {
        match self.take(key) {
            None => Ok(None),
            Some(Scalar::Int(i)) => Ok(Some(i)),
            Some(Scalar::Str(s)) if s.trim().parse::<i64>().is_ok() => Ok(s.trim().parse().ok()),
            Some(other) => Err(self.expected(key, "an integer", &other)),
        }
    }

    /// A length of event time: an integer of the stream's units, or with a declared
    /// `unit` a length as text, `'1 minute'` (a whole number of units).
    pub fn length(&mut self, key: &str, unit: Option<TimeUnit>) -> Result<Option<i64>> {
        match self.take(key) {
            Some(Scalar::Str(s)) if s.trim().parse::<i64>().is_err() => {
                let nanos = match (crate::time::length_nanos(&s), unit) {
                    (Ok(n), _) => n,
                    (Err(_), None) => {
                        return Err(self.expected(key, "an integer", &Scalar::Str(s)))
                    }
                    (Err(why), Some(_)) => {
                        return Err(Error::Plan(format!(
                            "option `{key}` of {}: {why}",
                            self.what
                        )))
                    }
                };
                let Some(unit) = unit else {
                    return Err(Error::Plan(format!(
                        "option `{key}` of {} is a length, '{s}', but the stream declares no time unit; add time_unit = 's', 'ms', 'us' or 'ns'",
                        self.what
                    )));
                };
                unit.of_nanos(nanos, &format!("option `{key}` = '{s}' of {}", self.what))
                    .map(Some)
            }
            None => Ok(None),
            Some(Scalar::Int(i)) => Ok(Some(i)),
            Some(Scalar::Str(s)) => Ok(s.trim().parse().ok()),
            Some(other) => Err(self.expected(key, "an integer or a length ('1 minute')", &other)),
        }
    }

    /// A number option: `1.5`, `2` or quoted, `'1.5'`.
    pub fn float(&mut self, key: &str) -> Result<Option<f64>> {
        match self.take(key) {
            None => Ok(None),
            Some(Scalar::Int(i)) => Ok(Some(i as f64)),
            Some(Scalar::Float(f)) => Ok(Some(f)),
            Some(Scalar::Str(s)) if s.trim().parse::<f64>().is_ok_and(f64::is_finite) => {
                Ok(s.trim().parse().ok())
            }
            Some(other) => Err(self.expected(key, "a number", &other)),
        }
    }

    /// A boolean option: `true`, `false` or quoted, `'true'` (any case).
    pub fn bool(&mut self, key: &str) -> Result<Option<bool>> {
        match self.take(key) {
            None => Ok(None),
            Some(Scalar::Bool(b)) => Ok(Some(b)),
            Some(Scalar::Str(s)) if s.trim().eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(Scalar::Str(s)) if s.trim().eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(other) => Err(self.expected(key, "true or false", &other)),
        }
    }

    /// Option `key` has a value that is not `what`.
    fn expected(&self, key: &str, what: &str, found: &Scalar) -> Error {
        let found = match found {
            Scalar::Str(s) => format!("'{s}'"),
            other => other.to_string(),
        };
        Error::Plan(format!(
            "option `{key}` of {} must be {what}, found {found}",
            self.what
        ))
    }

    /// Fails on options nobody asked for, listing the valid ones.
    pub fn done(self) -> Result<()> {
        if let Some(k) = self.values.keys().next() {
            return Err(Error::Plan(format!(
                "unknown option `{k}` for {}; options are {}",
                self.what,
                self.used.join(", ")
            )));
        }
        Ok(())
    }
}

fn resolve_path(base: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    if p.is_absolute() {
        p
    } else {
        base.join(p)
    }
}

/// Files matching `pattern` (a `*` in the file name matches any run), sorted.
fn expand(path: &Path) -> Result<Vec<PathBuf>> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if !name.contains('*') {
        return Ok(vec![path.to_path_buf()]);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let pattern = name.replace('%', "\\%").replace('*', "%");
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::Plan(format!("cannot list {}: {e}", dir.display())))?;
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if braid_plan::expr::like(&n, &pattern) {
            out.push(e.path());
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(Error::Plan(format!("no file matches {}", path.display())));
    }
    Ok(out)
}

/// Builds a stream from `CREATE STREAM name (columns) WITH (options)`.
pub fn stream(
    name: &str,
    columns: Option<Schema>,
    mut o: Options,
    base: &Path,
) -> Result<StreamDef> {
    let kind = connector(name, "source", &mut o)?;
    let path = o.string("path")?;
    let kind = kind.unwrap_or_else(|| if path.is_some() { "csv" } else { "" }.into());
    let event_time = o.string("event_time")?;
    let window = o.int("window")?.unwrap_or(1024);
    // Without an event time, epochs count rows: one per physical window by default.
    let default_epoch = if event_time.is_some() || kind == "generator" {
        1
    } else {
        window
    };
    let time_unit = o
        .string("time_unit")?
        .map(|u| TimeUnit::parse(&u))
        .transpose()?;
    // A timestamp event time counts microseconds.
    let stamped = columns
        .as_ref()
        .zip(event_time.as_ref())
        .is_some_and(|(c, t)| {
            c.index_of(t).is_ok_and(|i| {
                matches!(c.fields[i].ty, DataType::Timestamp | DataType::TimestampTz)
            })
        });
    let time_unit = match (stamped, time_unit) {
        (true, None | Some(TimeUnit::Micro)) => Some(TimeUnit::Micro),
        (true, Some(u)) => {
            return Err(Error::Plan(format!(
                "stream `{name}`: a timestamp event time counts microseconds, not {u}; leave time_unit out"
            )))
        }
        (false, u) => u,
    };
    if time_unit.is_some() && event_time.is_none() {
        return Err(Error::Plan(format!(
            "stream `{name}`: time_unit is the unit of the event-time column; declare event_time"
        )));
    }
    let epoch = o.length("epoch", time_unit)?.unwrap_or(default_epoch);
    let lateness = o.length("lateness", time_unit)?.unwrap_or(0);
    let speed = o.float("speed")?;
    let units = o.float("units_per_second")?;
    let units = units.unwrap_or_else(|| time_unit.map_or(1.0, TimeUnit::per_second));
    let feeds = match kind.as_str() {
        "log" => feeds(name, &mut o, base)?,
        _ => Feeds::default(),
    };
    let (spec, mut schema, children) = source_spec(name, &kind, path, columns, &mut o, base)?;
    o.done()?;
    let event_time =
        event_time.or_else(|| matches!(spec, SourceSpec::Generator(_)).then(|| "time".to_string()));
    if let Some(t) = &event_time {
        schema = schema.with_event_time(t)?;
    }
    if epoch < 1 || window < 1 || lateness < 0 {
        return Err(Error::Plan(format!(
            "stream `{name}`: epoch and window must be at least 1 and lateness at least 0"
        )));
    }
    let pace = match speed {
        Some(speed) => Pace::EventTime {
            units_per_second: units,
            speed,
        },
        None => Pace::Max,
    };
    let make = |spec: SourceSpec, schema: Schema, n: &str| Source {
        name: n.to_string(),
        spec,
        schema,
        epoch: epoch as u64,
        window: window as usize,
        pace,
        out_of_order: true,
        shed: None,
    };
    let source = match children {
        None => make(spec, schema, name),
        Some((files, header)) => interleave(name, &files, header, &schema, make)?,
    };
    Ok(StreamDef {
        name: name.to_string(),
        source,
        lateness,
        time_unit,
        feeds,
    })
}

/// The producers of a stream that lives in Braid: `listen` (an address, or a port on
/// 127.0.0.1), `tail` (a file), `format` ('csv' or 'json') and `header`.
fn feeds(name: &str, o: &mut Options, base: &Path) -> Result<Feeds> {
    let listen = match o.take("listen") {
        None => None,
        Some(Scalar::Int(port)) => Some(format!("127.0.0.1:{port}")),
        Some(Scalar::Str(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(format!("127.0.0.1:{s}"))
        }
        Some(Scalar::Str(s)) => Some(s),
        Some(other) => return Err(o.expected("listen", "an address or a port", &other)),
    };
    let listen = listen
        .map(|a| {
            a.parse::<std::net::SocketAddr>().map_err(|_| {
                Error::Plan(format!(
                    "stream `{name}`: listen = '{a}' is not an address; give an IP address and port ('127.0.0.1:7001') or a port"
                ))
            })
        })
        .transpose()?;
    let tail = o.string("tail")?.map(|p| resolve_path(base, &p));
    let format = o.string("format")?;
    let header = o.bool("header")?;
    if listen.is_none() && tail.is_none() && (format.is_some() || header.is_some()) {
        return Err(Error::Plan(format!(
            "stream `{name}`: format and header are options of its producers; give listen = 'address' or tail = 'file'"
        )));
    }
    let json = match format.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("csv") => false,
        Some("json") => true,
        Some(other) => {
            return Err(Error::Plan(format!(
                "stream `{name}`: unknown format '{other}'; formats are 'csv' and 'json'"
            )))
        }
    };
    if json && header == Some(true) {
        return Err(Error::Plan(format!(
            "stream `{name}`: JSON lines have no header; header is an option of format = 'csv'"
        )));
    }
    let retention = match o.take("retention") {
        None => None,
        Some(Scalar::Int(n)) if n > 0 => Some(Retention::Rows(n as u64)),
        Some(Scalar::Str(s)) => Some(retention(name, &s)?),
        Some(other) => {
            return Err(o.expected(
                "retention",
                "a positive row count or a duration such as '10m'",
                &other,
            ))
        }
    };
    Ok(Feeds {
        listen,
        tail,
        json,
        header: header.unwrap_or(false),
        retention,
    })
}

/// A stream's `retention = '...'`: a row count (`'5000'`, `'5000 rows'`) or a duration
/// with a unit (`'90s'`, `'10m'`, `'2 hours'`, `'7d'`).
fn retention(name: &str, text: &str) -> Result<Retention> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let seconds = match unit {
        "" | "row" | "rows" => {
            return match number.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Retention::Rows(n)),
                _ => Err(bad_retention(name, text)),
            }
        }
        "s" | "sec" | "second" | "seconds" => 1.0,
        "m" | "min" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return Err(bad_retention(name, text)),
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() && n * seconds < 1e12 => Ok(Retention::For(
            std::time::Duration::from_secs_f64(n * seconds),
        )),
        _ => Err(bad_retention(name, text)),
    }
}

fn bad_retention(name: &str, text: &str) -> Error {
    Error::Plan(format!(
        "stream `{name}`: retention = '{text}'; expected a positive row count ('100000', '100000 rows') or a duration with a unit ('90s', '10m', '2h', '7d')"
    ))
}

/// Files of a stream of several CSV files (a `*` in the path), and whether they have a
/// header.
type Files = Option<(Vec<PathBuf>, bool)>;

/// What a stream of source `kind` reads, its columns, and the files of a multi-file
/// CSV stream (read as an interleave of one source per file).
fn source_spec(
    name: &str,
    kind: &str,
    path: Option<String>,
    columns: Option<Schema>,
    o: &mut Options,
    base: &Path,
) -> Result<(SourceSpec, Schema, Files)> {
    let need_columns = |c: Option<Schema>| {
        c.ok_or_else(|| {
            Error::Plan(format!(
                "stream `{name}` needs its columns: CREATE STREAM {name} (col BIGINT, ...)"
            ))
        })
    };
    Ok(match kind {
        "csv" => {
            let path = path.ok_or_else(|| {
                Error::Plan(format!("stream `{name}` reads CSV: give `path = '...'`"))
            })?;
            let header = o.bool("header")?;
            let files = expand(&resolve_path(base, &path))?;
            let schema = need_columns(columns)?;
            let format = o.string("format")?;
            if let Some(f) = columnar(format.as_deref()) {
                if header.is_some() || files.len() != 1 {
                    return Err(Error::Plan(format!(
                        "stream `{name}`: format = '{}' reads one file, without a header option",
                        format.unwrap_or_default()
                    )));
                }
                let spec = SourceSpec::Columnar {
                    path: files[0].clone(),
                    format: f,
                };
                return Ok((spec, schema, None));
            }
            if let braid_plan::connector::RecordFormat::Json { paths } =
                format_of(name, format, o, Some(&schema))?
            {
                if header.is_some() {
                    return Err(Error::Plan(format!(
                        "stream `{name}`: JSON lines have no header; header is an option of format = 'csv'"
                    )));
                }
                no_arrays(name, &schema, "JSON lines")?;
                if files.len() != 1 {
                    return Err(Error::Plan(format!(
                        "stream `{name}`: format = 'json' reads one file; {} match {path}",
                        files.len()
                    )));
                }
                let spec = SourceSpec::JsonLines {
                    path: files[0].clone(),
                    paths,
                };
                return Ok((spec, schema, None));
            }
            let header = header.unwrap_or(true);
            if files.len() == 1 {
                let spec = SourceSpec::Csv {
                    path: files[0].clone(),
                    header,
                };
                (spec, schema, None)
            } else {
                (SourceSpec::Stdin, schema, Some((files, header)))
            }
        }
        "binary" => {
            let path = path.ok_or_else(|| {
                Error::Plan(format!("stream `{name}` reads a binary file: give `path`"))
            })?;
            let spec = SourceSpec::Binary {
                path: resolve_path(base, &path),
            };
            (spec, need_columns(columns)?, None)
        }
        "stdin" => (SourceSpec::Stdin, need_columns(columns)?, None),
        // A stream that lives in Braid: its log, read through the source the server
        // registers as `log:<name>`.
        "log" => {
            let schema = need_columns(columns)?;
            // The log's file and the HTTP and COPY ingest read scalars only.
            no_arrays(name, &schema, "a stream that lives in Braid (braid server)")?;
            (
                SourceSpec::Native(format!("log:{}", name.to_ascii_lowercase())),
                schema,
                None,
            )
        }
        // A source the embedder registered (a Python iterable, a Rust reader).
        "native" => {
            let source = o.string("name")?.ok_or_else(|| {
                Error::Plan(format!(
                    "stream `{name}` reads a native source: give the registered source's `name`"
                ))
            })?;
            (SourceSpec::Native(source), need_columns(columns)?, None)
        }
        "tcp" => {
            let addr = o.string("addr")?.unwrap_or_else(|| "127.0.0.1:7878".into());
            (SourceSpec::Tcp { addr }, need_columns(columns)?, None)
        }
        "kafka" => {
            let schema = need_columns(columns)?;
            no_arrays(name, &schema, "a Kafka topic")?;
            let spec = SourceSpec::Kafka(kafka_source(name, o, &schema)?);
            (spec, schema, None)
        }
        "generator" => {
            let spec = GeneratorSpec {
                tuples: o.int("tuples")?.unwrap_or(100_000).max(0) as u64,
                rate: o.float("rate")?.unwrap_or(10_000.0),
                keys: o.int("keys")?.unwrap_or(4).clamp(1, u32::MAX as i64) as u32,
                broadcast: o.float("broadcast")?.unwrap_or(0.0),
                seed: o.int("seed")?.unwrap_or(1) as u64,
            };
            if columns.is_some() {
                return Err(Error::Plan(format!(
                    "stream `{name}` is generated; its columns are fixed ({}), leave them out",
                    GeneratorSpec::schema().column_list()
                )));
            }
            let mut s = GeneratorSpec::schema();
            s.event_time = None;
            (SourceSpec::Generator(spec), s, None)
        }
        "" => {
            return Err(Error::Plan(format!(
                "stream `{name}` needs a source: WITH (source = 'csv', path = '...'); sources are csv, binary, stdin, tcp, kafka, generator, log, native"
            )))
        }
        other => {
            return Err(Error::Plan(format!(
                "unknown source `{other}` for stream `{name}`; sources are csv, binary, stdin, tcp, kafka, generator, log, native"
            )))
        }
    })
}

/// The `source` (or `sink`) option, or its other name `connector`.
fn connector(name: &str, word: &str, o: &mut Options) -> Result<Option<String>> {
    match (o.string(word)?, o.string("connector")?) {
        (Some(a), Some(b)) if !a.eq_ignore_ascii_case(&b) => Err(Error::Plan(format!(
            "`{name}`: {word} = '{a}' and connector = '{b}' name two connectors; give one"
        ))),
        (a, b) => Ok(a.or(b).map(|k| k.to_ascii_lowercase())),
    }
}

/// `bootstrap` and `topic` of a Kafka source or sink.
fn kafka_place(name: &str, o: &mut Options) -> Result<(String, String)> {
    let need = |v: Option<String>, key: &str, example: &str| {
        v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            Error::Plan(format!(
                "`{name}` is a Kafka topic: give `{key} = '{example}'`"
            ))
        })
    };
    let bootstrap = need(o.string("bootstrap")?, "bootstrap", "127.0.0.1:9092")?;
    let topic = need(o.string("topic")?, "topic", "events")?;
    Ok((bootstrap, topic))
}

/// `format = 'csv' | 'json'` of Kafka records, with JSON's `paths = 'col = a.b[0], ...'`
/// for the columns of `schema` (a sink writes its columns by name: no paths).
fn record_format(
    name: &str,
    o: &mut Options,
    schema: Option<&Schema>,
) -> Result<braid_plan::connector::RecordFormat> {
    let format = o.string("format")?;
    format_of(name, format, o, schema)
}

/// [`record_format`] of a `format` already taken.
fn format_of(
    name: &str,
    format: Option<String>,
    o: &mut Options,
    schema: Option<&Schema>,
) -> Result<braid_plan::connector::RecordFormat> {
    use braid_plan::connector::{JsonPath, RecordFormat};
    let format = format.map(|f| f.to_ascii_lowercase());
    let paths = o.string("paths")?;
    match format.as_deref() {
        None | Some("csv") => match paths {
            Some(_) => Err(Error::Plan(format!(
                "`{name}`: paths are an option of format = 'json'"
            ))),
            None => Ok(RecordFormat::Csv),
        },
        Some("json") => {
            let Some(schema) = schema else {
                return match paths {
                    Some(_) => Err(Error::Plan(format!(
                        "sink `{name}` writes each row as a JSON object keyed by column name; paths are an option of a source"
                    ))),
                    None => Ok(RecordFormat::Json { paths: Vec::new() }),
                };
            };
            let mut found: Vec<JsonPath> = schema
                .fields
                .iter()
                .map(|f| JsonPath::name(&f.name))
                .collect();
            for item in paths.iter().flat_map(|p| p.split(',')) {
                let item = item.trim();
                if item.is_empty() {
                    continue;
                }
                let (col, path) = item.split_once('=').ok_or_else(|| {
                    Error::Plan(format!(
                        "`{name}`: paths item '{item}'; expected `column = path`, as in 'lat = pos.coords[1]'"
                    ))
                })?;
                let i = schema.index_of(col.trim()).map_err(|_| {
                    Error::Plan(format!(
                        "`{name}`: paths names column `{}`; the columns are {}",
                        col.trim(),
                        schema.column_list()
                    ))
                })?;
                found[i] = JsonPath::parse(path).map_err(|why| {
                    Error::Plan(format!(
                        "`{name}`: the path of `{}`, '{}': {why}",
                        col.trim(),
                        path.trim()
                    ))
                })?;
            }
            Ok(RecordFormat::Json { paths: found })
        }
        Some(other) => Err(Error::Plan(format!(
            "`{name}`: unknown format '{other}'; formats are 'csv' and 'json' (and for a file 'parquet' and 'arrow')"
        ))),
    }
}

/// The columnar file format `format` names, if it names one.
fn columnar(format: Option<&str>) -> Option<braid_plan::connector::FileFormat> {
    use braid_plan::connector::FileFormat;
    match format?.to_ascii_lowercase().as_str() {
        "parquet" => Some(FileFormat::Parquet),
        "arrow" | "arrow_ipc" | "ipc" => Some(FileFormat::ArrowIpc),
        _ => None,
    }
}

/// A Kafka source: `bootstrap`, `topic`, `format`, `paths`, `start` ('earliest',
/// 'latest' or offsets 'partition:offset,...'), `stop` ('never' or 'latest': the ends
/// when the run starts) and `idle_timeout` (milliseconds).
fn kafka_source(
    name: &str,
    o: &mut Options,
    schema: &Schema,
) -> Result<braid_plan::connector::KafkaSource> {
    use braid_plan::connector::{KafkaSource, KafkaStart};
    let (bootstrap, topic) = kafka_place(name, o)?;
    let format = record_format(name, o, Some(schema))?;
    let start = match o.string("start")?.map(|s| s.trim().to_ascii_lowercase()) {
        None => KafkaStart::Earliest,
        Some(s) if s == "earliest" => KafkaStart::Earliest,
        Some(s) if s == "latest" => KafkaStart::Latest,
        Some(s) => {
            let mut offsets = Vec::new();
            for item in s.split(',') {
                let parsed = item.split_once(':').and_then(|(p, o)| {
                    Some((p.trim().parse::<i32>().ok()?, o.trim().parse::<i64>().ok()?))
                });
                match parsed {
                    Some((p, off)) if p >= 0 && off >= 0 => offsets.push((p, off)),
                    _ => {
                        return Err(Error::Plan(format!(
                            "stream `{name}`: start = '{s}'; expected 'earliest', 'latest' or offsets 'partition:offset,...' such as '0:100,1:250'"
                        )))
                    }
                }
            }
            KafkaStart::Offsets(offsets)
        }
    };
    let bounded = match o.string("stop")?.map(|s| s.trim().to_ascii_lowercase()) {
        None => false,
        Some(s) if s == "never" => false,
        Some(s) if s == "latest" => true,
        Some(s) => {
            return Err(Error::Plan(format!(
                "stream `{name}`: stop = '{s}'; expected 'never' (read on) or 'latest' (the partitions' ends when the run starts)"
            )))
        }
    };
    let idle_ms = match o.int("idle_timeout")? {
        None => 1000,
        Some(ms) if ms >= 0 => ms as u64,
        Some(ms) => {
            return Err(Error::Plan(format!(
                "stream `{name}`: idle_timeout = {ms}; expected milliseconds, at least 0"
            )))
        }
    };
    Ok(KafkaSource {
        bootstrap,
        topic,
        format,
        start,
        bounded,
        idle_ms,
    })
}

/// A Kafka sink: `bootstrap`, `topic`, `format` and `key` (a column).
fn kafka_sink(name: &str, o: &mut Options) -> Result<braid_plan::connector::KafkaSink> {
    let (bootstrap, topic) = kafka_place(name, o)?;
    let format = record_format(name, o, None)?;
    let key = o.string("key")?;
    Ok(braid_plan::connector::KafkaSink {
        bootstrap,
        topic,
        format,
        key,
    })
}

/// One CSV source per file, interleaved into one source named `name`.
fn interleave(
    name: &str,
    files: &[PathBuf],
    header: bool,
    schema: &Schema,
    make: impl Fn(SourceSpec, Schema, &str) -> Source,
) -> Result<Source> {
    let kids: Vec<Source> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            make(
                SourceSpec::Csv {
                    path: f.clone(),
                    header,
                },
                schema.clone(),
                &format!("{name}{i}"),
            )
        })
        .collect();
    let wide = braid_plan::interleave::schema(&kids)?;
    Ok(make(SourceSpec::Interleave(kids), wide, name))
}

/// Builds a sink from `CREATE SINK name WITH (options)`.
pub fn sink(name: &str, mut o: Options, base: &Path) -> Result<SinkDef> {
    let kind = connector(name, "sink", &mut o)?.unwrap_or_else(|| "stdout".into());
    let spec = match kind.as_str() {
        "stdout" => SinkSpec::Stdout,
        "csv" | "file" => {
            let path = o.string("path")?.ok_or_else(|| {
                Error::Plan(format!("sink `{name}` writes a file: give `path = '...'`"))
            })?;
            SinkSpec::File(resolve_path(base, &path))
        }
        "tcp" => SinkSpec::Tcp(
            o.string("addr")?
                .ok_or_else(|| Error::Plan(format!("sink `{name}` needs `addr`")))?,
        ),
        "kafka" => SinkSpec::Kafka(kafka_sink(name, &mut o)?),
        "parquet" | "arrow" => {
            let path = o.string("path")?.ok_or_else(|| {
                Error::Plan(format!("sink `{name}` writes a file: give `path = '...'`"))
            })?;
            let format = columnar(Some(kind.as_str())).expect("parquet or arrow");
            SinkSpec::Columnar(resolve_path(base, &path), format)
        }
        "discard" => SinkSpec::Discard,
        "collect" => SinkSpec::Collect,
        "native" => SinkSpec::Native(o.string("name")?.ok_or_else(|| {
            Error::Plan(format!(
                "sink `{name}` is native: give the registered sink's `name`"
            ))
        })?),
        other => {
            return Err(Error::Plan(format!(
            "unknown sink `{other}`; sinks are stdout, csv, tcp, kafka, parquet, arrow, discard, collect, native"
        )))
        }
    };
    let stamp_emit = o.bool("stamp_emit")?.unwrap_or(false);
    let header = o.bool("header")?.unwrap_or(false);
    let max_latency = match o.string("max_latency")? {
        Some(t) => Some(super::settings::duration(&t, "max_latency")?),
        None => None,
    };
    let latency_to = o.string("latency_to")?;
    let latency_from = o.string("latency_from")?;
    if header
        && !matches!(
            spec,
            SinkSpec::Stdout | SinkSpec::File(_) | SinkSpec::Tcp(_)
        )
    {
        return Err(Error::Plan(format!(
            "sink `{name}` writes no text: `header` is an option of stdout, csv and tcp sinks"
        )));
    }
    o.done()?;
    Ok(SinkDef {
        name: name.to_string(),
        spec,
        stamp_emit,
        header,
        max_latency,
        latency_to,
        latency_from,
    })
}

/// Refuses an array column in a stream read from `what`, whose readers parse scalars
/// only (CSV files, standard input, TCP, binary files and native sources take arrays).
fn no_arrays(name: &str, schema: &Schema, what: &str) -> Result<()> {
    match schema.fields.iter().find(|f| f.ty.is_array()) {
        Some(f) => Err(Error::NotSupported(format!(
            "stream `{name}`: array column `{}` ({}) read from {what}; arrays are read from \
             CSV files, standard input, TCP, binary files and native sources",
            f.name,
            f.ty.sql_name()
        ))),
        None => Ok(()),
    }
}

/// Loads a table from `CREATE TABLE name (columns) WITH (path = ...)`.
pub fn table(name: &str, schema: Schema, mut o: Options, base: &Path) -> Result<TableDef> {
    let path = o
        .string("path")?
        .ok_or_else(|| Error::Plan(format!("table `{name}` needs `path = '...'` (a CSV file)")))?;
    let header = o.bool("header")?.unwrap_or(true);
    o.done()?;
    let path = resolve_path(base, &path);
    let bytes = std::fs::read(&path)
        .map_err(|e| Error::Plan(format!("cannot read table {}: {e}", path.display())))?;
    let mut rows = Batch::new(schema.arity());
    // Split and parsed as every CSV reader of a stream (`braid_plan::text`), so a
    // value in a table is the value the same text is in a stream.
    let (mut data, mut fields) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i as u64 + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.is_empty() || (header && i == 0) {
            continue;
        }
        let at = |column: u64, why: String| {
            Error::Plan(format!(
                "{} line {line}, column {column}: {why}",
                path.display()
            ))
        };
        braid_plan::text::split_fields(raw, &mut data, &mut fields)
            .map_err(|(c, why)| at(c, why))?;
        if fields.len() != schema.arity() {
            return Err(at(
                1,
                format!(
                    "{} fields, expected {} ({})",
                    fields.len(),
                    schema.arity(),
                    schema.column_list()
                ),
            ));
        }
        rows.start_row(RowKey { seq: n, lane: 0 });
        n += 1;
        for (&(a, b, column, quoted), f) in fields.iter().zip(&schema.fields) {
            let text = if quoted { &data[a..b] } else { &raw[a..b] };
            let v = match f.ty.is_array() {
                true => std::str::from_utf8(text)
                    .map_err(|_| "bytes are not UTF-8".to_string())
                    .and_then(|t| {
                        braid_plan::batch::parse_array(t.trim(), f.ty, f.nullable, f.len)
                    }),
                false => braid_plan::text::parse_field(text, f.ty, f.nullable, quoted)
                    .map(|v| v.to_scalar()),
            };
            let v = v.map_err(|why| at(column, format!("column `{}`: {why}", f.name)))?;
            rows.push_value(v.as_value());
        }
    }
    Ok(TableDef {
        name: name.to_string(),
        schema,
        rows: Arc::new(rows),
    })
}

#[cfg(test)]
mod retention_tests {
    use super::{retention, Retention};
    use std::time::Duration;

    #[test]
    fn retentions_read_as_rows_or_durations() {
        assert_eq!(retention("s", "5000").ok(), Some(Retention::Rows(5000)));
        assert_eq!(retention("s", " 7 rows").ok(), Some(Retention::Rows(7)));
        assert_eq!(
            retention("s", "10m").ok(),
            Some(Retention::For(Duration::from_secs(600)))
        );
        assert_eq!(
            retention("s", "1.5 hours").ok(),
            Some(Retention::For(Duration::from_secs(5400)))
        );
        assert_eq!(
            retention("s", "7d").ok(),
            Some(Retention::For(Duration::from_secs(7 * 86400)))
        );
        for bad in ["0", "-3", "ten", "5 weeks", "0s", "1.5 rows", ""] {
            let e = retention("s", bad).expect_err(bad).to_string();
            assert!(
                e.contains(&format!("retention = '{bad}'")) && e.contains("expected"),
                "{bad}: {e}"
            );
        }
    }
}
