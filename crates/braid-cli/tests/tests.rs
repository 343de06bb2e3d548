//! Tests of the `braid` binary.

mod calibrate;
mod cluster;
#[cfg(feature = "parquet")]
mod columnar;
mod dashboard;
mod faults;
mod golden;
mod json_lines;
#[cfg(feature = "kafka")]
mod kafka;
mod late;
mod profile;
mod python_functions;
mod recovery;
mod s3;
mod server_cluster;
mod server_recovery;
mod shell;
mod shell_commands;
mod trips;
mod usage;

/// A port on 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range
/// (32768-60999): an outgoing connection (the Kafka tests open many) never takes it
/// between this probe and the test's bind, as it could take a port the kernel handed
/// out. Ports go up from a start that differs per process, each tried once.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + k) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN)
}
