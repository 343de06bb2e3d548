//! A stream log's file: one CSV line per row, written so that it reads back to the
//! same values (a server that restarts opens its streams again from these files).
//!
//! It is the CSV Braid writes elsewhere (an empty string is written quoted, `""`, so
//! that it reads back as a string and an empty field as NULL). A row's sequence number in the stream is its place in the file, after the
//! rows the log trimmed (retention): a file that starts later than the stream's first
//! row has a first line `#braid first=<seq>` (strings that start with `#` are written
//! quoted, so no row reads as it).

use crate::error::{Error, Result};
use crate::source::parse_field;
use braid_plan::batch::{parse_array, Batch, Row, RowKey, Scalar, Value};
use braid_plan::types::{DataType, Schema};
use std::io::Write;
use std::path::Path;

/// Rows per batch of a log read back from its file.
const BATCH: usize = 4096;

/// Writes `row` as one line (see [`braid_plan::text::write_csv_row`]).
pub(crate) fn write_row(
    out: &mut impl Write,
    row: &Row<'_>,
    types: &[DataType],
) -> std::io::Result<()> {
    braid_plan::text::write_csv_row(out, row, types, None)
}

/// What a log's file holds: its rows in batches (keyed by their sequence numbers from
/// 0), and the length of the file up to its last whole line.
pub(crate) struct Contents {
    pub batches: Vec<Batch>,
    /// The sequence number of the file's first row (rows before it were trimmed).
    pub first: u64,
    /// Rows of the stream, trimmed ones included: the next row's sequence number.
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
        first: 0,
        rows: 0,
        max_time: None,
        whole: 0,
    };
    let mut batch = Batch::with_capacity(arity, BATCH);
    let mut fields: Vec<(String, bool)> = Vec::with_capacity(arity);
    let mut at = 0usize;
    let mut line = 0u64;
    if let Some(rest) = bytes.strip_prefix(FIRST) {
        line = 1;
        let end = rest.iter().position(|&b| b == b'\n');
        let first = end
            .and_then(|e| std::str::from_utf8(&rest[..e]).ok())
            .and_then(|t| t.trim().parse::<u64>().ok());
        let (Some(end), Some(first)) = (end, first) else {
            return Err(Error::Plan(braid_plan::error::Error::Plan(format!(
                "the log {}, line 1: expected `#braid first=<row number>`",
                path.display()
            ))));
        };
        out.first = first;
        out.rows = first;
        at = FIRST.len() + end + 1;
        out.whole = at as u64;
    }
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
        // (Arrays, which the field parser leaves to a batch's arena, as owned values.)
        let mut arrays: Vec<Option<Scalar>> = Vec::with_capacity(arity);
        for (i, ((text, _), f)) in fields.iter().zip(&schema.fields).enumerate() {
            arrays.push(match f.ty {
                DataType::Float64Array | DataType::Int64Array => {
                    Some(parse_array(text, f.ty, f.nullable, f.len).map_err(|e| bad(i + 1, e))?)
                }
                _ => None,
            });
        }
        let mut values: Vec<Value<'_>> = Vec::with_capacity(arity);
        for (i, ((text, quoted), f)) in fields.iter().zip(&schema.fields).enumerate() {
            let v = match &arrays[i] {
                Some(a) => Ok(a.as_value()),
                None => parse_field(text.as_bytes(), f.ty, f.nullable, *quoted),
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

/// The first line of a log file that starts after the stream's first row.
const FIRST: &[u8] = b"#braid first=";

/// Writes `batches`' rows from sequence number `first` up to `rows` to `path` in place
/// of what it held (with the line naming `first` when it is not 0): a new file beside
/// it, synced, then renamed over it.
pub(crate) fn rewrite(
    path: &Path,
    batches: &[std::sync::Arc<Batch>],
    first: u64,
    rows: u64,
    schema: &Schema,
) -> Result<()> {
    let types: Vec<DataType> = schema.fields.iter().map(|f| f.ty).collect();
    let rows = batches
        .iter()
        .flat_map(|b| b.rows())
        .filter(|r| (first..rows).contains(&r.key().seq));
    crate::checkpoint_store::replace_with(path, |mut w| {
        if first > 0 {
            w.write_all(FIRST)?;
            writeln!(w, "{first}")?;
        }
        for r in rows {
            write_row(&mut w, &r, &types)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::log::StreamLog;
    use braid_plan::batch::{Batch, RowKey, Value};
    use braid_plan::types::{DataType, Field, Schema};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::nullable("s", DataType::String),
            Field::nullable("x", DataType::Float64),
            Field::new("n", DataType::Int64),
        ])
    }

    fn rows(log: &StreamLog) -> Vec<String> {
        let (mut out, mut k) = (Vec::new(), 0);
        while let super::super::log::Read::Batch(b) = log.read(k) {
            out.extend(
                b.rows()
                    .map(|r| format!("{:?}@{}", r.to_scalars(), r.key().seq)),
            );
            k += 1;
        }
        out
    }

    /// Strings that CSV makes hard (empty, quotes, commas, newlines, blanks around),
    /// NULL, floats: a log opened again holds the same values and sequence numbers, a
    /// line cut short at the end is dropped, and a cut back to 2 rows keeps 2.
    #[test]
    fn a_log_reads_back_what_it_wrote() {
        let dir = std::env::temp_dir().join(format!("braid-log-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = StreamLog::create("t", schema(), Some(&dir)).unwrap();
        let mut b = Batch::new(3);
        let strings = ["", "a,\"b\"", "line\nbreak", " pad ", "plain"];
        for (i, s) in strings.iter().enumerate() {
            b.push(
                RowKey { seq: 0, lane: 0 },
                &[
                    Value::Str(s),
                    Value::Float(0.1 * i as f64),
                    Value::Int(i as i64),
                ],
            );
        }
        b.push(
            RowKey { seq: 0, lane: 0 },
            &[Value::Null, Value::Null, Value::Int(-7)],
        );
        log.append(&b).unwrap();
        let before = rows(&log);
        drop(log);
        let path = dir.join("t.csv");
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"\"cut");
        std::fs::write(&path, &text).unwrap();
        let again = StreamLog::open("t", schema(), Some(&dir)).unwrap();
        assert_eq!(rows(&again), before);
        assert_eq!(again.reopened(), 6);
        again.truncate(2).unwrap();
        drop(again);
        let cut = StreamLog::open("t", schema(), Some(&dir)).unwrap();
        assert_eq!(rows(&cut), before[..2].to_vec());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An array's text has commas: it is written quoted, so a stream with an array
    /// column opens again with its rows whole (written bare, `{1,2.5}` read back as two
    /// fields and the row was lost at the restart).
    #[test]
    fn arrays_read_back_whole() {
        let dir = std::env::temp_dir().join(format!("braid-log-arrays-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let schema = Schema::new(vec![
            Field::nullable("v", DataType::Float64Array),
            Field::new("n", DataType::Int64),
        ]);
        let log = StreamLog::create("a", schema.clone(), Some(&dir)).unwrap();
        let mut b = Batch::new(2);
        b.push(
            RowKey::default(),
            &[Value::Floats(&[1.0, 2.5]), Value::Int(1)],
        );
        b.push(RowKey::default(), &[Value::Floats(&[]), Value::Int(2)]);
        log.append(&b).unwrap();
        let before = rows(&log);
        drop(log);
        let again = StreamLog::open("a", schema, Some(&dir)).unwrap();
        assert_eq!(rows(&again), before);
        assert_eq!(again.reopened(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
