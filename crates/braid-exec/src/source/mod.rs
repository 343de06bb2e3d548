//! Sources: what reads a stream and cuts it into physical windows.
//!
//! A [`Feed`] hands the worker loop whole windows: a [`Batch`] of at most `window`
//! rows that all belong to one epoch, with sequence numbers that give the serial order.
//! File, stdin and TCP sources parse CSV on a thread of their own (so parsing overlaps
//! with the dataflow) and pass finished windows through a bounded channel; the
//! generator and memory sources make windows on the worker itself.
//!
//! Malformed records never stop a run: each is counted in [`Rejects`] with its line,
//! column and reason (and written to a reject file when asked); strict mode turns the
//! first one into an [`Error::Input`].

pub mod binary;
#[cfg(feature = "parquet")]
pub(crate) mod columnar;
mod csv_feed;
pub mod generator;
mod interleave;
#[cfg(feature = "kafka")]
mod kafka;
pub mod par_csv;
mod record;

use crate::error::{Error, Result};
use braid_plan::batch::Batch;
use braid_plan::plan::{Source, SourceSpec};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use csv_feed::parse_field;

/// The epoch of row `seq` of `source` with event time `time`, before clamping (a feed
/// keeps its epochs from going back: see [`epoch_at`]).
pub(crate) fn epoch_of(source: &Source, time: Option<i64>, seq: u64) -> u64 {
    epoch_at(source.epoch, time, seq)
}

/// The epoch of a row with event time `time` (or, without one, sequence number `seq`)
/// for epochs of `epoch_len` (at least 1); a negative time is epoch 0. Feeds clamp it
/// to the epoch of the row before, so epochs never go back.
pub fn epoch_at(epoch_len: u64, time: Option<i64>, seq: u64) -> u64 {
    match time {
        Some(t) => t.max(0) as u64 / epoch_len.max(1),
        None => seq / epoch_len.max(1),
    }
}

/// About how many rows `source` has per epoch, from its first rows (event times in
/// column `time`): the rows of the first 256 KiB of a CSV file, or all of the rows in
/// memory, over the epochs they span. None where it cannot tell without reading
/// (other kinds of source, no event times).
pub(crate) fn rows_per_epoch(source: &Source, time: usize) -> Option<f64> {
    let mut times: Vec<i64> = Vec::new();
    match &source.spec {
        SourceSpec::Memory(batch) => {
            times.extend((0..batch.len()).filter_map(|i| batch.row(i).int(time)));
        }
        SourceSpec::Csv { path, header } => {
            use std::io::Read;
            let mut head = Vec::new();
            std::fs::File::open(path)
                .ok()?
                .take(256 << 10)
                .read_to_end(&mut head)
                .ok()?;
            // Whole lines only.
            let end = head.iter().rposition(|&b| b == b'\n')? + 1;
            let mut r = csv::ReaderBuilder::new()
                .has_headers(*header)
                .flexible(true)
                .from_reader(&head[..end]);
            // Each time as the source reads it (a TIMESTAMP's text too).
            let ty = source.schema.fields[time].ty;
            let mut record = csv::ByteRecord::new();
            while let Ok(true) = r.read_byte_record(&mut record) {
                let t = record.get(time).map(|f| parse_field(f, ty, false, false));
                if let Some(Ok(braid_plan::batch::Value::Int(t))) = t {
                    times.push(t);
                }
            }
        }
        _ => return None,
    }
    let epoch = |t: i64| epoch_at(source.epoch, Some(t), 0);
    let first = times.iter().map(|&t| epoch(t)).min()?;
    let last = times.iter().map(|&t| epoch(t)).max()?;
    Some(times.len() as f64 / (last - first + 1) as f64)
}

/// [`epoch_at`] for rows one after another: the epoch's bounds are kept, so a row in
/// the same epoch as the one before costs two comparisons, not a division (a tenth of
/// a CSV reader's time on lines of three short ints).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EpochCache {
    /// `epoch_at` is `e` for every time (or sequence number) in `lo..hi`.
    lo: u64,
    hi: u64,
    e: u64,
}

impl Default for EpochCache {
    fn default() -> EpochCache {
        EpochCache { lo: 1, hi: 0, e: 0 }
    }
}

