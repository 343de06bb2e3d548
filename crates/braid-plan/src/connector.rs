//! Connectors to systems outside Braid: a Kafka topic as a source or a sink, and the
//! formats of the records they carry (a CSV line or a JSON object per record).

use std::fmt;

/// How one record (a Kafka message) holds a row.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordFormat {
    /// One CSV line (a trailing line end is allowed).
    Csv,
    /// One JSON object. Column `i` is found at `paths[i]` (object keys and array
    /// indices from the top; by default the column's name, matched in any case). A
    /// missing field is NULL; keys no column names are ignored.
    Json {
        /// One path per column.
        paths: Vec<JsonPath>,
    },
}

/// Where a column's value is in a JSON object: keys and array indices from the top.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    /// The steps.
    pub steps: Vec<PathStep>,
    /// The path is the column's name (matched in any case), not one given.
    pub by_name: bool,
}

/// One step of a [`JsonPath`].
#[derive(Clone, Debug, PartialEq)]
pub enum PathStep {
    /// An object's key.
    Key(String),
    /// An array's element (0-based).
    Index(usize),
}

impl JsonPath {
    /// The path of a column found by its name.
    pub fn name(column: &str) -> JsonPath {
        JsonPath {
            steps: vec![PathStep::Key(column.to_string())],
            by_name: true,
        }
    }

    /// Parses `a.b[2].c` (keys separated by dots, `[n]` for an array's element; a key
    /// with a dot or bracket in it is quoted: `"a.b".c`); or why it is not a path.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let mut steps = Vec::new();
        let b = text.trim().as_bytes();
        let mut i = 0;
        let expected = |i: usize, what: &str| format!("at character {}: expected {what}", i + 1);
        while i < b.len() {
            if !steps.is_empty() && b[i] != b'[' {
                if b[i] != b'.' {
                    return Err(expected(i, "`.` or `[`"));
                }
                i += 1;
            }
            match b.get(i) {
                Some(b'[') => {
                    let end = b[i..]
                        .iter()
                        .position(|&c| c == b']')
                        .map(|p| i + p)
                        .ok_or_else(|| expected(i, "`]` closing the index"))?;
                    let n = std::str::from_utf8(&b[i + 1..end])
                        .ok()
                        .and_then(|s| s.trim().parse::<usize>().ok())
                        .ok_or_else(|| expected(i + 1, "an array index (0, 1, ...)"))?;
                    steps.push(PathStep::Index(n));
                    i = end + 1;
                }
                Some(b'"') => {
                    let end = b[i + 1..]
                        .iter()
                        .position(|&c| c == b'"')
                        .map(|p| i + 1 + p)
                        .ok_or_else(|| expected(i, "`\"` closing the key"))?;
                    let key = String::from_utf8_lossy(&b[i + 1..end]).into_owned();
                    steps.push(PathStep::Key(key));
                    i = end + 1;
                }
                Some(_) => {
                    let end = b[i..]
                        .iter()
                        .position(|&c| c == b'.' || c == b'[')
                        .map_or(b.len(), |p| i + p);
                    if end == i {
                        return Err(expected(i, "a key"));
                    }
                    let key = String::from_utf8_lossy(&b[i..end]).into_owned();
                    steps.push(PathStep::Key(key));
                    i = end;
                }
                None => return Err(expected(i, "a key after `.`")),
            }
        }
        if steps.is_empty() {
            return Err("an empty path; expected keys such as `a.b[0]`".into());
        }
        Ok(JsonPath {
            steps,
            by_name: false,
        })
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, s) in self.steps.iter().enumerate() {
            match s {
                PathStep::Key(key) if key.contains(['.', '[', ']']) => {
                    write!(f, "{}\"{key}\"", if k > 0 { "." } else { "" })?
                }
                PathStep::Key(key) => write!(f, "{}{key}", if k > 0 { "." } else { "" })?,
                PathStep::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for RecordFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordFormat::Csv => write!(f, "csv"),
            RecordFormat::Json { paths } => {
                write!(f, "json")?;
                let given: Vec<String> = paths
                    .iter()
                    .filter(|p| !p.by_name)
                    .map(|p| p.to_string())
                    .collect();
                if !given.is_empty() {
                    write!(f, " (paths {})", given.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// A columnar file format, read and written by record batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// An Arrow IPC stream (the streaming format, `.arrows`).
    ArrowIpc,
}

impl fmt::Display for FileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileFormat::Parquet => "parquet",
            FileFormat::ArrowIpc => "arrow ipc stream",
        })
    }
}

/// Where a Kafka source starts reading each partition.
#[derive(Clone, Debug, PartialEq)]
pub enum KafkaStart {
    /// The oldest message kept.
    Earliest,
    /// After the newest message when the run starts.
    Latest,
    /// Given offsets per partition; a partition not listed starts at its earliest.
    Offsets(Vec<(i32, i64)>),
}

/// A Kafka topic read as a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaSource {
    /// `host:port[,host:port...]` of the brokers.
    pub bootstrap: String,
    /// The topic.
    pub topic: String,
    /// What a message holds.
    pub format: RecordFormat,
    /// Where reading starts.
    pub start: KafkaStart,
    /// Read each partition up to its end when the run starts, then end (a bounded
    /// read); otherwise read on until the run is stopped.
    pub bounded: bool,
    /// A partition with no message for this long (and read to its end) stops holding
    /// back the others' epochs, in milliseconds.
    pub idle_ms: u64,
}

/// A Kafka topic written by a sink: one message per row.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaSink {
    /// `host:port[,host:port...]` of the brokers.
    pub bootstrap: String,
    /// The topic.
    pub topic: String,
    /// What a message holds.
    pub format: RecordFormat,
    /// The column whose value is each message's key (messages of a key go to one
    /// partition); none: no key.
    pub key: Option<String>,
}

impl fmt::Display for KafkaSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kafka {}/{} ({}, from {}{})",
            self.bootstrap,
            self.topic,
            self.format,
            match &self.start {
                KafkaStart::Earliest => "earliest".to_string(),
                KafkaStart::Latest => "latest".to_string(),
                KafkaStart::Offsets(o) => o
                    .iter()
                    .map(|(p, o)| format!("{p}:{o}"))
                    .collect::<Vec<_>>()
                    .join(","),
            },
            if self.bounded {
                " to the end at start"
            } else {
                ""
            }
        )
    }
}

impl fmt::Display for KafkaSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kafka {}/{} ({}",
            self.bootstrap, self.topic, self.format
        )?;
        if let Some(k) = &self.key {
            write!(f, ", keyed by {k}")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_print_back() {
        for text in ["a", "a.b", "a[0].b", "\"x.y\".z", "a[1][2]"] {
            let p = JsonPath::parse(text).unwrap();
            assert_eq!(p.to_string(), text, "{p:?}");
        }
        let p = JsonPath::parse("pos.coords[1]").unwrap();
        assert_eq!(
            p.steps,
            vec![
                PathStep::Key("pos".into()),
                PathStep::Key("coords".into()),
                PathStep::Index(1)
            ]
        );
        for bad in ["", "a.", "a[x]", "a[1", "a..b", "\"a"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
