//! CSV sources (file, stdin, TCP): a thread parses records into windows.
//!
//! Input is line-delimited CSV: one record per line (`\n` or `\r\n`), fields separated
//! by commas, a field may be quoted with `"` (then it may hold commas; `""` is a quote)
//! but never spans lines, so one malformed line (a stray quote, a cut-off record) costs
//! only itself. Blank lines are skipped; every line counts for line numbers.

use super::{Counters, Feed, Next, ReadOptions, RejectLog, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::plan::{Source, SourceSpec};
pub use braid_plan::text::parse_field;
pub(crate) use braid_plan::text::{ascii_int, split_fields, Field};
use braid_plan::types::{DataType, Schema};
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};

enum Msg {
    /// Windows in order, each with where its first row starts (a file's resume point).
    Windows(Vec<Parsed>),
    Fatal(Error),
}

/// A window of a message: its epoch, its rows, where its first row starts.
type Parsed = (u64, Batch, Option<Resume>);

/// A file's reader hands windows on in messages of about this many rows (or
/// [`BATCH_WINDOWS`] windows): one message, and one wake-up of a reader waiting for
/// room in the channel, per window cost more than parsing when epochs hold few rows.
const BATCH_ROWS: usize = 8192;
/// See [`BATCH_ROWS`].
const BATCH_WINDOWS: usize = 64;

/// Where a CSV file's parser was before a row: what it needs to start there again and
/// go on as it did (a checkpoint keeps the resume point of the first window after it).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Resume {
    /// Byte offset of the row's line.
    pub offset: u64,
    /// Lines before it.
    pub line: u64,
    /// The row's sequence number (rows before it).
    pub seq: u64,
    /// The epoch of the row before it (epochs never go back).
    pub epoch: u64,
    /// The latest event time before it.
    pub last_time: i64,
    /// Malformed records before it, and the first of them.
    pub rejects: u64,
    pub first: Vec<super::Reject>,
}

impl Resume {
    /// A resume point a checkpoint kept, checked against the file it is for.
    pub fn read(bytes: &[u8], file: &std::fs::File, path: &std::path::Path) -> Result<Resume> {
        let r: Resume = bincode::deserialize(bytes).map_err(|e| {
            Error::Internal(format!(
                "the checkpoint's position in {}: {e}",
                path.display()
            ))
        })?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
            .len();
        if r.offset > len {
            return Err(braid_plan::error::Error::Plan(format!(
                "{} has {len} bytes, shorter than when the checkpoint was taken (it was read up to byte {}): recover with the same input",
                path.display(),
                r.offset
            ))
            .into());
        }
        Ok(r)
    }
}

/// A CSV source read on its own thread.
pub(crate) struct CsvFeed {
    rx: Receiver<Msg>,
    /// Windows of the last message not yet taken.
    held: std::collections::VecDeque<Parsed>,
    /// Where the window `next` returned last starts.
    last: Option<Resume>,
    log: Arc<Mutex<RejectLog>>,
    name: String,
    /// Set when the feed is dropped: reader threads that wait on a socket stop.
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Drop for CsvFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A line of exactly `arity` plain int64 fields (`-?[0-9]{1,18}` each, separated by
/// commas, nothing else) into `out`, in one pass over its bytes; false for any other
/// line (a space, a sign `+`, a quote, 19 digits, an empty field), which the general
/// path then reads (and judges). 18 digits cannot overflow.
#[inline]
pub(crate) fn plain_ints(line: &[u8], arity: usize, out: &mut Vec<i64>) -> bool {
    plain_fields(line, arity, out) == Some(line.len())
}

/// [`plain_ints`] of the line at the start of `bytes`, found in the same pass: the
/// length of the line with its end (`\n` or `\r\n`) when it is `arity` plain int64
/// fields, none for any other line or a line `bytes` does not hold whole.
#[inline]
pub(crate) fn plain_ints_line(bytes: &[u8], arity: usize, out: &mut Vec<i64>) -> Option<usize> {
    let n = plain_fields(bytes, arity, out)?;
    match bytes.get(n) {
        Some(b'\n') => Some(n + 1),
        Some(_) => Some(n + 2),
        None => None,
    }
}

/// The one pass of [`plain_ints`] and [`plain_ints_line`]: exactly `arity` plain int64
/// fields at the start of `bytes` into `out`, ended by the end of `bytes`, a `\n` or a
/// `\r\n`; the fields' length (where the end starts), none for anything else.
#[inline]
fn plain_fields(bytes: &[u8], arity: usize, out: &mut Vec<i64>) -> Option<usize> {
    out.clear();
    let mut i = 0;
    loop {
        let mut b = *bytes.get(i)?; // (an empty field, or line)
        i += 1;
        let negative = b == b'-';
        if negative {
            b = *bytes.get(i)?;
            i += 1;
        }
        let mut v: i64 = 0;
        let mut digits = 0;
        // The byte after the digits (none at the end of `bytes`), and where it is.
        let end = loop {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break Some(b);
            }
            if digits == 18 {
                return None;
            }
            v = v * 10 + i64::from(d);
            digits += 1;
            match bytes.get(i) {
                Some(&next) => {
                    b = next;
                    i += 1;
                }
                None => {
                    i += 1;
                    break None;
                }
            }
        };
        if digits == 0 || out.len() == arity {
            return None;
        }
        out.push(if negative { -v } else { v });
        let fields = i - 1;
        match end {
            Some(b',') => {}
            None | Some(b'\n') => return (out.len() == arity).then_some(fields),
            Some(b'\r') if bytes.get(i) == Some(&b'\n') => {
                return (out.len() == arity).then_some(fields)
            }
            Some(_) => return None,
        }
    }
}

impl CsvFeed {
    /// Starts parsing `reader` on a thread.
    pub fn spawn(
        source: &Source,
        reader: Box<dyn Read + Send>,
        header: bool,
        opts: &ReadOptions,
        counters: Arc<Counters>,
    ) -> Result<CsvFeed> {
        // Lines may come slowly (standard input): every window goes on at once.
        CsvFeed::spawn_lines(
            source,
            Box::new(ReadLines::new(BufReader::with_capacity(1 << 16, reader))),
            header,
            opts,
            counters,
            None,
            false,
        )
    }

