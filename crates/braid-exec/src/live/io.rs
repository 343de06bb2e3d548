//! A live query's ends: the source that reads a [`StreamLog`] from an offset, and the
//! sink that appends a query's output to one (a stream made by a query, or a
//! subscriber's private stream). Both are registered under a name in the query's
//! registry, so the plan stays the closed plan enum (`native` source and sink).

use super::log::{Read, StreamLog};
use braid_plan::batch::Batch;
use braid_plan::function::{NativeSource, SinkFn, SourceFactory, SourceNext};
use braid_plan::types::Schema;
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
}

/// Reads a stream's log from an offset (on worker 0; the dataflow spreads the rows).
pub struct LogSource {
    /// The stream.
    pub log: Arc<StreamLog>,
    /// The first batch to read.
    pub from: usize,
    /// The stream as the query's plan declares it (schema, event time, epoch, window).
    pub source: braid_plan::plan::Source,
    /// Heartbeats, when the stream has them.
    pub heartbeat: Option<Heartbeat>,
}

impl SourceFactory for LogSource {
    fn schema(&self) -> Schema {
        self.log.schema().clone()
    }

    fn open(&self, worker: usize, _peers: usize) -> Option<Box<dyn NativeSource>> {
        (worker == 0).then(|| {
            Box::new(LogReader {
                log: self.log.clone(),
                next: self.from,
                batch: None,
                row: 0,
                epoch: 0,
                dirty: false,
                epoch_len: self.source.epoch.max(1),
                window: self.source.window.max(1),
                time: self.source.schema.event_time,
                heartbeat: self.heartbeat,
                last_beat: Instant::now(),
                opened: None,
            }) as Box<dyn NativeSource>
        })
    }
}

/// One reader of a log: cuts its batches into windows of one epoch.
struct LogReader {
    log: Arc<StreamLog>,
    /// The next batch of the log to fetch.
    next: usize,
    /// The batch being cut, and its next row.
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
            // Without event time (epochs count rows), or an event time of unknown unit:
            // close the epoch rows were sent in; a later row of it joins the next.
            _ => self.epoch + u64::from(self.dirty),
        };
        (epoch > self.epoch).then_some(epoch)
    }
}

impl LogReader {
    /// Whether the current epoch counts rows (no event time, or one of unknown unit)
    /// and has been open longer than the heartbeat's `idle`: then it closes now, so a
    /// slow stream's rows do not wait for the epoch to fill.
    fn overdue(&self) -> bool {
        let Some(hb) = self.heartbeat else {
            return false;
        };
        let counts_rows = self.time.is_none() || hb.units_per_second.is_none();
        counts_rows && self.dirty && self.opened.is_some_and(|t| t.elapsed() >= hb.idle)
    }
}

impl NativeSource for LogReader {
    fn next(&mut self, out: &mut Batch) -> std::io::Result<SourceNext> {
        if self.overdue() {
            self.epoch += 1;
            self.dirty = false;
            self.opened = None;
            return Ok(SourceNext::Window(self.epoch));
        }
        loop {
            if let Some(b) = self.batch.clone() {
                if self.row < b.len() {
                    let epoch = self.epoch_of(&b, self.row);
                    while self.row < b.len()
                        && out.len() < self.window
                        && self.epoch_of(&b, self.row) == epoch
                    {
                        out.push_row_of(&b, self.row, b.key(self.row));
                        self.row += 1;
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
            match self.log.read(self.next) {
                Read::Batch(b) => {
                    self.next += 1;
                    self.batch = Some(b);
                    self.row = 0;
                }
                Read::Closed => return Ok(SourceNext::Done),
                Read::Idle(last, max_time) => {
                    return Ok(match self.beat(last, max_time) {
                        Some(epoch) => {
                            self.last_beat = Instant::now();
                            self.epoch = epoch;
                            self.dirty = false;
                            self.opened = None;
                            SourceNext::Window(epoch)
                        }
                        None => SourceNext::Wait,
                    })
                }
            }
        }
    }
}

/// Appends a query's output to a stream's log (called on worker 0).
pub struct LogSink {
    /// The stream written.
    pub log: Arc<StreamLog>,
}

impl SinkFn for LogSink {
    fn write(&self, rows: &Batch, _since_start: Duration, _epoch: u64) -> std::io::Result<()> {
        self.log
            .append(rows)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}
