//! Braid and Python, both ways.
//!
//! - **Python inside Braid**: [`register`] adds the language `python` to a registry, so
//!   `CREATE FUNCTION f(x BIGINT) RETURNS DOUBLE LANGUAGE python AS $$ return x / 2 $$`
//!   declares a scalar function from SQL (the `braid` command and its server embed the
//!   interpreter for it). A Python callable can also be a scalar function
//!   ([`udf::PyScalar`]), a stream function with one instance per partition that Braid
//!   calls a batch of rows at a time ([`stream::PyStreamFactory`]), or a source reading
//!   a Python iterable ([`source::PySourceFactory`]).
//! - **Braid inside Python**: the extension module `braid._braid` ([`module`]) behind
//!   the `braid` package (`pip install` the wheel maturin builds from this crate): a
//!   session that runs SQL scripts and hands results to Python as rows, pyarrow tables or
//!   pandas data frames, all at the end or batch by batch as they are made.
//!
//! Python code runs holding the interpreter's lock (the GIL), one thread at a time; every
//! other part of a run (parsing, splitting, operators, merging) runs on Braid's workers
//! without it. A Python exception, or a value of the wrong type, is a fault of the row
//! (counted and reported, or the run fails under `--on-error fail`), never a NULL.

pub mod convert;
pub mod module;
pub mod source;
pub mod stream;
pub mod udf;

use braid_plan::function::Registry;
use std::sync::Arc;

/// Adds the language `python` (`CREATE FUNCTION ... LANGUAGE python`) to `registry`.
/// The interpreter starts the first time a function is declared (in a Python process,
/// the running one is used).
pub fn register(registry: &mut Registry) {
    registry.add_language("python", Arc::new(udf::PythonLanguage));
}
