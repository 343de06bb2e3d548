//! Tests of the `braid` binary.

mod calibrate;
mod cluster;
mod columnar;
mod dashboard;
mod faults;
mod golden;
mod json_lines;
mod kafka;
mod late;
mod profile;
mod recovery;
mod s3;
mod server_cluster;
mod server_recovery;
mod shell;
mod shell_commands;
mod usage;

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
