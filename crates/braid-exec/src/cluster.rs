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

/// Connects this process (`me`) to every other process at `hosts` as timely's own
/// setup does (each process connects to the processes before it, opening with its
/// index, and accepts those after it), for timely's network threads
/// (`initialize_networking_from_sockets`). Timely's setup waits a whole second after
/// an accept that found nobody yet and after a refused connect, which every run of a
/// cluster paid once or twice, and again after every live rescale: this tries every
/// 5 ms. [`connect_watchdog`] bounds the wait; a connection that fails while the
/// processes greet each other stops this process, naming the cluster (status
/// [`LOST_PEER`], as the fail-stop hook does).
pub fn connect(me: usize, hosts: &[String]) -> Vec<Option<std::net::TcpStream>> {
    greet(me, hosts).unwrap_or_else(|e| {
        eprintln!(
            "braid: process {me} could not connect to every process of the cluster ({}): {e}; stopping (a run with checkpoints resumes with --recover DIR)",
            hosts.join(", ")
        );
        std::process::exit(LOST_PEER);
    })
}

fn greet(me: usize, hosts: &[String]) -> std::io::Result<Vec<Option<std::net::TcpStream>>> {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    const POLL: std::time::Duration = std::time::Duration::from_millis(5);
    let later = hosts.len().saturating_sub(me + 1);
    let here = hosts.get(me).map_or("", String::as_str);
    let listeners = here
        .split_whitespace()
        .map(TcpListener::bind)
        .collect::<std::io::Result<Vec<_>>>()?;
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    let accepting = std::thread::Builder::new()
        .name("braid-accept".into())
        .spawn(move || -> std::io::Result<Vec<(usize, TcpStream)>> {
            let mut got = Vec::with_capacity(later);
            while got.len() < later {
                let mut any = false;
                for l in &listeners {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            s.set_nonblocking(false)?;
                            s.set_nodelay(true)?;
                            let mut index = [0u8; 8];
                            s.read_exact(&mut index)?;
                            got.push((u64::from_le_bytes(index) as usize, s));
                            any = true;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                }
                if !any {
                    std::thread::sleep(POLL);
                }
            }
            Ok(got)
        })?;
    let mut sockets: Vec<Option<TcpStream>> = (0..hosts.len()).map(|_| None).collect();
    for (i, address) in hosts.iter().enumerate().take(me) {
        let mut s = loop {
            match TcpStream::connect(address.as_str()) {
                Ok(s) => break s,
                // Not listening yet: the watchdog stops a wait that goes on too long.
                Err(_) => std::thread::sleep(POLL),
            }
        };
        s.set_nodelay(true)?;
        s.write_all(&(me as u64).to_le_bytes())?;
        sockets[i] = Some(s);
    }
    let accepted = accepting
        .join()
        .map_err(|_| std::io::Error::other("the thread accepting connections failed"))??;
    for (i, s) in accepted {
        match sockets.get_mut(i) {
            Some(slot @ None) if i > me => *slot = Some(s),
            _ => {
                return Err(std::io::Error::other(format!(
                    "a connection introduced itself as process {i}, not one of {}..{}",
                    me + 1,
                    hosts.len()
                )))
            }
        }
    }
    Ok(sockets)
}
