//! Values between Braid and Python: BIGINT (and the time types, as their int64
//! microseconds or days) is `int`, DOUBLE `float`, BOOLEAN `bool`, TEXT `str`, NULL
//! `None`, DOUBLE[] and BIGINT[] lists of `float` and `int`. Going back, a value must be of its column's type (an `int` is taken for a
//! DOUBLE when it converts exactly); anything else is an error naming the value.

use braid_plan::batch::{Scalar, Value};
use braid_plan::types::DataType;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// The helpers written in Python (compiling a function body, calling a stream function
/// over a batch), loaded once per interpreter.
const HELPERS: &std::ffi::CStr = c"
import textwrap

def compile_function(name, args, body):
    lines = body.split('\\n')
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        lines = ['pass']
    # A body written on the line of its opening $$ starts there: the lines after it are
    # dedented on their own.
    first_on_quote_line = not body.startswith('\\n') and not body.startswith('\\r')
    if first_on_quote_line and len(lines) > 1 and lines[0] == body.split('\\n')[0]:
        head = lines[0].strip()
        rest = textwrap.dedent('\\n'.join(lines[1:]))
        if head.endswith(':'):
            text = head + '\\n' + textwrap.indent(rest, '    ')
        else:
            text = head + '\\n' + rest
    else:
        text = textwrap.dedent('\\n'.join(lines))
    src = 'def %s(%s):\\n%s\\n' % (name, ', '.join(args), textwrap.indent(text, '    '))
    scope = {'__name__': 'braid_function_' + name}
    exec(compile(src, '<function %s>' % name, 'exec'), scope)
    return scope[name]

def process_batch(instance, rows):
    batch = getattr(instance, 'process_batch', None)
    if batch is not None:
        out = list(batch(rows))
        if len(out) != len(rows):
            raise ValueError('process_batch returned %d lists of rows for %d rows' % (len(out), len(rows)))
        return out
    return list(map(instance.process, rows))

def rows_of(data):
    # Rows as tuples: of a pyarrow Table, RecordBatch or RecordBatchReader (a batch at a
    # time), or of any other iterable as they are.
    if hasattr(data, 'to_batches'):
        batches = data.to_batches()
    elif hasattr(data, 'num_rows') and hasattr(data, 'columns'):
        batches = [data]
    elif hasattr(data, 'read_next_batch'):
        batches = data
    else:
        return iter(data)
    return (row for b in batches for row in zip(*[c.to_pylist() for c in b.columns]))
";

/// Runs `f` holding the interpreter's lock, keeping this thread's Python thread state
/// from one call to the next. `Python::attach` on a thread Python does not know makes a
/// thread state and frees it again when it returns (CPython 3.11 maps and unmaps the
/// thread's frame stack with it: about 8 us of system time per call of a function, on
/// every row); a worker keeps one until it ends instead.
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> R {
    struct Kept(pyo3::ffi::PyGILState_STATE, *mut pyo3::ffi::PyThreadState);
    impl Drop for Kept {
        fn drop(&mut self) {
            // SAFETY: the state this thread made in `attach`, given back on this thread;
            // only while the interpreter runs (never during or after its shutdown).
            unsafe {
                if pyo3::ffi::Py_IsInitialized() != 0 {
                    pyo3::ffi::PyEval_RestoreThread(self.1);
                    pyo3::ffi::PyGILState_Release(self.0);
                }
            }
        }
    }
    thread_local! {
        static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
    }
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        if k.is_none() {
            // SAFETY: only on a thread Python has no state for (a worker; never one of
            // Python's own threads, which may hold the lock), once the interpreter runs.
            unsafe {
                if pyo3::ffi::Py_IsInitialized() != 0
                    && pyo3::ffi::PyGILState_GetThisThreadState().is_null()
                {
                    let g = pyo3::ffi::PyGILState_Ensure();
                    let t = pyo3::ffi::PyEval_SaveThread();
                    *k = Some(Kept(g, t));
                }
            }
        }
    });
    Python::attach(f)
}

/// The helpers module.
pub(crate) fn helpers(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static HELPERS_MODULE: pyo3::sync::PyOnceLock<Py<PyModule>> = pyo3::sync::PyOnceLock::new();
    HELPERS_MODULE
        .get_or_try_init(py, || {
            PyModule::from_code(py, HELPERS, c"<braid helpers>", c"braid_helpers")
                .map(|m| m.unbind())
        })
        .map(|m| m.bind(py))
}

