//! Rows from producers into a stream's log: lines of CSV, of PostgreSQL's COPY text
//! format (tab-separated, `\N` for null) or of JSON (one object a line, see
//! [`super::json`]), and `INSERT ... VALUES` literals. A malformed line is counted and
//! kept (line, column, reason) for the producer's acknowledgement; the good lines of
//! the same call are appended. A line longer than [`Ingest::MAX_LINE`] is malformed and
//! skipped without being kept, so a producer holds bounded memory.

use super::log::StreamLog;
use crate::error::Result;
use crate::source::{parse_field, Reject};
use braid_plan::batch::{Batch, RowKey, Scalar, Value};
use braid_plan::types::Schema;
use std::ops::Range;
use std::sync::Arc;

/// How a producer's lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// PostgreSQL's COPY text format: tab-separated, `\N` null, backslash escapes.
    Text,
    /// CSV (RFC 4180 quoting); an empty field is null.
    Csv,
    /// JSON lines: one object a line, keyed by column name; a missing nullable column
    /// is null.
    Json,
}

/// A place in a producer's input: the bytes before it, and the lines they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    /// Bytes of the producer's input before it (only whole lines).
    pub offset: u64,
    /// Lines before it (header and malformed lines included).
    pub line: u64,
}

/// One append of a producer's, as its [`Ingest::on_append`] hook sees it (under the
/// log's lock, before the rows are written): the log held `rows_before` rows; the
/// lines from `from` to `to` of the producer's input gave `rows` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Rows of the log before this append.
    pub rows_before: u64,
    /// Rows this append adds.
    pub rows: u64,
    /// Where its lines start in the producer's input.
    pub from: Pos,
    /// Where they end (the next line's start).
    pub to: Pos,
}

/// The hook an [`Ingest`] calls with each append's [`Mark`].
pub type OnAppend = Box<dyn FnMut(Mark) -> Result<()> + Send>;

/// One producer's ingest into one stream: cuts what it sends into lines (a line may
/// span two sends), parses them, appends the good ones.
pub struct Ingest {
    log: Arc<StreamLog>,
    format: Format,
    /// Skip the first line (a CSV header).
    skip_header: bool,
    /// The unfinished last line of what came so far.
    partial: Vec<u8>,
    /// Skipping the rest of a line longer than [`Ingest::MAX_LINE`].
    skipping: bool,
    line: u64,
    /// Rows appended.
    pub rows: u64,
    /// Malformed lines: how many, and the first few.
    pub rejected: u64,
    /// The first [`Ingest::KEEP`] malformed lines.
    pub rejects: Vec<Reject>,
    /// The rows appended, by their sequence numbers in the stream (see [`Sent`]).
    pub sent: Sent,
    /// Bytes taken so far (the producer's input starts at `start.offset`).
    taken: u64,
    /// Where the lines appended so far end.
    done: Pos,
    on_append: Option<OnAppend>,
}

impl Ingest {
    /// How many malformed lines are kept for the acknowledgement.
    pub const KEEP: usize = 10;
    /// The longest line taken, in bytes.
    pub const MAX_LINE: usize = 1 << 20;

    /// A producer of `format` lines into `log` (a header line first when `header`).
    pub fn new(log: Arc<StreamLog>, format: Format, header: bool) -> Ingest {
        Ingest {
            log,
            format,
            skip_header: header,
            partial: Vec::new(),
            skipping: false,
            line: 0,
            rows: 0,
            rejected: 0,
            rejects: Vec::new(),
            sent: Sent::default(),
            taken: 0,
            done: Pos::default(),
            on_append: None,
        }
    }

    /// Starts at `at` of the producer's input instead of its start (a tailed file
    /// resumed after a restart: the header, if any, was read before).
    pub fn resume_at(mut self, at: Pos) -> Ingest {
        self.taken = at.offset;
        self.done = at;
        self.line = at.line;
        if at.offset > 0 {
            self.skip_header = false;
        }
        self
    }

    /// Calls `hook` with every append's [`Mark`] (empty appends too: lines that were
    /// all malformed), under the log's lock before the rows are written.
    pub fn on_append(mut self, hook: OnAppend) -> Ingest {
        self.on_append = Some(hook);
        self
    }

    /// Columns of the stream.
    pub fn columns(&self) -> usize {
        self.log.schema().fields.len()
    }