    /// [`CsvFeed::spawn`] over a file already at `at`'s offset, going on from there as
    /// the parser that made `at` did; its windows go on in messages of several.
    pub fn spawn_at(
        source: &Source,
        reader: Box<dyn Read + Send>,
        header: bool,
        opts: &ReadOptions,
        counters: Arc<Counters>,
        at: Option<Resume>,
    ) -> Result<CsvFeed> {
        CsvFeed::spawn_lines(
            source,
            Box::new(ReadLines::new(BufReader::with_capacity(1 << 16, reader))),
            header,
            opts,
            counters,
            at,
            true,
        )
    }

    /// A feed of `lines` parsed on a thread; with `batched`, several windows per
    /// message (a file: lines are always ready).
    fn spawn_lines(
        source: &Source,
        lines: Box<dyn Lines>,
        header: bool,
        opts: &ReadOptions,
        counters: Arc<Counters>,
        at: Option<Resume>,
        batched: bool,
    ) -> Result<CsvFeed> {
        let log = Arc::new(Mutex::new(RejectLog::new(
            &source.name,
            opts,
            counters.clone(),
        )?));
        if let (Some(r), Ok(mut l)) = (&at, log.lock()) {
            l.rejects.count = r.rejects;
            l.rejects.first = r.first.clone();
        }
        // The rows before the resume point were read, by the run that made it.
        if let Some(r) = &at {
            Counters::add(&counters.rows_in, r.seq);
        }
        let (tx, rx) = sync_channel(64);
        let parser = Parser {
            source: source.clone(),
            strict: opts.strict,
            log: log.clone(),
            tx,
            window_start: None,
            pending: Vec::new(),
            pending_rows: 0,
            batched,
        };
        std::thread::Builder::new()
            .name(format!("braid-read-{}", source.name))
            .spawn(move || parser.run(lines, header, at))
            .map_err(|e| Error::io("starting a reader thread", e))?;
        Ok(CsvFeed {
            rx,
            held: std::collections::VecDeque::new(),
            last: None,
            log,
            name: source.name.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            counters,
        })
    }

    /// Listens on `addr` and parses line-delimited CSV from `opts.tcp_clients` clients,
    /// one after the other. A client that disconnects mid-line loses only that line,
    /// which is malformed ("connection closed mid-line").
    pub fn spawn_tcp(
        source: &Source,
        addr: &str,
        opts: &ReadOptions,
        counters: Arc<Counters>,
    ) -> Result<CsvFeed> {
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| Error::io(format!("listening on {addr} for source {}", source.name), e))?;
        let clients = opts.tcp_clients.max(1);
        let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(64);
        let feed = CsvFeed::spawn_lines(
            source,
            Box::new(ChanLines {
                rx: chunk_rx,
                cur: Vec::new(),
                pos: 0,
                line: Vec::new(),
            }),
            false,
            opts,
            counters,
            None,
            false,
        )?;
        // The thread polls (accept and reads time out) so that it notices when the
        // feed is dropped (the run ended, say at a strict-mode error) and closes the
        // listener and the connection instead of blocking on them.
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
        let stop = feed.stop.clone();
        std::thread::Builder::new()
            .name(format!("braid-tcp-{}", source.name))
            .spawn(move || {
                for _ in 0..clients {
                    let stream = loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        match listener.accept() {
                            Ok((s, _)) => break s,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                std::thread::sleep(POLL)
                            }
                            Err(_) => return,
                        }
                    };
                    let polled = stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.set_read_timeout(Some(POLL)));
                    if polled.is_err() || !serve_client(stream, &chunk_tx, &stop) {
                        return; // the parser has stopped
                    }
                }
            })
            .map_err(|e| Error::io("starting a TCP reader thread", e))?;
        Ok(feed)
    }
}

/// What the TCP thread hands the parser.
enum Chunk {
    /// Whole lines, each ending in a newline.
    Lines(Vec<u8>),
    /// The start of a line the client never finished.
    Cut(Vec<u8>),
}

