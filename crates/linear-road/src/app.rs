//! Linear Road as a Braid plan: the stream function adapter, the balance combiner, the
//! output sink, and the plan itself.
//!
//! ```text
//! Source(LRB CSV, event time = Time, epoch 1 s)
//!   -> Split(q, route xway when type <> 2, broadcast type = 2)
//!   -> Map(linear_road: one expressway::Partition per partition)
//!   -> Merge(keyed on (type, time, vid, qid) where type = 2, combiner lr_balance;
//!            other rows: union)
//!   -> Sink(lr_output: LRB output lines, Emit stamped)
//! ```
//! Rows between Map and Sink have seven int64 columns `(type, time, vid, qid, a, b, c)`:
//! type 0 `(lav, toll, -)`, 1 `(seg, -, -)`, 2 partial `(latest, sum_before, total)`,
//! 3 `(bal, -, -)`, 4 `(travel_time, toll, -)`.

use crate::expressway::{BalancePartial, Emitted, Partition};
use crate::history::{SegmentHistory, TollHistory};
use crate::record::{Input, Output};
use braid_plan::batch::{Batch, Datum, Row};
use braid_plan::error::{Error, Result};
use braid_plan::expr::{BinOp, Expr};
use braid_plan::function::{
    Combiner, Emitter, Registry, SinkFn, StreamFunction, StreamFunctionFactory,
};
use braid_plan::plan::{Combine, MergeKind, Pace, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_plan::types::Schema;
use hdrhistogram::Histogram;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Name of the stream function.
pub const FUNCTION: &str = "linear_road";
/// Name of the balance combiner.
pub const COMBINER: &str = "lr_balance";
/// Name of the output sink.
pub const SINK: &str = "lr_output";

/// The 15 input columns, `time` being the event time.
pub fn input_schema() -> Schema {
    Schema::ints(&[
        "type", "time", "vid", "spd", "xway", "lane", "dir", "seg", "pos", "qid", "sinit", "send",
        "dow", "tod", "day",
    ])
    .with_event_time("time")
    .expect("the LR schema has an int64 time column")
}

/// The seven columns between Map and Sink.
pub fn output_schema() -> Schema {
    Schema::ints(&["type", "time", "vid", "qid", "a", "b", "c"])
}

/// Makes one [`Partition`] per logical partition, sharing the histories.
pub struct LinearRoad {
    tolls: Arc<TollHistory>,
    segments: Arc<SegmentHistory>,
    ignored: Arc<Ignored>,
}

/// Records the partitions ignored, and the size of their state, summed when each
/// partition finishes.
#[derive(Debug, Default)]
pub struct Ignored {
    /// Position reports with Lane, Dir or Seg out of range, Time, Pos or Spd beyond
    /// what a vehicle record holds, or one report too many for a group's count.
    pub reports: std::sync::atomic::AtomicU64,
    /// Records whose Type is not 0-4.
    pub types: std::sync::atomic::AtomicU64,
    /// Bytes the partitions' state held at their end (`PartitionStats::heap_bytes`).
    pub state_bytes: std::sync::atomic::AtomicU64,
    /// Of those: records, index, left groups, segment records, the rest
    /// (`StateBytes::each`).
    pub state_parts: [std::sync::atomic::AtomicU64; 5],
    /// Vehicle records at their end (`PartitionStats::vehicles_known`).
    pub vehicles: std::sync::atomic::AtomicU64,
}

impl StreamFunctionFactory for LinearRoad {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        if input.arity() != 15 {
            return Err(braid_plan::error::Error::Plan(format!(
                "linear_road reads the 15 LRB input columns, found {input}"
            )));
        }
        Ok(output_schema())
    }

    fn checkpoints(&self) -> bool {
        true
    }

    /// Instances hold up to [`LOOKAHEAD`] rows to ask the caches for their vehicles'
    /// state ahead: each batch's end processes them.
    fn holds_rows(&self) -> bool {
        true
    }

    /// A checkpoint restores with another partition count: the state is kept by
    /// expressway, the route value ([`Partition::absorb`]).
    fn rescales(&self) -> bool {
        true
    }

    fn create(&self, partition: u32, partitions: u32) -> Box<dyn StreamFunction> {
        let mut part = Partition::new(self.tolls.clone(), self.segments.clone());
        part.stagger(partition, partitions);
        Box::new(Adapter {
            ignored: self.ignored.clone(),
            part,
            buf: Vec::new(),
            partition: i64::from(partition),
            partitions: i64::from(partitions.max(1)),
            held: std::collections::VecDeque::with_capacity(LOOKAHEAD + 1),
        })
    }
}

