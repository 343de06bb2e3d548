//! Stream functions written in Python: one instance per logical partition, made by
//! calling the registered factory (a class, say) with `(partition, partitions)`.
//!
//! An instance has `process(row)`, returning the rows it makes for `row` (an iterable of
//! tuples, or None), or `process_batch(rows)`, returning one such iterable per row; and
//! optionally `end_of_epoch(epoch)` and `finish()`, returning rows too. Braid keeps a
//! partition's rows and calls Python once per batch of them (the rows the engine hands
//! over at once, at most [`BATCH`]), so the interpreter's lock is taken once per batch. Every
//! row an instance makes keeps the key of the input row it was made for, so the merged
//! output is in the serial order whatever the batching and the worker count.

use crate::convert::{error_text, from_py, helpers, row_to_py};
use braid_plan::batch::{Batch, Row, RowKey, Scalar};
use braid_plan::error::Result;
use braid_plan::expr::Fault;
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_plan::types::Schema;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

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

    fn holds_rows(&self) -> bool {
        true
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
            flat: Vec::new(),
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
    /// The values of the rows made for one input row (reused).
    flat: Vec<Scalar>,
}

impl PyStream {
    /// Hands the held rows to Python and emits what it makes, each output under the key
    /// of its input row. An exception of the call faults every row of the batch; a row
    /// whose outputs are not rows of the function's schema faults that row only.
    fn flush(&mut self, out: &mut Emitter<'_>) {
        let Some(mut rows) = self.held.take() else {
            return;
        };
        if rows.is_empty() {
            self.held = Some(rows);
            return;
        }
        let seqs = std::mem::take(&mut self.seqs);
        let mut flat = std::mem::take(&mut self.flat);
        crate::convert::attach(|py| {
            let called = (|| -> std::result::Result<Bound<'_, PyList>, String> {
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
                per_row
                    .cast_into::<PyList>()
                    .map_err(|_| "process_batch gave no list".to_string())
            })();
            match called {
                Ok(per_row) => {
                    for (seq, outs) in seqs.iter().zip(per_row.iter()) {
                        out.restart(*seq, self.partition);
                        self.emit_rows(py, &outs, &mut flat, out);
                    }
                }
                Err(why) => {
                    for seq in &seqs {
                        out.restart(*seq, self.partition);
                        out.fault("python", Fault::new(format!("{}: {why}", self.name)));
                    }
                }
            }
        });
        rows.clear();
        self.held = Some(rows);
        self.flat = flat;
    }

    /// Emits the rows `outs` (an iterable of rows, or None) made for the row being
    /// processed, checked against the function's schema; or, if one is not such a row,
    /// a fault and none of them.
    fn emit_rows(
        &self,
        py: Python<'_>,
        outs: &Bound<'_, PyAny>,
        flat: &mut Vec<Scalar>,
        out: &mut Emitter<'_>,
    ) {
        flat.clear();
        match self.rows_of(py, outs, flat) {
            Ok(()) => {
                let arity = self.schema.arity().max(1);
                let mut vals = Vec::with_capacity(arity);
                for row in flat.chunks(arity) {
                    vals.clear();
                    vals.extend(row.iter().map(|s| s.as_value()));
                    out.emit(&vals);
                }
            }
            Err(why) => out.fault("python", Fault::new(format!("{}: {why}", self.name))),
        }
    }

    /// The values of the rows `outs` (an iterable of rows, or None), appended to `flat`,
    /// checked against the function's schema.
    fn rows_of(
        &self,
        py: Python<'_>,
        outs: &Bound<'_, PyAny>,
        flat: &mut Vec<Scalar>,
    ) -> std::result::Result<(), String> {
        if outs.is_none() {
            return Ok(());
        }
        let iter = outs.try_iter().map_err(|_| {
            format!(
                "made {}, which is not a list of rows",
                crate::convert::shown(outs)
            )
        })?;
        for o in iter {
            let o = o.map_err(|e| format!("raised {}", error_text(py, &e)))?;
            self.row_of(&o, flat)?;
        }
        Ok(())
    }

    /// One row (a tuple, or any sequence) appended to `flat`.
    fn row_of(
        &self,
        o: &Bound<'_, PyAny>,
        flat: &mut Vec<Scalar>,
    ) -> std::result::Result<(), String> {
        let arity = self.schema.arity();
        let wrong_len = |n: usize| {
            format!(
                "made a row of {n} values; its rows have {arity} ({})",
                self.schema
                    .fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let mut push = |v: &Bound<'_, PyAny>, f: &braid_plan::types::Field| {
            let s = from_py(v, f.ty).map_err(|why| format!("column {}: {why}", f.name))?;
            if s == Scalar::Null && !f.nullable {
                return Err(format!("column {} is NOT NULL; got None", f.name));
            }
            flat.push(s);
            Ok(())
        };
        if let Ok(t) = o.cast::<PyTuple>() {
            if t.len() != arity {
                return Err(wrong_len(t.len()));
            }
            for (v, f) in t.iter().zip(&self.schema.fields) {
                push(&v, f)?;
            }
            return Ok(());
        }
        let vals: Vec<Bound<'_, PyAny>> = o.extract().map_err(|_| {
            format!(
                "made {}, which is not a row (a tuple of {arity} values)",
                crate::convert::shown(o)
            )
        })?;
        if vals.len() != arity {
            return Err(wrong_len(vals.len()));
        }
        for (v, f) in vals.iter().zip(&self.schema.fields) {
            push(v, f)?;
        }
        Ok(())
    }

    /// Calls `method(args)` if the instance has it and emits its rows under `seq`.
    fn call_end(&mut self, method: &str, arg: Option<u64>, seq: u64, out: &mut Emitter<'_>) {
        let mut flat = std::mem::take(&mut self.flat);
        out.restart(seq, self.partition);
        crate::convert::attach(|py| {
            let has = self.instance.bind(py).hasattr(method).unwrap_or(false);
            if !has {
                return;
            }
            let called = match arg {
                Some(a) => self.instance.bind(py).call_method1(method, (a,)),
                None => self.instance.bind(py).call_method0(method),
            };
            match called {
                Ok(rows) => self.emit_rows(py, &rows, &mut flat, out),
                Err(e) => out.fault(
                    "python",
                    Fault::new(format!(
                        "{}: {method} raised {}",
                        self.name,
                        error_text(py, &e)
                    )),
                ),
            }
        });
        self.flat = flat;
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

    fn end_of_batch(&mut self, out: &mut Emitter<'_>) {
        self.flush(out);
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
