//! Fail-stop for a cluster of processes: when the connection to another process breaks
//! (it died, or the network failed), timely's network thread panics and the workers
//! would wait for that process forever. This process then stops at once, with an error
//! naming the process it lost; a run with checkpoints resumes from the last one.

use std::sync::OnceLock;

/// This process's index and every process's address, for the message.
static CLUSTER: OnceLock<(usize, Vec<String>)> = OnceLock::new();

/// Exit status of a process that stopped because it lost another one.
pub const LOST_PEER: i32 = 3;

/// Installs the fail-stop hook (once per process; later calls keep the first cluster).
pub fn fail_stop(me: usize, hosts: &[String]) {
    if CLUSTER.set((me, hosts.to_vec())).is_err() {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        let peer = name
            .strip_prefix("timely:recv-")
            .or_else(|| name.strip_prefix("timely:send-"))
            .and_then(|i| i.parse::<usize>().ok());
        let what = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("the connection broke");
        let (me, hosts) = CLUSTER
            .get()
            .map(|(m, h)| (*m, h.as_slice()))
            .unwrap_or((0, &[]));
        let Some(peer) = peer else {
            // Connecting: a process that dies while the processes greet each other
            // leaves timely's connection setup (its accepting thread, then the main
            // thread waiting for it) to panic.
            let connecting = info.location().is_some_and(|l| {
                l.file().contains("timely_communication") && l.file().ends_with("networking.rs")
            });
            if connecting {
                eprintln!(
                    "braid: process {me} could not connect to every process of the cluster ({}): a process went away while they connected ({what}); stopping (a run with checkpoints resumes with --recover DIR)",
                    hosts.join(", ")
                );
                std::process::exit(LOST_PEER);
            }
            return previous(info);
        };
        let at = hosts
            .get(peer)
            .map_or(String::new(), |h| format!(" at {h}"));
        eprintln!(
            "braid: process {me} lost process {peer}{at} ({what}); stopping this process too (a run with checkpoints resumes with --recover DIR)"
        );
        std::process::exit(LOST_PEER);
    }));
}

/// Stops the process with an error naming the cluster when it is not connected (the
/// flag returned is not set) within `timeout`: timely waits for its peers forever.
pub fn connect_watchdog(
    me: usize,
    hosts: Vec<String>,
    timeout: std::time::Duration,
) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = connected.clone();
    let _ = std::thread::Builder::new()
        .name("braid-connect".into())
        .spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < timeout {
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if !flag.load(std::sync::atomic::Ordering::Relaxed) {
                eprintln!(
                    "braid: process {me} could not connect to every process of the cluster ({}) within {:?}; stopping (start all of them, or raise --connect-timeout)",
                    hosts.join(", "),
                    timeout
                );
                std::process::exit(LOST_PEER);
            }
        });
    connected
}