struct Adapter {
    ignored: Arc<Ignored>,
    part: Partition,
    buf: Vec<Emitted>,
    partition: i64,
    partitions: i64,
    /// The rows taken and not yet processed, oldest first, with their sequence
    /// numbers: at most [`LOOKAHEAD`], processed in order as later ones arrive and all
    /// at the end of each batch, epoch and the input.
    held: std::collections::VecDeque<(u64, Input)>,
}

/// How many rows ahead a partition asks the caches for a vehicle's index slot (half
/// as far for its record, once the slot is in): a report's two misses in gigabytes of
/// state overlap the work of the reports before it instead of stalling on each.
const LOOKAHEAD: usize = 16;

impl Adapter {
    /// Takes row `seq` (`t`), processing the oldest held one once [`LOOKAHEAD`] are.
    #[inline]
    fn take(&mut self, seq: u64, t: Input, out: &mut Emitter<'_>) {
        self.part.prefetch_slot(t.vid);
        // The row LOOKAHEAD / 2 behind this one (none while fewer are held).
        let mid = self.held.len().checked_sub(LOOKAHEAD / 2);
        if let Some(&(_, mid)) = mid.and_then(|i| self.held.get(i)) {
            self.part.prefetch_record(mid.vid);
        }
        self.held.push_back((seq, t));
        if self.held.len() > LOOKAHEAD {
            self.run_oldest(out);
        }
    }

    /// Processes the oldest held row, its outputs under its own sequence number.
    #[inline]
    fn run_oldest(&mut self, out: &mut Emitter<'_>) {
        if let Some((seq, t)) = self.held.pop_front() {
            out.restart(seq, self.partition as u32);
            self.part.process(&t, &mut self.buf);
            emit_all(&mut self.buf, out, self.partition, self.partitions);
        }
    }

    /// Processes every held row, then gives `out` back the sequence number it had
    /// (an epoch's or the input's end goes on under its own).
    fn run_held(&mut self, out: &mut Emitter<'_>) {
        let at = out.seq();
        while !self.held.is_empty() {
            self.run_oldest(out);
        }
        out.restart(at, self.partition as u32);
    }
}

/// Balance requests are broadcast to every partition, but a partition that never
/// notified the vehicle holds the combine's identity `(latest -1, 0, 0)`: only the
/// vehicle's home partition (`vid mod q`) sends such an empty partial, so each request
/// costs one or two partial rows instead of q.
fn emit_all(buf: &mut Vec<Emitted>, out: &mut Emitter<'_>, partition: i64, partitions: i64) {
    for e in buf.drain(..) {
        if let Emitted::BalancePartial(b) = &e {
            let empty = b.latest < 0 && b.total == 0 && b.sum_before == 0;
            if empty && b.vid.rem_euclid(partitions) != partition {
                continue;
            }
        }
        let row = match e {
            Emitted::Out(Output::Toll {
                vid,
                time,
                lav,
                toll,
                ..
            }) => [0, time, vid, -1, lav, toll, -1],
            Emitted::Out(Output::Accident { time, vid, seg, .. }) => {
                [1, time, vid, -1, seg, -1, -1]
            }
            Emitted::Out(Output::Balance {
                time,
                qid,
                result_time,
                bal,
                ..
            }) => [2, time, -1, qid, result_time, bal, bal],
            Emitted::BalancePartial(BalancePartial {
                time,
                qid,
                vid,
                latest,
                sum_before,
                total,
            }) => [2, time, vid, qid, latest, sum_before, total],
            Emitted::Out(Output::Daily { time, qid, bal, .. }) => [3, time, -1, qid, bal, -1, -1],
            Emitted::Out(Output::Travel {
                time,
                qid,
                travel_time,
                toll,
                ..
            }) => [4, time, -1, qid, travel_time, toll, -1],
        };
        out.emit_ints(&row);
    }
}

