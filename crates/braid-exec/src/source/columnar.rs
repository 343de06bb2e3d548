//! Parquet files and Arrow IPC streams as sources: their record batches as Braid rows.
//!
//! A declared column is found by name (any case) among the file's columns, and its
//! type must hold the declared type's values exactly: BIGINT from any integer type up
//! to 64 bits (unsigned up to 32), DOUBLE from a float, BOOLEAN, TEXT from UTF-8
//! strings, TIMESTAMP / TIMESTAMP WITH TIME ZONE from a timestamp of seconds,
//! milliseconds or microseconds without / with a zone, DATE from a 32-bit date. Any
//! other pairing is refused when the file is opened, naming the column and both types
//! (nanosecond timestamps too: Braid keeps microseconds). A null in a NOT NULL column
//! makes its row a malformed record, counted with its row number.

use super::{epoch_at, Counters, Feed, Next, ReadOptions, RejectLog, Rejects};
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as Arrow, Schema as ArrowSchema, TimeUnit};
use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::plan::Source;
use braid_plan::types::{DataType, Schema};
use std::sync::Arc;

/// How a declared column reads its file column.
#[derive(Clone, Copy, Debug)]
enum Read {
    Int,
    Float,
    Bool,
    Str,
    /// A timestamp, times this factor in microseconds.
    Time(i64),
    Date,
}

/// The file column of each declared column and how to read it; or why it cannot be read.
fn plan_columns(schema: &Schema, file: &ArrowSchema, what: &str) -> Result<Vec<(usize, Read)>> {
    let mut out = Vec::with_capacity(schema.arity());
    for f in &schema.fields {
        let Some(i) = file
            .fields()
            .iter()
            .position(|a| a.name().eq_ignore_ascii_case(&f.name))
        else {
            let names: Vec<&str> = file.fields().iter().map(|a| a.name().as_str()).collect();
            return Err(plan_error(format!(
                "{what} has no column `{}`; its columns are {}",
                f.name,
                names.join(", ")
            )));
        };
        let ty = file.field(i).data_type();
        let read = match (f.ty, ty) {
            (
                DataType::Int64,
                Arrow::Int8
                | Arrow::Int16
                | Arrow::Int32
                | Arrow::Int64
                | Arrow::UInt8
                | Arrow::UInt16
                | Arrow::UInt32,
            ) => Read::Int,
            (DataType::Float64, Arrow::Float32 | Arrow::Float64) => Read::Float,
            (DataType::Bool, Arrow::Boolean) => Read::Bool,
            (DataType::String, Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View) => Read::Str,
            (DataType::Timestamp, Arrow::Timestamp(unit, None))
            | (DataType::TimestampTz, Arrow::Timestamp(unit, Some(_))) => match unit {
                TimeUnit::Second => Read::Time(1_000_000),
                TimeUnit::Millisecond => Read::Time(1000),
                TimeUnit::Microsecond => Read::Time(1),
                TimeUnit::Nanosecond => {
                    return Err(plan_error(format!(
                        "{what}: column `{}` holds nanosecond timestamps; Braid keeps microseconds (reading them would cut digits off)",
                        f.name
                    )))
                }
            },
            (DataType::Date, Arrow::Date32) => Read::Date,
            _ => {
                return Err(plan_error(format!(
                    "{what}: column `{}` is {ty} in the file, declared {}; they do not hold the same values",
                    f.name, f.ty
                )))
            }
        };
        out.push((i, read));
    }
    Ok(out)
}

fn plan_error(m: String) -> Error {
    Error::Plan(braid_plan::error::Error::Plan(m))
}

