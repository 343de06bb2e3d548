//! Braid's benchmarks, run by the `braid-bench` binary and kept out of the shipping
//! `braid` one:
//!
//! ```text
//! cargo run --release -p braid-bench -- split|sql|placement|tune|rate|parse [OPTIONS]
//! ```
//!
//! Each subcommand has its module ([`split`], [`sql`], [`placement`], [`tune`],
//! [`rate`], [`parse`]), which says what it measures and what it writes (CSV, markdown
//! and SVG plots, by default under `docs/benchmarks/`). What several benchmarks share
//! has a module named for what it does: [`query`] (the split benchmarks' generator
//! query), [`measure`] (one timed engine run), [`probe`] (Braid's pieces timed without
//! the engine), [`host`] (readings from /proc), [`plot`] (SVG charts) and [`report`]
//! (CSV files and markdown tables).
//!
//! This library exists for the binary and its tests; like the binary it reports errors
//! with `anyhow`.
#![warn(missing_docs)]

pub mod checkpoints;
pub mod fuzz;
pub mod host;
pub mod latency;
pub mod measure;
pub mod parse;
pub mod peer;
pub mod placement;
pub mod plot;
pub mod probe;
pub mod query;
pub mod rate;
pub mod report;
pub mod retention;
pub mod scheduling;
pub mod server;
pub mod split;
pub mod sql;
pub mod sql_windows;
pub mod trips;
pub mod tune;
pub mod udf;
pub mod vectors;