/// The first four bytes of a checkpoint of a `linear_road` instance.
const CHECKPOINT_MAGIC: u32 = u32::from_le_bytes(*b"LRck");
/// The layout of the checkpoint; a build reads only its own (2: one record per
/// vehicle; 3: the 48-byte record, totals beyond 32 bits in a side map; 4: the 36-byte
/// record, ids in the index only, groups of the current minute only; 5: the 32-byte
/// record, the latest notification packed in one word; 6: a left group's speed sum and
/// count packed in one word).
const CHECKPOINT_VERSION: u32 = 6;
/// Magic, version, partition, partitions (u32 each), then the state's length and
/// checksum (u64 each), all little endian.
const CHECKPOINT_HEADER: usize = 32;

/// A 64-bit checksum of a checkpoint's state. Every step is a bijection of the running
/// value and of the word read, so a change confined to one 8-byte word always changes
/// the sum; the length is mixed in first, so is truncation.
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(29);
    let mut h = step(0x243f_6a88_85a3_08d3, bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = step(h, u64::from_le_bytes(w));
    }
    let mut w = [0u8; 8];
    w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = step(h, u64::from_le_bytes(w));
    h ^ (h >> 32)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

impl Adapter {
    fn checkpoint_error(&self, what: String) -> Error {
        Error::Plan(format!(
            "checkpoint of {FUNCTION} partition {} of {}: {what}",
            self.partition, self.partitions
        ))
    }
}

impl StreamFunction for Adapter {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let mut f = [0i64; 15];
        for (c, x) in f.iter_mut().enumerate() {
            *x = row.int(c).unwrap_or(-1);
        }
        self.take(out.seq(), Input::from_fields(f), out);
    }

    fn end_of_batch(&mut self, out: &mut Emitter<'_>) {
        self.run_held(out);
    }

    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        self.run_held(out);
        self.part.end_of_second(epoch as i64, &mut self.buf);
        emit_all(&mut self.buf, out, self.partition, self.partitions);
    }

    fn finish(&mut self, out: &mut Emitter<'_>) {
        let s = self.part.stats();
        use std::sync::atomic::Ordering::Relaxed;
        self.ignored.reports.fetch_add(s.ignored_reports, Relaxed);
        self.ignored.types.fetch_add(s.ignored_types, Relaxed);
        self.ignored
            .state_bytes
            .fetch_add(s.heap_bytes as u64, Relaxed);
        for (sum, b) in self.ignored.state_parts.iter().zip(s.parts.each()) {
            sum.fetch_add(b as u64, Relaxed);
        }
        self.ignored
            .vehicles
            .fetch_add(s.vehicles_known as u64, Relaxed);
        self.run_held(out);
        self.part.finish(&mut self.buf);
        emit_all(&mut self.buf, out, self.partition, self.partitions);
    }

    /// Writes the 32-byte header (magic, version, partition, partitions, state length and
    /// checksum) and the partition's state. The
    /// adapter's own state is its place (partition, partitions), which `create` sets and
    /// restore checks; its output buffer is empty between calls and the ignored-record
    /// counters are the partition's until `finish`.
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        if !self.buf.is_empty() || !self.held.is_empty() {
            return Err(Error::Internal(format!(
                "{FUNCTION}: checkpoint with {} outputs not emitted and {} rows not processed",
                self.buf.len(),
                self.held.len()
            )));
        }
        let start = out.len();
        out.extend_from_slice(&CHECKPOINT_MAGIC.to_le_bytes());
        out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.partition as u32).to_le_bytes());
        out.extend_from_slice(&(self.partitions as u32).to_le_bytes());
        out.extend_from_slice(&[0; 16]); // length and checksum, once known
        let body = out.len();
        if let Err(e) = self.part.save_state(out) {
            out.truncate(start);
            return Err(Error::Internal(format!("{FUNCTION}: {e}")));
        }
        let len = (out.len() - body) as u64;
        let sum = checksum(&out[body..]);
        out[start + 16..start + 24].copy_from_slice(&len.to_le_bytes());
        out[start + 24..start + 32].copy_from_slice(&sum.to_le_bytes());
        Ok(())
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let (p, q, state) = self.checked(bytes)?;
        if (i64::from(p), i64::from(q)) != (self.partition, self.partitions) {
            return Err(self.checkpoint_error(format!("it was taken of partition {p} of {q}")));
        }
        self.part
            .restore_state(state)
            .map_err(|e| self.checkpoint_error(e))?;
        self.buf.clear();
        self.held.clear();
        Ok(())
    }

    /// Takes the expressways of an old partition's checkpoint that route here (`keep`),
    /// with their vehicles ([`Partition::absorb`]); the old partition's counts of
    /// ignored records go to partition `p mod q` of the new count `q`.
    fn restore_share(&mut self, bytes: &[u8], keep: &dyn Fn(i64) -> bool) -> Result<()> {
        let (p, _, state) = self.checked(bytes)?;
        let other = self
            .part
            .decode_state(state)
            .map_err(|e| self.checkpoint_error(e))?;
        let counts = i64::from(p).rem_euclid(self.partitions) == self.partition;
        self.part
            .absorb(other, keep, counts)
            .map_err(|e| self.checkpoint_error(format!("taking its share of partition {p}: {e}")))
    }
}

