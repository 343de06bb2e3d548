//! Rows from producers into a stream's log: lines of CSV or of PostgreSQL's COPY text
//! format (tab-separated, `\N` for null), and `INSERT ... VALUES` literals. A
//! malformed line is counted and kept (line, column, reason) for the producer's
//! acknowledgement; the good lines of the same call are appended.

use super::log::StreamLog;
use crate::error::Result;
use crate::source::{parse_field, Reject};
use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::types::Schema;
use std::sync::Arc;

/// How a producer's lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// PostgreSQL's COPY text format: tab-separated, `\N` null, backslash escapes.
    Text,
    /// CSV (RFC 4180 quoting); an empty field is null.
    Csv,
}

/// One producer's ingest into one stream: cuts what it sends into lines (a line may
/// span two sends), parses them, appends the good ones.
pub struct Ingest {
    log: Arc<StreamLog>,
    format: Format,
    /// Skip the first line (a CSV header).
    skip_header: bool,
    /// The unfinished last line of what came so far.
    partial: Vec<u8>,
    line: u64,
    /// Rows appended.
    pub rows: u64,
    /// Malformed lines: how many, and the first few.
    pub rejected: u64,
    /// The first [`Ingest::KEEP`] malformed lines.
    pub rejects: Vec<Reject>,
}

impl Ingest {
    /// How many malformed lines are kept for the acknowledgement.
    pub const KEEP: usize = 10;

    /// A producer of `format` lines into `log` (a header line first when `header`).
    pub fn new(log: Arc<StreamLog>, format: Format, header: bool) -> Ingest {
        Ingest {
            log,
            format,
            skip_header: header,
            partial: Vec::new(),
            line: 0,
            rows: 0,
            rejected: 0,
            rejects: Vec::new(),
        }
    }

    /// Columns of the stream.
    pub fn columns(&self) -> usize {
        self.log.schema().fields.len()
    }

    /// Takes `bytes` (any cut of the producer's data): appends its complete lines.
    pub fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.partial.extend_from_slice(bytes);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let rest = self.partial.split_off(last + 1);
        let lines = std::mem::replace(&mut self.partial, rest);
        self.lines(&lines)
    }

    /// The producer is done: appends its last line if it had no newline.
    pub fn finish(&mut self) -> Result<()> {
        let rest = std::mem::take(&mut self.partial);
        self.lines(&rest)
    }

    fn lines(&mut self, bytes: &[u8]) -> Result<()> {
        let schema = self.log.schema().clone();
        let mut batch = Batch::new(schema.fields.len());
        let mut fields: Vec<String> = Vec::new();
        for raw in bytes.split(|&b| b == b'\n') {
            if raw.is_empty() && bytes.ends_with(b"\n") {
                continue; // after the last newline
            }
            self.line += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if self.skip_header {
                self.skip_header = false;
                continue;
            }
            // psql ends COPY text data with `\.` (protocol 3 does not need it).
            if raw == b"\\." || raw.is_empty() {
                continue;
            }
            let parsed = match self.format {
                Format::Text => split_text(raw, &mut fields),
                Format::Csv => split_csv(raw, &mut fields),
            };
            let row = parsed.and_then(|()| push_row(&mut batch, &schema, &fields, self.rows));
            match row {
                Ok(()) => self.rows += 1,
                Err((column, reason)) => {
                    self.rejected += 1;
                    if self.rejects.len() < Ingest::KEEP {
                        let line = self.line;
                        self.rejects.push(Reject {
                            line,
                            column,
                            reason,
                        });
                    }
                }
            }
        }
        self.log.append(&batch)
    }
}

/// Fields of a COPY text line (tab-separated; `\N` is null, kept as the empty field
/// with a marker; backslash escapes decoded).
fn split_text(raw: &[u8], out: &mut Vec<String>) -> std::result::Result<(), (u64, String)> {
    out.clear();
    let text = std::str::from_utf8(raw).map_err(|_| (0, "the line is not UTF-8".to_string()))?;
    for f in text.split('\t') {
        if f == "\\N" {
            out.push(NULL.into());
            continue;
        }
        let mut s = String::with_capacity(f.len());
        let mut chars = f.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                s.push(c);
                continue;
            }
            match chars.next() {
                Some('t') => s.push('\t'),
                Some('n') => s.push('\n'),
                Some('r') => s.push('\r'),
                Some('\\') => s.push('\\'),
                Some(o) => s.push(o),
                None => {}
            }
        }
        out.push(s);
    }
    Ok(())
}

/// A null field of a text line (a string no producer can send: it holds a NUL).
const NULL: &str = "\0null";

/// Fields of a CSV line.
fn split_csv(raw: &[u8], out: &mut Vec<String>) -> std::result::Result<(), (u64, String)> {
    out.clear();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(raw);
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(_) => {
            out.extend(record.iter().map(String::from));
            Ok(())
        }
        Err(e) => Err((0, format!("not a CSV line: {e}"))),
    }
}

/// Appends the row of `fields` (as `schema` types them) keyed `seq`; or the 1-based
/// column at fault and why.
fn push_row(
    batch: &mut Batch,
    schema: &Schema,
    fields: &[String],
    seq: u64,
) -> std::result::Result<(), (u64, String)> {
    if fields.len() != schema.fields.len() {
        return Err((
            0,
            format!(
                "{} fields, expected {} ({})",
                fields.len(),
                schema.fields.len(),
                schema.column_list()
            ),
        ));
    }
    let mut values: Vec<Value<'_>> = Vec::with_capacity(fields.len());
    for (i, (text, f)) in fields.iter().zip(&schema.fields).enumerate() {
        let v = if text == NULL {
            match f.nullable {
                true => Ok(Value::Null),
                false => Err(format!("null, expected {}", f.ty)),
            }
        } else {
            parse_field(text.as_bytes(), f.ty, f.nullable)
        };
        values.push(v.map_err(|reason| (i as u64 + 1, format!("column {}: {reason}", f.name)))?);
    }
    batch.push(RowKey { seq, lane: 0 }, &values);
    Ok(())
}

/// Appends rows given as text fields (`INSERT ... VALUES` literals, already in the
/// stream's column order; `None` is null); the first bad value is an error naming its
/// row and column.
pub fn insert(log: &StreamLog, rows: &[Vec<Option<String>>]) -> std::result::Result<u64, String> {
    let schema = log.schema().clone();
    let mut batch = Batch::new(schema.fields.len());
    let mut fields = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        fields.clear();
        fields.extend(row.iter().map(|v| v.clone().unwrap_or_else(|| NULL.into())));
        push_row(&mut batch, &schema, &fields, r as u64).map_err(|(c, reason)| match c {
            0 => format!("row {}: {reason}", r + 1),
            _ => format!("row {}, {reason}", r + 1),
        })?;
    }
    log.append(&batch).map_err(|e| e.to_string())?;
    Ok(rows.len() as u64)
}
