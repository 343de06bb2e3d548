//! Tests of the `braid` binary.

mod cluster;
mod golden;
mod shell;