impl EpochCache {
    /// `epoch_at(epoch_len, time, seq)`.
    #[inline]
    pub(crate) fn of(&mut self, epoch_len: u64, time: Option<i64>, seq: u64) -> u64 {
        let k = match time {
            Some(t) => t.max(0) as u64,
            None => seq,
        };
        if self.lo <= k && k < self.hi {
            return self.e;
        }
        let len = epoch_len.max(1);
        let e = k / len;
        self.lo = e * len;
        self.hi = self.lo.saturating_add(len);
        self.e = e;
        e
    }
}

/// What a feed has next.
pub enum Next {
    /// A window of rows of one epoch.
    Window(u64, Batch),
    /// Nothing yet (a thread is still reading).
    Wait,
    /// The input has ended.
    Done,
}

/// A source of physical windows for one worker.
pub trait Feed {
    /// The next window, if any.
    fn next(&mut self) -> Result<Next>;
    /// Where to start reading again to get the window [`Feed::next`] returned last and
    /// everything after it, as the feed would have (a checkpoint keeps it); None when
    /// the feed cannot start anywhere but at its beginning.
    fn resume_point(&self) -> Option<Vec<u8>> {
        None
    }
    /// Where to start reading again to get every row after epoch `closing` (and maybe
    /// some of `closing` and before, which a resumed run drops), as the feed would have;
    /// asked when this feed's input goes past `closing`. By default the
    /// [`Feed::resume_point`].
    fn resume_after(&self, _closing: u64) -> Option<Vec<u8>> {
        self.resume_point()
    }
    /// Closes the current epoch now without data (see
    /// [`braid_plan::function::NativeSource::close_epoch`]); the new epoch, if it can.
    fn close_epoch(&mut self) -> Result<Option<Next>> {
        Ok(None)
    }
    /// A checkpoint holding `resume` (a resume point this feed gave) has committed
    /// (see [`braid_plan::function::NativeSource::committed`]).
    fn committed(&mut self, _resume: &[u8]) {}
    /// Malformed-record report, once the feed is done.
    fn rejects(&mut self) -> Rejects;
    /// Epochs this feed may run ahead of the output beyond the runtime's horizon
    /// (`max_epochs_ahead`). A feed read in shares hands its worker whole chunks while
    /// the other workers read the chunks before: held to the common horizon, a worker
    /// whose chunk starts past it waits for the others to finish theirs, and the
    /// workers take turns instead of working at once. (Not used in a run that can
    /// rescale live: worker 0 takes a request as it closes an epoch, and the common
    /// horizon bounds how long that waits.)
    fn ahead(&self) -> u64 {
        0
    }
}

/// One malformed record.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reject {
    /// 1-based line (or record number for non-line sources).
    pub line: u64,
    /// 1-based column of the fault (0 when the whole record is at fault).
    pub column: u64,
    /// What was found and what was expected.
    pub reason: String,
}

/// Malformed records of one source: how many, and the first few.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rejects {
    /// The source's name.
    pub source: String,
    /// Number of malformed records.
    pub count: u64,
    /// The first [`Rejects::KEEP`] of them.
    pub first: Vec<Reject>,
    /// Where the source's rows are in its text, for a line-delimited source: `(row's
    /// sequence number, its line)` for the first row and every row after a line that
    /// was no row (the header, a blank or malformed line); see [`Rejects::line_of`].
    /// Line 0 says the rows from there on are not this report's to place.
    pub lines: Vec<(u64, u64)>,
    /// `lines` covers one reader's share of the source's rows (a file read by several
    /// workers): the reports of all shares together place every row.
    pub lines_partial: bool,
}

impl Rejects {
    /// How many rejects are kept for the report.
    pub const KEEP: usize = 20;

    /// The line of the source's row with sequence number `seq`, when the source says
    /// where its rows are.
    pub fn line_of(&self, seq: u64) -> Option<u64> {
        let i = self.lines.partition_point(|&(s, _)| s <= seq);
        let (s, line) = *self.lines.get(i.checked_sub(1)?)?;
        (line > 0).then(|| line + (seq - s))
    }

    /// Adds another report's counts and first rejects.
    pub fn absorb(&mut self, other: Rejects) {
        if self.lines_partial && other.lines_partial {
            // Shares of one file: together they place every row. A share's end (line
            // 0) sorts before the next share's start at the same row.
            self.lines.extend(other.lines);
            self.lines.sort_unstable();
            self.lines.dedup();
        } else {
            // Two readers of one source name: where a row is is no longer known.
            match (self.lines.is_empty(), other.lines.is_empty()) {
                (true, _) => self.lines = other.lines,
                (false, false) => self.lines.clear(),
                (false, true) => {}
            }
            self.lines_partial = false;
        }
        self.count += other.count;
        for r in other.first {
            if self.first.len() < Rejects::KEEP {
                self.first.push(r);
            }
        }
    }
}

