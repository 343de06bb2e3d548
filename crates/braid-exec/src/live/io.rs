//! A live query's ends: the source that reads a [`StreamLog`] from an offset, and the
//! sink that appends a query's output to one (a stream made by a query, or a
//! subscriber's private stream). Both are registered under a name in the query's
//! registry, so the plan stays the closed plan enum (`native` source and sink).

use super::log::{Read, StreamLog};
use braid_plan::batch::Batch;
use braid_plan::function::{NativeSource, SinkFn, SourceFactory, SourceNext};
use braid_plan::types::Schema;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How time moves on a stream no row comes to: after `idle` without a row, the
/// stream's epoch advances with the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct Heartbeat {
    /// How long a stream may be idle before its time moves without data.
    pub idle: Duration,
    /// Event-time units per second (the stream's `time_unit`; TIMESTAMP columns count
    /// microseconds): while idle, event time moves on from the last row's at this rate.
    /// `None` (no event time, or one of unknown unit): only the epoch of the last rows
    /// closes.
    pub units_per_second: Option<f64>,
    /// Whether the epoch of the last rows of an event time of unknown unit closes while
    /// idle: only for a query where nothing judges lateness (a stateless one, whose rows
    /// then go out). Where a window or a join does, closing it would make the next
    /// in-order row of that epoch late, so there time moves with rows only.
    pub close_unknown: bool,
}

/// Reads a stream's log from an offset (on worker 0; the dataflow spreads the rows).
pub struct LogSource {
    /// The stream (read from its first row).
    pub log: Arc<StreamLog>,
    /// The stream as the query's plan declares it (schema, event time, epoch, window).
    pub source: braid_plan::plan::Source,
    /// Heartbeats, when the stream has them.
    pub heartbeat: Option<Heartbeat>,
    /// The query's journal of the epochs heartbeats closed (a query with checkpoints):
    /// read again after a crash, the stream gets the same epochs.
    pub ticks: Option<PathBuf>,
    /// A query with checkpoints: the first row its last committed checkpoint would
    /// have it read again, kept for it across its readers (a recovery, or an ALTER
    /// that installs it again, opens a new one there). `None`: each reader holds
    /// where it is.
    pub hold: Option<super::log::Hold>,
}

impl LogSource {
    /// A reader at `at`; `fresh`: the query starts at the stream's start, which is
    /// its first row kept (a retention trims the stream).
    fn reader(
        &self,
        mut at: Resume,
        replay: VecDeque<(u64, u64)>,
        fresh: bool,
    ) -> std::io::Result<LogReader> {
        let first = self.log.first_row();
        if fresh {
            at.seq = at.seq.max(first);
        } else if at.seq < first {
            return Err(std::io::Error::other(format!(
                "stream {}: the checkpoint resumes at row {}, but the rows before {first} were trimmed (retention)",
                self.log.name(),
                at.seq
            )));
        }
        let (hold, checkpointed) = match &self.hold {
            Some(h) => {
                h.set(at.seq);
                (h.clone(), true)
            }
            None => (self.log.hold(at.seq), false),
        };
        // The journal keeps what is replayed and takes what comes next.
        let journal = match &self.ticks {
            Some(path) => Some(Journal::open(path.clone(), replay.clone())?),
            None => None,
        };
        Ok(LogReader {
            log: self.log.clone(),
            batch: None,
            row: 0,
            seq: at.seq,
            epoch: at.epoch,
            dirty: at.dirty,
            epoch_len: self.source.epoch.max(1),
            window: self.source.window.max(1),
            time: self.source.schema.event_time,
            heartbeat: self.heartbeat,
            last_beat: Instant::now(),
            opened: None,
            before: at,
            journal,
            replay,
            hold,
            checkpointed,
        })
    }
}

impl SourceFactory for LogSource {
    fn schema(&self) -> Schema {
        self.log.schema().clone()
    }

    fn open(&self, worker: usize, _peers: usize) -> Option<Box<dyn NativeSource>> {
        let at = Resume {
            seq: 0,
            epoch: 0,
            dirty: false,
        };
        match worker {
            0 => match self.reader(at, VecDeque::new(), true) {
                Ok(r) => Some(Box::new(r)),
                Err(e) => Some(Box::new(Failed(Some(e)))),
            },
            _ => None,
        }
    }

