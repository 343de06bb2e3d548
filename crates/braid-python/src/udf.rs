//! Scalar functions written in Python: from SQL (`CREATE FUNCTION ... LANGUAGE python`,
//! [`PythonLanguage`]) or registered from the `braid` package ([`PyScalar`]).

use crate::convert::{error_text, from_py, helpers, sql_name, to_py};
use braid_plan::batch::{Scalar, Value};
use braid_plan::error::{Error, Result};
use braid_plan::expr::ScalarUdf;
use braid_plan::function::{FunctionDef, FunctionLanguage};
use braid_plan::types::DataType;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// A Python callable as a scalar function.
pub struct PyScalar {
    name: String,
    f: Py<PyAny>,
    /// The declared argument types; `None` takes any.
    args: Option<Vec<DataType>>,
    returns: DataType,
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
        }
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
        crate::convert::attach(|py| {
            let mut vals = Vec::with_capacity(args.len());
            for (i, a) in args.iter().enumerate() {
                let as_float = self
                    .args
                    .as_ref()
                    .is_some_and(|w| w.get(i) == Some(&DataType::Float64));
                vals.push(to_py(py, *a, as_float).map_err(|e| error_text(py, &e))?);
            }
            let tuple = PyTuple::new(py, vals).map_err(|e| error_text(py, &e))?;
            let out = self
                .f
                .bind(py)
                .call1(tuple)
                .map_err(|e| format!("raised {}", error_text(py, &e)))?;
            from_py(&out, self.returns).map_err(|why| format!("returned {why}"))
        })
    }
}

/// The language `python`: a function's body is the body of a Python function whose
/// parameters are the declared arguments (as in PostgreSQL's PL/Python).
pub struct PythonLanguage;

impl FunctionLanguage for PythonLanguage {
    fn scalar(&self, def: &FunctionDef) -> Result<Arc<dyn ScalarUdf>> {
        Python::initialize();
        crate::convert::attach(|py| {
            let names: Vec<&str> = def.args.iter().map(|(n, _)| n.as_str()).collect();
            let f = helpers(py)
                .and_then(|h| {
                    h.getattr("compile_function")?.call1((
                        def.name.as_str(),
                        names,
                        def.body.as_str(),
                    ))
                })
                .map_err(|e| {
                    Error::Plan(format!(
                        "the body of function {}: {}",
                        def.name,
                        error_text(py, &e)
                    ))
                })?;
            let types = def.args.iter().map(|(_, t)| *t).collect();
            Ok(Arc::new(PyScalar::new(
                &def.name,
                f.unbind(),
                Some(types),
                def.returns,
            )) as Arc<dyn ScalarUdf>)
        })
    }
}
