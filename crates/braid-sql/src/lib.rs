//! Braid's continuous query language: SQL for streams, parsed with `sqlparser`.
//!
//! A script declares streams, tables and sinks and runs queries:
//!
//! ```sql
//! CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
//!   WITH (source = 'csv', path = 'calls.csv', event_time = 'start', epoch = 60);
//! CREATE TABLE watch (number BIGINT, reason TEXT) WITH (path = 'watch.csv');
//! CREATE SINK alerts WITH (sink = 'csv', path = 'alerts.csv');
//! SET partitions = 8;
//! INSERT INTO alerts
//!   SELECT window_end, dur / 60 AS minutes, count(*) AS calls
//!   FROM calls JOIN watch ON calls.caller = watch.number
//!   GROUP BY TUMBLE(start, 3600), dur / 60;
//! ```
//!
//! Compiling a script gives one [`Job`] per query, whose EXPLAIN shows each stage:
//!
//! ```
//! use braid_plan::function::Registry;
//! use std::path::Path;
//!
//! let script = braid_sql::compile_script(
//!     "CREATE STREAM calls (caller BIGINT, start BIGINT)
//!        WITH (source = 'stdin', event_time = 'start');
//!      SELECT window_end, caller, count(*) AS n FROM calls
//!        GROUP BY TUMBLE(start, 60), caller;",
//!     Path::new("."),
//!     &Registry::with_builtins(),
//! )?;
//! assert_eq!(
//!     braid_sql::explain_stages(&script.jobs[0]),
//!     "\
//! == logical plan ==
//! Project window_end, caller, __agg0 AS n
//!   Aggregate window=TUMBLE(60) keys=[caller] aggs=[count(*)]
//!     Scan calls (caller int64?, start int64? EVENT TIME)
//! == optimized plan ==
//! stage 1: any partition (partial aggregates: each window whole on the worker that splits it; a group's partials in any partition)
//! Aggregate (partial) window=TUMBLE(60) keys=[caller] aggs=[count(*)]
//!   Scan calls (caller int64?, start int64? EVENT TIME)
//! stage 2: hash hash(window_start, caller) (window and group-by keys of the partial aggregates)
//! Project window_end, caller, __agg0 AS n
//!   Aggregate (final) window=TUMBLE(60) keys=[caller] aggs=[count(*)]
//!     Scan stage1 (window_start int64, window_end int64 EVENT TIME, caller int64?, __p0 int64?)
//! "
//! );
//! # Ok::<(), braid_plan::error::Error>(())
//! ```
//!
//! # Stages
//!
//! The crate is laid out by stage; each depends only on those below it:
//!
//! - [`parse`]: the text into its statements, one closed enum; `statement`: each one
//!   run: declarations
//!   into the [`catalog`], `SET` into its settings, each query into a [`Job`] of the
//!   [`Script`];
//! - `query` (automatic parallelization) and `parallel` (the explicit
//!   `SELECT * FROM PARALLEL(...)`): one query to a job;
//! - `planner`: SQL to a [`Logical`](logical::Logical) plan, one file per clause;
//! - `optimizer`: one rule per file: filter pushdown, stage cuts, partitioning;
//! - [`physical`]: the physical plan, `Source -> Split -> Map -> Merge -> Sink` per
//!   stage, the same plan every other way of running Braid builds;
//! - [`run`]: the query of each stage as the stream function of each partition, one file
//!   per operator;
//! - at the bottom, [`logical`], [`expr`] (scalar expressions), [`catalog`] and the
//!   located errors every stage reports (`at line L, column C: ...` with a caret).

pub mod catalog;
pub mod copy;
pub mod examples;
pub mod expr;
mod function;
mod located;
pub mod logical;
mod optimizer;
mod order;
mod parallel;
pub mod parse;
pub mod physical;
mod planner;
mod query;
pub mod run;
mod script;
mod show;
mod statement;
pub use expr::time;
pub mod values;
mod view;
mod watermark;

pub use script::{Job, Script, Show, Shown};
pub use statement::parse_columns;

use braid_plan::error::Result;
use braid_plan::function::Registry;
use std::path::Path;

/// Compiles a script. Relative paths are relative to `base`; `registry` holds the
/// stream functions, routes, combiners and sinks the script may name.
pub fn compile_script(text: &str, base: &Path, registry: &Registry) -> Result<Script> {
    let mut script = Script {
        catalog: catalog::Catalog::default(),
        jobs: Vec::new(),
        registry: registry.clone(),
        shown: Vec::new(),
    };
    add_statements(&mut script, text, base)?;
    Ok(script)
}

/// Compiles more statements into `script` (the shell adds one at a time); returns the
/// number of jobs added.
pub fn add_statements(script: &mut Script, text: &str, base: &Path) -> Result<usize> {
    statement::add(script, text, base)
}

/// Runs one statement of the script language (of `text`, which its positions point
/// into) against `script`: what the server does with a statement that is not its own.
pub fn run_statement(
    script: &mut Script,
    text: &str,
    base: &Path,
    statement: &parse::Located<parse::Statement>,
) -> Result<()> {
    statement::run(script, text, base, statement)
}

/// Adds query `q` (of `text`) to `script` as a job whose rows go to the caller.
pub fn add_query(script: &mut Script, text: &str, q: &sqlparser::ast::Query) -> Result<()> {
    statement::query(script, text, q)
}

/// EXPLAIN of a job: the logical plan, the optimized plan with its partitioning, and
/// the physical plan resolved for `workers` workers.
pub fn explain(job: &Job, registry: &Registry, workers: usize) -> String {
    let mut s = explain_stages(job);
    s.push_str("== physical plan ==\n");
    let mut plan = job.plan.clone();
    braid_plan::optimize::resolve(&mut plan, braid_plan::optimize::Env::workers(workers));
    s.push_str(&braid_plan::explain::text(&plan, registry, workers));
    s
}

/// The logical and optimized plans of a job (EXPLAIN without the physical plan).
pub fn explain_stages(job: &Job) -> String {
    let mut s = String::new();
    s.push_str("== logical plan ==\n");
    match &job.logical {
        Some(l) => s.push_str(&l.to_string()),
        None => s.push_str("(explicit PARALLEL: the physical plan is as written)\n"),
    }
    s.push_str("== optimized plan ==\n");
    if job.stages.len() <= 1 {
        s.push_str(&format!("partitioning: {}\n", job.partitioning));
    }
    for (k, (l, part)) in job.stages.iter().enumerate() {
        if job.stages.len() > 1 {
            s.push_str(&format!("stage {}: {part}\n", k + 1));
        }
        s.push_str(&l.to_string());
    }
    s
}
