//! Stream functions written in Python: one instance per logical partition, made by
//! calling the registered factory (a class, say) with `(partition, partitions)`.
//!
//! An instance has `process(row)`, returning the rows it makes for `row` (an iterable of
//! tuples, or None), or `process_batch(rows)`, returning one such iterable per row; and
//! optionally `end_of_epoch(epoch)` and `finish()`, returning rows too. Braid keeps a
//! partition's rows and calls Python once per batch of them (at most [`BATCH`] rows, and
//! at the end of every epoch), so the interpreter's lock is taken once per batch. Every
//! row an instance makes keeps the key of the input row it was made for, so the merged
//! output is in the serial order whatever the batching and the worker count.

use crate::convert::{error_text, from_py, helpers, row_to_py};
use braid_plan::batch::{Batch, Row, RowKey, Scalar};
use braid_plan::error::Result;
use braid_plan::expr::Fault;
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_plan::types::Schema;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Rows a partition keeps before it calls Python.
pub const BATCH: usize = 1024;

/// Makes the instances of a Python stream function.
pub struct PyStreamFactory {
    name: String,
    make: Py<PyAny>,
    schema: Schema,
}

impl PyStreamFactory {
    /// The stream function `name`: `make(partition, partitions)` makes an instance,
    /// whose rows are of `schema`.
    pub fn new(name: &str, make: Py<PyAny>, schema: Schema) -> PyStreamFactory {
        PyStreamFactory {
            name: name.to_string(),
            make,
            schema,
        }
    }
}

impl StreamFunctionFactory for PyStreamFactory {
    fn output_schema(&self, _input: &Schema) -> Result<Schema> {
        Ok(self.schema.clone())
    }

    fn create(&self, partition: u32, partitions: u32) -> Box<dyn StreamFunction> {
        let instance = crate::convert::attach(|py| {
            self.make
                .bind(py)
                .call1((partition, partitions))
                .map(|i| i.unbind())
                .unwrap_or_else(|e| {
                    // The engine fails the run naming the function.
                    panic!(
                        "Python stream function {}: making the instance of partition {partition}: {}",
                        self.name,
                        error_text(py, &e)
                    )
                })
        });
        Box::new(PyStream {
            name: self.name.clone(),
            instance,
            schema: self.schema.clone(),
            partition,
            held: None,
            seqs: Vec::new(),
        })
    }
}

struct PyStream {
    name: String,
    instance: Py<PyAny>,
    schema: Schema,
    partition: u32,
    /// The rows not handed to Python yet, and their sequence numbers.
    held: Option<Batch>,
    seqs: Vec<u64>,
}

impl PyStream {
    /// Hands the held rows to Python and emits what it makes, each output under the key
    /// of its input row.
    fn flush(&mut self, out: &mut Emitter<'_>) {
        let Some(mut rows) = self.held.take() else {
            return;
        };
        if rows.is_empty() {
            self.held = Some(rows);
            return;
        }
        let made =
            crate::convert::attach(|py| -> std::result::Result<Vec<Vec<Vec<Scalar>>>, String> {
                let mut tuples = Vec::with_capacity(rows.len());
                for r in rows.rows() {
                    tuples.push(row_to_py(py, &r).map_err(|e| error_text(py, &e))?);
                }
                let list = PyList::new(py, tuples).map_err(|e| error_text(py, &e))?;
                let per_row = helpers(py)
                    .and_then(|h| {
                        h.getattr("process_batch")?
                            .call1((self.instance.bind(py), list))
                    })
                    .map_err(|e| format!("process raised {}", error_text(py, &e)))?;
                let per_row: Vec<Bound<'_, PyAny>> =
                    per_row.extract().map_err(|e| error_text(py, &e))?;
                per_row.iter().map(|outs| self.rows_of(py, outs)).collect()
            });
        let seqs = std::mem::take(&mut self.seqs);
        rows.clear();
        self.held = Some(rows);
        match made {
            Ok(made) => {
                for (seq, outs) in seqs.iter().zip(made) {
                    out.restart(*seq, self.partition);
                    for r in outs {
                        let vals: Vec<_> = r.iter().map(|s| s.as_value()).collect();
                        out.emit(&vals);
                    }
                }
            }
            // The whole batch failed: a fault for each of its rows.
            Err(why) => {
                for seq in seqs {
                    out.restart(seq, self.partition);
                    out.fault("python", Fault::new(format!("{}: {why}", self.name)));
                }
            }
        }
    }

    /// The rows of one output list, checked against the function's schema.
    fn rows_of(
        &self,
        py: Python<'_>,
        outs: &Bound<'_, PyAny>,
    ) -> std::result::Result<Vec<Vec<Scalar>>, String> {
        let outs: Vec<Bound<'_, PyAny>> = outs.extract().map_err(|e| error_text(py, &e))?;
        let arity = self.schema.arity();
        let mut rows = Vec::with_capacity(outs.len());
        for o in outs {
            let vals: Vec<Bound<'_, PyAny>> = o.extract().map_err(|_| {
                format!(
                    "made {}, which is not a row (a tuple of {arity} values)",
                    crate::convert::shown(&o)
                )
            })?;
            if vals.len() != arity {
                return Err(format!(
                    "made a row of {} values; its rows have {arity} ({})",
                    vals.len(),
                    self.schema
                        .fields
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let mut row = Vec::with_capacity(arity);
            for (v, f) in vals.iter().zip(&self.schema.fields) {
                let s = from_py(v, f.ty).map_err(|why| format!("column {}: {why}", f.name))?;
                if s == Scalar::Null && !f.nullable {
                    return Err(format!("column {} is NOT NULL; got None", f.name));
                }
                row.push(s);
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// Calls `method(args)` if the instance has it and emits its rows under `seq`.
    fn call_end(&mut self, method: &str, arg: Option<u64>, seq: u64, out: &mut Emitter<'_>) {
        let made = crate::convert::attach(|py| {
            let h = helpers(py).map_err(|e| error_text(py, &e))?;
            let call = h.getattr("call_optional").map_err(|e| error_text(py, &e))?;
            let rows = match arg {
                Some(a) => call.call1((self.instance.bind(py), method, a)),
                None => call.call1((self.instance.bind(py), method)),
            }
            .map_err(|e| format!("{method} raised {}", error_text(py, &e)))?;
            self.rows_of(py, &rows)
        });
        out.restart(seq, self.partition);
        match made {
            Ok(rows) => {
                for r in rows {
                    let vals: Vec<_> = r.iter().map(|s| s.as_value()).collect();
                    out.emit(&vals);
                }
            }
            Err(why) => out.fault("python", Fault::new(format!("{}: {why}", self.name))),
        }
    }
}

impl StreamFunction for PyStream {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let held = self
            .held
            .get_or_insert_with(|| Batch::with_capacity(row.arity(), BATCH));
        let (b, i) = row.location();
        held.push_row_of(b, i, RowKey::default());
        self.seqs.push(out.seq());
        if held.len() >= BATCH {
            self.flush(out);
        }
    }

    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        let seq = out.seq();
        self.flush(out);
        self.call_end("end_of_epoch", Some(epoch), seq, out);
    }

    fn finish(&mut self, out: &mut Emitter<'_>) {
        let seq = out.seq();
        self.flush(out);
        self.call_end("finish", None, seq, out);
    }
}
