//! Tests of the `braid` binary.

mod calibrate;
mod cluster;
mod dashboard;
mod faults;
mod golden;
mod late;
mod profile;
mod recovery;
mod server_cluster;
mod shell;
mod shell_commands;
mod usage;