impl Adapter {
    /// The old partition, partition count and state of checkpoint `bytes`, its header
    /// and checksum checked.
    fn checked<'a>(&self, bytes: &'a [u8]) -> Result<(u32, u32, &'a [u8])> {
        let n = bytes.len();
        if n >= 4 && u32_at(bytes, 0) != CHECKPOINT_MAGIC {
            return Err(self.checkpoint_error(format!(
                "magic {:#010x} is not {:#010x} (`LRck`): not a {FUNCTION} checkpoint",
                u32_at(bytes, 0),
                CHECKPOINT_MAGIC
            )));
        }
        if n >= 8 && u32_at(bytes, 4) != CHECKPOINT_VERSION {
            return Err(self.checkpoint_error(format!(
                "format version {} (this build reads version {CHECKPOINT_VERSION})",
                u32_at(bytes, 4)
            )));
        }
        if n < CHECKPOINT_HEADER {
            return Err(self.checkpoint_error(format!(
                "truncated: {n} bytes, shorter than the {CHECKPOINT_HEADER}-byte header"
            )));
        }
        let (p, q) = (u32_at(bytes, 8), u32_at(bytes, 12));
        let (len, sum) = (u64_at(bytes, 16), u64_at(bytes, 24));
        let state = &bytes[CHECKPOINT_HEADER..];
        if state.len() as u64 != len {
            return Err(self.checkpoint_error(if (state.len() as u64) < len {
                format!(
                    "truncated: the state has {} of its {len} bytes",
                    state.len()
                )
            } else {
                format!(
                    "{} bytes after the {len}-byte state",
                    state.len() as u64 - len
                )
            }));
        }
        let computed = checksum(state);
        if computed != sum {
            return Err(self.checkpoint_error(format!(
                "checksum {computed:#018x} of the state is not the saved {sum:#018x}: corrupt"
            )));
        }
        Ok((p, q, state))
    }
}

/// Combines balance partials `(2, time, vid, qid, latest, sum_before, total)`
/// associatively: the accumulator's `sum_before` is the balance if its `latest` is the
/// answer's ResultTime (doc 6.5: the owner's sum before r plus the other partitions'
/// totals; several owners with equal latest times all count their sums before r).
pub struct BalanceCombiner;

fn int(d: Datum) -> i64 {
    match d {
        Datum::Int(i) => i,
        _ => -1,
    }
}