/// How often the TCP thread checks whether the feed is gone.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Reads one client's lines into chunks of whole lines. Lines are passed on as soon as
/// no more input is waiting (so a slow client's lines are not held back), or every
/// 64 KB. Returns false when the parser has gone away (or `stop` is set).
fn serve_client(stream: std::net::TcpStream, tx: &SyncSender<Chunk>, stop: &AtomicBool) -> bool {
    let mut r = BufReader::with_capacity(1 << 16, stream);
    let mut chunk: Vec<u8> = Vec::with_capacity(1 << 16);
    // Bytes after the last newline in `chunk`: the start of an unfinished line.
    let line_start = |c: &[u8]| c.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    loop {
        match r.read_until(b'\n', &mut chunk) {
            Ok(0) => break,
            Ok(_) if chunk.last() == Some(&b'\n') => {
                if (chunk.len() >= 1 << 16 || r.buffer().is_empty())
                    && tx.send(Chunk::Lines(std::mem::take(&mut chunk))).is_err()
                {
                    return false;
                }
            }
            // No input for a while (what was read stays in `chunk`): pass on the whole
            // lines, and give up if the feed is gone.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                let rest = chunk.split_off(line_start(&chunk));
                if !chunk.is_empty() && tx.send(Chunk::Lines(std::mem::take(&mut chunk))).is_err() {
                    return false;
                }
                chunk = rest;
            }
            Ok(_) | Err(_) => {
                // Connection closed (or broke) in the middle of a line.
                let partial = chunk.split_off(line_start(&chunk));
                if !chunk.is_empty() && tx.send(Chunk::Lines(std::mem::take(&mut chunk))).is_err() {
                    return false;
                }
                if !partial.is_empty() && tx.send(Chunk::Cut(partial)).is_err() {
                    return false;
                }
                break;
            }
        }
    }
    chunk.is_empty() || tx.send(Chunk::Lines(chunk)).is_ok()
}

/// How a line read ended.
enum LineEnd {
    /// A line (the last one of a file may lack its newline).
    Whole,
    /// A line cut short (a TCP client disconnected in the middle of it).
    Cut,
    /// No more input.
    End,
}

/// Line-by-line input of the parser.
trait Lines: Send {
    /// The next line (newline included, if any), and how it ended.
    fn read_line(&mut self) -> std::io::Result<(LineEnd, &[u8])>;

    /// The bytes read ahead, for the parser to take whole lines of at once
    /// ([`Lines::consume`]); none where lines come one at a time.
    fn buffered(&mut self) -> std::io::Result<&[u8]> {
        Ok(&[])
    }

    /// Takes the first `n` bytes [`Lines::buffered`] gave.
    fn consume(&mut self, _n: usize) {}
}

/// Lines of a byte stream (file, stdin): lent from the reader's buffer, copied only
/// when a line runs past its end.
struct ReadLines<R> {
    r: R,
    /// Bytes of the buffer the line lent last took.
    taken: usize,
    /// A line that ran past the buffer's end.
    spill: Vec<u8>,
}

impl<R> ReadLines<R> {
    fn new(r: R) -> ReadLines<R> {
        ReadLines {
            r,
            taken: 0,
            spill: Vec::new(),
        }
    }
}

impl<R: BufRead + Send> Lines for ReadLines<R> {
    fn read_line(&mut self) -> std::io::Result<(LineEnd, &[u8])> {
        self.r.consume(std::mem::take(&mut self.taken));
        let (empty, newline) = {
            let buf = self.r.fill_buf()?;
            (buf.is_empty(), memchr::memchr(b'\n', buf))
        };
        if empty {
            return Ok((LineEnd::End, &[]));
        }
        if let Some(i) = newline {
            self.taken = i + 1;
            // The same buffer again: nothing was consumed.
            return Ok((LineEnd::Whole, &self.r.fill_buf()?[..=i]));
        }
        self.spill.clear();
        self.r.read_until(b'\n', &mut self.spill)?;
        Ok((LineEnd::Whole, &self.spill))
    }

    fn buffered(&mut self) -> std::io::Result<&[u8]> {
        self.r.consume(std::mem::take(&mut self.taken));
        self.r.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.r.consume(n);
    }
}

/// Lines of the chunks a TCP thread sends.
struct ChanLines {
    rx: Receiver<Chunk>,
    cur: Vec<u8>,
    pos: usize,
    /// The line read last.
    line: Vec<u8>,
}

impl Lines for ChanLines {
    fn read_line(&mut self) -> std::io::Result<(LineEnd, &[u8])> {
        let end = self.next_line()?;
        Ok((end, &self.line))
    }
}

impl ChanLines {
    /// Puts the next line into `self.line`.
    fn next_line(&mut self) -> std::io::Result<LineEnd> {
        let buf = &mut self.line;
        buf.clear();
        loop {
            if self.pos < self.cur.len() {
                let rest = &self.cur[self.pos..];
                match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        buf.extend_from_slice(&rest[..=i]);
                        self.pos += i + 1;
                        return Ok(LineEnd::Whole);
                    }
                    None => {
                        // Chunks end with a newline; keep going if one did not.
                        buf.extend_from_slice(rest);
                        self.pos = self.cur.len();
                    }
                }
            }
            match self.rx.recv() {
                Ok(Chunk::Lines(c)) => {
                    self.cur = c;
                    self.pos = 0;
                }
                Ok(Chunk::Cut(partial)) => {
                    buf.extend_from_slice(&partial);
                    return Ok(LineEnd::Cut);
                }
                Err(_) if buf.is_empty() => return Ok(LineEnd::End),
                Err(_) => return Ok(LineEnd::Whole),
            }
        }
    }
}

impl Feed for CsvFeed {
    fn next(&mut self) -> Result<Next> {
        if self.held.is_empty() {
            match self.rx.try_recv() {
                Ok(Msg::Windows(ws)) => self.held.extend(ws),
                Ok(Msg::Fatal(e)) => return Err(e),
                Err(TryRecvError::Empty) => return Ok(Next::Wait),
                Err(TryRecvError::Disconnected) => return Ok(Next::Done),
            }
        }
        match self.held.pop_front() {
            Some((e, b, at)) => {
                // Counted as the worker takes it: a reader ahead of a worker that
                // stops (a live rescale) must not count what it never hands on.
                Counters::add(&self.counters.rows_in, b.len() as u64);
                self.last = at;
                Ok(Next::Window(e, b))
            }
            None => Ok(Next::Wait),
        }
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        self.last.as_ref().and_then(|r| bincode::serialize(r).ok())
    }