impl std::fmt::Display for Rejects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}: {} malformed record(s)", self.source, self.count)?;
        for r in &self.first {
            if r.column > 0 {
                writeln!(f, "  line {}, column {}: {}", r.line, r.column, r.reason)?;
            } else {
                writeln!(f, "  line {}: {}", r.line, r.reason)?;
            }
        }
        if self.count > self.first.len() as u64 {
            writeln!(f, "  ... and {} more", self.count - self.first.len() as u64)?;
        }
        Ok(())
    }
}

/// Options for reading input.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Stop at the first malformed record or runtime fault (`--on-error fail`);
    /// otherwise both are counted, reported and skipped.
    pub strict: bool,
    /// Append malformed records here (`line<TAB>column<TAB>reason<TAB>text`).
    pub reject_file: Option<PathBuf>,
    /// TCP: number of client connections to serve before the input ends.
    pub tcp_clients: usize,
    /// A CSV file read by several workers: the bytes each chunk has (0:
    /// [`par_csv::CHUNK_BYTES`]).
    pub chunk_bytes: usize,
    /// A CSV file read by several workers: each worker's share parsed on a reader
    /// thread of its own (true) or in the worker's thread (false). None: a reader
    /// thread each when the process has more cores than workers (see
    /// [`ReadOptions::reader_threads_for`]).
    pub reader_threads: Option<bool>,
}

impl ReadOptions {
    /// Whether a worker's share gets a reader thread in a process of `workers` workers.
    pub fn reader_threads_for(&self, workers: usize) -> bool {
        self.reader_threads.unwrap_or_else(|| {
            workers < std::thread::available_parallelism().map_or(1, |n| n.get())
        })
    }
}

/// Live counters, readable while the run goes on.
#[derive(Debug, Default)]
pub struct Counters {
    /// Rows read.
    pub rows_in: AtomicU64,
    /// Malformed records.
    pub malformed: AtomicU64,
    /// Rows skipped on runtime faults.
    pub faults: AtomicU64,
    /// Rows written by sinks.
    pub rows_out: AtomicU64,
    /// Largest epoch handed to the dataflow.
    pub epoch_in: AtomicU64,
    /// Epochs every sink has completed (the output frontier).
    pub epoch_out: AtomicU64,
    /// When the source is paced by event time: when the run started and the seconds
    /// of the schedule an epoch takes (see [`Counters::behind`]).
    pub pacing: std::sync::OnceLock<(std::time::Instant, f64)>,
    /// The most rows a worker had in epochs (ticks) the output had not completed.
    pub queued_peak: AtomicU64,
    /// The most rows one `Map` held waiting for its stream functions (come in, not run
    /// yet): what a scheduling policy keeps low or not.
    pub waiting_peak: AtomicU64,
    /// Rows dropped by load shedding (`shed_load`).
    pub shed: AtomicU64,
    /// Epochs (per `Map` and worker) whose rows came out of serial order, so that `Map`
    /// sorted each partition's rows before running them: the same output, at a cost
    /// (a split whose windows interleave as they should not, such as rows held back
    /// across windows from several roots).
    pub sorted_epochs: AtomicU64,
    /// Records of Kafka sources not read yet: each partition's end (as its broker last
    /// said) less where reading stands, summed over partitions.
    pub kafka_lag: AtomicU64,
    /// The run's latency measurements, when it takes stamps ([`crate::qos`]).
    pub latency: std::sync::OnceLock<std::sync::Arc<crate::qos::Latencies>>,
    /// The late-row counts of the queries running (SQL; see [`Counters::late`]).
    pub late_rows: std::sync::Mutex<Vec<Arc<braid_sql::run::LateRows>>>,
}

impl Counters {
    /// Adds to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// For a source paced by event time: how far the output is behind the source's
    /// schedule. The output has completed the epochs before `epoch_out`; on schedule,
    /// the clock is within the epoch after them (its end is not due yet).
    pub fn behind(&self) -> Option<std::time::Duration> {
        let (started, epoch_secs) = *self.pacing.get()?;
        let done = (self.epoch_out.load(Ordering::Relaxed) + 1) as f64 * epoch_secs;
        Some(
            started
                .elapsed()
                .saturating_sub(std::time::Duration::from_secs_f64(done)),
        )
    }