/// Value `r` of `a` read as `how`: None for a null; Err for a timestamp beyond
/// Braid's range.
fn value(a: &dyn Array, how: Read, r: usize) -> std::result::Result<Option<Value<'_>>, String> {
    if a.is_null(r) {
        return Ok(None);
    }
    Ok(Some(match how {
        Read::Int => Value::Int(match a.data_type() {
            Arrow::Int8 => a.as_primitive::<Int8Type>().value(r) as i64,
            Arrow::Int16 => a.as_primitive::<Int16Type>().value(r) as i64,
            Arrow::Int32 => a.as_primitive::<Int32Type>().value(r) as i64,
            Arrow::UInt8 => a.as_primitive::<UInt8Type>().value(r) as i64,
            Arrow::UInt16 => a.as_primitive::<UInt16Type>().value(r) as i64,
            Arrow::UInt32 => a.as_primitive::<UInt32Type>().value(r) as i64,
            _ => a.as_primitive::<Int64Type>().value(r),
        }),
        Read::Float => Value::Float(match a.data_type() {
            Arrow::Float32 => a.as_primitive::<Float32Type>().value(r) as f64,
            _ => a.as_primitive::<Float64Type>().value(r),
        }),
        Read::Bool => Value::Bool(a.as_boolean().value(r)),
        Read::Str => Value::Str(match a.data_type() {
            Arrow::LargeUtf8 => a.as_string::<i64>().value(r),
            Arrow::Utf8View => a.as_string_view().value(r),
            _ => a.as_string::<i32>().value(r),
        }),
        Read::Time(k) => {
            let v = match a.data_type() {
                Arrow::Timestamp(TimeUnit::Second, _) => {
                    a.as_primitive::<TimestampSecondType>().value(r)
                }
                Arrow::Timestamp(TimeUnit::Millisecond, _) => {
                    a.as_primitive::<TimestampMillisecondType>().value(r)
                }
                _ => a.as_primitive::<TimestampMicrosecondType>().value(r),
            };
            return match v.checked_mul(k) {
                Some(t) => Ok(Some(Value::Int(t))),
                None => Err(format!(
                    "the timestamp {v} is beyond the range of microseconds"
                )),
            };
        }
        Read::Date => Value::Int(a.as_primitive::<Date32Type>().value(r) as i64),
    }))
}

/// Record batches from a file, one after another.
pub(crate) type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, String>> + Send>;

/// Opens `path` as a Parquet file or an Arrow IPC stream: its schema and its batches.
pub(crate) fn open_file(
    path: &std::path::Path,
    parquet: bool,
) -> Result<(Arc<ArrowSchema>, Batches)> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let bad = |e: String| Error::Input {
        source_name: path.display().to_string(),
        line: 0,
        column: 0,
        message: e,
    };
    if parquet {
        let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| bad(format!("not a Parquet file: {e}")))?;
        let schema = builder.schema().clone();
        let reader = builder
            .with_batch_size(4096)
            .build()
            .map_err(|e| bad(format!("reading the Parquet file: {e}")))?;
        Ok((
            schema,
            Box::new(reader.map(|b| b.map_err(|e| e.to_string()))),
        ))
    } else {
        let reader = arrow_ipc::reader::StreamReader::try_new(std::io::BufReader::new(file), None)
            .map_err(|e| bad(format!("not an Arrow IPC stream: {e}")))?;
        let schema = reader.schema();
        Ok((
            schema,
            Box::new(reader.map(|b| b.map_err(|e| e.to_string()))),
        ))
    }
}

/// Where a columnar feed resumes: the rows before it, and the epoch of the last.
#[derive(serde::Serialize, serde::Deserialize)]
struct Resume {
    row: u64,
    epoch: u64,
    rejects: u64,
}

/// A Parquet file or Arrow IPC stream cut into windows of one epoch each.
pub(crate) struct ColumnarFeed {
    source: Source,
    columns: Vec<(usize, Read)>,
    batches: Batches,
    /// The batch being read and the next row in it.
    batch: Option<RecordBatch>,
    next: usize,
    /// Rows read (the next row's number), and rows to pass over (resuming).
    row: u64,
    skip: u64,
    epoch: u64,
    rejects: RejectLog,
    strict: bool,
    counters: Arc<Counters>,
    last: Option<Vec<u8>>,
}