    fn open_at(
        &self,
        worker: usize,
        _peers: usize,
        resume: &[u8],
    ) -> std::io::Result<Option<Box<dyn NativeSource>>> {
        if worker != 0 {
            return Ok(None);
        }
        let at: Resume = serde_json::from_slice(resume).map_err(|e| {
            std::io::Error::other(format!("a resume point of stream {}: {e}", self.log.name()))
        })?;
        // The epochs heartbeats closed after the resume point, in order.
        let mut replay = VecDeque::new();
        if let Some(path) = &self.ticks {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(e),
            };
            let lines = text.lines().count();
            for (n, line) in text.lines().enumerate() {
                let mut w = line.split(' ').map(str::parse::<u64>);
                match (w.next(), w.next()) {
                    (Some(Ok(seq)), Some(Ok(epoch))) if epoch > at.epoch => {
                        replay.push_back((seq, epoch))
                    }
                    (Some(Ok(_)), Some(Ok(_))) => {}
                    // A line cut by a crash while it was written closed nothing.
                    _ if n + 1 == lines && !text.ends_with('\n') => {}
                    _ => {
                        return Err(std::io::Error::other(format!(
                            "{}, line {}: expected `row epoch`",
                            path.display(),
                            n + 1
                        )))
                    }
                }
            }
        }
        Ok(Some(Box::new(self.reader(at, replay, false)?)))
    }

    fn replayable(&self) -> bool {
        self.heartbeat.is_none() || self.ticks.is_some()
    }
}

/// Where a reader of a log starts again: the row, and the epoch it was in.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Resume {
    seq: u64,
    epoch: u64,
    dirty: bool,
}

/// A reader that could not be opened: its first read fails.
struct Failed(Option<std::io::Error>);

impl NativeSource for Failed {
    fn next(&mut self, _out: &mut Batch) -> std::io::Result<SourceNext> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| std::io::Error::other("failed")))
    }
}

/// One reader of a log: cuts its batches into windows of one epoch.
struct LogReader {
    log: Arc<StreamLog>,
    /// The batch being cut, and its next row (the batch is found by `seq`).
    batch: Option<Arc<Batch>>,
    row: usize,
    /// The current epoch (epochs never go back), and whether rows were sent in it.
    epoch: u64,
    dirty: bool,
    epoch_len: u64,
    window: usize,
    time: Option<usize>,
    heartbeat: Option<Heartbeat>,
    /// When time last moved without data (heartbeats come at most every [`BEAT`]).
    last_beat: Instant,
    /// When the current epoch got its first row (epochs that count rows close after
    /// `idle` even while rows keep coming).
    opened: Option<Instant>,
    /// The sequence number of the next row to read.
    seq: u64,
    /// Where the window returned last started (a checkpoint's resume point).
    before: Resume,
    /// The journal of epochs closed without data, synced before the window that closes
    /// one goes out (a checkpointed query: its epochs do not depend on the clock).
    journal: Option<Journal>,
    /// Journaled closes still to replay after a recovery: (row, epoch), in order. While
    /// any is left the clock closes nothing.
    replay: VecDeque<(u64, u64)>,
    /// The rows it may still read (see [`LogSource::hold`]): where it is, or, with
    /// checkpoints, where its last committed checkpoint resumes.
    hold: super::log::Hold,
    checkpointed: bool,
}

/// The shortest time between two heartbeats of a reader.
const BEAT: Duration = Duration::from_millis(10);

impl LogReader {
    fn epoch_of(&self, b: &Batch, i: usize) -> u64 {
        let t = self.time.and_then(|c| b.row(i).int(c));
        crate::source::epoch_at(self.epoch_len, t, b.key(i).seq).max(self.epoch)
    }