    /// Rows the running queries have refused as late so far.
    pub fn late(&self) -> u64 {
        let late = self.late_rows.lock().unwrap_or_else(|e| e.into_inner());
        late.iter().map(|l| l.count.load(Ordering::Relaxed)).sum()
    }
}

/// Which worker reads a source: all of them for the generator, a native source and
/// Kafka (each its share of the partitions), worker 0 otherwise (but see
/// [`reads_in_shares`] and [`braid_plan::placement::files_per_worker`]).
pub fn reads_on_all_workers(spec: &SourceSpec) -> bool {
    matches!(
        spec,
        SourceSpec::Generator(_) | SourceSpec::Native(_) | SourceSpec::Kafka(_)
    )
}

/// The worker whose resume point worker `index` of `peers` resumes a source from: its
/// own, or the one point worker 0 writes for all (a generator: the epoch it resumes
/// after; a CSV file read in shares).
pub fn resumes_from(spec: &SourceSpec, index: usize, peers: usize) -> usize {
    match reads_in_shares(spec, peers) || matches!(spec, SourceSpec::Generator(_)) {
        true => 0,
        false => index,
    }
}

/// Whether `peers` workers read a source in shares of the same rows with one resume
/// point ([`par_csv`]: a CSV file, when a run hands its feeds a board).
pub fn reads_in_shares(spec: &SourceSpec, peers: usize) -> bool {
    matches!(spec, SourceSpec::Csv { .. }) && peers > 1
}

/// Whether the source's feed adds its rows to [`Counters::rows_in`] itself (CSV parsers
/// count as they parse; an interleave counts for its children that do not); the
/// runtime counts the rows of the others as it sends them.
pub fn counts_rows_itself(spec: &SourceSpec) -> bool {
    matches!(
        spec,
        SourceSpec::Csv { .. }
            | SourceSpec::JsonLines { .. }
            | SourceSpec::Columnar { .. }
            | SourceSpec::Stdin
            | SourceSpec::Tcp { .. }
            | SourceSpec::Interleave(_)
            | SourceSpec::Kafka(_)
    )
}

/// Opens the feed of `source` for global worker `index` of `peers`. Workers that do not
/// read this source get `None`.
pub fn open(
    source: &Source,
    index: usize,
    peers: usize,
    opts: &ReadOptions,
    counters: Arc<Counters>,
    registry: &braid_plan::function::Registry,
) -> Result<Option<Box<dyn Feed>>> {
    open_at(source, index, peers, opts, counters, registry, None, None)
}

