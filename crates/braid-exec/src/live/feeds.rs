//! Producers of a stream that lives in Braid, besides `INSERT` and `COPY`: TCP clients
//! (`listen`) and a growing file (`tail`), each writing CSV or JSON lines through an
//! [`Ingest`] of its own. They run on threads of their own, never on the engine's
//! workers, and stop when the stream is dropped ([`Feed`]'s `Drop`).
//!
//! A TCP producer's protocol: it sends lines; after each append (the complete lines of
//! what one read brought, written and synced to the log) the server writes back `ok
//! <rows> <rejected>` (the producer's totals so far). When the producer shuts down its
//! write half, its last line counts even without a newline, and the server answers
//! `done <rows> <rejected>` and then the first malformed lines, one a line, as `line
//! <l> column <c>: <reason>` (column 0: the whole line), and closes. A connection reset
//! mid-line drops that partial line and counts it as malformed. A producer that reads
//! no acknowledgement for [`ACK_TIMEOUT`] gets none after that (its rows still go in).

use super::ingest::{Format, Ingest};
use super::log::StreamLog;
use crate::error::{Error, Result};
use braid_sql::catalog::Feeds;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often an idle producer thread looks at the stop flag, and how often a tailed
/// file is looked at.
const POLL: Duration = Duration::from_millis(20);
/// How long a write of an acknowledgement may wait for the producer to read.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(1);
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// The running producers of one stream.
pub struct Feed {
    /// The address TCP producers connect to (bound: the real port also for port 0).
    pub addr: Option<SocketAddr>,
    /// The file followed.
    pub tail: Option<PathBuf>,
    /// The lines' format.
    pub format: Format,
    /// Counters over all of this stream's producers.
    pub stats: Arc<FeedStats>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Counters of a stream's producers.
#[derive(Default)]
pub struct FeedStats {
    /// TCP producers that connected.
    pub producers: AtomicU64,
    /// Rows appended.
    pub rows: AtomicU64,
    /// Malformed lines.
    pub rejected: AtomicU64,
    /// The first malformed lines (who sent it, line, column, reason).
    pub first: Mutex<Vec<String>>,
}

impl FeedStats {
    /// Adds what `ingest` did since it stood at `before` (rows, rejected); `who` names
    /// the producer in the first malformed lines.
    fn add(&self, ingest: &Ingest, before: (u64, u64), who: &str) {
        self.rows
            .fetch_add(ingest.rows - before.0, Ordering::Relaxed);
        self.rejected
            .fetch_add(ingest.rejected - before.1, Ordering::Relaxed);
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        let new = ingest.rejects.iter().skip(before.1 as usize);
        for r in new.take(Ingest::KEEP.saturating_sub(first.len())) {
            first.push(format!(
                "{who} line {} column {}: {}",
                r.line, r.column, r.reason
            ));
        }
    }
}

impl Feed {
    /// Starts the producers `feeds` declares for `log`; `None` when it declares none.
    pub fn start(feeds: &Feeds, log: &Arc<StreamLog>) -> Result<Option<Feed>> {
        if feeds.listen.is_none() && feeds.tail.is_none() {
            return Ok(None);
        }
        let format = if feeds.json {
            Format::Json
        } else {
            Format::Csv
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(FeedStats::default());
        let mut feed = Feed {
            addr: None,
            tail: feeds.tail.clone(),
            format,
            stats: stats.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
        };
        let name = log.name().to_string();
        if let Some(addr) = feeds.listen {
            let io = |e| Error::io(format!("stream {name}: listening on {addr}"), e);
            let listener = TcpListener::bind(addr).map_err(io)?;
            feed.addr = Some(listener.local_addr().map_err(io)?);
            listener.set_nonblocking(true).map_err(io)?;
            let (log, stop, stats, header) =
                (log.clone(), stop.clone(), stats.clone(), feeds.header);
            let t = std::thread::Builder::new()
                .name(format!("listen-{name}"))
                .spawn(move || accept(listener, log, format, header, stop, stats))
                .map_err(io)?;
            feed.threads.push(t);
        }
        if let Some(path) = feeds.tail.clone() {
            let (log, header) = (log.clone(), feeds.header);
            let t = std::thread::Builder::new()
                .name(format!("tail-{name}"))
                .spawn(move || {
                    tail(
                        &path,
                        || Ingest::new(log.clone(), format, header),
                        &stop,
                        &stats,
                    )
                })
                .map_err(|e| Error::io(format!("stream {name}: tailing"), e))?;
            feed.threads.push(t);
        }
        Ok(Some(feed))
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Accepts TCP producers until stopped, one thread each.
fn accept(
    listener: TcpListener,
    log: Arc<StreamLog>,
    format: Format,
    header: bool,
    stop: Arc<AtomicBool>,
    stats: Arc<FeedStats>,
) {
    let mut producers: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                stats.producers.fetch_add(1, Ordering::Relaxed);
                let ingest = Ingest::new(log.clone(), format, header);
                let (stop, stats) = (stop.clone(), stats.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("producer-{peer}"))
                    .spawn(move || produce(stream, &peer.to_string(), ingest, &stop, &stats));
                producers.extend(spawned.ok());
                producers.retain(|t| !t.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for t in producers {
        let _ = t.join();
    }
}

/// One TCP producer: its lines into the log, an acknowledgement after each append.
fn produce(
    mut stream: TcpStream,
    who: &str,
    mut ingest: Ingest,
    stop: &AtomicBool,
    stats: &FeedStats,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(ACK_TIMEOUT));
    let mut deaf = false;
    let mut say = |stream: &mut TcpStream, text: &str| {
        if !deaf && stream.write_all(text.as_bytes()).is_err() {
            deaf = true;
        }
    };
    let mut buf = vec![0u8; CHUNK];
    loop {
        if stop.load(Ordering::Relaxed) {
            say(&mut stream, "error the stream was dropped\n");
            return;
        }
        let before = (ingest.rows, ingest.rejected);
        let pushed = match stream.read(&mut buf) {
            Ok(0) => {
                let r = ingest.finish();
                stats.add(&ingest, before, who);
                if let Err(e) = r {
                    say(&mut stream, &format!("error {e}\n"));
                    return;
                }
                let mut text = format!("done {} {}\n", ingest.rows, ingest.rejected);
                for r in &ingest.rejects {
                    text += &format!("line {} column {}: {}\n", r.line, r.column, r.reason);
                }
                say(&mut stream, &text);
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
            Ok(n) => ingest.push(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                // Reset: the unfinished line is lost, and counted.
                ingest.abandon();
                stats.add(&ingest, before, who);
                return;
            }
        };
        stats.add(&ingest, before, who);
        if let Err(e) = pushed {
            say(&mut stream, &format!("error {e}\n"));
            return;
        }
        if (ingest.rows, ingest.rejected) != before {
            say(
                &mut stream,
                &format!("ok {} {}\n", ingest.rows, ingest.rejected),
            );
        }
    }
}

/// Follows the file at `path`: its new complete lines into the log until stopped. The
/// file may appear later; a file that gets shorter (replaced or truncated) is read
/// again from its start.
fn tail(path: &Path, new: impl Fn() -> Ingest, stop: &AtomicBool, stats: &FeedStats) {
    let who = path.display().to_string();
    let mut ingest = new();
    let mut offset = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut file) = std::fs::File::open(path) else {
            std::thread::sleep(POLL);
            continue;
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            ingest = new();
            offset = 0;
        }
        if len == offset || file.seek(SeekFrom::Start(offset)).is_err() {
            std::thread::sleep(POLL);
            continue;
        }
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            offset += n as u64;
            let before = (ingest.rows, ingest.rejected);
            let pushed = ingest.push(&buf[..n]);
            stats.add(&ingest, before, &who);
            if pushed.is_err() {
                return; // the stream was dropped
            }
        }
    }
}

/// `SHOW FEEDS`: each stream's producers, where they come in, and their counters.
pub fn listing(feeds: &std::collections::BTreeMap<String, Feed>) -> braid_sql::catalog::Listing {
    let rows = feeds
        .iter()
        .map(|(name, f)| {
            let at = [
                f.addr.map(|a| format!("listen {a}")),
                f.tail.as_ref().map(|p| format!("tail {}", p.display())),
            ];
            let first = f.stats.first.lock().unwrap_or_else(|p| p.into_inner());
            vec![
                name.clone(),
                at.into_iter().flatten().collect::<Vec<_>>().join(", "),
                format!("{:?}", f.format).to_ascii_lowercase(),
                f.stats.producers.load(Ordering::Relaxed).to_string(),
                f.stats.rows.load(Ordering::Relaxed).to_string(),
                f.stats.rejected.load(Ordering::Relaxed).to_string(),
                first.first().cloned().unwrap_or_default(),
            ]
        })
        .collect();
    braid_sql::catalog::Listing {
        header: [
            "stream",
            "from",
            "format",
            "producers",
            "rows",
            "rejected",
            "first_rejected",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}