impl Combiner for BalanceCombiner {
    fn output_schema(&self, _: &Schema) -> Result<Schema> {
        Ok(output_schema())
    }

    fn combine(&self, acc: &mut [Datum], row: &[Datum]) {
        let (la, sa, ta) = (int(acc[4]), int(acc[5]), int(acc[6]));
        let (lb, sb, tb) = (int(row[4]), int(row[5]), int(row[6]));
        let (latest, sum) = match la.cmp(&lb) {
            std::cmp::Ordering::Greater => (la, sa + tb),
            std::cmp::Ordering::Less => (lb, sb + ta),
            std::cmp::Ordering::Equal => (la, sa + sb),
        };
        acc[4] = Datum::Int(latest);
        acc[5] = Datum::Int(sum);
        acc[6] = Datum::Int(ta + tb);
    }

    fn finish(&self, acc: &[Datum], out: &mut Vec<Datum>) {
        let (time, latest) = (int(acc[1]), int(acc[4]));
        let (result_time, bal) = if latest < 0 {
            (time, 0)
        } else {
            (latest, int(acc[5]))
        };
        out.extend_from_slice(&[
            Datum::Int(2),
            acc[1],
            acc[2],
            acc[3],
            Datum::Int(result_time),
            Datum::Int(bal),
            Datum::Int(int(acc[6])),
        ]);
    }
}

/// Per-type output counts and response times.
#[derive(Debug)]
pub struct ResponseStats {
    /// Outputs per type.
    pub counts: [u64; 5],
    /// Response time Emit - Time in milliseconds of driver time, per type.
    pub millis: Vec<Histogram<u64>>,
    /// Outputs later than their deadline (Emit - Time in simulation seconds), per type.
    pub late: [u64; 5],
    /// Response times of scored outputs (Time at or after the sink's `score_from`).
    pub scored_millis: Vec<Histogram<u64>>,
    /// Scored outputs later than their deadline.
    pub late_scored: [u64; 5],
}

impl Default for ResponseStats {
    fn default() -> ResponseStats {
        ResponseStats {
            counts: [0; 5],
            millis: (0..5)
                .map(|_| {
                    Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid histogram bounds")
                })
                .collect(),
            late: [0; 5],
            scored_millis: (0..5)
                .map(|_| {
                    Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid histogram bounds")
                })
                .collect(),
            late_scored: [0; 5],
        }
    }
}

/// Writes LRB output lines with Emit stamped on the driver's clock.
///
/// Paced runs: Emit = seconds since the start times the speed factor (the driver's
/// simulation clock). Runs as fast as possible: Emit = the input clock (the latest
/// second handed to the system), so Emit - Time is the lag behind the input.
pub struct OutputSink {
    out: Mutex<Option<BufWriter<std::fs::File>>>,
    speed: Option<f64>,
    /// Counts and response times.
    pub stats: Mutex<ResponseStats>,
    score_from: i64,
    keep: Option<Keep>,
    /// Outputs kept by the `keep` predicate (rating: the sampled copies).
    pub kept: Mutex<Vec<Output>>,
    /// Max response time (ms) per simulation second, per type.
    pub series: Mutex<[std::collections::BTreeMap<i64, u64>; 5]>,
}

/// Which outputs a sink keeps in memory.
pub type Keep = Box<dyn Fn(&Output) -> bool + Send + Sync>;

impl OutputSink {
    /// A sink writing to `path` (None: count only).
    pub fn create(
        path: Option<&std::path::Path>,
        speed: Option<f64>,
    ) -> std::io::Result<OutputSink> {
        let out = match path {
            Some(p) => Some(BufWriter::with_capacity(1 << 20, std::fs::File::create(p)?)),
            None => None,
        };
        Ok(OutputSink {
            out: Mutex::new(out),
            speed,
            stats: Mutex::new(ResponseStats::default()),
            score_from: 0,
            keep: None,
            kept: Mutex::new(Vec::new()),
            series: Mutex::new(Default::default()),
        })
    }