/// [`open`], starting at a [`Feed::resume_point`] of a feed of the same source when
/// given one: a CSV file seeks to it, an interleave hands each CSV child its own. Only
/// feeds that gave a resume point are given one back. With a `board`, a CSV file is read
/// by every worker in shares ([`par_csv`]; [`reads_in_shares`]).
#[allow(clippy::too_many_arguments)]
pub fn open_at(
    source: &Source,
    index: usize,
    peers: usize,
    opts: &ReadOptions,
    counters: Arc<Counters>,
    registry: &braid_plan::function::Registry,
    resume: Option<&[u8]>,
    board: Option<&Arc<par_csv::Board>>,
) -> Result<Option<Box<dyn Feed>>> {
    let shares = board.filter(|_| reads_in_shares(&source.spec, peers));
    let by_file = braid_plan::placement::files_per_worker(source);
    if !reads_on_all_workers(&source.spec) && index != 0 && shares.is_none() && !by_file {
        return Ok(None);
    }
    let feed: Box<dyn Feed> = match &source.spec {
        // Made inside the dataflow: there is nothing to read.
        SourceSpec::Late { .. } => return Ok(None),
        SourceSpec::Native(name) => match match resume {
            Some(at) => registry
                .source(name)?
                .open_at(index, peers, at)
                .map_err(|e| Error::io(format!("resuming source {}", source.name), e))?,
            None => registry.source(name)?.open(index, peers),
        } {
            Some(reader) => Box::new(NativeFeed {
                reader,
                name: source.name.clone(),
                arity: source.schema.arity(),
            }),
            None => return Ok(None),
        },
        SourceSpec::Generator(g) => match resume {
            Some(bytes) => {
                let at: generator::After = serde_json::from_slice(bytes).map_err(|e| {
                    Error::Internal(format!(
                        "the checkpoint's position of generator {}: {e}",
                        source.name
                    ))
                })?;
                Box::new(generator::GeneratorFeed::resumed(
                    *g, source, index, peers, at.after, &counters,
                ))
            }
            None => Box::new(generator::GeneratorFeed::new(*g, source, index, peers)),
        },
        SourceSpec::Memory(rows) => Box::new(MemoryFeed {
            rows: rows.clone(),
            next: 0,
            epoch: 0,
            source: source.clone(),
        }),
        // A JSON lines file goes through the CSV reader's line parser, serially (it is
        // not read in shares: see `reads_in_shares`).
        SourceSpec::Csv { path, .. } | SourceSpec::JsonLines { path, .. } => {
            let header = matches!(source.spec, SourceSpec::Csv { header: true, .. });
            let mut file = std::fs::File::open(path).map_err(|e| {
                Error::io(
                    format!("opening {} for source {}", path.display(), source.name),
                    e,
                )
            })?;
            let at = match resume {
                Some(bytes) => Some(csv_feed::Resume::read(bytes, &file, path)?),
                None => None,
            };
            if let Some(board) = shares {
                return Ok(Some(Box::new(par_csv::open(
                    source,
                    file,
                    path,
                    header,
                    (index, peers),
                    opts,
                    counters,
                    board.clone(),
                    at,
                )?)));
            }
            if let Some(r) = &at {
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(r.offset))
                    .map_err(|e| Error::io(format!("seeking in {}", path.display()), e))?;
            }
            Box::new(csv_feed::CsvFeed::spawn_at(
                source,
                Box::new(file),
                header,
                opts,
                counters,
                at,
            )?)
        }
        #[cfg(not(feature = "parquet"))]
        SourceSpec::Columnar { .. } => {
            return Err(crate::error::not_built(
                "Parquet and Arrow files",
                "parquet",
            ))
        }
        #[cfg(feature = "parquet")]
        SourceSpec::Columnar { path, format } => Box::new(columnar::ColumnarFeed::open(
            source,
            path,
            *format == braid_plan::connector::FileFormat::Parquet,
            opts,
            counters,
            resume,
        )?),
        SourceSpec::Stdin => Box::new(csv_feed::CsvFeed::spawn(
            source,
            Box::new(std::io::stdin()),
            false,
            opts,
            counters,
        )?),
        SourceSpec::Tcp { addr } => {
            Box::new(csv_feed::CsvFeed::spawn_tcp(source, addr, opts, counters)?)
        }
        SourceSpec::Binary { path } => match resume {
            Some(at) => Box::new(binary::BinaryFeed::open_at(path, source, at, &counters)?),
            None => Box::new(binary::BinaryFeed::open(path, source)?),
        },
        #[cfg(not(feature = "kafka"))]
        SourceSpec::Kafka(_) => return Err(crate::error::not_built("Kafka topics", "kafka")),
        #[cfg(feature = "kafka")]
        SourceSpec::Kafka(k) => {
            match kafka::KafkaFeed::open(source, k, (index, peers), opts, counters, resume)? {
                Some(feed) => Box::new(feed),
                None => return Ok(None),
            }
        }
        SourceSpec::Interleave(children) => Box::new(interleave::InterleaveFeed::open(
            source,
            children,
            (index, peers),
            opts,
            counters,
            registry,
            resume,
        )?),
    };
    Ok(Some(feed))
}

/// A source written in Rust.
struct NativeFeed {
    reader: Box<dyn braid_plan::function::NativeSource>,
    name: String,
    arity: usize,
}

impl Feed for NativeFeed {
    fn next(&mut self) -> Result<Next> {
        use braid_plan::function::SourceNext;
        let mut out = Batch::new(self.arity);
        match self
            .reader
            .next(&mut out)
            .map_err(|e| Error::io(format!("reading source {}", self.name), e))?
        {
            SourceNext::Window(epoch) => Ok(Next::Window(epoch, out)),
            SourceNext::Wait => Ok(Next::Wait),
            SourceNext::Done => Ok(Next::Done),
        }
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        self.reader.resume_point()
    }

    fn committed(&mut self, resume: &[u8]) {
        self.reader.committed(resume)
    }

    fn close_epoch(&mut self) -> Result<Option<Next>> {
        let epoch = self
            .reader
            .close_epoch()
            .map_err(|e| Error::io(format!("reading source {}", self.name), e))?;
        Ok(epoch.map(|e| Next::Window(e, Batch::new(self.arity))))
    }

