//! Parquet and Arrow IPC stream sinks: each window written as a record batch by
//! worker 0, the file closed (its footer written) when the input ends. Column types:
//! BIGINT int64, DOUBLE float64, BOOLEAN boolean, TEXT utf8, TIMESTAMP a microsecond
//! timestamp (TIMESTAMP WITH TIME ZONE with zone UTC), DATE date32, DOUBLE[] and
//! BIGINT[] lists of float64 and int64 (elements not null); nullable as declared.

use crate::error::{Error, Result};
use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType as Arrow, Field, Schema as ArrowSchema, TimeUnit};
use braid_plan::batch::{Batch, Value};
use braid_plan::connector::FileFormat;
use braid_plan::types::{DataType, Schema};
use std::path::Path;
use std::sync::Arc;

/// The Arrow schema Braid writes for `schema`.
pub(crate) fn arrow_schema(schema: &Schema) -> Arc<ArrowSchema> {
    let fields: Vec<Field> = schema
        .fields
        .iter()
        .map(|f| {
            let ty = match f.ty {
                DataType::Int64 => Arrow::Int64,
                DataType::Float64 => Arrow::Float64,
                DataType::Bool => Arrow::Boolean,
                DataType::String => Arrow::Utf8,
                DataType::Timestamp => Arrow::Timestamp(TimeUnit::Microsecond, None),
                DataType::TimestampTz => {
                    Arrow::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
                }
                DataType::Date => Arrow::Date32,
                DataType::Float64Array => {
                    Arrow::List(Arc::new(Field::new("item", Arrow::Float64, false)))
                }
                DataType::Int64Array => {
                    Arrow::List(Arc::new(Field::new("item", Arrow::Int64, false)))
                }
            };
            Field::new(&f.name, ty, f.nullable)
        })
        .collect();
    Arc::new(ArrowSchema::new(fields))
}

