//! A stream read from a Python iterable (a list, a generator, rows of a pyarrow table):
//! worker 0 takes up to a window of rows at a time from it, holding the interpreter's
//! lock for the window. A collection is read again by every run; an iterator (a
//! generator) only by the first. Rows are tuples (or lists) of the stream's columns; a row that
//! is not (a wrong type, a wrong length, an int out of range) fails the run with its
//! number and column, never a quiet NULL.

use crate::convert::{error_text, from_py};
use braid_plan::batch::{Batch, RowKey, Scalar};
use braid_plan::function::{NativeSource, SourceFactory, SourceNext};
use braid_plan::types::Schema;
use pyo3::prelude::*;
use std::sync::Mutex;

/// Rows per window at most.
const WINDOW: usize = 1024;

/// A source reading a Python iterable once.
pub struct PySourceFactory {
    name: String,
    schema: Schema,
    /// The rows: a collection (a list, a pyarrow table) every run reads again, or an
    /// iterator (a generator) the first run takes.
    rows: Mutex<Option<Py<PyAny>>>,
    /// Epoch length (see `braid_plan::plan::Source::epoch`).
    epoch: u64,
}

impl PySourceFactory {
    /// Stream `name` of `schema` reading `rows` (any iterable); epochs of `epoch` units
    /// of its event-time column (of rows, without one).
    pub fn new(name: &str, schema: Schema, rows: Py<PyAny>, epoch: u64) -> PySourceFactory {
        PySourceFactory {
            name: name.to_string(),
            schema,
            rows: Mutex::new(Some(rows)),
            epoch,
        }
    }
}

impl SourceFactory for PySourceFactory {
    fn schema(&self) -> Schema {
        self.schema.clone()
    }

    fn open(&self, worker: usize, _peers: usize) -> Option<Box<dyn NativeSource>> {
        if worker != 0 {
            return None;
        }
        let rows = {
            let mut held = self.rows.lock().unwrap_or_else(|e| e.into_inner());
            let once = crate::convert::attach(|py| {
                held.as_ref()
                    .is_some_and(|r| r.bind(py).hasattr("__next__").unwrap_or(true))
            });
            match once {
                true => held.take(),
                false => crate::convert::attach(|py| held.as_ref().map(|r| r.clone_ref(py))),
            }
        };
        Some(Box::new(PyRows {
            name: self.name.clone(),
            schema: self.schema.clone(),
            iter: rows.map(|r| {
                crate::convert::attach(|py| {
                    crate::convert::helpers(py)
                        .and_then(|h| h.getattr("rows_of")?.call1((r.bind(py),)))
                        .map(|i| i.unbind())
                        .map_err(|e| error_text(py, &e))
                })
            }),
            epoch_len: self.epoch,
            epoch: 0,
            next_seq: 0,
            held: None,
            done: false,
        }))
    }
}

struct PyRows {
    name: String,
    schema: Schema,
    /// The iterator; `None` when a run read it already.
    iter: Option<std::result::Result<Py<PyAny>, String>>,
    epoch_len: u64,
    /// Epoch of the last window.
    epoch: u64,
    next_seq: u64,
    /// A row of a later epoch than the window it was read for.
    held: Option<(u64, Vec<Scalar>)>,
    done: bool,
}

impl PyRows {
    /// The epoch of `row`, never before `floor` (epochs never go back; the row keeps
    /// its time and queries judge its lateness).
    fn epoch_of(&self, row: &[Scalar], seq: u64, floor: u64) -> u64 {
        let time = self.schema.event_time.and_then(|c| match row[c] {
            Scalar::Int(t) => Some(t),
            _ => None,
        });
        braid_exec::source::epoch_at(self.epoch_len, time, seq).max(floor)
    }

    /// The next row from Python, checked against the schema; `None` at the end.
    fn read(&self, py: Python<'_>, iter: &Py<PyAny>) -> std::io::Result<Option<Vec<Scalar>>> {
        let fail = |why: String| {
            std::io::Error::other(format!(
                "stream {}, row {}: {why}",
                self.name,
                self.next_seq + 1
            ))
        };
        let it = iter.bind(py);
        let v = match it.call_method0("__next__") {
            Ok(v) => v,
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => return Ok(None),
            Err(e) => return Err(fail(format!("the iterable raised {}", error_text(py, &e)))),
        };
        let vals: Vec<Bound<'_, PyAny>> = v.extract().map_err(|_| {
            fail(format!(
                "{} is not a row (a tuple of {} values)",
                crate::convert::shown(&v),
                self.schema.arity()
            ))
        })?;
        if vals.len() != self.schema.arity() {
            return Err(fail(format!(
                "{} values; the stream has {} columns",
                vals.len(),
                self.schema.arity()
            )));
        }
        let mut row = Vec::with_capacity(vals.len());
        for (x, f) in vals.iter().zip(&self.schema.fields) {
            let s = from_py(x, f.ty).map_err(|why| fail(format!("column {}: {why}", f.name)))?;
            if s == Scalar::Null && !f.nullable {
                return Err(fail(format!("column {} is NOT NULL; got None", f.name)));
            }
            row.push(s);
        }
        Ok(Some(row))
    }
}

impl NativeSource for PyRows {
    fn next(&mut self, out: &mut Batch) -> std::io::Result<SourceNext> {
        let iter = match self.iter.take() {
            None => {
                return Err(std::io::Error::other(format!(
                    "stream {} reads a Python iterable, an iterator a run has read already: give the rows again (create_stream with replace=True)",
                    self.name
                )))
            }
            Some(Err(why)) => {
                return Err(std::io::Error::other(format!(
                    "stream {}: the rows are not iterable: {why}",
                    self.name
                )))
            }
            Some(Ok(i)) => i,
        };
        let read = self.fill(&iter, out);
        self.iter = Some(Ok(iter));
        read
    }
}

impl PyRows {
    /// Fills `out` with the next window from `iter`.
    fn fill(&mut self, iter: &Py<PyAny>, out: &mut Batch) -> std::io::Result<SourceNext> {
        if self.done && self.held.is_none() {
            return Ok(SourceNext::Done);
        }
        let mut window: Option<u64> = None;
        let push = |out: &mut Batch, seq: u64, row: &[Scalar]| {
            out.start_row(RowKey { seq, lane: 0 });
            for s in row {
                out.push_value(s.as_value());
            }
        };
        if let Some((seq, row)) = self.held.take() {
            let e = self.epoch_of(&row, seq, self.epoch);
            push(out, seq, &row);
            window = Some(e);
        }
        crate::convert::attach(|py| -> std::io::Result<()> {
            while !self.done && out.len() < WINDOW {
                let Some(row) = self.read(py, iter)? else {
                    self.done = true;
                    break;
                };
                let seq = self.next_seq;
                self.next_seq += 1;
                let e = self.epoch_of(&row, seq, window.unwrap_or(self.epoch));
                match window {
                    Some(w) if e != w => {
                        self.held = Some((seq, row));
                        break;
                    }
                    _ => {
                        window = Some(e);
                        push(out, seq, &row);
                    }
                }
            }
            Ok(())
        })?;
        match window {
            Some(e) => {
                self.epoch = e;
                Ok(SourceNext::Window(e))
            }
            None => Ok(SourceNext::Done),
        }
    }
}
