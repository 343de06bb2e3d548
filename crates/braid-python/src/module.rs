//! The extension module `braid._braid`: a [`Session`] (declarations, Python code,
//! queries, runs) and the results it hands back ([`QueryResult`], [`Subscription`]).
//! The `braid` package (python/braid/__init__.py) re-exports them and adds pyarrow and
//! pandas conversions.
//!
//! Every call that compiles or runs lets go of the interpreter's lock while Braid works,
//! so the workers can call Python functions; a session runs one thing at a time (a
//! running subscription holds it until it ends or is closed).

use crate::convert::{to_py, to_pyerr};
use crate::source::PySourceFactory;
use crate::stream::PyStreamFactory;
use crate::udf::PyScalar;
use braid_exec::runtime::RunConfig;
use braid_exec::session::{QueryReport, Session as Inner};
use braid_plan::batch::{Batch, RowKey};
use braid_plan::function::{Registry, SinkFn};
use braid_plan::types::Schema;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

/// A Braid session: streams, sinks, functions and queries, run on `workers` threads.
#[pyclass(module = "braid._braid", name = "Session")]
pub struct Session {
    inner: Arc<Mutex<Inner>>,
    base: PathBuf,
    workers: usize,
    /// Names the sinks `query` and `subscribe` make.
    made: AtomicUsize,
}

impl Session {
    /// Runs `f` on the session without the interpreter's lock.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> braid_exec::error::Result<R> + Send,
    ) -> PyResult<R> {
        let inner = self.inner.clone();
        py.detach(move || {
            let mut s = inner.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut s)
        })
        .map_err(to_pyerr)
    }

    /// A fresh name for a sink the session makes.
    fn fresh(&self, what: &str) -> String {
        format!("__py_{what}_{}", self.made.fetch_add(1, Ordering::Relaxed))
    }
}

#[pymethods]
impl Session {
    /// A session running on `workers` threads; relative paths in statements are
    /// relative to `base` (the current directory by default).
    #[new]
    #[pyo3(signature = (workers = 1, base = None))]
    fn new(workers: usize, base: Option<PathBuf>) -> PyResult<Session> {
        if workers == 0 {
            return Err(to_pyerr("workers must be at least 1"));
        }
        let mut registry = Registry::with_builtins();
        crate::register(&mut registry);
        let config = RunConfig {
            workers,
            ..RunConfig::default()
        };
        let base = match base {
            Some(b) => b,
            None => std::env::current_dir().map_err(to_pyerr)?,
        };
        Ok(Session {
            inner: Arc::new(Mutex::new(Inner::new(&registry, config))),
            base,
            workers,
            made: AtomicUsize::new(0),
        })
    }

    /// The number of worker threads.
    #[getter]
    fn workers(&self) -> usize {
        self.workers
    }

    /// Compiles `sql` (statements separated by `;`) and runs the queries it adds, each
    /// to the end of its input; returns one result per query (rows of a `collect`
    /// sink, counts for the others). A bare SELECT prints its rows as the `braid`
    /// command does: use `query` to get them.
    fn execute(&self, py: Python<'_>, sql: &str) -> PyResult<Vec<QueryResult>> {
        let base = self.base.clone();
        let sql = sql.to_string();
        let reports = self.with(py, move |s| {
            s.compile(&sql, &base)?;
            let reports = s.run_pending()?;
            reports.into_iter().map(|r| result_of(s, r)).collect()
        })?;
        Ok(reports)
    }

    /// Compiles the script file `path` (relative paths in it are relative to its
    /// directory) and runs the queries it adds, as `execute` does.
    fn execute_file(&self, py: Python<'_>, path: PathBuf) -> PyResult<Vec<QueryResult>> {
        self.with(py, move |s| {
            s.compile_file(&path)?;
            let reports = s.run_pending()?;
            reports.into_iter().map(|r| result_of(s, r)).collect()
        })
    }