    /// A sink that writes no file, scores outputs with Time >= `score_from`, and keeps
    /// the outputs `keep` selects.
    pub fn for_rating(speed: Option<f64>, score_from: i64, keep: Keep) -> OutputSink {
        OutputSink {
            out: Mutex::new(None),
            speed,
            stats: Mutex::new(ResponseStats::default()),
            score_from,
            keep: Some(keep),
            kept: Mutex::new(Vec::new()),
            series: Mutex::new(Default::default()),
        }
    }
}

/// The LRB output of one row of [`output_schema`].
pub fn to_output(r: &[i64; 7], emit: i64) -> Option<Output> {
    let [typ, time, vid, qid, a, b, _] = *r;
    Some(match typ {
        0 => Output::Toll {
            vid,
            time,
            emit,
            lav: a,
            toll: b,
        },
        1 => Output::Accident {
            time,
            emit,
            vid,
            seg: a,
        },
        2 => Output::Balance {
            time,
            emit,
            result_time: a,
            qid,
            bal: b,
        },
        3 => Output::Daily {
            time,
            emit,
            qid,
            bal: a,
        },
        4 => Output::Travel {
            time,
            emit,
            qid,
            travel_time: a,
            toll: b,
        },
        _ => return None,
    })
}

impl SinkFn for OutputSink {
    fn write(&self, rows: &Batch, since_start: Duration, input_epoch: u64) -> std::io::Result<()> {
        let (emit, now_ms) = match self.speed {
            Some(s) => (
                (since_start.as_secs_f64() * s) as i64,
                since_start.as_secs_f64() * s * 1000.0,
            ),
            None => (input_epoch as i64, input_epoch as f64 * 1000.0 + 999.0),
        };
        fn poisoned<T>(_: T) -> std::io::Error {
            std::io::Error::other("sink lock poisoned")
        }
        let mut out = self.out.lock().map_err(poisoned)?;
        let mut stats = self.stats.lock().map_err(poisoned)?;
        let mut kept = self.kept.lock().map_err(poisoned)?;
        let mut series = self.series.lock().map_err(poisoned)?;
        for row in rows.rows() {
            let mut r = [0i64; 7];
            for (c, x) in r.iter_mut().enumerate() {
                *x = row.int(c).unwrap_or(-1);
            }
            let Some(o) = to_output(&r, emit) else {
                continue;
            };
            let t = o.typ();
            stats.counts[t] += 1;
            let ms = (now_ms - o.time() as f64 * 1000.0).max(1.0) as u64;
            let _ = stats.millis[t].record(ms.min(3_600_000));
            let late = emit - o.time() > o.deadline();
            if late {
                stats.late[t] += 1;
            }
            if o.time() >= self.score_from {
                let _ = stats.scored_millis[t].record(ms.min(3_600_000));
                stats.late_scored[t] += late as u64;
            }
            let worst = series[t].entry(o.time()).or_insert(0);
            *worst = (*worst).max(ms);
            if let Some(keep) = &self.keep {
                if keep(&o) {
                    kept.push(o);
                }
            }
            if let Some(w) = out.as_mut() {
                writeln!(w, "{o}")?;
            }
        }
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        match self.out.lock() {
            Ok(mut o) => o.as_mut().map_or(Ok(()), |w| w.flush()),
            Err(_) => Err(std::io::Error::other("output lock poisoned")),
        }
    }
}

/// How to run Linear Road.
#[derive(Clone, Debug)]
pub struct LrOptions {
    /// Logical partitions (expressway x goes to x mod q).
    pub q: u32,
    /// Split strategy.
    pub strategy: Strategy,
    /// Fan-in of the balance merge tree (None: per worker, then global).
    pub fanin: Option<u32>,
    /// Replay speed (None: as fast as possible).
    pub speed: Option<f64>,
    /// Rows per physical window.
    pub window: usize,
    /// A latency constraint on the answers (`braid lrb run --max-latency`; see
    /// `braid_exec::qos`): tolls and alerts then leave as their rows' ticks complete
    /// instead of at the end of each second.
    pub max_latency: Option<std::time::Duration>,
}