impl ColumnarFeed {
    pub fn open(
        source: &Source,
        path: &std::path::Path,
        parquet: bool,
        opts: &ReadOptions,
        counters: Arc<Counters>,
        resume: Option<&[u8]>,
    ) -> Result<ColumnarFeed> {
        let (schema, batches) = open_file(path, parquet)?;
        let what = format!("{} ({})", source.name, path.display());
        let columns = plan_columns(&source.schema, &schema, &what)?;
        let at: Option<Resume> = match resume {
            Some(b) => Some(serde_json::from_slice(b).map_err(|e| {
                Error::Internal(format!("the checkpoint's place in {}: {e}", source.name))
            })?),
            None => None,
        };
        let mut rejects = RejectLog::new(&source.name, opts, counters.clone())?;
        if let Some(a) = &at {
            rejects.rejects.count = a.rejects;
        }
        Ok(ColumnarFeed {
            source: source.clone(),
            columns,
            batches,
            batch: None,
            next: 0,
            row: 0,
            skip: at.as_ref().map_or(0, |a| a.row),
            epoch: at.as_ref().map_or(0, |a| a.epoch),
            rejects,
            strict: opts.strict,
            counters,
            last: None,
        })
    }

    /// The batch holding the next row, if any is left.
    fn fill(&mut self) -> Result<bool> {
        loop {
            if let Some(b) = &self.batch {
                if self.next < b.num_rows() {
                    return Ok(true);
                }
            }
            match self.batches.next() {
                None => return Ok(false),
                Some(Err(e)) => {
                    return Err(Error::Input {
                        source_name: self.source.name.clone(),
                        line: self.row + 1,
                        column: 0,
                        message: e,
                    })
                }
                Some(Ok(b)) => {
                    // Resuming: whole batches before the resume point are passed over.
                    let n = b.num_rows() as u64;
                    if self.row + n <= self.skip {
                        self.row += n;
                        continue;
                    }
                    self.next = (self.skip.saturating_sub(self.row)) as usize;
                    self.row += self.next as u64;
                    self.batch = Some(b);
                }
            }
        }
    }
}

impl Feed for ColumnarFeed {
    fn next(&mut self) -> Result<Next> {
        let start = serde_json::to_vec(&Resume {
            row: self.row,
            epoch: self.epoch,
            rejects: self.rejects.rejects.count,
        })
        .ok();
        let window = self.source.window.max(1);
        let tcol = self.source.schema.event_time;
        let mut out: Option<(u64, Batch)> = None;
        while out.as_ref().is_none_or(|(_, b)| b.len() < window) {
            if !self.fill()? {
                break;
            }
            let b = self.batch.as_ref().expect("a batch");
            let r = self.next;
            let row = self.row;
            // The row's values, or the column at fault.
            let mut values: Vec<Value<'_>> = Vec::with_capacity(self.columns.len());
            let mut fault = None;
            for (k, &(i, how)) in self.columns.iter().enumerate() {
                let f = &self.source.schema.fields[k];
                match value(b.column(i).as_ref(), how, r) {
                    Ok(Some(v)) => values.push(v),
                    Ok(None) if f.nullable => values.push(Value::Null),
                    Ok(None) => {
                        let why = format!("column {}: null, declared NOT NULL", f.name);
                        fault = Some((k as u64 + 1, why));
                        break;
                    }
                    Err(why) => {
                        fault = Some((k as u64 + 1, format!("column {}: {why}", f.name)));
                        break;
                    }
                }
            }
            if let Some((column, reason)) = fault {
                if self.strict {
                    return Err(Error::Input {
                        source_name: self.source.name.clone(),
                        line: row + 1,
                        column,
                        message: reason,
                    });
                }
                self.rejects.add(row + 1, column, reason, b"");
                self.next += 1;
                self.row += 1;
                continue;
            }
            let time = tcol.and_then(|c| match values[c] {
                Value::Int(t) => Some(t),
                _ => None,
            });
            let e = epoch_at(self.source.epoch, time, row).max(self.epoch);
            if out.as_ref().is_some_and(|(oe, _)| *oe != e) {
                break;
            }
            let (_, batch) =
                out.get_or_insert_with(|| (e, Batch::with_capacity(values.len(), window)));
            batch.push(RowKey { seq: row, lane: 0 }, &values);
            self.epoch = e;
            self.next += 1;
            self.row += 1;
        }
        match out {
            Some((e, batch)) => {
                Counters::add(&self.counters.rows_in, batch.len() as u64);
                self.last = start;
                Ok(Next::Window(e, batch))
            }
            None => Ok(Next::Done),
        }
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        self.last.clone()
    }

    fn rejects(&mut self) -> Rejects {
        self.rejects.flush();
        self.rejects.rejects.clone()
    }
}
