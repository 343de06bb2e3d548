//! Braid's execution layer: renders `braid-plan` physical plans onto timely dataflow
//! (pinned at 0.32.0; nothing outside this crate sees timely), with sources, sinks and
//! the runtime that drives the workers.
//!
//! ```
//! use braid_exec::runtime::{run, RunConfig};
//! use braid_plan::expr::Expr;
//! use braid_plan::function::Registry;
//! use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
//!
//! let schema = GeneratorSpec::schema();
//! let spec = GeneratorSpec { tuples: 10_000, rate: 1000.0, keys: 8, broadcast: 0.01, seed: 1 };
//! let plan = Plan::source("gen", SourceSpec::Generator(spec), schema.clone())
//!     .split(8, Route::Expr { expr: Expr::col(&schema, "xway")?, when: None },
//!            Some(Expr::col(&schema, "type")?.eq(Expr::int(2))), Strategy::Parasplit)
//!     .map("count")
//!     .merge(MergeKind::TimeOrdered)
//!     .sink(SinkSpec::Collect);
//! let report = run(&plan, &Registry::with_builtins(), &RunConfig { workers: 2, ..RunConfig::default() })?;
//! assert_eq!(report.rows_in, 10_000);
//! # Ok::<(), braid_exec::error::Error>(())
//! ```
#![warn(missing_docs)]

pub mod calibrate;
pub mod cancel;
pub mod checkpoint;
pub mod checkpoint_store;
pub mod cluster;
pub mod error;
pub mod fault;
pub mod live;
pub mod profile;
pub mod qos;
pub mod render;
pub mod rescale;
pub mod runtime;
pub mod session;
pub mod shared;
pub mod source;
pub mod tune;