    /// The log rows go to.
    pub fn log(&self) -> &Arc<StreamLog> {
        &self.log
    }

    /// Takes `bytes` (any cut of the producer's data): appends its complete lines.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<()> {
        self.log.note_bytes(bytes.len());
        self.taken += bytes.len() as u64;
        if self.skipping {
            let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
                return Ok(());
            };
            self.skipping = false;
            bytes = &bytes[end + 1..];
        }
        self.partial.extend_from_slice(bytes);
        if let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') {
            let rest = self.partial.split_off(last + 1);
            let lines = std::mem::replace(&mut self.partial, rest);
            let end = self.taken - self.partial.len() as u64;
            self.lines(&lines, end)?;
        }
        if self.partial.len() > Ingest::MAX_LINE {
            self.line += 1;
            self.skip_header = false;
            let reason = format!("a line longer than {} bytes", Ingest::MAX_LINE);
            self.reject(self.line, 0, reason);
            self.partial = Vec::new();
            self.skipping = true;
        }
        Ok(())
    }

    /// The producer is done: appends its last line if it had no newline.
    pub fn finish(&mut self) -> Result<()> {
        let rest = std::mem::take(&mut self.partial);
        self.skipping = false;
        self.lines(&rest, self.taken)
    }

    /// The producer went away mid-line (its connection was reset): its unfinished
    /// line, if any, is dropped and counted as malformed.
    pub fn abandon(&mut self) {
        if !self.partial.is_empty() || self.skipping {
            self.line += 1;
            let reason = "the line was cut off: the connection was reset".to_string();
            self.reject(self.line, 0, reason);
        }
        self.partial.clear();
        self.skipping = false;
    }

    fn reject(&mut self, line: u64, column: u64, reason: String) {
        self.rejected += 1;
        self.log.note_rejected();
        if self.rejects.len() < Ingest::KEEP {
            self.rejects.push(Reject {
                line,
                column,
                reason,
            });
        }
    }

    /// Parses `bytes` (whole lines, ending at offset `end` of the input) and appends
    /// the good ones.
    fn lines(&mut self, bytes: &[u8], end: u64) -> Result<()> {
        let schema = self.log.schema().clone();
        let mut batch = Batch::new(schema.fields.len());
        let mut fields: Vec<Written> = Vec::new();
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
            let row = match self.format {
                Format::Text => split_text(raw, &mut fields)
                    .and_then(|()| push_row(&mut batch, &schema, &fields, self.rows)),
                Format::Csv => split_csv(raw, &mut fields)
                    .and_then(|()| push_row(&mut batch, &schema, &fields, self.rows)),
                Format::Json => super::json::push_row(&mut batch, &schema, raw, self.rows),
            };
            match row {
                Ok(()) => self.rows += 1,
                Err((column, reason)) => self.reject(self.line, column, reason),
            }
        }
        let to = Pos {
            offset: end,
            line: self.line,
        };
        let from = std::mem::replace(&mut self.done, to);
        let seqs = match self.on_append.as_mut() {
            Some(hook) => self.log.append_with(&batch, |rows_before| {
                hook(Mark {
                    rows_before,
                    rows: batch.len() as u64,
                    from,
                    to,
                })
            })?,
            None => self.log.append(&batch)?,
        };
        self.sent.add(self.log.name(), seqs);
        Ok(())
    }
}

/// A field as written: its text and whether it was written as a value whatever its
/// bytes (see [`parse_field`]: a quoted CSV field, a field of COPY's text format, a SQL
/// literal), or None for null (text format's `\N`, SQL's NULL).
type Written = Option<(String, bool)>;