    fn rejects(&mut self) -> Rejects {
        match self.log.lock() {
            Ok(l) => l.rejects.clone(),
            Err(_) => Rejects {
                source: self.name.clone(),
                ..Rejects::default()
            },
        }
    }
}

/// What serial reading knows before a line: where the line starts, the lines and rows
/// before it, the epoch of the row before (epochs never go back), the latest event time
/// before it, and whether the header is still to come.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Before {
    pub offset: u64,
    pub line: u64,
    pub seq: u64,
    pub epoch: u64,
    pub last_time: i64,
    pub header_pending: bool,
}

impl Before {
    /// The start of an input, before its header if it has one.
    pub fn start(header: bool) -> Before {
        Before {
            offset: 0,
            line: 0,
            seq: 0,
            epoch: 0,
            last_time: i64::MIN,
            header_pending: header,
        }
    }

    /// Where a resume point says a parser was.
    pub fn resumed(r: &Resume) -> Before {
        Before {
            offset: r.offset,
            line: r.line,
            seq: r.seq,
            epoch: r.epoch,
            last_time: r.last_time,
            header_pending: false,
        }
    }
}

/// Where a [`LineParser`]'s results go.
pub(crate) trait Emit {
    /// The next row starts a window; `at` is the state before its line.
    fn window_starts(&mut self, _at: &Before) {}
    /// A finished window of epoch `epoch`. False: stop reading.
    fn window(&mut self, epoch: u64, batch: Batch) -> bool;
    /// A malformed line. False: stop reading (strict mode).
    fn reject(&mut self, line: u64, column: u64, reason: String, text: &[u8]) -> bool;
    /// An error that ends the input (a wrong header).
    fn fatal(&mut self, line: u64, column: u64, message: String);
    /// Row `seq` is on line `line` (and the rows after it on the lines after it, until
    /// the next note).
    fn rows_at(&mut self, seq: u64, line: u64);
}

/// Rows the first window of a parse is made for (the next ones for as many as the
/// window before held).
const FIRST_WINDOW: usize = 256;

/// Parses lines into windows the way serial reading does, from a given [`Before`].
pub(crate) struct LineParser<'s> {
    source: &'s Source,
    /// The state before the next line.
    pub at: Before,
    /// `line - seq` of the last row: rows are lines `seq + line_offset` until a line
    /// that is no row comes between.
    line_offset: u64,
    window: Batch,
    data: Vec<u8>,
    fields: Vec<Field>,
    /// The earliest event time judged against no row before (every time read until
    /// a row is taken, that row's included): a parser that started without knowing the
    /// latest time before it judged these differently if one is earlier than that.
    pub unjudged: Option<i64>,
    /// A row has been taken.
    taken: bool,
    /// Every column is a BIGINT: a line of plain ints may take [`plain_ints`].
    all_ints: bool,
    /// The values of a line read by [`plain_ints`].
    ints: Vec<i64>,
    /// The epoch of the row before, with its bounds.
    epochs: super::EpochCache,
}