    /// Runs one SELECT and returns its rows (in the serial order, whatever the number
    /// of workers).
    fn query(&self, py: Python<'_>, sql: &str) -> PyResult<QueryResult> {
        let sink = self.fresh("query");
        let text = format!(
            "CREATE SINK {sink} WITH (sink = 'collect'); INSERT INTO {sink} {}",
            sql.trim().trim_end_matches(';')
        );
        let base = self.base.clone();
        let mut results = self.with(py, move |s| {
            let added = s.compile(&text, &base)?;
            if added.len() != 1 {
                return Err(braid_plan::error::Error::Plan("query takes one SELECT".into()).into());
            }
            let reports = s.run_pending()?;
            reports
                .into_iter()
                .map(|r| result_of(s, r))
                .collect::<braid_exec::error::Result<Vec<_>>>()
        })?;
        results
            .pop()
            .ok_or_else(|| PyRuntimeError::new_err("the query did not run"))
    }

    /// Starts one SELECT and returns an iterator over its results as they are made:
    /// each item a `QueryResult` of the rows a sink got at once (an epoch's, or
    /// fewer), in the serial order.
    fn subscribe(&self, py: Python<'_>, sql: &str) -> PyResult<Subscription> {
        let sink = self.fresh("subscribe");
        let (tx, rx) = sync_channel::<Msg>(16);
        let text = format!(
            "CREATE SINK {sink} WITH (sink = 'native', name = '{sink}'); INSERT INTO {sink} {}",
            sql.trim().trim_end_matches(';')
        );
        let base = self.base.clone();
        let name = sink.clone();
        let tx_sink = tx.clone();
        let schema = self.with(py, move |s| {
            s.registry_mut().add_sink(
                &name,
                Arc::new(Channel {
                    tx: Mutex::new(tx_sink),
                }),
            );
            let added = s.compile(&text, &base)?;
            let job = &s.script().jobs[added[0]];
            Ok(job.plan.schema(s.registry())?)
        })?;
        let inner = self.inner.clone();
        let cancel = {
            let s = inner.lock().unwrap_or_else(|e| e.into_inner());
            s.cancel_handle()
        };
        let thread = std::thread::spawn(move || {
            let mut s = inner.lock().unwrap_or_else(|e| e.into_inner());
            let end = match s.run_pending() {
                Ok(_) => Msg::End(None),
                Err(e) => Msg::End(Some(e.to_string())),
            };
            let _ = tx.send(end);
        });
        Ok(Subscription {
            rx: Mutex::new(Some(rx)),
            schema,
            cancel: Some(cancel),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Declares stream `name` reading the Python iterable `rows` (tuples of the
    /// `columns`, written as in CREATE STREAM: `"caller BIGINT, dur BIGINT, at BIGINT"`),
    /// with epochs of `epoch` units of its `event_time` column (of rows, without one).
    /// The iterable is read once, by the next run that reads the stream.
    #[pyo3(signature = (name, rows, columns, event_time = None, epoch = None, replace = false))]
    #[allow(clippy::too_many_arguments)]
    fn create_stream(
        &self,
        py: Python<'_>,
        name: &str,
        rows: Py<PyAny>,
        columns: &str,
        event_time: Option<&str>,
        epoch: Option<u64>,
        replace: bool,
    ) -> PyResult<()> {
        let lower = name.to_ascii_lowercase();
        let source = format!("py:{lower}");
        let mut opts = format!("source = 'native', name = '{source}'");
        if let Some(t) = event_time {
            opts += &format!(", event_time = '{}'", t.replace('\'', "''"));
        }
        if let Some(e) = epoch {
            opts += &format!(", epoch = {e}");
        }
        let text = format!(
            "CREATE {}STREAM {name} ({columns}) WITH ({opts})",
            if replace { "OR REPLACE " } else { "" }
        );
        let base = self.base.clone();
        self.with(py, move |s| {
            s.compile(&text, &base)?;
            let def = s.script().catalog.stream(&lower)?.clone();
            let f = PySourceFactory::new(&lower, def.source.schema.clone(), rows, def.source.epoch);
            s.registry_mut().add_source(&source, Arc::new(f));
            Ok(())
        })
    }

    /// Registers the Python callable `f` as the scalar function `name` returning
    /// `returns` (a SQL type); `args` (SQL types) are checked when a query calls it
    /// (any, when not given). Braid calls it for a batch of rows at once, holding the
    /// interpreter's lock once. With `vectorized=True`, `f` is called once per batch
    /// with one list per argument and returns a sequence of one result per row (a
    /// list, a numpy array, a pandas Series).
    #[pyo3(signature = (name, f, returns, args = None, vectorized = false))]
    fn register_function(
        &self,
        py: Python<'_>,
        name: &str,
        f: Py<PyAny>,
        returns: &str,
        args: Option<Vec<String>>,
        vectorized: bool,
    ) -> PyResult<()> {
        let returns = one_type(returns)?;
        let args = args
            .map(|a| a.iter().map(|t| one_type(t)).collect::<PyResult<Vec<_>>>())
            .transpose()?;
        if braid_plan::expr::Func::by_name(name).is_some() {
            return Err(to_pyerr(format!(
                "`{name}` is a built-in function; give the function another name"
            )));
        }
        let udf = PyScalar::new(name, f, args, returns);
        let udf = Arc::new(match vectorized {
            true => udf.vectorized(),
            false => udf,
        });
        let name = name.to_string();
        self.with(py, move |s| {
            s.registry_mut().add_scalar(&name, udf);
            Ok(())
        })
    }

    /// Registers a stream function for `PARALLEL(stream, apply => name, ...)`:
    /// `make(partition, partitions)` makes the instance of each partition, whose rows
    /// have the `columns` (as in CREATE STREAM).
    fn register_stream_function(
        &self,
        py: Python<'_>,
        name: &str,
        make: Py<PyAny>,
        columns: &str,
    ) -> PyResult<()> {
        let schema = braid_sql::parse_columns(columns).map_err(to_pyerr)?;
        let f = Arc::new(PyStreamFactory::new(name, make, schema));
        let name = name.to_string();
        self.with(py, move |s| {
            s.registry_mut().add_function(&name, f);
            Ok(())
        })
    }

    /// EXPLAIN of the statements `sql` (nothing runs, nothing is added).
    fn explain(&self, py: Python<'_>, sql: &str) -> PyResult<String> {
        let base = self.base.clone();
        let sql = sql.to_string();
        self.with(py, move |s| s.explain_statements(&sql, &base, false))
    }
}

/// A single SQL type (`DOUBLE`).
fn one_type(t: &str) -> PyResult<braid_plan::types::DataType> {
    let s = braid_sql::parse_columns(&format!("x {t}")).map_err(to_pyerr)?;
    Ok(s.fields[0].ty)
}

/// What a run of a query gave back.
fn result_of(s: &Inner, r: QueryReport) -> braid_exec::error::Result<QueryResult> {
    let schema = s.script().jobs[r.query].plan.schema(s.registry())?;
    let mut rows = Batch::with_capacity(schema.arity(), r.run.collected.len());
    for o in &r.run.collected {
        rows.start_row(RowKey::default());
        for v in &o.values {
            rows.push_value(v.as_value());
        }
    }
    let faults = r
        .run
        .faults
        .iter()
        .map(|f| f.to_string())
        .chain(
            r.run
                .rejects
                .iter()
                .filter(|x| x.count > 0)
                .map(|x| format!("{} malformed records in source {}", x.count, x.source)),
        )
        .collect();
    Ok(QueryResult {
        sql: r.sql,
        schema,
        rows,
        rows_in: r.run.rows_in,
        rows_out: r.run.rows_out,
        seconds: r.run.elapsed.as_secs_f64(),
        partitioning: r.partitioning,
        faults,
    })
}

/// The rows of a query (or of one batch of a subscription).
#[pyclass(module = "braid._braid", name = "QueryResult")]
pub struct QueryResult {
    /// The query's text.
    #[pyo3(get)]
    sql: String,
    schema: Schema,
    rows: Batch,
    /// Rows its sources read.
    #[pyo3(get)]
    rows_in: u64,
    /// Rows its sinks wrote.
    #[pyo3(get)]
    rows_out: u64,
    /// Wall time of the run.
    #[pyo3(get)]
    seconds: f64,
    /// How its input was partitioned, and why.
    #[pyo3(get)]
    partitioning: String,
    /// The faults and malformed records it counted and skipped.
    #[pyo3(get)]
    faults: Vec<String>,
}

#[pymethods]
impl QueryResult {
    /// The column names.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.schema.fields.iter().map(|f| f.name.clone()).collect()
    }

    /// The column types, as SQL names them.
    #[getter]
    fn types(&self) -> Vec<&'static str> {
        self.schema
            .fields
            .iter()
            .map(|f| crate::convert::sql_name(f.ty))
            .collect()
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// The rows as a list of tuples.
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::with_capacity(self.rows.len());
        for r in self.rows.rows() {
            let mut vals = Vec::with_capacity(r.arity());
            for c in 0..r.arity() {
                vals.push(to_py(py, r.get(c), false)?);
            }
            out.push(PyTuple::new(py, vals)?);
        }
        PyList::new(py, out)
    }

    /// The rows as an Arrow IPC stream (`braid` turns it into a pyarrow table).
    fn arrow_ipc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes =
            braid_exec::render::ipc_stream(&self.schema, &[&self.rows]).map_err(to_pyerr)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The rows as a pyarrow.Table (needs pyarrow).
    fn to_arrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let ipc = py.import("pyarrow.ipc")?;
        ipc.call_method1("open_stream", (self.arrow_ipc(py)?,))?
            .call_method0("read_all")
    }

    /// The rows as a pandas.DataFrame (needs pyarrow and pandas).
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_arrow(py)?.call_method0("to_pandas")
    }