/// The rows of `batch` as a record batch of `schema`; or why not (a date beyond 32 bits
/// of days).
pub(crate) fn record_batch(
    batch: &Batch,
    types: &[DataType],
    schema: &Arc<ArrowSchema>,
) -> Result<RecordBatch> {
    let n = batch.len();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(types.len());
    for (c, ty) in types.iter().enumerate() {
        let values = batch.rows().map(|r| r.get(c));
        let array: ArrayRef = match ty {
            DataType::Int64 => {
                let mut b = Int64Builder::with_capacity(n);
                values.for_each(|v| b.append_option(int(v)));
                Arc::new(b.finish())
            }
            DataType::Timestamp | DataType::TimestampTz => {
                let mut b = TimestampMicrosecondBuilder::with_capacity(n);
                values.for_each(|v| b.append_option(int(v)));
                let a = b.finish();
                match ty {
                    DataType::TimestampTz => Arc::new(a.with_timezone("UTC")),
                    _ => Arc::new(a),
                }
            }
            DataType::Date => {
                let mut b = Date32Builder::with_capacity(n);
                for v in values {
                    let d = int(v)
                        .map(|d| {
                            i32::try_from(d).map_err(|_| {
                                Error::Internal(format!("date {d} (days) beyond Arrow's date32"))
                            })
                        })
                        .transpose()?;
                    b.append_option(d);
                }
                Arc::new(b.finish())
            }
            DataType::Float64 => {
                let mut b = Float64Builder::with_capacity(n);
                values.for_each(|v| {
                    b.append_option(match v {
                        Value::Float(f) => Some(f),
                        _ => None,
                    })
                });
                Arc::new(b.finish())
            }
            DataType::Bool => {
                let mut b = BooleanBuilder::with_capacity(n);
                values.for_each(|v| {
                    b.append_option(match v {
                        Value::Bool(x) => Some(x),
                        _ => None,
                    })
                });
                Arc::new(b.finish())
            }
            DataType::Float64Array => {
                let item = Field::new("item", Arrow::Float64, false);
                let mut b = ListBuilder::new(Float64Builder::new()).with_field(Arc::new(item));
                for v in values {
                    match v {
                        Value::Floats(a) => {
                            b.values().append_slice(a);
                            b.append(true);
                        }
                        _ => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Int64Array => {
                let item = Field::new("item", Arrow::Int64, false);
                let mut b = ListBuilder::new(Int64Builder::new()).with_field(Arc::new(item));
                for v in values {
                    match v {
                        Value::Ints(a) => {
                            b.values().append_slice(a);
                            b.append(true);
                        }
                        _ => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::String => {
                let mut b = StringBuilder::with_capacity(n, n * 8);
                values.for_each(|v| {
                    b.append_option(match v {
                        Value::Str(s) => Some(s),
                        _ => None,
                    })
                });
                Arc::new(b.finish())
            }
        };
        columns.push(array);
    }
    RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| Error::Internal(format!("a record batch of the sink's rows: {e}")))
}

fn int(v: Value<'_>) -> Option<i64> {
    match v {
        Value::Int(i) => Some(i),
        _ => None,
    }
}

enum Writer {
    Parquet(parquet::arrow::ArrowWriter<std::fs::File>),
    Ipc(arrow_ipc::writer::StreamWriter<std::io::BufWriter<std::fs::File>>),
}

/// Writes rows to a Parquet file or an Arrow IPC stream.
pub(crate) struct ColumnarWriter {
    writer: Option<Writer>,
    schema: Arc<ArrowSchema>,
    types: Vec<DataType>,
    path: std::path::PathBuf,
}

impl ColumnarWriter {
    pub fn create(path: &Path, format: FileFormat, schema: &Schema) -> Result<ColumnarWriter> {
        let file = std::fs::File::create(path)
            .map_err(|e| Error::io(format!("creating output file {}", path.display()), e))?;
        let arrow = arrow_schema(schema);
        let fault = |e: String| Error::Internal(format!("starting {}: {e}", path.display()));
        let writer = match format {
            FileFormat::Parquet => Writer::Parquet(
                parquet::arrow::ArrowWriter::try_new(file, arrow.clone(), None)
                    .map_err(|e| fault(e.to_string()))?,
            ),
            FileFormat::ArrowIpc => Writer::Ipc(
                arrow_ipc::writer::StreamWriter::try_new(std::io::BufWriter::new(file), &arrow)
                    .map_err(|e| fault(e.to_string()))?,
            ),
        };
        Ok(ColumnarWriter {
            writer: Some(writer),
            schema: arrow,
            types: schema.fields.iter().map(|f| f.ty).collect(),
            path: path.to_path_buf(),
        })
    }

    fn fault(&self, doing: &str, e: impl std::fmt::Display) -> Error {
        Error::io(
            format!("{doing} {}", self.path.display()),
            std::io::Error::other(e.to_string()),
        )
    }

    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let rb = record_batch(batch, &self.types, &self.schema)?;
        match self.writer.as_mut() {
            Some(Writer::Parquet(w)) => w.write(&rb).map_err(|e| self.fault("writing", e)),
            Some(Writer::Ipc(w)) => w.write(&rb).map_err(|e| self.fault("writing", e)),
            None => Ok(()),
        }
    }

    /// Writes the footer (Parquet) or end of stream (IPC) and closes the file.
    pub fn finish(&mut self) -> Result<()> {
        match self.writer.take() {
            Some(Writer::Parquet(w)) => w.close().map(|_| ()).map_err(|e| self.fault("closing", e)),
            Some(Writer::Ipc(mut w)) => w.finish().map_err(|e| self.fault("closing", e)),
            None => Ok(()),
        }
    }
}

/// `batches` of `schema` as an Arrow IPC stream (what `pyarrow.ipc.open_stream` reads):
/// how the Python package hands results to pyarrow without sharing its memory layout.
pub fn ipc_stream(schema: &Schema, batches: &[&Batch]) -> Result<Vec<u8>> {
    let arrow = arrow_schema(schema);
    let types: Vec<DataType> = schema.fields.iter().map(|f| f.ty).collect();
    let fault = |e: arrow_schema::ArrowError| Error::Internal(format!("an Arrow IPC stream: {e}"));
    let mut out = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &arrow).map_err(fault)?;
    for b in batches.iter().filter(|b| !b.is_empty()) {
        w.write(&record_batch(b, &types, &arrow)?).map_err(fault)?;
    }
    w.finish().map_err(fault)?;
    drop(w);
    Ok(out)
}
