//! A named stream that lives in Braid: an append-only log of row batches.
//!
//! Producers append (`INSERT`, `COPY`, a query's output); readers (queries, subscribers)
//! each keep their own offset, so one ingest serves any number of them. With a
//! directory, every append is written to the stream's file as CSV lines and synced
//! before [`StreamLog::append`] returns: a row is acknowledged once it is durable.
//! The log keeps its rows in memory too; a server that restarts reads them back from
//! the file ([`StreamLog::open`], [`super::log_file`]).
//!
//! A stream declared with a retention ([`Retention`]) is trimmed: after each append,
//! the whole batches before both the retention's bound and every reader's [`Hold`]
//! (the first row it may still read: a query's reader holds where it is, or, when the
//! query takes checkpoints, where its last committed checkpoint would have it read
//! again; a subscriber holds where it is) leave memory; the file is rewritten without
//! them once they are as many rows as it still holds. A reader that starts later
//! starts at the first row kept.

use super::taps::Taps;
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, RowKey};
use braid_plan::expr::Expr;
use braid_plan::types::{DataType, Schema};
pub use braid_sql::catalog::Retention;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// A named, append-only stream of rows.
pub struct StreamLog {
    name: String,
    schema: Schema,
    inner: Mutex<Inner>,
    path: Option<PathBuf>,
    /// Malformed rows its producers skipped (COPY, TCP, HTTP, tails), over all of them.
    rejected: AtomicU64,
    /// Subscribers reading it now.
    subscribers: AtomicUsize,
    /// Bytes its producers sent (COPY, TCP, HTTP, tails), good lines and bad.
    bytes: AtomicU64,
    /// Rows its file held when a restarting server opened it: a query that makes the
    /// stream may cut it back and make those rows again, and until they are there
    /// again a reader must not take the wait for idleness (see [`StreamLog::reopened`]).
    reopened: AtomicU64,
}

struct Inner {
    /// Appended batches not trimmed, each keyed by its rows' sequence numbers in the
    /// stream, and when each came.
    entries: Vec<Arc<Batch>>,
    arrived: Vec<Instant>,
    /// Batches trimmed before `entries[0]` (a reader's offset counts them).
    trimmed: usize,
    /// The sequence number of the first row kept, and of the file's first row.
    first: u64,
    file_first: u64,
    rows: u64,
    /// How much the stream keeps; every reader's hold.
    retention: Option<Retention>,
    holds: Vec<std::sync::Weak<AtomicU64>>,
    /// No more appends: readers end once they have read everything.
    closed: bool,
    /// When the last row came, and the largest event time so far (heartbeats).
    last_arrival: Instant,
    max_time: Option<i64>,
    file: Option<std::io::BufWriter<std::fs::File>>,
    /// Readers waiting for the next append.
    wakers: Vec<Waker>,
    /// Subscribers' filters, run as batches are appended.
    taps: Taps,
}

/// The first row a reader of a log may still read: no row from it on is trimmed while
/// the hold lives ([`StreamLog::hold`]).
#[derive(Clone, Debug)]
pub struct Hold(Arc<AtomicU64>);

impl Hold {
    /// Rows before `seq` are no longer needed.
    pub fn set(&self, seq: u64) {
        self.0.store(seq, Ordering::Relaxed);
    }

