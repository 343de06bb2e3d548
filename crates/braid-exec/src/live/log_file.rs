//! A stream log's file: one CSV line per row, written so that it reads back to the
//! same values (a server that restarts opens its streams again from these files).
//!
//! It is the CSV Braid writes elsewhere, with one difference: an empty string is
//! written quoted (`""`), so that it reads back as a string and an empty field as
//! NULL. A row's sequence number in the stream is its place in the file.

use crate::error::{Error, Result};
use crate::source::parse_field;
use braid_plan::batch::{Batch, Row, RowKey, Value};
use braid_plan::types::{DataType, Schema};
use std::io::Write;
use std::path::Path;

/// Rows per batch of a log read back from its file.
const BATCH: usize = 4096;

/// Writes `row` as one line.
pub(crate) fn write_row(
    out: &mut impl Write,
    row: &Row<'_>,
    types: &[DataType],
) -> std::io::Result<()> {
    for c in 0..row.arity() {
        if c > 0 {
            out.write_all(b",")?;
        }
        match row.get(c) {
            Value::Str(s)
                if s.is_empty() || s.contains([',', '"', '\n', '\r']) || s.trim() != s =>
            {
                write!(out, "\"{}\"", s.replace('"', "\"\""))?;
            }
            Value::Int(v) if types.get(c).is_some_and(|t| t.is_time()) => {
                out.write_all(braid_plan::time::format(v, types[c]).as_bytes())?;
            }
            v => write!(out, "{v}")?,
        }
    }
    out.write_all(b"\n")
}

/// What a log's file holds: its rows in batches (keyed by their sequence numbers from
/// 0), and the length of the file up to its last whole line.
pub(crate) struct Contents {
    pub batches: Vec<Batch>,
    pub rows: u64,
    pub max_time: Option<i64>,
    /// Bytes up to the end of the last whole line: a line cut by a crash in the middle
    /// of an append (never acknowledged) is dropped.
    pub whole: u64,
}

/// Reads the file at `path` as rows of `schema`; a line that does not read back is an
/// error naming the file, line and column.
pub(crate) fn read(path: &Path, schema: &Schema) -> Result<Contents> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let arity = schema.fields.len();
    let mut out = Contents {
        batches: Vec::new(),
        rows: 0,
        max_time: None,
        whole: 0,
    };
    let mut batch = Batch::with_capacity(arity, BATCH);
    let mut fields: Vec<(String, bool)> = Vec::with_capacity(arity);
    let mut at = 0usize;
    let mut line = 0u64;
    while at < bytes.len() {
        line += 1;
        let Some(end) = record(&bytes, at, &mut fields) else {
            break; // the last line, cut short: it was never acknowledged
        };
        let bad = |column: usize, what: String| {
            Error::Plan(braid_plan::error::Error::Plan(format!(
                "the log of stream {} ({}), line {line}, column {column}: {what}",
                schema.column_list(),
                path.display()
            )))
        };
        if fields.len() != arity {
            return Err(bad(0, format!("{} fields, expected {arity}", fields.len())));
        }
        let mut values: Vec<Value<'_>> = Vec::with_capacity(arity);
        for (i, ((text, quoted), f)) in fields.iter().zip(&schema.fields).enumerate() {
            let v = match (f.ty, quoted) {
                (DataType::String, true) => Ok(Value::Str(text)),
                (_, false) if text.is_empty() => match f.nullable {
                    true => Ok(Value::Null),
                    false => Err(format!("empty, expected {}", f.ty)),
                },
                _ => parse_field(text.as_bytes(), f.ty, f.nullable),
            };
            values.push(v.map_err(|e| bad(i + 1, e))?);
        }
        if let Some(c) = schema.event_time {
            if let Value::Int(t) = values[c] {
                out.max_time = out.max_time.max(Some(t));
            }
        }
        batch.push(
            RowKey {
                seq: out.rows,
                lane: 0,
            },
            &values,
        );
        out.rows += 1;
        if batch.len() == BATCH {
            out.batches.push(std::mem::replace(
                &mut batch,
                Batch::with_capacity(arity, BATCH),
            ));
        }
        at = end;
        out.whole = end as u64;
    }
    if !batch.is_empty() {
        out.batches.push(batch);
    }
    Ok(out)
}

/// Reads the CSV record starting at `at` into `fields` (text, and whether it was
/// quoted); the offset after its newline, or `None` when the bytes end before it.
fn record(bytes: &[u8], mut at: usize, fields: &mut Vec<(String, bool)>) -> Option<usize> {
    fields.clear();
    let mut field = Vec::new();
    let mut quoted = false;
    loop {
        let b = *bytes.get(at)?;
        at += 1;
        match b {
            b'"' if field.is_empty() && !quoted => {
                quoted = true;
                // Up to the closing quote; `""` inside is one quote.
                loop {
                    let c = *bytes.get(at)?;
                    at += 1;
                    if c == b'"' {
                        if bytes.get(at) == Some(&b'"') {
                            field.push(b'"');
                            at += 1;
                        } else {
                            break;
                        }
                    } else {
                        field.push(c);
                    }
                }
            }
            b',' | b'\n' => {
                fields.push((String::from_utf8_lossy(&field).into_owned(), quoted));
                field.clear();
                quoted = false;
                if b == b'\n' {
                    return Some(at);
                }
            }
            b'\r' if bytes.get(at) == Some(&b'\n') => {}
            b => field.push(b),
        }
    }
}

/// Writes `batches`' first `rows` rows to `path` in place of what it held: a new file
/// beside it, synced, then renamed over it.
pub(crate) fn rewrite(
    path: &Path,
    batches: &[std::sync::Arc<Batch>],
    rows: u64,
    schema: &Schema,
) -> Result<()> {
    let types: Vec<DataType> = schema.fields.iter().map(|f| f.ty).collect();
    let tmp = path.with_extension("csv.tmp");
    let io = |what: &str, e| Error::io(format!("{what} {}", tmp.display()), e);
    let file = std::fs::File::create(&tmp).map_err(|e| io("creating", e))?;
    let mut w = std::io::BufWriter::new(file);
    let mut left = rows;
    'all: for b in batches {
        for r in b.rows() {
            if left == 0 {
                break 'all;
            }
            write_row(&mut w, &r, &types).map_err(|e| io("writing", e))?;
            left -= 1;
        }
    }
    let file = w.into_inner().map_err(|e| io("writing", e.into_error()))?;
    file.sync_all().map_err(|e| io("syncing", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        Error::io(
            format!("renaming {} over {}", tmp.display(), path.display()),
            e,
        )
    })?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