impl<'s> LineParser<'s> {
    /// A parser at `at`; `noted` when the rows before are already placed (a fresh
    /// start: row 0 on line 1 needs no note), otherwise the first row notes its line.
    pub fn new(source: &'s Source, at: Before, noted: bool) -> LineParser<'s> {
        let arity = source.schema.arity();
        LineParser {
            source,
            at,
            line_offset: if noted { at.line - at.seq } else { u64::MAX },
            window: Batch::with_capacity(arity, source.window.min(FIRST_WINDOW)),
            data: Vec::with_capacity(1 << 12),
            fields: Vec::with_capacity(arity + 1),
            unjudged: None,
            taken: false,
            all_ints: source.schema.fields.iter().all(|f| f.ty == DataType::Int64),
            ints: Vec::with_capacity(arity),
            epochs: super::EpochCache::default(),
        }
    }

    /// One line as read (its line end included, if any); `cut` when its input ended in
    /// the middle of it. False: stop reading.
    pub fn line(&mut self, buf: &[u8], cut: bool, out: &mut impl Emit) -> bool {
        let source = self.source;
        let line_at = self.at.offset;
        self.at.offset += buf.len() as u64;
        self.at.line += 1;
        let line = self.at.line;
        let mut text: &[u8] = buf;
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        if cut {
            return out.reject(line, 0, "connection closed mid-line".into(), text);
        }
        if let SourceSpec::JsonLines { paths, .. } = &source.spec {
            if text.iter().all(u8::is_ascii_whitespace) {
                return true; // a blank line
            }
            return self.json_line(line, line_at, text, paths, out);
        }
        // A line of plain int64s, read in one pass when its row is taken as it is (a
        // row out of order goes the general way, which words the reject).
        if self.all_ints
            && !self.at.header_pending
            && plain_ints(text, source.schema.arity(), &mut self.ints)
        {
            if let Some(go) = self.take_plain(line, line_at, out) {
                return go;
            }
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            return true; // a blank line
        }
        let mut data = std::mem::take(&mut self.data);
        let mut fields = std::mem::take(&mut self.fields);
        let go = self.general(line, line_at, text, &mut data, &mut fields, out);
        (self.data, self.fields) = (data, fields);
        go
    }

    /// The row of line `line` (at byte `line_at`), read by [`plain_ints`] into
    /// `self.ints`, taken as it is; none (nothing done) when it is out of order, for the
    /// general path, which words the reject.
    #[inline]
    fn take_plain(&mut self, line: u64, line_at: u64, out: &mut impl Emit) -> Option<bool> {
        let source = self.source;
        let time = source.schema.event_time.map(|c| self.ints[c]);
        if time.is_some_and(|t| t < self.at.last_time && !source.out_of_order) {
            return None;
        }
        self.time_read(time);
        let ints = std::mem::take(&mut self.ints);
        let go = self.take_row(line, line_at, time, out, |w, key| {
            w.push_ints(key, &ints);
            Ok(())
        });
        self.ints = ints;
        Some(go.unwrap_or(true))
    }

    /// The whole lines at the start of `text`, as [`LineParser::line`] reads each, a
    /// line of plain ints found and read in one pass ([`plain_ints_line`]): how many
    /// bytes they took (a last line without its end is left to the caller), and false
    /// to stop reading.
    pub fn lines(&mut self, text: &[u8], out: &mut impl Emit) -> (usize, bool) {
        let plain = self.all_ints && !matches!(self.source.spec, SourceSpec::JsonLines { .. });
        let arity = self.source.schema.arity();
        let mut at = 0;
        while at < text.len() {
            let rest = &text[at..];
            if plain && !self.at.header_pending {
                if let Some(n) = plain_ints_line(rest, arity, &mut self.ints) {
                    let (line, line_at) = (self.at.line + 1, self.at.offset);
                    let (offset, seen) = (self.at.offset, self.at.line);
                    (self.at.offset, self.at.line) = (line_at + n as u64, line);
                    match self.take_plain(line, line_at, out) {
                        Some(true) => {
                            at += n;
                            continue;
                        }
                        Some(false) => return (at + n, false),
                        // Out of order: the general way, as the line comes.
                        None => (self.at.offset, self.at.line) = (offset, seen),
                    }
                }
            }
            let Some(i) = memchr::memchr(b'\n', rest) else {
                break;
            };
            if !self.line(&rest[..=i], false, out) {
                return (at + i + 1, false);
            }
            at += i + 1;
        }
        (at, true)
    }

    /// A line that is not plain ints: split into fields, each parsed by its type.
    fn general(
        &mut self,
        line: u64,
        line_at: u64,
        text: &[u8],
        data: &mut Vec<u8>,
        fields: &mut Vec<Field>,
        out: &mut impl Emit,
    ) -> bool {
        let source = self.source;
        let schema: &Schema = &source.schema;
        let arity = schema.arity();
        let tcol = schema.event_time;
        let split = split_fields(text, data, fields);
        let (data, fields) = (&*data, &*fields);
        let field = |i: usize| match fields[i] {
            (a, b, _, true) => &data[a..b],
            (a, b, _, false) => &text[a..b],
        };
        if self.at.header_pending {
            self.at.header_pending = false;
            let names = split.map(|()| {
                (0..fields.len())
                    .map(|i| String::from_utf8_lossy(field(i)).trim().to_string())
                    .collect()
            });
            return header_ok(source, line, names, out);
        }
        if let Err((column, reason)) = split {
            return out.reject(line, column, reason, text);
        }
        if fields.len() != arity {
            let reason = format!("expected {arity} fields, found {}", fields.len());
            return out.reject(line, 0, reason, text);
        }
        // Event time first: it decides the window.
        let time = match tcol {
            Some(c) => match parse_field(field(c), schema.fields[c].ty, false, false) {
                Ok(Value::Int(t)) => Some(t),
                Ok(_) => None,
                Err(reason) => {
                    let reason = format!("field `{}`: {reason}", schema.fields[c].name);
                    return out.reject(line, fields[c].2, reason, text);
                }
            },
            None => None,
        };
        self.time_read(time);
        if let (Some(t), Some(c)) = (time, tcol) {
            let last_time = self.at.last_time;
            if t < last_time && !source.out_of_order {
                let reason = format!("event time {t} is before the previous record's {last_time}");
                return out.reject(line, fields[c].2, reason, text);
            }
        }
        let go = self.take_row(line, line_at, time, out, |w, key| {
            w.start_row(key);
            for (i, f) in schema.fields.iter().enumerate() {
                // The event time, parsed once.
                if let (true, Some(t)) = (Some(i) == tcol, time) {
                    w.push_value(Value::Int(t));
                    continue;
                }
                let bytes = field(i);
                if let (DataType::Int64, Some(v)) = (f.ty, ascii_int(bytes)) {
                    w.push_value(Value::Int(v));
                    continue;
                }
                if f.ty.is_array() {
                    let parsed = std::str::from_utf8(bytes)
                        .map_err(|_| format!("bytes are not UTF-8, expected {}", f.ty))
                        .and_then(|t| w.push_array_text(f.ty, t, f.nullable, f.len));
                    if let Err(reason) = parsed {
                        w.abandon_row();
                        let reason = format!("field `{}`: {reason}", f.name);
                        return Err((fields[i].2, reason));
                    }
                    continue;
                }
                match parse_field(bytes, f.ty, f.nullable, fields[i].3) {
                    Ok(v) => w.push_value(v),
                    Err(reason) => {
                        w.abandon_row(); // drops the half-built row
                        let reason = format!("field `{}`: {reason}", f.name);
                        return Err((fields[i].2, reason));
                    }
                }
            }
            Ok(())
        });
        match go {
            Ok(go) => go,
            Err((column, reason)) => out.reject(line, column, reason, text),
        }
    }

    /// A line of a JSON lines file: one object, its columns found by `paths`.
    fn json_line(
        &mut self,
        line: u64,
        line_at: u64,
        text: &[u8],
        paths: &[braid_plan::connector::JsonPath],
        out: &mut impl Emit,
    ) -> bool {
        let source = self.source;
        let schema = &source.schema;
        let object = match super::record::json_object(text) {
            Ok(o) => o,
            Err((column, reason)) => return out.reject(line, column, reason, text),
        };
        // Event time first: it decides the window.
        let time = match schema.event_time {
            Some(c) => match super::record::json_column(&object, schema, paths, c, false) {
                Ok(Value::Int(t)) => Some(t),
                Ok(_) => None,
                Err((column, reason)) => return out.reject(line, column, reason, text),
            },
            None => None,
        };
        self.time_read(time);
        if let (Some(t), Some(c)) = (time, schema.event_time) {
            let last_time = self.at.last_time;
            if t < last_time && !source.out_of_order {
                let reason = format!("event time {t} is before the previous record's {last_time}");
                return out.reject(line, c as u64 + 1, reason, text);
            }
        }
        let go = self.take_row(line, line_at, time, out, |w, key| {
            super::record::push_json(w, key, &object, schema, paths)
        });
        match go {
            Ok(go) => go,
            Err((column, reason)) => out.reject(line, column, reason, text),
        }
    }

    /// An event time read from a line (taken or refused): until a row is taken, it
    /// counts toward [`LineParser::unjudged`].
    fn time_read(&mut self, time: Option<i64>) {
        if let (Some(t), false) = (time, self.taken) {
            self.unjudged = Some(self.unjudged.map_or(t, |u| u.min(t)));
        }
    }

    /// Takes the row of `line` (starting at byte `line_at`), whose event time is
    /// `time` (not before the latest unless the stream is out of order): cuts the
    /// window where its epoch or size says, and has `fill` append the row with its key.
    /// `Ok(false)`: stop reading; `Err`: `fill`'s column and reason (the row is not
    /// taken, the window and epoch moved as for a taken row, as serial reading does).
    fn take_row(
        &mut self,
        line: u64,
        line_at: u64,
        time: Option<i64>,
        out: &mut impl Emit,
        fill: impl FnOnce(&mut Batch, RowKey) -> Result<(), (u64, String)>,
    ) -> Result<bool, (u64, String)> {
        let source = self.source;
        // Epochs never go back (a late row joins the current epoch).
        let seq = self.at.seq;
        let epoch = self.at.epoch;
        let e = self.epochs.of(source.epoch, time, seq).max(epoch);
        if !self.window.is_empty() && (e != epoch || self.window.len() >= source.window) {
            // The next window is sized for as many rows as this one had (epochs of few
            // rows make small windows, and a reader holding a chunk's windows holds
            // little more than their rows).
            let rows = (self.window.len() + self.window.len() / 4 + 1).min(source.window);
            let arity = source.schema.arity();
            let full = std::mem::replace(&mut self.window, Batch::with_capacity(arity, rows));
            if !out.window(epoch, full) {
                return Ok(false);
            }
        }
        if self.window.is_empty() {
            out.window_starts(&Before {
                offset: line_at,
                line: line - 1,
                ..self.at
            });
        }
        self.at.epoch = e;
        fill(&mut self.window, RowKey { seq, lane: 0 })?;
        // Where rows are in the text: a new note whenever a line that is no row came
        // between (faults name their row's line by it).
        if line - seq != self.line_offset {
            self.line_offset = line - seq;
            out.rows_at(seq, line);
        }
        self.at.seq += 1;
        if let Some(t) = time {
            self.at.last_time = self.at.last_time.max(t);
        }
        self.taken = true;
        Ok(true)
    }

    /// The input ended: hands on the last window.
    pub fn finish(&mut self, out: &mut impl Emit) {
        if !self.window.is_empty() {
            let arity = self.source.schema.arity();
            let last = std::mem::replace(&mut self.window, Batch::new(arity));
            out.window(self.at.epoch, last);
        }
    }
}

/// Checks a header line against the schema.
fn header_ok(
    source: &Source,
    line: u64,
    names: Result<Vec<String>, (u64, String)>,
    out: &mut impl Emit,
) -> bool {
    let schema: &Schema = &source.schema;
    match names {
        Ok(names) => {
            let ok = names.len() == schema.arity()
                && names
                    .iter()
                    .zip(&schema.fields)
                    .all(|(n, f)| n.eq_ignore_ascii_case(&f.name));
            if !ok {
                out.fatal(
                    line,
                    1,
                    format!(
                        "header has columns {}, expected {}",
                        names.join(", "),
                        schema.column_list()
                    ),
                );
            }
            ok
        }
        Err((column, reason)) => {
            out.fatal(line, column, format!("cannot read the header: {reason}"));
            false
        }
    }
}

struct Parser {
    source: Source,
    strict: bool,
    log: Arc<Mutex<RejectLog>>,
    tx: SyncSender<Msg>,
    /// Where the window being filled starts.
    window_start: Option<Resume>,
    /// Windows not yet sent, and their rows ([`BATCH_ROWS`]).
    pending: Vec<Parsed>,
    pending_rows: usize,
    /// Several windows per message (else each on its own, at once).
    batched: bool,
}

impl Parser {
    /// Sends the windows not yet sent; false when the feed is gone.
    fn flush(&mut self) -> bool {
        self.pending_rows = 0;
        self.pending.is_empty()
            || self
                .tx
                .send(Msg::Windows(std::mem::take(&mut self.pending)))
                .is_ok()
    }
}

impl Emit for Parser {
    fn window_starts(&mut self, at: &Before) {
        let (rejects, first) = match self.log.lock() {
            Ok(l) => (l.rejects.count, l.rejects.first.clone()),
            Err(_) => (0, Vec::new()),
        };
        self.window_start = Some(Resume {
            offset: at.offset,
            line: at.line,
            seq: at.seq,
            epoch: at.epoch,
            last_time: at.last_time,
            rejects,
            first,
        });
    }