    fn __repr__(&self) -> String {
        format!(
            "<braid.QueryResult {} rows of ({})>",
            self.rows.len(),
            self.columns().join(", ")
        )
    }
}

enum Msg {
    Rows(Batch),
    /// The run ended (with the error, if it failed).
    End(Option<String>),
}

/// A sink handing every batch it gets to a subscription.
struct Channel {
    tx: Mutex<SyncSender<Msg>>,
}

impl SinkFn for Channel {
    fn write(&self, rows: &Batch, _: std::time::Duration, _: u64) -> std::io::Result<()> {
        let mut copy = Batch::with_capacity(rows.arity(), rows.len());
        for i in 0..rows.len() {
            copy.push_row_of(rows, i, RowKey::default());
        }
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.send(Msg::Rows(copy))
            .map_err(|_| std::io::Error::other("the subscription was closed"))
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The results of a running query, batch by batch.
#[pyclass(module = "braid._braid", name = "Subscription")]
pub struct Subscription {
    rx: Mutex<Option<Receiver<Msg>>>,
    schema: Schema,
    cancel: Option<braid_exec::cancel::Cancel>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[pymethods]
impl Subscription {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<QueryResult>> {
        let msg = py.detach(|| {
            let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
            rx.as_ref().map(|r| r.recv())
        });
        match msg {
            Some(Ok(Msg::Rows(rows))) => Ok(Some(QueryResult {
                sql: String::new(),
                schema: self.schema.clone(),
                rows,
                rows_in: 0,
                rows_out: 0,
                seconds: 0.0,
                partitioning: String::new(),
                faults: Vec::new(),
            })),
            Some(Ok(Msg::End(err))) => {
                self.join(py);
                match err {
                    Some(e) => Err(PyRuntimeError::new_err(e)),
                    None => Ok(None),
                }
            }
            Some(Err(_)) | None => Ok(None),
        }
    }

    /// Stops the query (its sinks keep what they wrote) and waits for it to end.
    fn close(&self, py: Python<'_>) {
        if let Some(c) = &self.cancel {
            c.cancel();
        }
        // Drain so the run never blocks on a full channel, then wait for it.
        let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(|| {
            if let Some(rx) = rx {
                while let Ok(m) = rx.recv() {
                    if matches!(m, Msg::End(_)) {
                        break;
                    }
                }
            }
        });
        self.join(py);
    }
}

/// A subscription let go before its end (a `break` out of the loop over it) stops the
/// query: its sink's next batch finds nobody listening and the run ends, so the session
/// is free again. Nothing here waits (the run may need the interpreter's lock).
impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(c) = &self.cancel {
            c.cancel();
        }
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl Subscription {
    fn join(&self, py: Python<'_>) {
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            py.detach(|| {
                let _ = t.join();
            });
        }
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// The module `braid._braid`.
#[pymodule]
fn _braid(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Session>()?;
    m.add_class::<QueryResult>()?;
    m.add_class::<Subscription>()?;
    Ok(())
}
