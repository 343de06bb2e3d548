//! A CSV file read by every worker of every process, each parsing its share, with the
//! rows, sequence numbers, epochs, line numbers and malformed-record report of serial
//! reading.
//!
//! The file is cut into chunks of [`ReadOptions::chunk_bytes`]; chunk `k` goes to
//! worker `k % peers`, and a line belongs to the chunk its first byte is in. Each worker
//! parses its chunk from a provisional start (no line, row or event time before it), so
//! all of them parse at once: on a reader thread of its own when the process has cores
//! to spare for one (the worker queries one chunk while its reader parses the next), in
//! the worker's own thread otherwise ([`ReadOptions::reader_threads`]: a reader
//! thread per worker on as many cores as workers made each core switch between two
//! threads, and every window was made on one thread and freed on another). What serial reading carries
//! from line to line (a [`Carry`]: lines and rows before, the epoch of the row before,
//! the latest event time, the malformed records so far) then goes from chunk to chunk in
//! file order through a [`Board`] shared by the workers of a process (between processes,
//! a small dataflow broadcasts each carry: see `runtime`). With the carry into its
//! chunk, a worker shifts its rows' sequence numbers and lines, clamps their epochs,
//! writes its malformed records, publishes the carry out of its chunk, and only then
//! hands on its windows: the carry never waits for a full channel.
//!
//! The provisional start gives serial reading's result unless an event time read before
//! the chunk's first row was taken (that row's included) is earlier than the latest
//! time before the chunk (serial reading would refuse its row, and the rows after it
//! are judged against a later time), or the header is still to come (a first chunk of
//! blank lines): then the worker parses the chunk again from the carry, exactly as
//! serial reading does.

use super::csv_feed::{strict_message, Before, Emit, LineParser, Resume};
use super::{epoch_of, Counters, Feed, Next, ReadOptions, Reject, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::Batch;
use braid_plan::plan::Source;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Chunk size when [`ReadOptions::chunk_bytes`] is 0 and one process reads the file:
/// 64 KiB, measured against 1 MiB (docs/benchmarks/ingest.md: 2 workers' peak memory
/// 16-52 MB lower, fraud 1.41x, the peer queries 1.04-1.12x).
pub const CHUNK_BYTES: u64 = 1 << 16;

/// Chunk size when [`ReadOptions::chunk_bytes`] is 0 and several processes read the
/// file: 1 MiB. Chunks are dealt in turn, so the carry into every chunk crosses to
/// another process, and each crossing waits for two workers to step (about half a
/// millisecond on loopback): 2 processes of 1 worker read the peer benchmark's file in
/// 1.07 s with 1 MiB chunks against 1.48 s with 64 KiB (medians of 8 pairs, ingest.md).
pub const CHUNK_BYTES_ACROSS: u64 = 1 << 20;

/// What serial reading knows at the start of a chunk.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Carry {
    at: Before,
    /// Malformed records before, and the first [`Rejects::KEEP`] of them.
    rejects: u64,
    first: Vec<Reject>,
}

impl Carry {
    fn resumed(r: &Resume) -> Carry {
        Carry {
            at: Before::resumed(r),
            rejects: r.rejects,
            first: r.first.clone(),
        }
    }
}

/// A carry between processes: the chunk it goes into and the carry, or None when the
/// reading stopped (a strict-mode error).
pub type CarryMsg = (u64, Option<Carry>);

/// How many carries a board keeps (the latest): enough for any checkpoint barrier,
/// which comes within a few epochs of the chunks being read.
const KEPT: usize = 4096;

#[derive(Default)]
struct BoardState {
    carries: BTreeMap<u64, Carry>,
    stopped: bool,
    outbox: Vec<CarryMsg>,
}

/// The carries into the chunks of one reading of a file, shared by the workers of a
/// process; with `remote`, what this process publishes also waits in an outbox for the
/// runtime to broadcast to the other processes.
pub struct Board {
    state: Mutex<BoardState>,
    ready: Condvar,
    remote: bool,
}

