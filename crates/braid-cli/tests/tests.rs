//! Tests of the `braid` binary.

mod calibrate;
mod cluster;
mod golden;
mod late;
mod shell;
mod shell_commands;
mod usage;
