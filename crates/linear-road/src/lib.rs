//! Linear Road on Braid: the benchmark's records, data generator, stream function,
//! independent validator and rating harness. Semantics: `docs/linear-road.md`.
#![warn(missing_docs)]

pub mod app;
pub mod expressway;
pub mod generate;
pub mod history;
pub mod rate;
pub mod record;
pub mod validate;