impl Board {
    /// An empty board; `remote` when other processes read the same file.
    pub fn new(remote: bool) -> Board {
        Board {
            state: Mutex::new(BoardState::default()),
            ready: Condvar::new(),
            remote,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BoardState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(state: &mut BoardState, k: u64, c: Carry) {
        state.carries.entry(k).or_insert(c);
        while state.carries.len() > KEPT {
            state.carries.pop_first();
        }
    }

    /// Publishes the carry into chunk `k`.
    fn put(&self, k: u64, c: Carry) {
        let mut s = self.state();
        if self.remote {
            s.outbox.push((k, Some(c.clone())));
        }
        Board::insert(&mut s, k, c);
        self.ready.notify_all();
    }

    /// The carry every reader starts from (each puts it; nothing to send).
    fn seed(&self, c: Carry) {
        Board::insert(&mut self.state(), 0, c);
    }

    /// The reading stopped: nobody waits for a carry any more.
    fn stop(&self) {
        let mut s = self.state();
        s.stopped = true;
        if self.remote {
            s.outbox.push((u64::MAX, None));
        }
        self.ready.notify_all();
    }

    /// A carry another process published.
    pub fn receive(&self, (k, c): CarryMsg) {
        let mut s = self.state();
        match c {
            Some(c) => Board::insert(&mut s, k, c),
            None => s.stopped = true,
        }
        self.ready.notify_all();
    }

    /// What this process published since the last call, for the other processes.
    pub fn take_outbox(&self) -> Vec<CarryMsg> {
        std::mem::take(&mut self.state().outbox)
    }

    /// Waits for the carry into chunk `k`; None when the reading stopped.
    fn wait(&self, k: u64, stop: &AtomicBool) -> Option<Carry> {
        let mut s = self.state();
        loop {
            if let Some(c) = s.carries.get(&k) {
                return Some(c.clone());
            }
            if s.stopped || stop.load(Ordering::Relaxed) {
                return None;
            }
            s = self
                .ready
                .wait_timeout(s, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The carry into chunk `k`, if it is known.
    fn get(&self, k: u64) -> Option<Carry> {
        self.state().carries.get(&k).cloned()
    }

    /// Whether the reading stopped.
    fn stopped(&self) -> bool {
        self.state().stopped
    }

    /// The latest carry known.
    fn latest(&self) -> Option<Carry> {
        self.state().carries.values().next_back().cloned()
    }

    /// The latest carry with no row after epoch `closing` before it: reading again
    /// from there, and dropping the rows up to `closing`, gives everything after.
    fn latest_through(&self, closing: u64) -> Option<Carry> {
        self.state()
            .carries
            .values()
            .rev()
            .find(|c| c.at.epoch <= closing && !c.at.header_pending)
            .cloned()
    }
}

enum Msg {
    /// A chunk's windows, in order, and how many malformed lines it had.
    Windows(Vec<(u64, Batch)>, u64),
    Fatal(Error),
}

/// How many chunks of windows a reader hands on ahead of its worker: a reader that
/// waited for its worker to send a chunk's windows would hold back the carry into the
/// chunks after its next one.
const CHUNKS_AHEAD: usize = 2;

/// What parses a worker's share.
enum Share {
    /// A reader thread, handing on each chunk's windows.
    Thread(Receiver<Msg>),
    /// The worker itself, in [`Feed::next`].
    Inline(Box<Inline>),
}

/// A share parsed in the worker's thread: the next chunk, and the chunk parsed from its
/// provisional start while the carry into it is still to come.
struct Inline {
    reader: Reader,
    next: u64,
    chunks: u64,
    parsed: Option<Provisional>,
    done: bool,
}

/// What [`Inline::step`] gave.
enum Step {
    Chunk(Vec<(u64, Batch)>, u64),
    Wait,
    Done,
}

impl Inline {
    /// Parses the next chunk (unless it waits for its carry already) and finishes it if
    /// the carry into it is known: never waits for another worker.
    fn step(&mut self) -> Result<Step> {
        let r = &mut self.reader;
        if self.done {
            return Ok(Step::Done);
        }
        if self.next >= self.chunks {
            if r.index == 0 {
                // The report is serial reading's: the carry past the last chunk.
                match r.board.get(self.chunks) {
                    Some(end) => r.report(Some(end)),
                    None if r.board.stopped() => r.report(None),
                    None => return Ok(Step::Wait),
                }
            }
            self.done = true;
            return Ok(Step::Done);
        }
        if r.board.stopped() {
            self.done = true;
            return Ok(Step::Done);
        }
        let p = match self.parsed.take() {
            Some(p) => p,
            None => match r.begin(self.next) {
                Ok(p) => p,
                Err(e) => {
                    r.board.stop();
                    self.done = true;
                    return Err(e);
                }
            },
        };
        let Some(carry) = r.board.get(p.k) else {
            self.parsed = Some(p);
            return Ok(Step::Wait);
        };
        match r.finish(p, carry) {
            Chunk::Windows(w, malformed) => {
                self.next += r.peers;
                Ok(Step::Chunk(w, malformed))
            }
            Chunk::Fatal(e) => {
                r.board.stop();
                self.done = true;
                Err(e)
            }
        }
    }
}

/// One worker's share of a CSV file.
pub(crate) struct ParFeed {
    share: Share,
    /// The windows of the chunk being sent.
    pending: std::collections::VecDeque<(u64, Batch)>,
    /// Rows and malformed lines are counted as the worker takes them (a reader ahead
    /// of a worker that stops, at a live rescale, must not count what it never sends).
    counters: Arc<Counters>,
    board: Arc<Board>,
    rejects: Arc<Mutex<Rejects>>,
    stop: Arc<AtomicBool>,
    /// Workers reading in shares, and the most epochs one chunk has spanned so far.
    peers: u64,
    span: u64,
    /// The reader thread's channel closed: it read its whole share.
    ended: bool,
}

/// The most epochs a worker reading in shares runs ahead of the output for the chunks
/// of the others ([`Feed::ahead`]): each epoch in flight is a timestamp every worker
/// tracks, so chunks of very many small epochs still take turns past this.
const AHEAD_MAX: u64 = 4096;

impl Drop for ParFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // A worker that stops before its reading ended (a live rescale's fence) stops
        // the board now, not when its reader thread next looks at the stop: another
        // worker may be waiting for the carry out of a chunk this one will now never
        // parse, and would wait forever in its feed's `Next::Wait`; the other
        // processes hear of it from the outbox its worker sends on as the feed ends,
        // which a reader thread's later stop would miss.
        let ended = match &self.share {
            Share::Inline(s) => s.done,
            Share::Thread(_) => self.ended,
        };
        if !ended {
            self.board.stop();
        }
    }
}

/// Where a reader is and what it shares.
struct Reader {
    source: Source,
    path: PathBuf,
    file: std::fs::File,
    /// Where the reading starts (a line start), the file's length and the chunk size.
    base: u64,
    len: u64,
    chunk: u64,
    index: u64,
    peers: u64,
    strict: bool,
    reject_file: Option<std::fs::File>,
    board: Arc<Board>,
    rejects: Arc<Mutex<Rejects>>,
    stop: Arc<AtomicBool>,
    /// The chunk being read (one buffer for every chunk).
    text: Vec<u8>,
}

/// A chunk read and parsed from its provisional start (`end`; None for the first
/// chunk, which is parsed once its carry, the file's start, is taken).
struct Provisional {
    k: u64,
    out: Parsed,
    end: Option<LineParserEnd>,
}

/// What a chunk gave: its windows and malformed lines, or a strict-mode error.
enum Chunk {
    Windows(Vec<(u64, Batch)>, u64),
    Fatal(Error),
}

/// Opens worker `index` of `peers`'s share of the CSV file `file` (at `path`), from
/// `resume` (a resume point of this feed or of a serial one) or the file's start.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    source: &Source,
    file: std::fs::File,
    path: &Path,
    header: bool,
    (index, peers): (usize, usize),
    opts: &ReadOptions,
    counters: Arc<Counters>,
    board: Arc<Board>,
    resume: Option<Resume>,
) -> Result<ParFeed> {
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
        .len();
    let start = match &resume {
        Some(r) => Carry::resumed(r),
        None => Carry {
            at: Before::start(header),
            rejects: 0,
            first: Vec::new(),
        },
    };
    let base = start.at.offset;
    if index == 0 {
        // The rows before the resume point were read, by the run that made it.
        Counters::add(&counters.rows_in, start.at.seq);
    }
    board.seed(start.clone());
    let rejects = Arc::new(Mutex::new(Rejects {
        source: source.name.clone(),
        count: if index == 0 { start.rejects } else { 0 },
        first: if index == 0 { start.first } else { Vec::new() },
        lines: Vec::new(),
        lines_partial: true,
    }));
    let reject_file = super::open_reject_file(opts)?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = Reader {
        source: source.clone(),
        path: path.to_path_buf(),
        file,
        base,
        len,
        chunk: match (opts.chunk_bytes, board.remote) {
            (0, false) => CHUNK_BYTES,
            (0, true) => CHUNK_BYTES_ACROSS,
            (n, _) => n as u64,
        },
        index: index as u64,
        peers: peers.max(1) as u64,
        strict: opts.strict,
        reject_file,
        board: board.clone(),
        rejects: rejects.clone(),
        stop: stop.clone(),
        text: Vec::new(),
    };
    let share = match opts.reader_threads.unwrap_or(true) {
        true => {
            let (tx, rx) = sync_channel(CHUNKS_AHEAD);
            std::thread::Builder::new()
                .name(format!("braid-read-{}-{index}", source.name))
                .spawn(move || reader.run(tx))
                .map_err(|e| Error::io("starting a reader thread", e))?;
            Share::Thread(rx)
        }
        false => Share::Inline(Box::new(Inline {
            next: reader.index,
            chunks: reader.chunks(),
            reader,
            parsed: None,
            done: false,
        })),
    };
    Ok(ParFeed {
        share,
        pending: Default::default(),
        counters,
        board,
        rejects,
        stop,
        peers: peers.max(1) as u64,
        span: 0,
        ended: false,
    })
}

impl Feed for ParFeed {
    fn next(&mut self) -> Result<Next> {
        loop {
            if let Some((e, b)) = self.pending.pop_front() {
                Counters::add(&self.counters.rows_in, b.len() as u64);
                return Ok(Next::Window(e, b));
            }
            let (w, malformed) = match &mut self.share {
                Share::Thread(rx) => match rx.try_recv() {
                    Ok(Msg::Windows(w, malformed)) => (w, malformed),
                    Ok(Msg::Fatal(e)) => return Err(e),
                    Err(TryRecvError::Empty) => return Ok(Next::Wait),
                    Err(TryRecvError::Disconnected) => {
                        self.ended = true;
                        return Ok(Next::Done);
                    }
                },
                Share::Inline(s) => match s.step()? {
                    Step::Chunk(w, malformed) => (w, malformed),
                    Step::Wait => return Ok(Next::Wait),
                    Step::Done => return Ok(Next::Done),
                },
            };
            Counters::add(&self.counters.malformed, malformed);
            if let (Some(first), Some(last)) = (w.first(), w.last()) {
                self.span = self.span.max(last.0.saturating_sub(first.0) + 1);
            }
            self.pending = w.into();
        }
    }

    fn resume_after(&self, closing: u64) -> Option<Vec<u8>> {
        let c = self.board.latest_through(closing)?;
        let r = Resume {
            offset: c.at.offset,
            line: c.at.line,
            seq: c.at.seq,
            epoch: c.at.epoch,
            last_time: c.at.last_time,
            rejects: c.rejects,
            first: c.first,
        };
        bincode::serialize(&r).ok()
    }

    fn rejects(&mut self) -> Rejects {
        self.rejects
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// The chunks of the other workers that come before this worker's next: as many
    /// epochs as that many chunks span (at most [`AHEAD_MAX`]).
    fn ahead(&self) -> u64 {
        (self.span.saturating_mul(self.peers.saturating_sub(1))).min(AHEAD_MAX)
    }
}

/// What a chunk's parse gave.
#[derive(Default)]
struct Parsed {
    windows: Vec<(u64, Batch)>,
    /// Malformed lines: line, column, reason, text (for the reject file).
    rejects: Vec<(u64, u64, String, Vec<u8>)>,
    rows_at: Vec<(u64, u64)>,
    fatal: Option<(u64, u64, String)>,
    strict: bool,
    keep_text: bool,
}

impl Emit for Parsed {
    fn window(&mut self, epoch: u64, batch: Batch) -> bool {
        self.windows.push((epoch, batch));
        true
    }

    fn reject(&mut self, line: u64, column: u64, reason: String, text: &[u8]) -> bool {
        if self.strict {
            self.fatal = Some((line, column, strict_message(reason, text)));
            return false;
        }
        let text = match self.keep_text {
            true => text[..text.len().min(4096)].to_vec(),
            false => Vec::new(),
        };
        self.rejects.push((line, column, reason, text));
        true
    }

    fn fatal(&mut self, line: u64, column: u64, message: String) {
        self.fatal = Some((line, column, message));
    }

    fn rows_at(&mut self, seq: u64, line: u64) {
        self.rows_at.push((seq, line));
    }
}

impl Reader {
    /// The chunks of the file after `base`.
    fn chunks(&self) -> u64 {
        (self.len.saturating_sub(self.base)).div_ceil(self.chunk)
    }

    /// The reader thread: each chunk of the share in turn, its windows handed on.
    fn run(mut self, tx: SyncSender<Msg>) {
        let chunks = self.chunks();
        let mut k = self.index;
        while k < chunks {
            let chunk = self.begin(k).map(|p| {
                let carry = self.board.wait(k, &self.stop);
                carry.map(|carry| self.finish(p, carry))
            });
            match chunk {
                Ok(Some(Chunk::Windows(w, malformed))) => {
                    let empty = w.is_empty() && malformed == 0;
                    if !empty && tx.send(Msg::Windows(w, malformed)).is_err() {
                        self.board.stop();
                        return;
                    }
                }
                // The reading stopped elsewhere.
                Ok(None) => {
                    self.board.stop();
                    return;
                }
                Ok(Some(Chunk::Fatal(e))) | Err(e) => {
                    self.board.stop();
                    let _ = tx.send(Msg::Fatal(e));
                    return;
                }
            }
            k += self.peers;
        }
        if self.index == 0 {
            let end = self.board.wait(chunks, &self.stop);
            self.report(end);
        }
    }

    /// The report of the whole reading (worker 0's): serial reading's, the carry past
    /// the last chunk (`end`; the latest known when the reading stopped).
    fn report(&self, end: Option<Carry>) {
        let end = end.or_else(|| self.board.latest());
        if let (Some(end), Ok(mut r)) = (end, self.rejects.lock()) {
            r.count = end.rejects;
            r.first = end.first;
        }
    }

    /// The lines that start in `[start, hi)`, whole, into `text` (one buffer for every
    /// chunk: a fresh one per chunk cost a fault on fresh memory for each of its pages).
    fn read_chunk(&self, start: u64, hi: u64, text: &mut Vec<u8>) -> Result<()> {
        use std::os::unix::fs::FileExt;
        text.clear();
        if start >= hi {
            return Ok(());
        }
        let failed = |e| Error::io(format!("reading {}", self.path.display()), e);
        text.resize((hi - start) as usize, 0);
        let mut got = 0;
        while got < text.len() {
            match self.file.read_at(&mut text[got..], start + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(e)),
            }
        }
        text.truncate(got);
        // The last line goes on past `hi`: it is this chunk's to the end.
        if got as u64 == hi - start && text.last() != Some(&b'\n') {
            let mut r = BufReader::with_capacity(1 << 12, &self.file);
            r.seek(SeekFrom::Start(hi)).map_err(failed)?;
            r.read_until(b'\n', text).map_err(failed)?;
        }
        Ok(())
    }

    /// Parses `text`, the lines from `from.offset` on, from state `from`.
    fn parse(&self, text: &[u8], from: Before, out: &mut Parsed) -> LineParserEnd {
        let mut parser = LineParser::new(&self.source, from, false);
        let (n, go) = parser.lines(text, out);
        // A last line without its end.
        let stopped = !go || (n < text.len() && !parser.line(&text[n..], false, out));
        if !stopped {
            parser.finish(out);
        }
        LineParserEnd {
            at: parser.at,
            unjudged: parser.unjudged,
        }
    }

    /// Where the first line starting at or after `lo` starts.
    fn first_line(&self, lo: u64) -> Result<u64> {
        if lo == self.base {
            return Ok(lo);
        }
        let mut r = BufReader::with_capacity(1 << 12, &self.file);
        r.seek(SeekFrom::Start(lo - 1))
            .map_err(|e| Error::io(format!("seeking in {}", self.path.display()), e))?;
        let mut skipped = Vec::new();
        let n = r
            .read_until(b'\n', &mut skipped)
            .map_err(|e| Error::io(format!("reading {}", self.path.display()), e))?;
        Ok(lo - 1 + n as u64)
    }

    fn fresh(&self) -> Parsed {
        Parsed {
            strict: self.strict,
            keep_text: self.reject_file.is_some(),
            ..Parsed::default()
        }
    }

    /// Reads chunk `k`'s lines (into `self.text`, kept for [`Reader::finish`]) and
    /// parses them from a provisional start, while the chunks before it are read; the
    /// first chunk is parsed from the carry every reader has, in `finish`.
    fn begin(&mut self, k: u64) -> Result<Provisional> {
        let lo = self.base + k * self.chunk;
        let hi = (lo + self.chunk).min(self.len);
        let start = self.first_line(lo)?;
        let mut text = std::mem::take(&mut self.text);
        let read = self.read_chunk(start, hi, &mut text);
        self.text = text;
        read?;
        let mut out = self.fresh();
        let end = (k > 0).then(|| {
            let provisional = Before {
                offset: start,
                ..Before::start(false)
            };
            self.parse(&self.text, provisional, &mut out)
        });
        Ok(Provisional { k, out, end })
    }

    /// Finishes chunk `p.k` with `carry`, the carry into it (parsing it again from
    /// there when the provisional start cannot give serial reading's result):
    /// publishes the carry out of it and gives its windows.
    fn finish(&mut self, p: Provisional, carry: Carry) -> Chunk {
        let tcol = self.source.schema.event_time;
        let k = p.k;
        let mut out = p.out;
        let (exact, end) = match p.end {
            None => (true, self.parse(&self.text, carry.at, &mut out)),
            Some(end) => {
                let earlier = |t: i64| t < carry.at.last_time;
                let again = carry.at.header_pending
                    || (tcol.is_some()
                        && !self.source.out_of_order
                        && end.unjudged.is_some_and(earlier));
                if again {
                    out = self.fresh();
                    (true, self.parse(&self.text, carry.at, &mut out))
                } else {
                    (false, end)
                }
            }
        };
        let (dl, ds) = match exact {
            true => (0, 0),
            false => (carry.at.line, carry.at.seq),
        };
        if let Some((line, column, message)) = out.fatal.take() {
            return Chunk::Fatal(Error::Input {
                source_name: self.source.name.clone(),
                line: line + dl,
                column,
                message,
            });
        }
        let seq = end.at.seq + ds;
        let epoch = match (exact, tcol) {
            (true, _) => end.at.epoch,
            (false, Some(_)) => end.at.epoch.max(carry.at.epoch),
            (false, None) if seq > carry.at.seq => {
                epoch_of(&self.source, None, seq - 1).max(carry.at.epoch)
            }
            (false, None) => carry.at.epoch,
        };
        let mut first = carry.first.clone();
        for (line, column, reason, _) in &out.rejects {
            if first.len() >= Rejects::KEEP {
                break;
            }
            first.push(Reject {
                line: line + dl,
                column: *column,
                reason: reason.clone(),
            });
        }
        let next = Carry {
            at: Before {
                offset: end.at.offset,
                line: end.at.line + dl,
                seq,
                epoch,
                last_time: match exact {
                    true => end.at.last_time,
                    false => end.at.last_time.max(carry.at.last_time),
                },
                header_pending: end.at.header_pending,
            },
            rejects: carry.rejects + out.rejects.len() as u64,
            first,
        };
        // The reject file in file order: written before the next chunk can be.
        if let Some(f) = &mut self.reject_file {
            let mut text = Vec::new();
            for (line, column, reason, shown) in &out.rejects {
                super::reject_line(&mut text, line + dl, *column, reason, shown);
            }
            // A failing reject file must not stop the run; the count is still kept.
            let _ = f.write_all(&text);
        }
        self.board.put(k + 1, next);
        if let Ok(mut r) = self.rejects.lock() {
            r.lines
                .extend(out.rows_at.iter().map(|&(s, l)| (s + ds, l + dl)));
            // Where this share's rows end: a row after it is another share's.
            r.lines.push((seq, 0));
        }
        let mut windows = Vec::with_capacity(out.windows.len());
        for (e, mut batch) in out.windows {
            if exact {
                windows.push((e, batch));
                continue;
            }
            for key in batch.keys_mut() {
                key.seq += ds;
            }
            match tcol {
                Some(_) => windows.push((e.max(carry.at.epoch), batch)),
                None => recut(&self.source, batch, carry.at.epoch, &mut windows),
            }
        }
        Chunk::Windows(windows, out.rejects.len() as u64)
    }
}

/// How a chunk's parse ended.
struct LineParserEnd {
    at: Before,
    unjudged: Option<i64>,
}

/// Cuts a window of a source without event time, its sequence numbers shifted, where
/// its rows' epochs (by sequence number, never before `min`) change.
fn recut(source: &Source, batch: Batch, min: u64, out: &mut Vec<(u64, Batch)>) {
    let epoch = |i: usize| epoch_of(source, None, batch.key(i).seq).max(min);
    let n = batch.len();
    if n == 0 {
        return;
    }
    if epoch(0) == epoch(n - 1) {
        out.push((epoch(0), batch));
        return;
    }
    let mut cur = Batch::with_capacity(batch.arity(), n);
    let mut at = epoch(0);
    for i in 0..n {
        let e = epoch(i);
        if e != at && !cur.is_empty() {
            let full = std::mem::replace(&mut cur, Batch::with_capacity(batch.arity(), n));
            out.push((at, full));
        }
        at = e;
        cur.push_row_of(&batch, i, batch.key(i));
    }
    out.push((at, cur));
}

#[cfg(test)]
mod tests {
    //! Reading in shares against serial reading of the same file: the same rows with
    //! the same sequence numbers and epochs, the same report (count, first records,
    //! the line of every row), the same reject file and the same strict-mode error, on
    //! files with malformed, blank and out-of-order lines, CRLF, quotes, a header, and
    //! chunks far smaller than a line.
    use super::*;
    use crate::source::{open_at, Counters, ReadOptions};
    use braid_plan::function::Registry;
    use braid_plan::plan::{Plan, SourceSpec};
    use braid_plan::types::{DataType, Field, Schema};
    use proptest::prelude::*;

    /// One line of a generated file.
    #[derive(Clone, Debug)]
    enum Line {
        Row { dt: i64, v: Option<i64>, s: String },
        Blank,
        BadInt,
        Fields,
        Quote,
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            8 => (-2i64..5, proptest::option::of(-9i64..99), "[a-z ,\"]{0,6}")
                .prop_map(|(dt, v, s)| Line::Row { dt, v, s }),
            1 => Just(Line::Blank),
            1 => Just(Line::BadInt),
            1 => Just(Line::Fields),
            1 => Just(Line::Quote),
        ]
    }

    fn text(lines: &[Line], header: bool, crlf: &[bool], last_newline: bool) -> String {
        let mut out = String::new();
        if header {
            out.push_str("t,v,s\n");
        }
        let mut t = 0i64;
        for (i, l) in lines.iter().enumerate() {
            match l {
                Line::Row { dt, v, s } => {
                    t += dt;
                    let v = v.map(|v| v.to_string()).unwrap_or_default();
                    let s = format!("\"{}\"", s.replace('"', "\"\""));
                    out.push_str(&format!("{t},{v},{s}"));
                }
                Line::Blank => out.push_str("  "),
                Line::BadInt => out.push_str(&format!("{t},x{i},s")),
                Line::Fields => out.push_str(&format!("{t},1")),
                Line::Quote => out.push_str(&format!("{t},1,\"open")),
            }
            let last = i + 1 == lines.len();
            if !last || last_newline {
                out.push_str(if crlf[i % crlf.len()] { "\r\n" } else { "\n" });
            }
        }
        out
    }

    fn source(path: &Path, header: bool, timed: bool, out_of_order: bool) -> Source {
        let schema = Schema::new(vec![
            Field::new("t", DataType::Int64),
            Field {
                nullable: true,
                ..Field::new("v", DataType::Int64)
            },
            Field::new("s", DataType::String),
        ]);
        let schema = Schema {
            event_time: timed.then_some(0),
            ..schema
        };
        let mut s = Plan::source(
            "s",
            SourceSpec::Csv {
                path: path.to_path_buf(),
                header,
            },
            schema,
        )
        .leaf_source()
        .clone();
        s.epoch = 3;
        s.window = 4;
        s.out_of_order = out_of_order;
        s
    }

    /// What a reading gave: every row (sequence number, epoch, values), the error that
    /// ended it, the report (count, first records, each row's line) and the reject file.
    type Read = (
        Vec<(u64, u64, String)>,
        Option<String>,
        Rejects,
        Vec<Option<u64>>,
        String,
    );

    fn read(source: &Source, peers: usize, chunk: usize, strict: bool, dir: &Path) -> Read {
        read_from(source, peers, chunk, strict, dir, None, false).0
    }

    /// [`read`], from a resume point; and with `after`, where the reading resumes to
    /// give the rows after that epoch; `inline`: the shares parsed in the feeds' thread
    /// (all of them in this one). Checks that each share's report places its own rows
    /// where the whole report does, and the others nowhere.
    fn read_from(
        source: &Source,
        peers: usize,
        chunk: usize,
        strict: bool,
        dir: &Path,
        resume: Option<&[u8]>,
        inline: bool,
    ) -> (Read, Arc<Board>) {
        let reject_file = dir.join(format!("rejects-{peers}-{chunk}-{strict}"));
        let _ = std::fs::remove_file(&reject_file);
        let opts = ReadOptions {
            strict,
            reject_file: Some(reject_file.clone()),
            chunk_bytes: chunk,
            reader_threads: Some(!inline),
            ..ReadOptions::default()
        };
        let board = Arc::new(Board::new(false));
        let counters = Arc::new(Counters::default());
        let registry = Registry::default();
        let mut feeds: Vec<Box<dyn Feed>> = (0..peers)
            .filter_map(|i| {
                open_at(
                    source,
                    i,
                    peers,
                    &opts,
                    counters.clone(),
                    &registry,
                    resume,
                    Some(&board),
                )
                .unwrap()
            })
            .collect();
        let mut rows = Vec::new();
        let mut error = None;
        let mut done = vec![false; feeds.len()];
        let mut last_epoch = vec![0u64; feeds.len()];
        while error.is_none() && done.iter().any(|d| !d) {
            for (i, feed) in feeds.iter_mut().enumerate() {
                if done[i] {
                    continue;
                }
                match feed.next() {
                    Ok(Next::Window(e, b)) => {
                        assert!(e >= last_epoch[i], "a feed's epochs went back");
                        last_epoch[i] = e;
                        for r in 0..b.len() {
                            let row = b.row(r);
                            rows.push((row.key().seq, e, format!("{row:?}")));
                        }
                    }
                    Ok(Next::Wait) => std::thread::yield_now(),
                    Ok(Next::Done) => done[i] = true,
                    Err(e) => error = Some(e.to_string()),
                }
            }
        }
        let mut rejects: Option<Rejects> = None;
        let mut shares = Vec::new();
        for f in &mut feeds {
            let r = f.rejects();
            shares.push(r.clone());
            match &mut rejects {
                Some(x) => x.absorb(r),
                None => rejects = Some(r),
            }
        }
        drop(feeds);
        let rejects = rejects.unwrap_or_default();
        rows.sort();
        let lines: Vec<Option<u64>> = rows.iter().map(|r| rejects.line_of(r.0)).collect();
        if error.is_none() && peers > 1 {
            for share in &shares {
                for (row, line) in rows.iter().zip(&lines) {
                    let placed = share.line_of(row.0);
                    assert!(
                        placed.is_none() || placed == *line,
                        "a share placed another's row"
                    );
                }
            }
        }
        let file = std::fs::read_to_string(&reject_file).unwrap_or_default();
        ((rows, error, rejects, lines, file), board)
    }

    fn dir() -> PathBuf {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "braid-par-csv-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn same(serial: &Read, shares: &Read, what: &str) {
        assert_eq!(serial.1, shares.1, "{what}: the error");
        if serial.1.is_none() {
            assert_eq!(serial.0, shares.0, "{what}: the rows");
            assert_eq!(serial.3, shares.3, "{what}: each row's line");
            assert_eq!(serial.4, shares.4, "{what}: the reject file");
        }
        assert_eq!(
            serial.2.count, shares.2.count,
            "{what}: the malformed count"
        );
        assert_eq!(
            serial.2.first, shares.2.first,
            "{what}: the first malformed"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        #[test]
        fn shares_read_what_serial_reading_reads(
            lines in proptest::collection::vec(line(), 0..60),
            header in any::<bool>(),
            timed in any::<bool>(),
            out_of_order in any::<bool>(),
            crlf in proptest::collection::vec(any::<bool>(), 1..4),
            last_newline in any::<bool>(),
            peers in 2usize..5,
            chunk in 1usize..48,
            strict in any::<bool>(),
            inline in any::<bool>(),
        ) {
            let dir = dir();
            let path = dir.join("in.csv");
            std::fs::write(&path, text(&lines, header, &crlf, last_newline)).unwrap();
            let source = source(&path, header, timed, out_of_order);
            let serial = read(&source, 1, 0, strict, &dir);
            let (shares, board) = read_from(&source, peers, chunk, strict, &dir, None, inline);
            same(
                &serial,
                &shares,
                &format!("{peers} workers, chunks of {chunk} bytes, parsed inline {inline}"),
            );
            // Resuming after each epoch, from where a checkpoint would: every row after
            // it, nothing lost (the rows up to it are dropped, as a resumed run does).
            let last = serial.0.iter().map(|r| r.1).max();
            if let (None, Some(last)) = (&serial.1, last) {
                for closing in 0..=last {
                    let feed = ParFeed {
                        share: Share::Thread(sync_channel(1).1),
                        pending: Default::default(),
                        counters: Default::default(),
                        board: board.clone(),
                        rejects: Default::default(),
                        stop: Default::default(),
                        peers: peers as u64,
                        span: 0,
                        ended: true,
                    };
                    let Some(at) = feed.resume_after(closing) else {
                        continue;
                    };
                    let (again, _) =
                        read_from(&source, peers, chunk, false, &dir, Some(&at), inline);
                    let after = |r: &Read| {
                        r.0.iter().filter(|x| x.1 > closing).cloned().collect::<Vec<_>>()
                    };
                    prop_assert_eq!(after(&serial), after(&again), "resumed after {}", closing);
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A worker of a cluster whose feed is dropped before its reading ended (a live
    /// rescale's fence) has its board's stop in the outbox as the feed drops, for its
    /// worker to send on at once: with a reader thread the stop used to come when the
    /// thread next looked (up to 50 ms later), after the worker's last send, and another
    /// process's reader then waited forever for a carry of the old reading.
    #[test]
    fn a_dropped_share_stops_the_other_processes_readers_at_once() {
        let dir = dir();
        let path = dir.join("in.csv");
        let text: String = (0..400).map(|i| format!("{i},{i},x\n")).collect();
        std::fs::write(&path, text).unwrap();
        let source = source(&path, false, true, false);
        for inline in [false, true] {
            let opts = ReadOptions {
                chunk_bytes: 256,
                reader_threads: Some(!inline),
                ..ReadOptions::default()
            };
            // Worker 0 of 2, the other in another process: its second chunk waits for
            // a carry that never comes.
            let board = Arc::new(Board::new(true));
            let mut feed = open_at(
                &source,
                0,
                2,
                &opts,
                Arc::new(Counters::default()),
                &Registry::default(),
                None,
                Some(&board),
            )
            .unwrap()
            .expect("worker 0 reads a share");
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !matches!(feed.next().unwrap(), Next::Window(..)) {
                assert!(std::time::Instant::now() < deadline, "no window");
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(feed);
            let sent = board.take_outbox();
            assert!(
                sent.iter().any(|(k, c)| *k == u64::MAX && c.is_none()),
                "inline {inline}: the outbox as the feed dropped: {:?}",
                sent.iter().map(|m| m.0).collect::<Vec<_>>()
            );
        }
    }

    /// Lines of plain ints (found and read in one pass) count in the line numbers as
    /// every other line does, with CRLF, a blank line, a malformed line, a row out of
    /// order and a last line without its end among them, read serially and in shares
    /// with chunk bounds inside lines: the lines here are counted by hand.
    #[test]
    fn plain_int_lines_count_in_line_numbers() {
        let dir = dir();
        let path = dir.join("ints.csv");
        let text = "t,v\n1,10\n2,20\r\n\n3,x\n4,40\n1,50\n5,-60\n6,70";
        std::fs::write(&path, text).unwrap();
        let schema = Schema::new(vec![
            Field::new("t", DataType::Int64),
            Field::new("v", DataType::Int64),
        ]);
        let schema = Schema {
            event_time: Some(0),
            ..schema
        };
        let spec = SourceSpec::Csv { path, header: true };
        let mut source = Plan::source("s", spec, schema).leaf_source().clone();
        source.epoch = 3;
        source.window = 4;
        for (peers, chunk) in [(1, 0), (2, 7), (3, 5), (2, 64)] {
            let (rows, error, rejects, lines, _) = read(&source, peers, chunk, false, &dir);
            let what = format!("{peers} workers, chunks of {chunk} bytes");
            assert_eq!(error, None, "{what}");
            assert_eq!(rows.len(), 5, "{what}: {rows:?}");
            assert_eq!(
                lines,
                [Some(2), Some(3), Some(6), Some(8), Some(9)],
                "{what}"
            );
            let bad: Vec<u64> = rejects.first.iter().map(|r| r.line).collect();
            assert_eq!((rejects.count, bad), (2, vec![5, 7]), "{what}");
        }
    }

    #[test]
    fn a_header_after_a_chunk_of_blank_lines_is_still_the_header() {
        let dir = dir();
        let path = dir.join("in.csv");
        let text = format!("{}t,v,s\n1,2,a\n1,3,b\nx\n2,4,c\n", "\n".repeat(40));
        std::fs::write(&path, text).unwrap();
        let source = source(&path, true, true, false);
        let serial = read(&source, 1, 0, false, &dir);
        assert_eq!(serial.0.len(), 3);
        assert_eq!(serial.2.count, 1);
        for chunk in [1, 7, 16, 64] {
            same(
                &serial,
                &read(&source, 3, chunk, false, &dir),
                "blank lines first",
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