    /// The epoch an idle stream has reached, if time should move.
    fn beat(&self, last: Instant, max_time: Option<i64>) -> Option<u64> {
        let hb = self.heartbeat?;
        let idle = last.elapsed();
        if idle < hb.idle || self.last_beat.elapsed() < BEAT {
            return None;
        }
        let epoch = match (self.time, hb.units_per_second) {
            (Some(_), Some(units)) => {
                let t = max_time? as f64 + idle.as_secs_f64() * units;
                (t.max(0.0) as u64) / self.epoch_len
            }
            // Without event time (epochs count rows): close the epoch rows were sent
            // in; a later row joins the next, and no row is late for it.
            (None, _) => self.epoch + u64::from(self.dirty),
            // An event time of unknown unit cannot move with the clock. Closing the epoch
            // of the latest time would make the next in-order row (of that time, or of
            // a time in that epoch) late where windows or joins judge lateness: there
            // time moves with rows only (declare `time_unit` for windows that close on an
            // idle stream); elsewhere the epoch closes so its rows go out.
            (Some(_), None) if hb.close_unknown => self.epoch + u64::from(self.dirty),
            (Some(_), None) => return None,
        };
        (epoch > self.epoch).then_some(epoch)
    }
}

impl LogReader {
    /// Whether the current epoch counts rows (no event time) and has been open longer than the heartbeat's `idle`: then it closes now, so a
    /// slow stream's rows do not wait for the epoch to fill.
    fn overdue(&self) -> bool {
        let Some(hb) = self.heartbeat else {
            return false;
        };
        let counts_rows =
            self.time.is_none() || (hb.units_per_second.is_none() && hb.close_unknown);
        counts_rows && self.dirty && self.opened.is_some_and(|t| t.elapsed() >= hb.idle)
    }
}

impl LogReader {
    /// Journaled closes to replay, or rows from before a restart still to come back:
    /// the clock closes nothing.
    fn catching_up(&self) -> bool {
        !self.replay.is_empty() || self.seq < self.log.reopened()
    }

    /// Where the reader is now.
    fn here(&self) -> Resume {
        Resume {
            seq: self.seq,
            epoch: self.epoch,
            dirty: self.dirty,
        }
    }

    /// Closes the current epoch without data, moving to `epoch`: journaled (and
    /// synced) first when the query keeps a journal.
    fn tick(&mut self, epoch: u64) -> std::io::Result<SourceNext> {
        if let Some(j) = self.journal.as_mut() {
            use std::io::Write;
            let Some(f) = j.file.as_mut() else {
                return Err(std::io::Error::other(format!(
                    "stream {}: the query's journal of epoch closes {} could not be opened again after it was compacted",
                    self.log.name(),
                    j.path.display()
                )));
            };
            writeln!(f, "{} {epoch}", self.seq)?;
            f.sync_data()?;
            j.lines.push_back((self.seq, epoch));
        }
        self.epoch = epoch;
        self.dirty = false;
        self.opened = None;
        Ok(SourceNext::Window(epoch))
    }
}

/// A query's journal of the epochs its reader closed without data: its file (kept
/// open for appending) and the closes it holds, (row, epoch) in order.
struct Journal {
    path: PathBuf,
    /// None once it could not be opened again after a compaction: the next close
    /// fails the query (closes written elsewhere would be lost to a recovery).
    file: Option<std::fs::File>,
    lines: VecDeque<(u64, u64)>,
}

impl Journal {
    /// The journal at `path` holding `lines` in place of what it held, open for
    /// appending.
    fn open(path: PathBuf, lines: VecDeque<(u64, u64)>) -> std::io::Result<Journal> {
        let mut j = Journal {
            path,
            file: None,
            lines: VecDeque::new(),
        };
        j.rewrite(lines)?;
        match j.file {
            Some(_) => Ok(j),
            None => Err(std::io::Error::other(format!(
                "opening {} to append",
                j.path.display()
            ))),
        }
    }