    fn window(&mut self, epoch: u64, batch: Batch) -> bool {
        self.pending_rows += batch.len();
        self.pending.push((epoch, batch, self.window_start.take()));
        if self.batched && self.pending_rows < BATCH_ROWS && self.pending.len() < BATCH_WINDOWS {
            return true;
        }
        self.flush()
    }

    /// Records a malformed line. In strict mode, stops the run instead.
    fn reject(&mut self, line: u64, column: u64, reason: String, text: &[u8]) -> bool {
        if self.strict {
            self.fatal(line, column, strict_message(reason, text));
            return false;
        }
        if let Ok(mut l) = self.log.lock() {
            l.add(line, column, reason, text);
        }
        true
    }

    fn fatal(&mut self, line: u64, column: u64, message: String) {
        // The windows before the fault first, as they were read.
        self.flush();
        let _ = self.tx.send(Msg::Fatal(Error::Input {
            source_name: self.source.name.clone(),
            line,
            column,
            message,
        }));
    }

    fn rows_at(&mut self, seq: u64, line: u64) {
        if let Ok(mut l) = self.log.lock() {
            l.rejects.lines.push((seq, line));
        }
    }
}

/// The error of strict mode's first malformed line: the reason and the line's text.
pub(crate) fn strict_message(reason: String, text: &[u8]) -> String {
    let shown = String::from_utf8_lossy(&text[..text.len().min(200)]);
    let cut = if text.len() > 200 { "..." } else { "" };
    format!("{reason} (line {shown:?}{cut})")
}

impl Parser {
    fn run(mut self, mut input: Box<dyn Lines>, header: bool, at: Option<Resume>) {
        let source = self.source.clone();
        let start = match &at {
            Some(r) => Before::resumed(r),
            None => Before::start(header),
        };
        let mut parser = LineParser::new(&source, start, at.is_none());
        loop {
            // The whole lines read ahead at once; a line they do not hold whole, and
            // the end of the input, line by line.
            let (n, go) = match input.buffered() {
                Ok(block) => parser.lines(block, &mut self),
                Err(e) => {
                    let line = parser.at.line + 1;
                    self.fatal(line, 0, format!("read failed: {e}"));
                    return;
                }
            };
            input.consume(n);
            if !go {
                return;
            }
            if n > 0 {
                continue;
            }
            let (cut, buf) = match input.read_line() {
                Ok((LineEnd::End, _)) => break,
                Ok((LineEnd::Whole, buf)) => (false, buf),
                Ok((LineEnd::Cut, buf)) => (true, buf),
                Err(e) => {
                    let line = parser.at.line + 1;
                    self.fatal(line, 0, format!("read failed: {e}"));
                    return;
                }
            };
            if !parser.line(buf, cut, &mut self) {
                return;
            }
        }
        parser.finish(&mut self);
        self.flush();
        if let Ok(mut l) = self.log.lock() {
            l.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The int fast path says what the general path says whenever it says anything,
        /// and says something for every plain decimal int64.
        #[test]
        fn ascii_ints_are_what_str_parse_gives(
            text in "[ \t]{0,2}[+-]?[0-9]{0,21}[ \t\r]{0,2}|[ +\\-0-9a\u{a0}]{0,8}",
            v in any::<i64>(),
        ) {
            if let Some(got) = ascii_int(text.as_bytes()) {
                prop_assert_eq!(Ok(got), text.trim().parse::<i64>());
            }
            for plain in [v.to_string(), format!(" {v}\t"), format!("+{}", v.unsigned_abs())] {
                let want = plain.trim().parse::<i64>().ok();
                prop_assert_eq!(ascii_int(plain.as_bytes()), want, "{:?}", plain);
            }
        }
    }

    /// What the general path reads from a line of a stream of `arity` BIGINT NOT NULL
    /// columns: split into fields, each parsed on its own (shares nothing with
    /// [`plain_ints`]).
    fn field_by_field(line: &str, arity: usize) -> Option<Vec<i64>> {
        let (mut data, mut fields) = (Vec::new(), Vec::new());
        split_fields(line.as_bytes(), &mut data, &mut fields).ok()?;
        if fields.len() != arity {
            return None;
        }
        fields
            .iter()
            .map(|&(a, b, _, quoted)| {
                let bytes = if quoted {
                    &data[a..b]
                } else {
                    &line.as_bytes()[a..b]
                };
                match parse_field(bytes, DataType::Int64, false, false) {
                    Ok(Value::Int(v)) => Some(v),
                    _ => None,
                }
            })
            .collect()
    }

    /// A field: mostly a plain int, else nearly one (signs, spaces, quotes, too many
    /// digits, letters, nothing).
    fn field() -> impl Strategy<Value = (String, bool)> {
        prop_oneof![
            6 => "-?[0-9]{1,18}".prop_map(|f| (f, true)),
            1 => any::<i64>().prop_map(|v| (v.to_string(), false)),
            1 => "[ +\\-]{0,2}[0-9]{0,20}[ \t]{0,1}".prop_map(|f| (f, false)),
            1 => "\"-?[0-9]{1,3}\"|[0-9]{1,3}[a-z.;]|".prop_map(|f| (f, false)),
            // A byte next to the digits in ASCII ('/', ':', '@', `P`, `` ` ``) or a
            // multibyte character, inside or after a field of up to 9 digits.
            1 => "[0-9]{0,9}[/:@P`\u{e9}\u{1f600}][0-9]{0,9}".prop_map(|f| (f, false)),
        ]
    }

    /// Every byte that is no digit (those no UTF-8 text has too), after 0 to 17 digits
    /// of a field, makes the line one the plain reader does not answer; 1 to 18 nines,
    /// either sign, read as themselves.
    #[test]
    fn plain_ints_stop_at_any_byte_that_is_no_digit() {
        let mut v = Vec::new();
        for lead in 0..=17usize {
            // (A minus sign leading a field is one.)
            let no_digit = |b: &u8| !b.is_ascii_digit() && *b != b',' && (lead > 0 || *b != b'-');
            for b in (0u8..=255).filter(no_digit) {
                let mut line: Vec<u8> = b"7,".to_vec();
                line.extend(std::iter::repeat_n(b'1', lead));
                line.push(b);
                line.extend_from_slice(b"23,4");
                assert!(
                    !plain_ints(&line, 3, &mut v),
                    "{:?} read as {v:?}",
                    String::from_utf8_lossy(&line)
                );
            }
            let digits = "9".repeat(lead + 1);
            let line = format!("{digits},-{digits}");
            assert!(plain_ints(line.as_bytes(), 2, &mut v), "{line}");
            let n: i64 = digits.parse().unwrap();
            assert_eq!(v, [n, -n]);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whenever the one-pass reader answers, it answers what field-by-field
        /// reading does; it answers for every line of plain ints of the right arity.
        #[test]
        fn plain_int_lines_are_read_as_field_by_field(
            fields in proptest::collection::vec(field(), 0..6),
            arity in 1usize..6,
            sep in prop_oneof![8 => Just(","), 1 => Just(";"), 1 => Just(", ")],
            end in prop_oneof![8 => Just(""), 1 => Just(","), 1 => Just(" ")],
        ) {
            let line = fields.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(sep) + end;
            let mut got = Vec::new();
            let answered = plain_ints(line.as_bytes(), arity, &mut got);
            let want = field_by_field(&line, arity);
            if answered {
                prop_assert_eq!(Some(got), want, "{:?}", line);
            }
            let plain = fields.len() == arity && fields.iter().all(|f| f.1) && sep == "," && end.is_empty();
            if plain {
                prop_assert!(answered, "plain line {:?} not answered", line);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Reading a line of plain ints in the pass that finds its end gives what
        /// reading the line found first gives: the same values, for the same lines
        /// (its end `\n` or `\r\n` taken off, as `LineParser::line` takes it off), and the
        /// line's length with its end; nothing for a line the bytes do not hold whole.
        #[test]
        fn a_line_found_and_read_in_one_pass_is_read_as_found_first(
            fields in proptest::collection::vec(field(), 0..6),
            arity in 1usize..6,
            sep in prop_oneof![8 => Just(","), 1 => Just(";")],
            end in prop_oneof![4 => Just("\n"), 2 => Just("\r\n"), 1 => Just("\r\r\n"),
                1 => Just(""), 1 => Just("\r"), 1 => Just(",\n")],
            after in "[0-9,\n]{0,6}",
        ) {
            let line = fields.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(sep) + end;
            let bytes = format!("{line}{after}");
            let mut got = Vec::new();
            let one_pass = plain_ints_line(bytes.as_bytes(), arity, &mut got);
            // The line as `memchr` finds it, its end taken off as `LineParser::line` does.
            let mut want = Vec::new();
            let found = bytes.find('\n').map(|i| (i + 1, &bytes[..i]));
            let found_first = found
                .map(|(n, t)| (n, t.strip_suffix('\r').unwrap_or(t)))
                .filter(|(_, t)| plain_ints(t.as_bytes(), arity, &mut want));
            prop_assert_eq!(one_pass, found_first.map(|(n, _)| n), "{:?}", bytes);
            if one_pass.is_some() {
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn plain_int_edges() {
        let mut v = Vec::new();
        assert!(plain_ints(b"-999999999999999999,0,-0,7", 4, &mut v));
        assert_eq!(v, [-999_999_999_999_999_999, 0, 0, 7]);
        for bad in [
            &b""[..],
            b",",
            b"1,",
            b",1",
            b"1,,2",
            b"1,2,3",
            b"1",
            b"1 ,2",
            b"+1,2",
            b"1,2\r",
            b"1234567890123456789,1",
            b"--1,2",
            b"-,1",
        ] {
            assert!(
                !plain_ints(bad, 2, &mut v),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn ascii_int_edges() {
        assert_eq!(ascii_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(ascii_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(ascii_int(b"9223372036854775808"), None);
        assert_eq!(ascii_int(b"-9223372036854775809"), None);
        for bad in [&b""[..], b" ", b"-", b"+", b"1 2", b"--1", b"1e3", b"0x1"] {
            assert_eq!(ascii_int(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
