//! Scalar functions written in Python: from SQL (`CREATE FUNCTION ... LANGUAGE python`,
//! [`PythonLanguage`]) or registered from the `braid` package ([`PyScalar`]).

use crate::convert::{error_text, from_py, helpers, sql_name, to_py};
use braid_plan::batch::{Scalar, Value};
use braid_plan::error::{Error, Result};
use braid_plan::expr::{arg_lists, ScalarUdf};
use braid_plan::function::{FunctionDef, FunctionLanguage};
use braid_plan::types::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::Arc;

/// A Python callable as a scalar function.
pub struct PyScalar {
    name: String,
    f: Py<PyAny>,
    /// The declared argument types; `None` takes any.
    args: Option<Vec<DataType>>,
    returns: DataType,
    /// `f` takes a batch: one list per argument, and returns one value per row.
    vectorized: bool,
}

impl PyScalar {
    /// `f` as the function `name` returning `returns`, taking arguments of the types
    /// `args` (any, when `None`).
    pub fn new(name: &str, f: Py<PyAny>, args: Option<Vec<DataType>>, returns: DataType) -> Self {
        PyScalar {
            name: name.to_ascii_lowercase(),
            f,
            args,
            returns,
            vectorized: false,
        }
    }

    /// `f` takes a batch of rows at once (pandas UDFs' way in PyFlink): one list per
    /// argument, all of the batch's length, and returns a sequence of as many results
    /// (a list, a numpy array, a pandas Series).
    pub fn vectorized(mut self) -> Self {
        self.vectorized = true;
        self
    }
}

impl ScalarUdf for PyScalar {
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let Some(want) = &self.args else {
            return Ok(self.returns);
        };
        let shown = |t: &[DataType]| {
            t.iter()
                .map(|t| sql_name(*t))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let fits = want.len() == args.len()
            && want
                .iter()
                .zip(args)
                .all(|(w, a)| w == a || (*w == DataType::Float64 && *a == DataType::Int64));
        match fits {
            true => Ok(self.returns),
            false => Err(Error::Plan(format!(
                "function {}({}) called with ({})",
                self.name,
                shown(want),
                shown(args)
            ))),
        }
    }

    fn call(&self, args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
        crate::convert::attach(|py| match self.vectorized {
            true => self.call_columns(py, args, 1).pop().expect("one result"),
            false => self.call_in(py, args),
        })
    }

    fn batched(&self) -> bool {
        true
    }

    /// One hold of the interpreter's lock for all the rows.
    fn call_batch(
        &self,
        args: &[Value<'_>],
        rows: usize,
    ) -> Vec<std::result::Result<Scalar, String>> {
        crate::convert::attach(|py| match self.vectorized {
            true => self.call_columns(py, args, rows),
            false => arg_lists(args, rows).map(|a| self.call_in(py, a)).collect(),
        })
    }
}

impl PyScalar {
    /// Whether argument `i` is declared DOUBLE (an int goes in as a float).
    fn float_arg(&self, i: usize) -> bool {
        self.args
            .as_ref()
            .is_some_and(|w| w.get(i) == Some(&DataType::Float64))
    }

    /// A vectorized function's results for `rows` rows: an exception, or a result that
    /// is not a sequence of `rows` values, faults every row of the batch; a value of the
    /// wrong type, its row only.
    fn call_columns(
        &self,
        py: Python<'_>,
        args: &[Value<'_>],
        rows: usize,
    ) -> Vec<std::result::Result<Scalar, String>> {
        let arity = arg_lists(args, rows).next().map_or(0, <[_]>::len);
        let called = (|| -> std::result::Result<Vec<Bound<'_, PyAny>>, String> {
            let mut columns = Vec::with_capacity(arity);
            for j in 0..arity {
                let mut col = Vec::with_capacity(rows);
                for list in arg_lists(args, rows) {
                    let v = to_py(py, list[j], self.float_arg(j));
                    col.push(v.map_err(|e| error_text(py, &e))?);
                }
                columns.push(PyList::new(py, col).map_err(|e| error_text(py, &e))?);
            }
            let tuple = PyTuple::new(py, columns).map_err(|e| error_text(py, &e))?;
            let out = self
                .f
                .bind(py)
                .call1(tuple)
                .map_err(|e| format!("raised {}", error_text(py, &e)))?;
            let items = out
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .map_err(|_| {
                    format!(
                        "returned {}, not a sequence of one value per row",
                        crate::convert::shown(&out)
                    )
                })?;
            match items.len() == rows {
                true => Ok(items),
                false => Err(format!(
                    "returned {} values for a batch of {rows} rows",
                    items.len()
                )),
            }
        })();
        match called {
            Ok(items) => items
                .iter()
                .map(|v| from_py(v, self.returns).map_err(|why| format!("returned {why}")))
                .collect(),
            Err(why) => vec![Err(why); rows],
        }
    }

    fn call_in(&self, py: Python<'_>, args: &[Value<'_>]) -> std::result::Result<Scalar, String> {
        let mut vals = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            vals.push(to_py(py, *a, self.float_arg(i)).map_err(|e| error_text(py, &e))?);
        }
        let tuple = PyTuple::new(py, vals).map_err(|e| error_text(py, &e))?;
        let out = self
            .f
            .bind(py)
            .call1(tuple)
            .map_err(|e| format!("raised {}", error_text(py, &e)))?;
        from_py(&out, self.returns).map_err(|why| format!("returned {why}"))
    }
}

/// The language `python`: a function's body is the body of a Python function whose
/// parameters are the declared arguments (as in PostgreSQL's PL/Python).
pub struct PythonLanguage;

impl FunctionLanguage for PythonLanguage {
    fn scalar(&self, def: &FunctionDef) -> Result<Arc<dyn ScalarUdf>> {
        Ok(Arc::new(compile(def)?))
    }
}

/// The function `def` declares, its body compiled into a Python function (the
/// interpreter started if it is not running).
pub fn compile(def: &FunctionDef) -> Result<PyScalar> {
    Python::initialize();
    crate::convert::attach(|py| {
        let names: Vec<&str> = def.args.iter().map(|(n, _)| n.as_str()).collect();
        let f = helpers(py)
            .and_then(|h| {
                h.getattr("compile_function")?
                    .call1((def.name.as_str(), names, def.body.as_str()))
            })
            .map_err(|e| {
                Error::Plan(format!(
                    "the body of function {}: {}",
                    def.name,
                    error_text(py, &e)
                ))
            })?;
        let types = def.args.iter().map(|(_, t)| *t).collect();
        Ok(PyScalar::new(
            &def.name,
            f.unbind(),
            Some(types),
            def.returns,
        ))
    })
}