    fn rejects(&mut self) -> Rejects {
        Rejects {
            source: self.name.clone(),
            ..Rejects::default()
        }
    }
}

/// Cuts rows (already in a batch, in order) into windows of one epoch and at most
/// `window` rows. Used by in-memory sources. Epochs are clamped to never go back.
struct MemoryFeed {
    rows: Arc<Batch>,
    next: usize,
    /// Epoch of the last window.
    epoch: u64,
    source: Source,
}

impl Feed for MemoryFeed {
    fn next(&mut self) -> Result<Next> {
        let n = self.rows.len();
        if self.next >= n {
            return Ok(Next::Done);
        }
        let tcol = self.source.schema.event_time;
        let epoch_at = |i: usize| {
            epoch_of(
                &self.source,
                tcol.and_then(|c| self.rows.row(i).int(c)),
                i as u64,
            )
        };
        let epoch = epoch_at(self.next).max(self.epoch);
        let mut out =
            Batch::with_capacity(self.rows.arity(), self.source.window.min(n - self.next));
        while self.next < n && out.len() < self.source.window && epoch_at(self.next) <= epoch {
            let seq = self.next as u64;
            out.push_row_of(
                &self.rows,
                self.next,
                braid_plan::batch::RowKey { seq, lane: 0 },
            );
            self.next += 1;
        }
        self.epoch = epoch;
        Ok(Next::Window(epoch, out))
    }

    fn rejects(&mut self) -> Rejects {
        Rejects {
            source: self.source.name.clone(),
            ..Rejects::default()
        }
    }
}

/// Records malformed records: counts, keeps the first few, writes the reject file.
pub(crate) struct RejectLog {
    pub rejects: Rejects,
    file: Option<std::io::BufWriter<std::fs::File>>,
    counters: Arc<Counters>,
}

/// The reject file of `opts`, opened to append, if it names one.
pub(crate) fn open_reject_file(opts: &ReadOptions) -> Result<Option<std::fs::File>> {
    let Some(p) = &opts.reject_file else {
        return Ok(None);
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map(Some)
        .map_err(|e| Error::io(format!("opening reject file {}", p.display()), e))
}

/// Appends a malformed record's line of the reject file
/// (`line<TAB>column<TAB>reason<TAB>text`, the text cut at 4 KB) to `out`.
pub(crate) fn reject_line(out: &mut Vec<u8>, line: u64, column: u64, reason: &str, text: &[u8]) {
    let shown = String::from_utf8_lossy(&text[..text.len().min(4096)]);
    let _ = writeln!(out, "{line}\t{column}\t{reason}\t{shown}");
}

impl RejectLog {
    pub fn new(source: &str, opts: &ReadOptions, counters: Arc<Counters>) -> Result<RejectLog> {
        let file = open_reject_file(opts)?.map(std::io::BufWriter::new);
        Ok(RejectLog {
            rejects: Rejects {
                source: source.to_string(),
                ..Rejects::default()
            },
            file,
            counters,
        })
    }

    pub fn add(&mut self, line: u64, column: u64, reason: String, text: &[u8]) {
        self.rejects.count += 1;
        Counters::add(&self.counters.malformed, 1);
        if let Some(f) = &mut self.file {
            let mut shown = Vec::new();
            reject_line(&mut shown, line, column, &reason, text);
            // A failing reject file must not stop the run; the count is still kept.
            let _ = f.write_all(&shown);
        }
        if self.rejects.first.len() < Rejects::KEEP {
            self.rejects.first.push(Reject {
                line,
                column,
                reason,
            });
        }
    }

    pub fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The cached epoch is `epoch_at`'s for any rows in any order: times near the
        /// epochs' bounds, negative times, the ends of i64, and rows without a time.
        #[test]
        fn the_epoch_cache_is_epoch_at(
            len in prop_oneof![Just(0u64), Just(1), Just(7), Just(1000), Just(u64::MAX)],
            rows in proptest::collection::vec(
                (prop_oneof![
                    (-3i64..3000).prop_map(Some),
                    Just(Some(i64::MAX)),
                    Just(Some(i64::MIN)),
                    Just(None),
                ], 0u64..3000),
                1..200,
            ),
        ) {
            let mut c = EpochCache::default();
            for (time, seq) in rows {
                prop_assert_eq!(c.of(len, time, seq), epoch_at(len, time, seq));
            }
        }
    }
}