/// `v` as a Python object; as a float when `as_float` (an int64 passed to a DOUBLE
/// argument).
pub fn to_py<'py>(py: Python<'py>, v: Value<'_>, as_float: bool) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Value::Null => Ok(py.None().into_bound(py)),
        Value::Int(i) if as_float => (i as f64).into_bound_py_any(py),
        Value::Int(i) => i.into_bound_py_any(py),
        Value::Float(x) => x.into_bound_py_any(py),
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Str(s) => s.into_bound_py_any(py),
        Value::Floats(a) => a.into_bound_py_any(py),
        Value::Ints(a) => a.into_bound_py_any(py),
    }
}

/// A row as a Python tuple.
pub fn row_to_py<'py>(
    py: Python<'py>,
    row: &braid_plan::batch::Row<'_>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut vals = Vec::with_capacity(row.arity());
    for c in 0..row.arity() {
        vals.push(to_py(py, row.get(c), false)?);
    }
    PyTuple::new(py, vals)
}

/// A short text of `v` for errors: its repr and type.
pub fn shown(v: &Bound<'_, PyAny>) -> String {
    let repr = v
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    let repr = match repr.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &repr[..i]),
        None => repr,
    };
    let ty = v
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    format!("{repr} ({ty})")
}

/// `v` as a value of type `ty`, or why it is not one.
pub fn from_py(v: &Bound<'_, PyAny>, ty: DataType) -> Result<Scalar, String> {
    if v.is_none() {
        return Ok(Scalar::Null);
    }
    let wrong = || Err(format!("{} is not a {}", shown(v), sql_name(ty)));
    match ty {
        DataType::Bool => match v.cast::<PyBool>() {
            Ok(b) => Ok(Scalar::Bool(b.is_true())),
            Err(_) => wrong(),
        },
        DataType::String => match v.cast::<PyString>() {
            Ok(s) => Ok(Scalar::Str(
                s.to_str().map_err(|e| e.to_string())?.to_string(),
            )),
            Err(_) => wrong(),
        },
        DataType::Float64 => {
            if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyString>() {
                return wrong();
            }
            if v.is_instance_of::<PyFloat>() {
                return v
                    .extract::<f64>()
                    .map(Scalar::Float)
                    .map_err(|e| e.to_string());
            }
            match v.extract::<i64>() {
                Ok(i) if (i as f64) as i64 == i && (i as f64) != 9.223372036854776e18 => {
                    Ok(Scalar::Float(i as f64))
                }
                Ok(i) => Err(format!("{i} has no exact DOUBLE")),
                Err(_) if v.is_instance_of::<PyInt>() => {
                    Err(format!("{} is out of DOUBLE's exact range", shown(v)))
                }
                Err(_) => match v.extract::<f64>() {
                    // numpy's floats and other numbers that say they are floats
                    Ok(x) if v.hasattr("__float__").unwrap_or(false) => Ok(Scalar::Float(x)),
                    _ => wrong(),
                },
            }
        }
        DataType::Float64Array | DataType::Int64Array => {
            // A list, tuple, numpy array or any other sequence of numbers; each element
            // as a value of the element type would be.
            if v.is_instance_of::<PyString>() {
                return wrong();
            }
            let items = match v.try_iter() {
                Ok(it) => it,
                Err(_) => return wrong(),
            };
            let mut floats = Vec::new();
            let mut ints = Vec::new();
            for (i, item) in items.enumerate() {
                let item = item.map_err(|e| e.to_string())?;
                if item.is_none() {
                    return Err(format!(
                        "element {} of {} is None; arrays hold numbers only",
                        i + 1,
                        shown(v)
                    ));
                }
                match from_py(&item, ty.element()) {
                    Ok(Scalar::Float(x)) => floats.push(x),
                    Ok(Scalar::Int(x)) => ints.push(x),
                    Ok(_) => return wrong(),
                    Err(why) => return Err(format!("element {} of {}: {why}", i + 1, shown(v))),
                }
            }
            Ok(match ty {
                DataType::Float64Array => Scalar::Floats(floats),
                _ => Scalar::Ints(ints),
            })
        }
        // BIGINT and the time types (their int64).
        _ => {
            if v.is_instance_of::<PyBool>()
                || v.is_instance_of::<PyFloat>()
                || v.is_instance_of::<PyString>()
            {
                return wrong();
            }
            match v.extract::<i64>() {
                Ok(i) => Ok(Scalar::Int(i)),
                Err(_) if v.is_instance_of::<PyInt>() => {
                    Err(format!("{} is out of BIGINT's range", shown(v)))
                }
                Err(_) => wrong(),
            }
        }
    }
}

/// The SQL name of a type, for errors.
pub fn sql_name(ty: DataType) -> &'static str {
    ty.sql_name()
}

/// A Python exception as one line (its type and message), for a fault or an error.
pub fn error_text(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    format!("{ty}: {}", e.value(py))
}

/// A Braid error as a Python exception.
pub fn to_pyerr(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}