impl Default for LrOptions {
    fn default() -> LrOptions {
        LrOptions {
            q: 64,
            strategy: Strategy::Autosplit,
            fanin: None,
            speed: Some(1.0),
            window: 1024,
            max_latency: None,
        }
    }
}

/// The Linear Road plan over `input`.
pub fn plan(input: SourceSpec, opts: &LrOptions) -> Plan {
    let schema = input_schema();
    let col = |n: &str| Expr::col(&schema, n).expect("LR column exists");
    let route = Route::Expr {
        expr: col("xway"),
        when: Some(col("type").bin(BinOp::NotEq, Expr::int(2))),
    };
    let broadcast = Some(col("type").eq(Expr::int(2)));
    let out = output_schema();
    let is_balance = Expr::col(&out, "type")
        .expect("type column")
        .eq(Expr::int(2));
    let mut p = Plan::source("lrb", input, schema);
    if let Plan::Source(s) = &mut p {
        s.epoch = 1;
        s.window = opts.window;
        if let Some(speed) = opts.speed {
            s.pace = Pace::EventTime {
                units_per_second: 1.0,
                speed,
            };
        }
    }
    let mut p = p.split(opts.q, route, broadcast, opts.strategy);
    if let Plan::Split(s) = &mut p {
        s.hints.broadcast_fraction = 0.005;
    }
    let p = p
        .map(FUNCTION)
        .merge(MergeKind::Keyed {
            key: vec![0, 1, 2, 3],
            combine: Combine::Native(COMBINER.into()),
            fanin: opts.fanin,
            filter: Some(is_balance),
        })
        .sink(SinkSpec::Native(SINK.into()));
    match opts.max_latency {
        Some(d) => p.max_latency(d),
        None => p,
    }
}

/// The parallel plan of `examples/linear_road.sql` as a script that reads `input` (a
/// CSV file of `braid lrb generate`) and writes its answers to the CSV file `out`
/// instead of the `lr_output` sink; an error when the example no longer reads and
/// writes where this rewrites it.
pub fn example_script(input: &std::path::Path, out: &std::path::Path) -> Result<String> {
    let example = include_str!("../../../examples/linear_road.sql");
    let text = example
        .split("-- EXPECTED")
        .next()
        .unwrap_or_default()
        .replace("'lrb/input.csv'", &format!("'{}'", input.display()))
        .replace(
            &format!("(sink = 'native', name = '{SINK}')"),
            &format!("(sink = 'csv', path = '{}')", out.display()),
        );
    if !text.contains(&input.display().to_string()) || !text.contains(&out.display().to_string()) {
        return Err(Error::Plan(
            "examples/linear_road.sql: its input or its sink changed".into(),
        ));
    }
    Ok(text)
}

/// Registers the stream function, combiner and sink; returns the counters of ignored
/// records (read them after the run).
pub fn register(
    registry: &mut Registry,
    tolls: Arc<TollHistory>,
    segments: Arc<SegmentHistory>,
    sink: Arc<OutputSink>,
) -> Arc<Ignored> {
    let ignored = Arc::new(Ignored::default());
    registry.add_function(
        FUNCTION,
        Arc::new(LinearRoad {
            tolls,
            segments,
            ignored: ignored.clone(),
        }),
    );
    registry.add_combiner(COMBINER, Arc::new(BalanceCombiner));
    registry.add_sink(SINK, sink);
    ignored
}

/// What a Linear Road run did.
pub struct LrRun {
    /// The engine's report.
    pub report: braid_exec::runtime::RunReport,
    /// Output counts and response times.
    pub stats: ResponseStats,
    /// Seconds spent loading the histories.
    pub load_seconds: f64,
    /// Toll-history rows loaded, and bad lines.
    pub history_rows: (u64, u64),
    /// Records the stream function ignored (out-of-range reports, unknown types).
    pub ignored: Arc<Ignored>,
}