    /// Replaces what the journal holds by `lines` (a synced rename: on an error it is
    /// as it was, and still appended to), then appends to the new file.
    fn rewrite(&mut self, lines: VecDeque<(u64, u64)>) -> std::io::Result<()> {
        crate::checkpoint_store::replace_with(&self.path, |w| {
            lines
                .iter()
                .try_for_each(|(seq, epoch)| writeln!(w, "{seq} {epoch}"))
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.lines = lines;
        self.file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .ok();
        Ok(())
    }
}

impl LogReader {
    /// Drops from the journal the closes of epochs up to `epoch` (a committed
    /// checkpoint's: a recovery replays only later ones), once they are at least as
    /// many as what stays or 64. Without it the journal of an idle stream grows by a
    /// line per heartbeat.
    fn compact(&mut self, epoch: u64) {
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let gone = j.lines.iter().take_while(|l| l.1 <= epoch).count();
        if gone == 0 || (gone < 64 && gone < j.lines.len() - gone) {
            return;
        }
        let kept = j.lines.iter().skip(gone).copied().collect();
        // Not replaced: kept whole, and compacted at a later commit.
        let _ = j.rewrite(kept);
    }
}

impl NativeSource for LogReader {
    fn next(&mut self, out: &mut Batch) -> std::io::Result<SourceNext> {
        self.before = self.here();
        // Replaying after a recovery: the journaled closes, at the rows they came at.
        let limit = match self.replay.front() {
            Some(&(seq, epoch)) if seq <= self.seq => {
                self.replay.pop_front();
                self.epoch = epoch.max(self.epoch);
                self.dirty = false;
                self.opened = None;
                return Ok(SourceNext::Window(self.epoch));
            }
            Some(&(seq, _)) => seq,
            None => u64::MAX,
        };
        let catching_up = self.catching_up();
        if !catching_up && self.overdue() {
            return self.tick(self.epoch + 1);
        }
        loop {
            if let Some(b) = self.batch.clone() {
                if self.row < b.len() {
                    let epoch = self.epoch_of(&b, self.row);
                    // Time jumps over epochs without rows: the one before the row's
                    // closes first, so the queries close their windows at the
                    // watermark the row shows (`epoch * length - lateness`) now,
                    // not when the row's own epoch ends, which on a stream of unknown
                    // unit is only when a later row comes.
                    if self.time.is_some() && epoch > self.epoch + 1 {
                        return self.tick(epoch - 1);
                    }
                    while self.row < b.len()
                        && out.len() < self.window
                        && self.epoch_of(&b, self.row) == epoch
                        && self.seq < limit
                    {
                        out.push_row_of(&b, self.row, b.key(self.row));
                        self.row += 1;
                        self.seq += 1;
                    }
                    if epoch != self.epoch || !self.dirty {
                        self.opened = Some(Instant::now());
                    }
                    self.dirty = true;
                    self.epoch = epoch;
                    return Ok(SourceNext::Window(epoch));
                }
                self.batch = None;
            }
            if !self.checkpointed {
                self.hold.set(self.seq);
            }
            // Its hold keeps what it has not read: a trim past it is a fault, never
            // rows skipped.
            let first = self.log.first_row();
            if self.seq < first {
                return Err(std::io::Error::other(format!(
                    "stream {}: this query's reader is at row {}, but the rows before {first} were trimmed",
                    self.log.name(),
                    self.seq
                )));
            }
            // A reader resumed past the end (a stream a recovering query makes again)
            // waits for its rows.
            let (k, row) = self.log.locate(self.seq);
            match self.log.read(k) {
                Read::Batch(b) => {
                    self.batch = Some(b);
                    self.row = row;
                }
                Read::Closed => return Ok(SourceNext::Done),
                Read::Idle(last, max_time) => {
                    // Caught up: what the readers have passed may go now.
                    self.log.trim_idle();
                    if catching_up {
                        return Ok(SourceNext::Wait);
                    }
                    return match self.beat(last, max_time) {
                        Some(epoch) => {
                            self.last_beat = Instant::now();
                            self.tick(epoch)
                        }
                        None => Ok(SourceNext::Wait),
                    };
                }
            }
        }
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&self.before).ok()
    }

    /// A checkpoint resuming at `resume` committed: rows before it are no longer
    /// needed by this query, nor the journaled closes a recovery from it skips.
    fn committed(&mut self, resume: &[u8]) {
        if let Ok(at) = serde_json::from_slice::<Resume>(resume) {
            self.hold.set(at.seq);
            self.compact(at.epoch);
        }
    }

    /// A close of its own, journaled like a heartbeat's; not while catching up.
    fn close_epoch(&mut self) -> std::io::Result<Option<u64>> {
        if self.catching_up() {
            return Ok(None);
        }
        self.before = self.here();
        match self.tick(self.epoch + 1)? {
            SourceNext::Window(e) => Ok(Some(e)),
            _ => Ok(None),
        }
    }
}

/// Appends a query's output to a stream's log (called on worker 0).
pub struct LogSink {
    /// The stream written.
    pub log: Arc<StreamLog>,
}

impl SinkFn for LogSink {
    /// Into a dropped stream nothing goes: a stream is closed only once the query
    /// making it has been dropped (`DROP STREAM` drops its maker first, and the workers
    /// may still be finishing a window when the drop closes the log), so its rows
    /// go where the stream went.
    fn write(&self, rows: &Batch, _since_start: Duration, _epoch: u64) -> std::io::Result<()> {
        match self.log.append(rows) {
            Err(_) if self.log.is_closed() => Ok(()),
            r => r
                .map(drop)
                .map_err(|e| std::io::Error::other(e.to_string())),
        }
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }

    /// Every append is synced before it returns.
    fn committed_rows(&self) -> Option<u64> {
        Some(self.log.rows())
    }

    fn truncate(&self, rows: u64) -> std::io::Result<()> {
        self.log
            .truncate(rows)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::plan::{Pace, Source, SourceSpec};
    use braid_plan::types::{DataType, Field};

    /// A commit drops from the journal exactly the closes of the epochs up to the
    /// committed resume point's (a recovery replays only later ones), once there are
    /// enough of them; later closes go on being appended to the rewritten file.
    #[test]
    fn a_commit_compacts_the_journal_to_what_a_recovery_replays() {
        let dir = std::env::temp_dir().join(format!("braid-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let schema = Schema::new(vec![Field::new("v", DataType::Int64)]);
        let log = StreamLog::create("j", schema.clone(), None).expect("log");
        let path = dir.join("ticks-j.log");
        let source = LogSource {
            log,
            source: Source {
                name: "j".into(),
                spec: SourceSpec::Native("log:j".into()),
                schema,
                epoch: 1,
                window: 16,
                pace: Pace::Max,
                out_of_order: false,
                shed: None,
            },
            heartbeat: Some(Heartbeat {
                idle: Duration::from_millis(1),
                units_per_second: None,
                close_unknown: true,
            }),
            ticks: Some(path.clone()),
            hold: None,
        };
        let mut r = source
            .reader(
                Resume {
                    seq: 0,
                    epoch: 0,
                    dirty: false,
                },
                VecDeque::new(),
                true,
            )
            .expect("a reader");
        // 100 closes: epochs 1..=100.
        for _ in 0..100 {
            r.close_epoch().expect("close");
        }
        let epochs = |p: &std::path::Path| -> Vec<u64> {
            std::fs::read_to_string(p)
                .expect("journal")
                .lines()
                .map(|l| {
                    l.split(' ')
                        .nth(1)
                        .and_then(|e| e.parse().ok())
                        .expect("epoch")
                })
                .collect()
        };
        assert_eq!(epochs(&path), (1..=100).collect::<Vec<u64>>());
        let at = |epoch: u64| {
            serde_json::to_vec(&Resume {
                seq: 0,
                epoch,
                dirty: false,
            })
            .expect("json")
        };
        // 10 closes a recovery would skip against 90 it replays: kept as they are.
        r.committed(&at(10));
        assert_eq!(epochs(&path).len(), 100);
        // 70 against 30: compacted to the 30 a recovery from epoch 70 replays.
        r.committed(&at(70));
        assert_eq!(epochs(&path), (71..=100).collect::<Vec<u64>>());
        // Closes after it go to the new file.
        r.close_epoch().expect("close");
        assert_eq!(epochs(&path), (71..=101).collect::<Vec<u64>>());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A query's window that reaches its stream after `DROP STREAM` closed it (the
    /// workers drop the maker a moment after the session does) goes nowhere and is no
    /// fault of the query; into a stream that is open, rows land.
    #[test]
    fn a_window_after_its_stream_was_dropped_goes_nowhere_without_an_error() {
        use braid_plan::batch::{RowKey, Value};
        let schema = Schema::new(vec![Field::new("v", DataType::Int64)]);
        let log = StreamLog::create("gone", schema, None).expect("log");
        let sink = LogSink { log: log.clone() };
        let mut b = Batch::new(1);
        b.push(RowKey { seq: 0, lane: 0 }, &[Value::Int(7)]);
        sink.write(&b, Duration::ZERO, 0)
            .expect("an open stream takes rows");
        assert_eq!(log.rows(), 1);
        log.close();
        sink.write(&b, Duration::ZERO, 0)
            .expect("a dropped stream's maker is not failed");
        assert_eq!(log.rows(), 1);
    }
}
