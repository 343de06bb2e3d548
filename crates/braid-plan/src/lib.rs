//! Braid's planning layer: the data model (typed schemas, batches of rows), scalar
//! expressions, the physical plan with its parallelization nodes (`Split`, `Map`,
//! `Merge`), the split cost models, plan resolution, EXPLAIN, and the reference
//! interpreter that defines what every parallel execution must produce.
//!
//! Nothing here depends on timely: `braid-exec` renders these plans.
//!
//! ```
//! use braid_plan::plan::{Plan, Route, Strategy, MergeKind, SinkSpec, GeneratorSpec, SourceSpec};
//! use braid_plan::expr::Expr;
//! use braid_plan::function::Registry;
//!
//! let schema = GeneratorSpec::schema();
//! let spec = GeneratorSpec { tuples: 1000, rate: 100.0, keys: 4, broadcast: 0.1, seed: 7 };
//! let route = Route::Expr { expr: Expr::col(&schema, "xway")?, when: None };
//! let broadcast = Some(Expr::col(&schema, "type")?.eq(Expr::int(2)));
//! let plan = Plan::source("gen", SourceSpec::Generator(spec), schema)
//!     .split(4, route, broadcast, Strategy::Autosplit)
//!     .map("count")
//!     .merge(MergeKind::Union)
//!     .sink(SinkSpec::Collect);
//! assert_eq!(plan.schema(&Registry::with_builtins())?.column_list(), "partition, epoch, count");
//! # Ok::<(), braid_plan::error::Error>(())
//! ```
#![warn(missing_docs)]

pub mod batch;
pub mod classes;
pub mod combine;
pub mod connector;
pub mod cost;
pub mod error;
pub mod explain;
pub mod expr;
pub mod function;
pub mod graph;
pub mod interleave;
pub mod optimize;
pub mod output;
pub mod placement;
pub mod plan;
pub mod reference;
pub mod router;
pub mod text;
pub mod time;
pub mod types;