/// Runs Linear Road on files: loads the histories, runs the plan, writes `output`.
pub fn run_files(
    input: &std::path::Path,
    history: &std::path::Path,
    segment_history: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    opts: &LrOptions,
    cfg: &braid_exec::runtime::RunConfig,
) -> braid_exec::error::Result<LrRun> {
    use braid_exec::error::Error;
    let t = std::time::Instant::now();
    let (tolls, report) = TollHistory::load(history)
        .map_err(|e| Error::io(format!("loading toll history {}", history.display()), e))?;
    let segments = match segment_history {
        Some(p) => {
            SegmentHistory::load(p)
                .map_err(|e| Error::io(format!("loading segment history {}", p.display()), e))?
                .0
        }
        None => SegmentHistory::empty(),
    };
    let load_seconds = t.elapsed().as_secs_f64();
    let sink = Arc::new(OutputSink::create(output, opts.speed).map_err(|e| {
        Error::io(
            format!(
                "creating output {}",
                output.map_or("-".into(), |p| p.display().to_string())
            ),
            e,
        )
    })?);
    let mut registry = Registry::with_builtins();
    let ignored = register(
        &mut registry,
        Arc::new(tolls),
        Arc::new(segments),
        sink.clone(),
    );
    // A `.bin` input is a Braid binary batch file (`braid lrb generate --binary`).
    let spec = if input.extension().is_some_and(|e| e == "bin") {
        SourceSpec::Binary {
            path: input.to_path_buf(),
        }
    } else {
        SourceSpec::Csv {
            path: input.to_path_buf(),
            header: false,
        }
    };
    let plan = plan(spec, opts);
    let run_report = braid_exec::runtime::run(&plan, &registry, cfg)?;
    sink.flush()
        .map_err(|e| Error::io("flushing the output", e))?;
    let stats = std::mem::take(
        &mut *sink
            .stats
            .lock()
            .map_err(|_| Error::Internal("stats lock poisoned".into()))?,
    );
    Ok(LrRun {
        report: run_report,
        stats,
        load_seconds,
        history_rows: (report.rows, report.bad_lines),
        ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expressway::merge_balance;

    fn datums(p: &BalancePartial) -> Vec<Datum> {
        [2, p.time, p.vid, p.qid, p.latest, p.sum_before, p.total]
            .iter()
            .map(|&i| Datum::Int(i))
            .collect()
    }

    #[test]
    fn balance_combiner_agrees_with_merge_balance_in_any_order() {
        let parts = [
            BalancePartial {
                time: 100,
                qid: 7,
                vid: 3,
                latest: 90,
                sum_before: 10,
                total: 14,
            },
            BalancePartial {
                time: 100,
                qid: 7,
                vid: 3,
                latest: -1,
                sum_before: 0,
                total: 0,
            },
            BalancePartial {
                time: 100,
                qid: 7,
                vid: 3,
                latest: 40,
                sum_before: 5,
                total: 9,
            },
            BalancePartial {
                time: 100,
                qid: 7,
                vid: 3,
                latest: 60,
                sum_before: 2,
                total: 8,
            },
        ];
        let expected = merge_balance(&parts);
        let c = BalanceCombiner;
        for rot in 0..parts.len() {
            let order: Vec<&BalancePartial> =
                parts.iter().cycle().skip(rot).take(parts.len()).collect();
            let mut acc = datums(order[0]);
            for p in &order[1..] {
                c.combine(&mut acc, &datums(p));
            }
            let mut out = Vec::new();
            c.finish(&acc, &mut out);
            let r: [i64; 7] = std::array::from_fn(|i| int(out[i]));
            assert_eq!(to_output(&r, -1), Some(expected), "rotation {rot}");
        }
        let none = [BalancePartial {
            time: 5,
            qid: 1,
            vid: 2,
            latest: -1,
            sum_before: 0,
            total: 0,
        }; 3];
        let mut acc = datums(&none[0]);
        c.combine(&mut acc, &datums(&none[1]));
        let mut out = Vec::new();
        c.finish(&acc, &mut out);
        let r: [i64; 7] = std::array::from_fn(|i| int(out[i]));
        assert_eq!(to_output(&r, -1), Some(merge_balance(&none)));
    }
}