/// Fields of a COPY text line (tab-separated; `\N` is null; backslash escapes
/// decoded; an empty field is the empty string, as in PostgreSQL).
fn split_text(raw: &[u8], out: &mut Vec<Written>) -> std::result::Result<(), (u64, String)> {
    out.clear();
    let text = std::str::from_utf8(raw).map_err(|_| (0, "the line is not UTF-8".to_string()))?;
    for f in text.split('\t') {
        if f == "\\N" {
            out.push(None);
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
        out.push(Some((s, true)));
    }
    Ok(())
}

/// Fields of a CSV line, split as every CSV reader splits them
/// ([`braid_plan::text::split_fields`]): an unquoted empty field is null, `""` the
/// empty string.
fn split_csv(raw: &[u8], out: &mut Vec<Written>) -> std::result::Result<(), (u64, String)> {
    out.clear();
    let (mut data, mut fields) = (Vec::new(), Vec::new());
    braid_plan::text::split_fields(raw, &mut data, &mut fields)?;
    for &(a, b, column, quoted) in &fields {
        let bytes = if quoted { &data[a..b] } else { &raw[a..b] };
        let text = std::str::from_utf8(bytes)
            .map_err(|_| (column, "the field is not UTF-8".to_string()))?;
        out.push(Some((text.to_string(), quoted)));
    }
    Ok(())
}

/// Appends the row of `fields` (as `schema` types them) keyed `seq`; or the 1-based
/// column at fault and why.
fn push_row(
    batch: &mut Batch,
    schema: &Schema,
    fields: &[Written],
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
    for (i, (written, f)) in fields.iter().zip(&schema.fields).enumerate() {
        let v = match written {
            None => match f.nullable {
                true => Ok(Value::Null),
                false => Err(format!("null, expected {}", f.ty)),
            },
            Some((text, quoted)) => parse_field(text.as_bytes(), f.ty, f.nullable, *quoted),
        };
        values.push(v.map_err(|reason| (i as u64 + 1, format!("column {}: {reason}", f.name)))?);
    }
    batch.push(RowKey { seq, lane: 0 }, &values);
    Ok(())
}

/// Appends rows of values already typed as the stream's columns (`INSERT ... VALUES`,
/// see `braid_sql::values`), all of them or none.
pub fn insert(log: &StreamLog, rows: &[Vec<Scalar>]) -> std::result::Result<Range<u64>, String> {
    let schema = log.schema().clone();
    let mut batch = Batch::new(schema.fields.len());
    let mut values: Vec<Value<'_>> = Vec::with_capacity(schema.fields.len());
    for (r, row) in rows.iter().enumerate() {
        values.clear();
        values.extend(row.iter().map(Scalar::as_value));
        if values.len() != schema.fields.len() {
            return Err(format!(
                "row {}: {} values, expected {}",
                r + 1,
                values.len(),
                schema.fields.len()
            ));
        }
        batch.push(
            RowKey {
                seq: r as u64,
                lane: 0,
            },
            &values,
        );
    }
    log.append(&batch).map_err(|e| e.to_string())
}

/// The rows one producer appended, by stream and sequence numbers: what a client is
/// told about when some of them turn out late for a query (see
/// `LiveSession::late_notices`). The most recent [`Sent::KEEP`] runs are kept.
#[derive(Debug, Default)]
pub struct Sent {
    runs: std::collections::VecDeque<(String, Range<u64>)>,
}

impl Sent {
    /// How many runs of rows are kept.
    pub const KEEP: usize = 1024;

    /// Rows `seqs` of `stream` were appended.
    pub fn add(&mut self, stream: &str, seqs: Range<u64>) {
        if seqs.is_empty() {
            return;
        }
        if let Some((s, last)) = self.runs.back_mut() {
            if s == stream && last.end == seqs.start {
                last.end = seqs.end;
                return;
            }
        }
        if self.runs.len() == Sent::KEEP {
            self.runs.pop_front();
        }
        self.runs.push_back((stream.to_string(), seqs));
    }

    /// Takes another producer's runs (a COPY's, into its client's).
    pub fn extend(&mut self, other: Sent) {
        for (s, r) in other.runs {
            self.add(&s, r);
        }
    }

    /// Whether row `seq` of `stream` was sent here.
    pub fn holds(&self, stream: &str, seq: u64) -> bool {
        self.runs
            .iter()
            .any(|(s, r)| s.eq_ignore_ascii_case(stream) && r.contains(&seq))
    }

    /// Whether anything was sent.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::types::{DataType, Field};

    /// A stream `(a BIGINT NOT NULL, b DOUBLE, s TEXT, t TIMESTAMP)` in memory.
    fn log() -> Arc<StreamLog> {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64),
            Field::nullable("b", DataType::Float64),
            Field::nullable("s", DataType::String),
            Field::nullable("t", DataType::Timestamp),
        ]);
        StreamLog::create("s", schema, None).unwrap()
    }

    /// Every row of `log` as text, `-` for null.
    fn rows(log: &StreamLog) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = 0;
        while let super::super::log::Read::Batch(b) = log.read(at) {
            at += 1;
            for r in b.rows() {
                let cells: Vec<String> = (0..4)
                    .map(|c| match r.get(c) {
                        Value::Null => "-".into(),
                        Value::Int(i) => i.to_string(),
                        Value::Float(f) => f.to_string(),
                        Value::Bool(b) => b.to_string(),
                        v => v.to_string(),
                    })
                    .collect();
                out.push(cells.join(","));
            }
        }
        out
    }

    #[test]
    fn json_lines_by_column_name() {
        let log = log();
        let mut ingest = Ingest::new(log.clone(), Format::Json, false);
        // Cut mid-line: the second send finishes the first line.
        ingest.push(br#"{"a": 1, "b": 2.5, "s": "x"#).unwrap();
        ingest
            .push(b"\"}\n{\"A\": 2}\n{\"t\": \"1970-01-01 00:00:01\", \"a\": -3, \"b\": 4}\n")
            .unwrap();
        ingest.finish().unwrap();
        assert_eq!(ingest.rows, 3);
        assert_eq!(ingest.rejected, 0);
        assert_eq!(rows(&log), ["1,2.5,x,-", "2,-,-,-", "-3,4,-,1000000"]);
    }

    #[test]
    fn json_malformed_lines_name_line_column_reason() {
        let log = log();
        let mut ingest = Ingest::new(log.clone(), Format::Json, false);
        let text = [
            r#"{"a": 1}"#,
            r#"{"a": 2, "c": 1}"#,
            r#"{"b": 1.0}"#,
            r#"{"a": "3"}"#,
            r#"{"a": 1.5}"#,
            r#"[1, 2]"#,
            r#"{"a": 4, "s": 5}"#,
            r#"{"a": 5"#,
            r#"{"a": null}"#,
            r#"{"a": 6, "b": null}"#,
        ]
        .join("\n");
        ingest.push(text.as_bytes()).unwrap();
        ingest.finish().unwrap();
        assert_eq!(rows(&log), ["1,-,-,-", "6,-,-,-"]);
        assert_eq!(ingest.rows, 2);
        assert_eq!(ingest.rejected, 8);
        let got: Vec<(u64, u64)> = ingest.rejects.iter().map(|r| (r.line, r.column)).collect();
        assert_eq!(
            got,
            [
                (2, 0),
                (3, 1),
                (4, 1),
                (5, 1),
                (6, 0),
                (7, 3),
                (8, 0),
                (9, 1)
            ]
        );
        let reasons: Vec<&str> = ingest.rejects.iter().map(|r| r.reason.as_str()).collect();
        assert!(reasons[0].starts_with("unknown key \"c\""), "{reasons:?}");
        assert!(reasons[1].contains("missing"), "{reasons:?}");
        assert_eq!(reasons[2], "column a: a JSON string, expected int64");
        assert_eq!(reasons[3], "column a: 1.5 is not an int64");
        assert_eq!(reasons[4], "a JSON array, expected an object");
        assert!(reasons[6].starts_with("not JSON"), "{reasons:?}");
    }

    #[test]
    fn an_overlong_line_is_skipped_and_counted() {
        let log = log();
        let mut ingest = Ingest::new(log.clone(), Format::Csv, false);
        ingest.push(b"1,,,\n").unwrap();
        let chunk = vec![b'9'; 64 * 1024];
        for _ in 0..(Ingest::MAX_LINE / chunk.len() + 2) {
            ingest.push(&chunk).unwrap();
            assert!(ingest.partial.len() <= Ingest::MAX_LINE + chunk.len());
        }
        ingest.push(b"9\n2,,,\n").unwrap();
        ingest.finish().unwrap();
        assert_eq!(rows(&log), ["1,-,-,-", "2,-,-,-"]);
        assert_eq!((ingest.rejected, ingest.rejects[0].line), (1, 2));
    }

    #[test]
    fn a_reset_drops_only_the_cut_line() {
        let log = log();
        let mut ingest = Ingest::new(log.clone(), Format::Csv, false);
        ingest.push(b"1,,,\n2,").unwrap();
        ingest.abandon();
        assert_eq!(rows(&log), ["1,-,-,-"]);
        assert_eq!((ingest.rows, ingest.rejected), (1, 1));
        assert_eq!((ingest.rejects[0].line, ingest.rejects[0].column), (2, 0));
    }
}
