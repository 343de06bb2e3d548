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

use super::ingest::{Format, Ingest, Mark, Pos};
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
    /// A tailed file is followed from `tail_from` ([`tail_resume`] after a restart),
    /// else from its start.
    pub fn start(
        feeds: &Feeds,
        log: &Arc<StreamLog>,
        tail_from: Option<Pos>,
    ) -> Result<Option<Feed>> {
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
            // Beside a log kept on disk, where the tail stands after each append.
            let marks = marks_path(&log);
            if let (Some(m), None) = (&marks, tail_from) {
                match std::fs::remove_file(m) {
                    Err(e) if e.kind() != ErrorKind::NotFound => {
                        return Err(Error::io(format!("removing {}", m.display()), e))
                    }
                    _ => {}
                }
            }
            let start = tail_from.unwrap_or_default();
            let new = move |at: Pos| {
                let ingest = Ingest::new(log.clone(), format, header).resume_at(at);
                match marks.clone() {
                    Some(m) => ingest.on_append(Box::new(move |mark| write_mark(&m, mark))),
                    None => ingest,
                }
            };
            let t = std::thread::Builder::new()
                .name(format!("tail-{name}"))
                .spawn(move || tail(&path, new, start, &stop, &stats))
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

/// Follows the file at `path` from `start`: its new complete lines into the log until
/// stopped. The file may appear later; a file that gets shorter (replaced or
/// truncated) is read again from its start.
fn tail(
    path: &Path,
    new: impl Fn(Pos) -> Ingest,
    start: Pos,
    stop: &AtomicBool,
    stats: &FeedStats,
) {
    let who = path.display().to_string();
    let mut ingest = new(start);
    let mut offset = start.offset;
    let mut buf = vec![0u8; CHUNK];
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut file) = std::fs::File::open(path) else {
            std::thread::sleep(POLL);
            continue;
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            ingest = new(Pos::default());
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
            if let Err(e) = pushed {
                // The stream was dropped, or its log or the tail's mark could not
                // be written: SHOW FEEDS says which.
                let mut first = stats.first.lock().unwrap_or_else(|p| p.into_inner());
                first.insert(0, format!("{who}: the tail stopped: {e}"));
                return;
            }
        }
    }
}

/// Where a stream's tail keeps its marks: `<name>.tail` beside the log's file (none
/// for a log in memory).
fn marks_path(log: &StreamLog) -> Option<PathBuf> {
    log.path().map(|p| p.with_extension("tail"))
}

/// Keeps `mark`, the tail's append about to be written, durably (a synced rename):
/// `rows_before rows from.offset from.line to.offset to.line`.
fn write_mark(path: &Path, m: Mark) -> Result<()> {
    crate::checkpoint_store::replace_with(path, |w| {
        writeln!(
            w,
            "{} {} {} {} {} {}",
            m.rows_before, m.rows, m.from.offset, m.from.line, m.to.offset, m.to.line
        )
    })
}

/// Where the tail of a stream whose `log` was just opened again (a server restarting)
/// resumes in its file, from its last mark: after that append when the log holds it
/// whole; else (the crash came in the middle of it, so it was never all written) the
/// log is cut back to the rows before it and the tail resumes where it began. From
/// the file's start when there is no mark (nothing appended yet). A mark that does
/// not read back, or that the log cannot hold, is an error naming the file.
pub fn tail_resume(log: &StreamLog) -> Result<Pos> {
    let Some(path) = marks_path(log) else {
        return Ok(Pos::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Pos::default()),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let bad = |why: &str| {
        Error::Plan(braid_plan::error::Error::Plan(format!(
            "the tail's mark {} ({:?}): {why}",
            path.display(),
            text.trim()
        )))
    };
    let v: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad("expected 6 numbers"))?;
    let [before, rows, from, from_line, to, to_line] = v[..] else {
        return Err(bad("expected 6 numbers"));
    };
    let (from, to) = (
        Pos {
            offset: from,
            line: from_line,
        },
        Pos {
            offset: to,
            line: to_line,
        },
    );
    let held = log.rows();
    if held >= before + rows {
        return Ok(to);
    }
    if held < before {
        return Err(bad(&format!(
            "it was written with {before} rows in the stream, which now holds {held}"
        )));
    }
    log.truncate(before)?;
    Ok(from)
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

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::batch::{Batch, RowKey, Value};
    use braid_plan::types::{DataType, Field, Schema};

    fn log(dir: &Path) -> Arc<StreamLog> {
        let schema = Schema::new(vec![Field::new("a", DataType::Int64)]);
        StreamLog::create("s", schema, Some(dir)).expect("a log")
    }

    fn rows(log: &StreamLog, n: i64) {
        let mut b = Batch::new(1);
        for i in 0..n {
            b.push(RowKey { seq: 0, lane: 0 }, &[Value::Int(i)]);
        }
        log.append(&b).expect("append");
    }

    /// The tail resumes after its last append when the log holds it whole, and where
    /// that append began, with the log cut back, when the crash came in the middle of
    /// it; with no mark, from the start; a mark the log cannot hold is an error.
    #[test]
    fn a_tail_resumes_after_its_last_whole_append() {
        let dir = std::env::temp_dir().join(format!("braid-tail-marks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let l = log(&dir);
        assert_eq!(tail_resume(&l).expect("no mark"), Pos::default());
        let marks = marks_path(&l).expect("a log on disk");
        let (from, to) = (
            Pos {
                offset: 10,
                line: 3,
            },
            Pos {
                offset: 40,
                line: 9,
            },
        );
        let mark = |before, n| Mark {
            rows_before: before,
            rows: n,
            from,
            to,
        };
        rows(&l, 5);
        // An append of 4 rows after the 5 that landed whole, then rows of others.
        write_mark(&marks, mark(5, 4)).expect("mark");
        rows(&l, 4);
        rows(&l, 2);
        assert_eq!(tail_resume(&l).expect("whole"), to);
        assert_eq!(l.rows(), 11);
        // An append of 6 rows of which 2 were written: cut back to the 11 before it.
        write_mark(&marks, mark(11, 6)).expect("mark");
        rows(&l, 2);
        assert_eq!(tail_resume(&l).expect("cut"), from);
        assert_eq!(l.rows(), 11);
        let reopened = StreamLog::open("s", l.schema().clone(), Some(&dir)).expect("open");
        assert_eq!(reopened.rows(), 11, "the file was cut back too");
        // Nothing of it written: nothing to cut.
        assert_eq!(tail_resume(&reopened).expect("none of it"), from);
        assert_eq!(reopened.rows(), 11);
        write_mark(&marks, mark(12, 1)).expect("mark");
        let e = tail_resume(&reopened).expect_err("more rows than the log");
        assert!(e.to_string().contains("12 rows"), "{e}");
        std::fs::write(&marks, "1 2 x\n").expect("a bad mark");
        let e = tail_resume(&reopened).expect_err("a bad mark").to_string();
        assert!(e.contains("s.tail") && e.contains("6 numbers"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