    /// The row held.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a tap (a subscriber's filter run at the log, see [`super::taps`]) has.
pub enum TapRead {
    /// The next batch of its rows.
    Batch(Arc<Batch>),
    /// Its filter met this fault: it gets nothing more.
    Fault(String),
    /// The stream was dropped and it has taken everything.
    Closed,
    /// Nothing yet.
    Idle,
}

/// What a reader finds at its offset.
pub enum Read {
    /// The next batch.
    Batch(Arc<Batch>),
    /// Nothing yet: the last row came at this instant, with the largest event time so
    /// far.
    Idle(Instant, Option<i64>),
    /// The stream was dropped and everything was read.
    Closed,
}

impl StreamLog {
    /// An empty stream `name` of rows of `schema`; written to `dir/<name>.csv` when a
    /// directory is given (an existing file is replaced).
    pub fn create(name: &str, schema: Schema, dir: Option<&Path>) -> Result<Arc<StreamLog>> {
        let (path, file) = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
                let path = dir.join(format!("{name}.csv"));
                let file = std::fs::File::create(&path)
                    .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
                (Some(path), Some(file))
            }
            None => (None, None),
        };
        Ok(StreamLog::create_with(name, schema, path, file))
    }

    /// Stream `name` as its file in `dir` holds it (a server restarting): its rows
    /// read back, later appends added to the file. A line cut short at the end of the
    /// file (a crash in the middle of an append, never acknowledged) is dropped. Without
    /// a file, a new empty stream.
    pub fn open(name: &str, schema: Schema, dir: Option<&Path>) -> Result<Arc<StreamLog>> {
        let Some(path) = dir
            .map(|d| d.join(format!("{name}.csv")))
            .filter(|p| p.exists())
        else {
            return StreamLog::create(name, schema, dir);
        };
        let read = super::log_file::read(&path, &schema)?;
        let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| io("opening", e))?;
        if file.metadata().map_err(|e| io("reading", e))?.len() > read.whole {
            file.set_len(read.whole).map_err(|e| io("truncating", e))?;
        }
        let log = StreamLog::create_with(name, schema, Some(path), Some(file));
        let mut inner = log.lock();
        inner.rows = read.rows;
        inner.first = read.first;
        inner.file_first = read.first;
        inner.max_time = read.max_time;
        inner.entries = read.batches.into_iter().map(Arc::new).collect();
        // When the rows came before is not kept: a retention by time counts from now.
        inner.arrived = vec![Instant::now(); inner.entries.len()];
        drop(inner);
        log.reopened.store(read.rows, Ordering::Relaxed);
        Ok(log)
    }

    fn create_with(
        name: &str,
        schema: Schema,
        path: Option<PathBuf>,
        file: Option<std::fs::File>,
    ) -> Arc<StreamLog> {
        Arc::new(StreamLog {
            name: name.to_string(),
            schema,
            inner: Mutex::new(Inner {
                entries: Vec::new(),
                arrived: Vec::new(),
                trimmed: 0,
                first: 0,
                file_first: 0,
                rows: 0,
                retention: None,
                holds: Vec::new(),
                closed: false,
                last_arrival: Instant::now(),
                max_time: None,
                file: file.map(std::io::BufWriter::new),
                wakers: Vec::new(),
                taps: Taps::default(),
            }),
            path,
            rejected: AtomicU64::new(0),
            subscribers: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
        })
    }

    /// Rows its file held when the server opened it again (0 for a new stream). A
    /// reader below this row is catching up with rows that were there before the
    /// restart: it never closes an epoch for lack of rows there.
    pub fn reopened(&self) -> u64 {
        self.reopened.load(Ordering::Relaxed)
    }

    /// Takes back every row after the first `rows` (a query's output on recovery: what
    /// it wrote after its last checkpoint is made again). Only before anyone reads it.
    pub fn truncate(&self, rows: u64) -> Result<()> {
        let mut inner = self.lock();
        if rows >= inner.rows {
            return Ok(());
        }
        if rows < inner.first {
            return Err(Error::Internal(format!(
                "stream {}: cutting it back to {rows} rows, but its rows before {} were trimmed",
                self.name, inner.first
            )));
        }
        let (k, row) = locate(&inner.entries, rows);
        inner.entries.truncate(k + usize::from(row > 0));
        let kept = inner.entries.len();
        inner.arrived.truncate(kept);
        if row > 0 {
            let last = inner.entries.last().cloned();
            if let Some(b) = last {
                let mut cut = Batch::with_capacity(b.arity(), row);
                for i in 0..row {
                    cut.push_row_of(&b, i, b.key(i));
                }
                *inner.entries.last_mut().expect("a batch") = Arc::new(cut);
            }
        }
        inner.rows = rows;
        inner.max_time = self.schema.event_time.and_then(|c| {
            inner
                .entries
                .iter()
                .flat_map(|b| b.rows().filter_map(move |r| r.int(c)))
                .max()
        });
        self.rewrite_file(&mut inner)
    }

    /// Writes the log's file again with its rows kept, from the first to the last (a
    /// synced rename; see [`super::log_file::rewrite`]), and appends to the new file
    /// from now on. Nothing without a file.
    fn rewrite_file(&self, inner: &mut Inner) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        super::log_file::rewrite(path, &inner.entries, inner.first, inner.rows, &self.schema)?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        inner.file = Some(std::io::BufWriter::new(file));
        inner.file_first = inner.first;
        Ok(())
    }

    /// The batch holding the row with sequence number `seq`, and its place in it
    /// (one past the last batch when `seq` is the next row to come).
    pub fn locate(&self, seq: u64) -> (usize, usize) {
        let inner = self.lock();
        let (k, row) = locate(&inner.entries, seq);
        (inner.trimmed + k, row)
    }

    /// Keeps the stream's rows as `retention` says (all of them when `None`).
    pub fn set_retention(&self, retention: Option<Retention>) {
        self.lock().retention = retention;
    }

    /// A hold on the rows from `seq` on (see [`Hold`]); it goes with its last clone.
    pub fn hold(&self, seq: u64) -> Hold {
        let h = Arc::new(AtomicU64::new(seq));
        let mut inner = self.lock();
        inner.holds.retain(|w| w.strong_count() > 0);
        inner.holds.push(Arc::downgrade(&h));
        Hold(h)
    }

    /// The sequence number of the first row kept (rows before it were trimmed).
    pub fn first_row(&self) -> u64 {
        self.lock().first
    }

    /// The offset of the first batch kept: a reader starting at the stream's start
    /// starts here.
    pub fn first_batch(&self) -> usize {
        self.lock().trimmed
    }

    /// Counts a malformed row a producer skipped.
    pub fn note_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` bytes a producer sent.
    pub fn note_bytes(&self, n: usize) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes producers sent so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Malformed rows skipped so far, over all producers.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Counts a subscriber in (`true`) or out.
    pub(super) fn subscriber(&self, arrives: bool) {
        match arrives {
            true => self.subscribers.fetch_add(1, Ordering::Relaxed),
            false => self.subscribers.fetch_sub(1, Ordering::Relaxed),
        };
    }

    /// Subscribers reading the stream now.
    pub fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// Subscribers whose filters run at the log.
    pub fn filters(&self) -> usize {
        self.lock().taps.len()
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream's columns.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The file the log is written to, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Rows appended so far.
    pub fn rows(&self) -> u64 {
        self.lock().rows
    }

    /// Batches appended so far (a reader at this offset reads only what comes next).
    pub fn end(&self) -> usize {
        let inner = self.lock();
        inner.trimmed + inner.entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `rows` (their keys are replaced by their sequence numbers in the
    /// stream); returns their sequence numbers once they are in the log (and synced to
    /// its file). An empty batch appends nothing.
    pub fn append(&self, rows: &Batch) -> Result<Range<u64>> {
        if rows.is_empty() {
            return Ok(0..0);
        }
        self.append_with(rows, |_| Ok(()))
    }

    /// [`StreamLog::append`], calling `before` with the rows the log holds just
    /// before these (also when there are none) while no other append can come in
    /// between: a producer notes there where it is in its own input (a tailed file's
    /// offset), durably, so that after a crash it knows whether this append landed.
    pub fn append_with(
        &self,
        rows: &Batch,
        before: impl FnOnce(u64) -> Result<()>,
    ) -> Result<Range<u64>> {
        let types: Vec<DataType> = self.schema.fields.iter().map(|f| f.ty).collect();
        let mut inner = self.lock();
        if inner.closed {
            return Err(Error::Internal(format!("stream {} was dropped", self.name)));
        }
        before(inner.rows)?;
        if rows.is_empty() {
            return Ok(inner.rows..inner.rows);
        }
        let mut batch = Batch::with_capacity(rows.arity(), rows.len());
        let first = inner.rows;
        for i in 0..rows.len() {
            batch.push_row_of(
                rows,
                i,
                RowKey {
                    seq: first + i as u64,
                    lane: 0,
                },
            );
        }
        if let Some(file) = inner.file.as_mut() {
            let written = (|| {
                for row in batch.rows() {
                    super::log_file::write_row(file, &row, &types)?;
                }
                file.flush()?;
                file.get_ref().sync_data()
            })();
            written
                .map_err(|e| Error::io(format!("writing the log of stream {}", self.name), e))?;
        }
        if let Some(c) = self.schema.event_time {
            let max = batch.rows().filter_map(|r| r.int(c)).max();
            inner.max_time = inner.max_time.max(max);
        }
        inner.rows += batch.len() as u64;
        inner.last_arrival = Instant::now();
        let batch = Arc::new(batch);
        inner.taps.dispatch(&batch);
        inner.entries.push(batch);
        let now = inner.last_arrival;
        inner.arrived.push(now);
        for w in inner.wakers.drain(..) {
            w.wake();
        }
        if inner.retention.is_some() {
            self.trim(&mut inner, true)?;
        }
        Ok(first..inner.rows)
    }

    /// Trims what the retention and the holds allow now, in memory only (a reader that
    /// caught up with an idle stream calls it: after a burst the readers pass the rows
    /// the appends could not trim yet). The file follows at the next append.
    pub fn trim_idle(&self) {
        let mut inner = self.lock();
        if inner.retention.is_some() {
            let _ = self.trim(&mut inner, false);
        }
    }

    /// Trims what the retention and every hold allow (see the module doc); the file
    /// too when `file` (and it holds enough trimmed rows).
    fn trim(&self, inner: &mut Inner, file: bool) -> Result<()> {
        let bound = match inner.retention {
            None => return Ok(()),
            Some(Retention::Rows(n)) => inner.rows.saturating_sub(n),
            Some(Retention::For(d)) => {
                let now = Instant::now();
                let k = inner
                    .arrived
                    .partition_point(|&t| now.saturating_duration_since(t) > d);
                inner.entries.get(k).map_or(inner.rows, |b| {
                    b.keys().first().map_or(inner.rows, |k| k.seq)
                })
            }
        };
        inner.holds.retain(|w| w.strong_count() > 0);
        let held = inner
            .holds
            .iter()
            .filter_map(|w| w.upgrade())
            .map(|h| h.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        let keep = bound.min(held);
        // Whole batches whose rows all come before `keep`.
        let k = inner
            .entries
            .partition_point(|b| b.keys().last().is_none_or(|l| l.seq < keep));
        if k > 0 {
            inner.entries.drain(..k);
            inner.arrived.drain(..k);
            inner.trimmed += k;
            inner.first = inner
                .entries
                .first()
                .and_then(|b| b.keys().first())
                .map_or(inner.rows, |k| k.seq);
        }
        // The file is rewritten once it holds as many trimmed rows as kept ones.
        let dropped = inner.first - inner.file_first;
        if file && dropped > 0 && dropped >= inner.rows - inner.first {
            self.rewrite_file(inner)?;
        }
        Ok(())
    }

    /// The batch at `offset`, or why there is none.
    pub fn read(&self, offset: usize) -> Read {
        let inner = self.lock();
        // Before the first batch kept there is nothing to read (a reader starts at
        // `first_batch`, and its hold keeps what it has not read).
        let at = offset.checked_sub(inner.trimmed).unwrap_or(usize::MAX);
        match inner.entries.get(at) {
            Some(b) => Read::Batch(b.clone()),
            None if inner.closed => Read::Closed,
            None => Read::Idle(inner.last_arrival, inner.max_time),
        }
    }

    /// Like [`StreamLog::read`], registering `cx`'s waker to be woken by the next
    /// append (or close) when there is nothing at `offset` yet.
    pub fn poll_read(&self, offset: usize, cx: &mut Context<'_>) -> Poll<Option<Arc<Batch>>> {
        let mut inner = self.lock();
        // Before the first batch kept there is nothing to read (a reader starts at
        // `first_batch`, and its hold keeps what it has not read).
        let at = offset.checked_sub(inner.trimmed).unwrap_or(usize::MAX);
        match inner.entries.get(at) {
            Some(b) => Poll::Ready(Some(b.clone())),
            None if inner.closed => Poll::Ready(None),
            None => {
                inner.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// No more appends (the stream was dropped): readers end after what is there.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        for w in inner.wakers.drain(..) {
            w.wake();
        }
        inner.taps.wake_all();
    }

    /// Registers a subscriber's filter `expr` (written `text`) to be run on every batch
    /// appended from now on; its id, and the offset of the first batch it sees (the
    /// subscriber reads what comes before from the log itself).
    pub fn tap(&self, expr: Expr, text: &str) -> (u64, usize) {
        let mut inner = self.lock();
        let id = inner.taps.add(expr, text, &self.schema);
        (id, inner.trimmed + inner.entries.len())
    }

    /// Takes the next batch of tap `id`; when there is none yet, `waker` (if given)
    /// is woken when there is.
    pub fn take_tap(&self, id: u64, waker: Option<&Waker>) -> TapRead {
        let mut inner = self.lock();
        let closed = inner.closed;
        let Some(t) = inner.taps.get_mut(id) else {
            return TapRead::Closed;
        };
        if let Some(f) = &t.fault {
            return TapRead::Fault(f.clone());
        }
        match t.queue.pop_front() {
            Some(b) => {
                t.queued -= b.len() as u64;
                TapRead::Batch(b)
            }
            None if closed => TapRead::Closed,
            None => {
                t.waker = waker.cloned();
                TapRead::Idle
            }
        }
    }

    /// Rows tap `id` holds that its subscriber has not taken.
    pub fn tap_queued(&self, id: u64) -> u64 {
        self.lock().taps.get_mut(id).map_or(0, |t| t.queued)
    }

    /// Takes tap `id` away.
    pub fn untap(&self, id: u64) {
        self.lock().taps.remove(id);
    }

    /// Whether the stream was closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

/// The batch of `entries` holding sequence number `seq` (batches are keyed from 0 in
/// order), and the row in it; one past the last batch for a later `seq`.
fn locate(entries: &[Arc<Batch>], seq: u64) -> (usize, usize) {
    let k = entries.partition_point(|b| b.is_empty() || b.key(0).seq <= seq);
    match k
        .checked_sub(1)
        .and_then(|i| entries.get(i).map(|b| (i, b)))
    {
        Some((i, b)) if seq < b.key(0).seq + b.len() as u64 => (i, (seq - b.key(0).seq) as usize),
        _ => (k, 0),
    }
}

impl std::fmt::Debug for StreamLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamLog({}, {} rows)", self.name, self.rows())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::batch::Value;
    use braid_plan::types::Field;

    fn batch(from: i64, n: i64) -> Batch {
        let mut b = Batch::new(1);
        for i in from..from + n {
            b.push(RowKey { seq: 0, lane: 0 }, &[Value::Int(i)]);
        }
        b
    }

    /// Every value the log holds from `offset` on, with its sequence number.
    fn held(log: &StreamLog) -> Vec<(u64, i64)> {
        let mut out = Vec::new();
        let mut k = log.first_batch();
        while let Read::Batch(b) = log.read(k) {
            out.extend(b.rows().map(|r| (r.key().seq, r.int(0).unwrap_or(-1))));
            k += 1;
        }
        out
    }

    /// A stream keeping its newest 10 rows trims whole batches before both that bound
    /// and every hold, never a row a hold keeps; its file is rewritten once it holds
    /// as many trimmed rows as kept ones and reads back with the same sequence
    /// numbers; a reader that starts later starts at the first row kept.
    #[test]
    fn a_stream_keeps_what_its_retention_and_its_readers_need() {
        let dir = std::env::temp_dir().join(format!("braid-log-trim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let schema = Schema::new(vec![Field::new("v", DataType::Int64)]);
        let log = StreamLog::create("s", schema.clone(), Some(&dir)).expect("log");
        log.set_retention(Some(Retention::Rows(10)));
        let reader = log.hold(0);
        for b in 0..10 {
            log.append(&batch(b * 4, 4)).expect("append");
        }
        // The reader at 0 keeps everything.
        assert_eq!((log.first_row(), log.first_batch(), log.rows()), (0, 0, 40));
        reader.set(13);
        log.append(&batch(40, 4)).expect("append");
        // Batches of rows 0..12 go (the one holding 12 stays).
        assert_eq!((log.first_row(), log.first_batch()), (12, 3));
        assert_eq!(held(&log).first(), Some(&(12, 12)));
        assert_eq!(log.locate(13), (3, 1));
        drop(reader);
        log.append(&batch(44, 4)).expect("append");
        // Now only the retention: the newest 10 of 48 rows, by whole batches.
        assert_eq!((log.first_row(), log.first_batch()), (36, 9));
        let want: Vec<(u64, i64)> = (36..48).map(|i| (i as u64, i as i64)).collect();
        assert_eq!(held(&log), want);
        // The file was rewritten (24 trimmed rows against 12 kept) and reads back.
        let text = std::fs::read_to_string(dir.join("s.csv")).expect("file");
        assert!(text.starts_with("#braid first="), "{text}");
        let again = StreamLog::open("s", schema.clone(), Some(&dir)).expect("open");
        assert_eq!((again.rows(), again.first_row()), (48, log.first_row()));
        let kept: Vec<(u64, i64)> = held(&again).into_iter().filter(|&(s, _)| s >= 36).collect();
        assert_eq!(kept, want);
        assert_eq!(held(&again).first().map(|r| r.0), Some(again.first_row()));
        // Cutting back below the first row kept is refused, above it works.
        assert!(log.truncate(20).is_err());
        log.truncate(42).expect("cut back");
        assert_eq!(log.rows(), 42);
        let again = StreamLog::open("s", schema, Some(&dir)).expect("open");
        assert_eq!(held(&again).last(), Some(&(41, 41)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reader that passes rows between appends lets them go at its next idle read.
    #[test]
    fn an_idle_trim_takes_what_the_readers_passed_since_the_last_append() {
        let schema = Schema::new(vec![Field::new("v", DataType::Int64)]);
        let log = StreamLog::create("i", schema, None).expect("log");
        log.set_retention(Some(Retention::Rows(10)));
        let reader = log.hold(0);
        for b in 0..10 {
            log.append(&batch(b * 4, 4)).expect("append");
        }
        assert_eq!(log.first_row(), 0);
        reader.set(40);
        log.trim_idle();
        // The newest 10 of 40 by whole batches of 4: from row 28.
        assert_eq!((log.first_row(), log.first_batch()), (28, 7));
    }

    /// A retention by time trims the batches that came longer ago than it says.
    #[test]
    fn a_retention_by_time_trims_what_came_before_it() {
        let schema = Schema::new(vec![Field::new("v", DataType::Int64)]);
        let log = StreamLog::create("t", schema, None).expect("log");
        log.set_retention(Some(Retention::For(std::time::Duration::from_millis(100))));
        log.append(&batch(0, 3)).expect("append");
        log.append(&batch(3, 3)).expect("append");
        assert_eq!(log.first_row(), 0);
        std::thread::sleep(std::time::Duration::from_millis(150));
        log.append(&batch(6, 3)).expect("append");
        assert_eq!((log.first_row(), log.first_batch(), log.rows()), (6, 2, 9));
    }

    /// A string that starts with `#` in the first column reads back as itself.
    #[test]
    fn a_hash_string_first_reads_back() {
        let dir = std::env::temp_dir().join(format!("braid-log-hash-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let schema = Schema::new(vec![Field::new("s", DataType::String)]);
        let log = StreamLog::create("h", schema.clone(), Some(&dir)).expect("log");
        let mut b = Batch::new(1);
        b.push(RowKey { seq: 0, lane: 0 }, &[Value::Str("#braid first=7")]);
        log.append(&b).expect("append");
        let again = StreamLog::open("h", schema, Some(&dir)).expect("open");
        assert_eq!((again.rows(), again.first_row()), (1, 0));
        let Read::Batch(b) = again.read(0) else {
            panic!("no batch")
        };
        assert_eq!(b.row(0).get(0), Value::Str("#braid first=7"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
