//! Braid's binary batch file, version 2: windows encoded column by column, compactly.
//!
//! # Layout
//!
//! The file opens with the ASCII header line `BRAID-BATCH 2 <arity>\n`. Windows follow
//! back to back, each:
//!
//! | bytes | field                                   |
//! |-------|-----------------------------------------|
//! | 8     | epoch, u64 little endian                |
//! | 4     | rows, u32 little endian                 |
//! | 4     | payload length in bytes, u32 little endian |
//! | n     | payload                                 |
//!
//! The payload holds, in this order:
//!
//! 1. Sequence numbers: per row, the zigzag varint of `seq - previous seq` (wrapping, read
//!    as an i64; the first row's previous seq is 0).
//! 2. Lanes: a flag byte. 0: every lane is 0 and nothing follows; 1: one varint per row.
//! 3. Per column, in schema order, a tag byte and the column's values. The low 7 bits of
//!    the tag name the encoding. Bit 7 (`0x80`) says that a null bitmap follows the tag:
//!    `ceil(rows / 8)` bytes, bit `r % 8` of byte `r / 8` set when row `r` is null. The
//!    writer sets it only for a column that has nulls; the values that follow are then
//!    those of the non-null rows, in row order.
//!    - 0, all null: nothing follows (never with a bitmap).
//!    - 1, int64: per value, its zigzag varint.
//!    - 2, int64 delta: per value, the zigzag varint of the value minus the previous value
//!      of the column (wrapping; the first value's previous is 0).
//!    - 3, float64: per value, 8 bytes of [`f64::to_bits`], little endian.
//!    - 4, bool: a bitmap of `ceil(values / 8)` bytes, bit set for true.
//!    - 5, string: per value, a varint byte length and that many bytes of UTF-8.
//!    - 6, mixed, for a column whose values have several types (never with a bitmap):
//!      per row a type byte, 0 null, 1 int64 (its zigzag varint follows), 2 float64 (8
//!      bytes as above follow), 3 false, 4 true, 5 string (varint length and bytes
//!      follow), 6 float64 array (a varint element count, then 8 bytes per element as
//!      above), 7 int64 array (a varint element count, then a zigzag varint per
//!      element). A column with an array is always mixed.
//!
//! The payload ends with the last column. Varints are unsigned LEB128 (7 bits a byte,
//! low bits first, high bit set on every byte but the last, at most 10 bytes); zigzag
//! maps `i` to `(i << 1) ^ (i >> 63)`, so small negative numbers stay short. The writer
//! picks int64 or int64 delta per column and window, whichever encodes smaller (delta
//! wins for event times and other sorted columns).
//!
//! Linear Road input takes 18.3 bytes a row (its CSV 49.2; version 1 took 196).
//!
//! Reading checks every count, length and offset: a corrupt or truncated window is an
//! [`Error::Input`] with the window's number as `line` and the fault in the message,
//! never a panic. Decoding allocates per window (the batch handed out), not per row;
//! the read buffer is reused. Version 1 files (bincode of a [`Batch`]) are recognised by
//! their header and must be regenerated.

use super::{Feed, Next, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, Datum, RowKey, Value};
use braid_plan::plan::Source;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &str = "BRAID-BATCH 2";
const MAGIC_V1: &str = "BRAID-BATCH 1";

/// Bytes before a window's payload: epoch, rows, payload length.
const WINDOW_HEAD: usize = 16;

/// Lane flags.
const LANES_ZERO: u8 = 0;
const LANES_VARINT: u8 = 1;

/// Column tags (low 7 bits) and the null-bitmap bit.
const ALL_NULL: u8 = 0;
const INT: u8 = 1;
const INT_DELTA: u8 = 2;
const FLOAT: u8 = 3;
const BOOL: u8 = 4;
const STR: u8 = 5;
const MIXED: u8 = 6;
const HAS_NULLS: u8 = 0x80;

/// Type bytes of a mixed column.
const M_NULL: u8 = 0;
const M_INT: u8 = 1;
const M_FLOAT: u8 = 2;
const M_FALSE: u8 = 3;
const M_TRUE: u8 = 4;
const M_STR: u8 = 5;
const M_FLOATS: u8 = 6;
const M_INTS: u8 = 7;

/// Writes windows to a binary batch file.
pub struct BinaryWriter {
    out: BufWriter<std::fs::File>,
    arity: usize,
    /// The window being encoded (reused).
    payload: Vec<u8>,
}

impl BinaryWriter {
    /// Creates the file and writes its header.
    pub fn create(path: &Path, arity: usize) -> Result<BinaryWriter> {
        let f = std::fs::File::create(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        writeln!(out, "{MAGIC} {arity}")
            .map_err(|e| Error::io("writing a binary batch header", e))?;
        Ok(BinaryWriter {
            out,
            arity,
            payload: Vec::new(),
        })
    }

    /// Appends one window.
    pub fn write(&mut self, epoch: u64, batch: &Batch) -> Result<()> {
        if batch.arity() != self.arity {
            return Err(Error::Internal(format!(
                "a batch of arity {} written to a binary batch file of arity {}",
                batch.arity(),
                self.arity
            )));
        }
        encode(batch, &mut self.payload);
        let too_big = |what: String| {
            Error::io(
                "writing a binary batch file",
                std::io::Error::new(std::io::ErrorKind::InvalidInput, what),
            )
        };
        let rows = u32::try_from(batch.len()).map_err(|_| {
            too_big(format!(
                "a window of {} rows (at most 2^32 - 1)",
                batch.len()
            ))
        })?;
        let len = u32::try_from(self.payload.len()).map_err(|_| {
            too_big(format!(
                "a window of {} bytes (at most 4 GiB)",
                self.payload.len()
            ))
        })?;
        let mut head = [0u8; WINDOW_HEAD];
        head[..8].copy_from_slice(&epoch.to_le_bytes());
        head[8..12].copy_from_slice(&rows.to_le_bytes());
        head[12..].copy_from_slice(&len.to_le_bytes());
        let io = |e| Error::io("writing a binary batch file", e);
        self.out.write_all(&head).map_err(io)?;
        self.out.write_all(&self.payload).map_err(io)
    }

    /// Flushes the file.
    pub fn finish(mut self) -> Result<()> {
        self.out
            .flush()
            .map_err(|e| Error::io("writing a binary batch file", e))
    }
}

/// Reads a binary batch file.
pub struct BinaryFeed {
    input: BufReader<std::fs::File>,
    name: String,
    arity: usize,
    /// Windows read so far.
    windows: u64,
    /// The payload of the window being decoded (reused).
    buf: Vec<u8>,
    /// Where the next window's head is, and the rows before it.
    offset: u64,
    rows: u64,
    /// Where the window returned last started (a checkpoint's resume point).
    last: Resume,
}

/// Where a binary file's reader was before a window: its head's byte offset, the
/// windows and rows before it.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Resume {
    offset: u64,
    windows: u64,
    rows: u64,
}

impl BinaryFeed {
    /// Opens the file and checks its header against the source's arity.
    pub fn open(path: &Path, source: &Source) -> Result<BinaryFeed> {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let mut input = BufReader::with_capacity(1 << 20, f);
        let mut header = Vec::new();
        let mut ended = false;
        let mut byte = [0u8; 1];
        while header.len() < 64 {
            match input.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => {
                    ended = true;
                    break;
                }
                Ok(1) => header.push(byte[0]),
                Ok(_) => break,
                Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
            }
        }
        let header = String::from_utf8_lossy(&header).into_owned();
        let arity = source.schema.arity();
        let expected = format!("{MAGIC} {arity}");
        if header != expected || !ended {
            let message = if header == MAGIC_V1 || header.starts_with(&format!("{MAGIC_V1} ")) {
                format!(
                    "{} is a version 1 Braid binary batch file, which this Braid no longer \
                     reads; regenerate it from its CSV with `braid convert` (Linear Road \
                     input: `braid lrb generate --binary`)",
                    path.display()
                )
            } else {
                format!(
                    "header is {header:?}{}, expected {expected:?} and a newline (a Braid \
                     binary batch file of this schema)",
                    if ended { "" } else { " without a newline" }
                )
            };
            return Err(Error::Input {
                source_name: source.name.clone(),
                line: 1,
                column: 1,
                message,
            });
        }
        let offset = header.len() as u64 + 1;
        Ok(BinaryFeed {
            input,
            name: source.name.clone(),
            arity,
            windows: 0,
            buf: Vec::new(),
            offset,
            rows: 0,
            last: Resume {
                offset,
                ..Resume::default()
            },
        })
    }

    /// [`BinaryFeed::open`], going on from a resume point a reader of the same file
    /// gave (a checkpoint); the rows before it are counted as read.
    pub fn open_at(
        path: &Path,
        source: &Source,
        resume: &[u8],
        counters: &super::Counters,
    ) -> Result<BinaryFeed> {
        let at: Resume = serde_json::from_slice(resume).map_err(|e| {
            Error::Internal(format!(
                "the checkpoint's position in {}: {e}",
                path.display()
            ))
        })?;
        let mut feed = BinaryFeed::open(path, source)?;
        use std::io::Seek;
        feed.input
            .seek(std::io::SeekFrom::Start(at.offset))
            .map_err(|e| Error::io(format!("seeking in {}", path.display()), e))?;
        feed.offset = at.offset;
        feed.windows = at.windows;
        feed.rows = at.rows;
        feed.last = at;
        super::Counters::add(&counters.rows_in, at.rows);
        Ok(feed)
    }

    fn corrupt(&self, window: u64, reason: impl std::fmt::Display) -> Error {
        Error::Input {
            source_name: self.name.clone(),
            line: window,
            column: 0,
            message: format!("window {window}: {reason}"),
        }
    }
}

impl Feed for BinaryFeed {
    fn next(&mut self) -> Result<Next> {
        let window = self.windows + 1;
        let mut head = [0u8; WINDOW_HEAD];
        let mut got = 0;
        while got < WINDOW_HEAD {
            match self.input.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(format!("reading {}", self.name), e)),
            }
        }
        if got == 0 {
            return Ok(Next::Done);
        }
        if got < WINDOW_HEAD {
            return Err(self.corrupt(
                window,
                format!("truncated: the file ends {got} bytes into the window's 16-byte head"),
            ));
        }
        let epoch = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let rows = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
        let len = u32::from_le_bytes(head[12..].try_into().expect("4 bytes"));
        // Read through `take`, so a corrupt length cannot allocate more than the file has.
        self.buf.clear();
        (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut self.buf)
            .map_err(|e| Error::io(format!("reading {}", self.name), e))?;
        if self.buf.len() < len as usize {
            return Err(self.corrupt(
                window,
                format!(
                    "truncated: the file ends {} bytes into a payload of {len}",
                    self.buf.len()
                ),
            ));
        }
        self.last = Resume {
            offset: self.offset,
            windows: self.windows,
            rows: self.rows,
        };
        self.windows = window;
        self.offset += (WINDOW_HEAD + self.buf.len()) as u64;
        self.rows += rows as u64;
        match decode(&self.buf, rows, self.arity) {
            Ok(batch) => Ok(Next::Window(epoch, batch)),
            Err(reason) => Err(self.corrupt(window, reason)),
        }
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&self.last).ok()
    }

    fn rejects(&mut self) -> Rejects {
        Rejects {
            source: self.name.clone(),
            ..Rejects::default()
        }
    }
}

/// Reads all of `source` (as worker 0 of 1) and writes it to a binary batch file at
/// `out`, window by window. Returns the rows written and the malformed-record report.
pub fn convert(
    source: &Source,
    out: &Path,
    opts: &super::ReadOptions,
    registry: &braid_plan::function::Registry,
) -> Result<(u64, Rejects)> {
    let counters = std::sync::Arc::new(super::Counters::default());
    let mut feed = super::open(source, 0, 1, opts, counters, registry)?
        .ok_or_else(|| Error::Internal("worker 0 reads every source".into()))?;
    let mut writer = BinaryWriter::create(out, source.schema.arity())?;
    let mut rows = 0u64;
    loop {
        match feed.next()? {
            Next::Window(epoch, batch) => {
                rows += batch.len() as u64;
                writer.write(epoch, &batch)?;
            }
            Next::Wait => std::thread::sleep(std::time::Duration::from_micros(200)),
            Next::Done => break,
        }
    }
    writer.finish()?;
    Ok((rows, feed.rejects()))
}

// ---------------------------------------------------------------------------------------
// Encoding

fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn varint_len(u: u64) -> usize {
    // 1 byte per started group of 7 significant bits (0 takes one byte).
    (64 - (u | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push(u as u8 | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// Sets bit `i` of the bitmap starting at `out[start]`.
fn set_bit(out: &mut [u8], start: usize, i: usize) {
    out[start + i / 8] |= 1 << (i % 8);
}

/// Encodes `batch` as a window payload into `out` (cleared first).
fn encode(batch: &Batch, out: &mut Vec<u8>) {
    out.clear();
    let mut prev = 0u64;
    for k in batch.keys() {
        put_varint(out, zigzag(k.seq.wrapping_sub(prev) as i64));
        prev = k.seq;
    }
    if batch.keys().iter().all(|k| k.lane == 0) {
        out.push(LANES_ZERO);
    } else {
        out.push(LANES_VARINT);
        for k in batch.keys() {
            put_varint(out, k.lane);
        }
    }
    for c in 0..batch.arity() {
        encode_column(batch, c, out);
    }
}

fn encode_column(batch: &Batch, c: usize, out: &mut Vec<u8>) {
    let rows = batch.len();
    let column = || batch.column(c);
    // Which types occur, how many nulls, and the int encodings' sizes.
    let (mut ints, mut floats, mut bools, mut strs, mut nulls) = (0, 0, 0, 0, 0);
    let mut arrays = 0;
    let (mut plain, mut delta, mut prev) = (0usize, 0usize, 0i64);
    for d in column() {
        match d {
            Datum::Null => nulls += 1,
            Datum::Int(i) => {
                ints += 1;
                plain += varint_len(zigzag(i));
                delta += varint_len(zigzag(i.wrapping_sub(prev)));
                prev = i;
            }
            Datum::Float(_) => floats += 1,
            Datum::Bool(_) => bools += 1,
            Datum::Str(..) => strs += 1,
            Datum::Floats(..) | Datum::Ints(..) => arrays += 1,
        }
    }
    let tag = if nulls == rows {
        ALL_NULL
    } else if arrays > 0 {
        MIXED
    } else if ints + nulls == rows {
        if delta < plain {
            INT_DELTA
        } else {
            INT
        }
    } else if floats + nulls == rows {
        FLOAT
    } else if bools + nulls == rows {
        BOOL
    } else if strs + nulls == rows {
        STR
    } else {
        MIXED
    };
    if tag == ALL_NULL || tag == MIXED || nulls == 0 {
        out.push(tag);
    } else {
        out.push(tag | HAS_NULLS);
        let start = out.len();
        out.resize(start + rows.div_ceil(8), 0);
        for (r, d) in column().enumerate() {
            if d == Datum::Null {
                set_bit(out, start, r);
            }
        }
    }
    match tag {
        INT => {
            for d in column() {
                if let Datum::Int(i) = d {
                    put_varint(out, zigzag(i));
                }
            }
        }
        INT_DELTA => {
            let mut prev = 0i64;
            for d in column() {
                if let Datum::Int(i) = d {
                    put_varint(out, zigzag(i.wrapping_sub(prev)));
                    prev = i;
                }
            }
        }
        FLOAT => {
            for d in column() {
                if let Datum::Float(f) = d {
                    out.extend_from_slice(&f.to_bits().to_le_bytes());
                }
            }
        }
        BOOL => {
            let start = out.len();
            out.resize(start + bools.div_ceil(8), 0);
            let values = column().filter_map(|d| match d {
                Datum::Bool(b) => Some(b),
                _ => None,
            });
            for (i, b) in values.enumerate() {
                if b {
                    set_bit(out, start, i);
                }
            }
        }
        STR => {
            for d in column() {
                if let Datum::Str(..) = d {
                    put_str(out, batch, d);
                }
            }
        }
        MIXED => {
            for d in column() {
                match d {
                    Datum::Null => out.push(M_NULL),
                    Datum::Int(i) => {
                        out.push(M_INT);
                        put_varint(out, zigzag(i));
                    }
                    Datum::Float(f) => {
                        out.push(M_FLOAT);
                        out.extend_from_slice(&f.to_bits().to_le_bytes());
                    }
                    Datum::Bool(b) => out.push(if b { M_TRUE } else { M_FALSE }),
                    Datum::Str(..) => {
                        out.push(M_STR);
                        put_str(out, batch, d);
                    }
                    Datum::Floats(..) => {
                        out.push(M_FLOATS);
                        let Value::Floats(a) = batch.value(d) else {
                            unreachable!("a float array datum")
                        };
                        put_varint(out, a.len() as u64);
                        for x in a {
                            out.extend_from_slice(&x.to_bits().to_le_bytes());
                        }
                    }
                    Datum::Ints(..) => {
                        out.push(M_INTS);
                        let Value::Ints(a) = batch.value(d) else {
                            unreachable!("an int array datum")
                        };
                        put_varint(out, a.len() as u64);
                        for &x in a {
                            put_varint(out, zigzag(x));
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

fn put_str(out: &mut Vec<u8>, batch: &Batch, d: Datum) {
    let s = match batch.value(d) {
        braid_plan::batch::Value::Str(s) => s,
        _ => "",
    };
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

// ---------------------------------------------------------------------------------------
// Decoding

const TRUNCATED: &str = "truncated";

/// A bounds-checked reader over a payload.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn byte(&mut self) -> Result<u8, &'static str> {
        let b = *self.buf.get(self.pos).ok_or(TRUNCATED)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.buf.len() - self.pos {
            return Err(TRUNCATED);
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut x = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err("varint longer than 64 bits");
            }
            x |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(x);
            }
            shift += 7;
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// Whether row `r` is null in an optional null bitmap.
#[inline]
fn is_null(nulls: Option<&[u8]>, r: usize) -> bool {
    nulls.is_some_and(|b| b[r / 8] & (1 << (r % 8)) != 0)
}

/// Decodes a window payload of `rows` rows of `arity` columns. The error says what is
/// wrong (without the window number).
fn decode(payload: &[u8], rows: usize, arity: usize) -> Result<Batch, String> {
    // Each row takes at least one byte (its sequence number): this bounds what a corrupt
    // row count can make us allocate.
    if rows > payload.len() {
        return Err(format!(
            "{rows} rows cannot fit in a payload of {} bytes",
            payload.len()
        ));
    }
    let mut cur = Cursor {
        buf: payload,
        pos: 0,
    };
    let mut keys = Vec::with_capacity(rows);
    let mut seq = 0u64;
    for _ in 0..rows {
        let d = cur.varint().map_err(|e| format!("sequence numbers: {e}"))?;
        seq = seq.wrapping_add(unzigzag(d) as u64);
        keys.push(RowKey { seq, lane: 0 });
    }
    match cur.byte().map_err(|e| format!("lanes: {e}"))? {
        LANES_ZERO => {}
        LANES_VARINT => {
            for k in &mut keys {
                k.lane = cur.varint().map_err(|e| format!("lanes: {e}"))?;
            }
        }
        f => return Err(format!("lanes: unknown flag {f}")),
    }
    let cells = rows
        .checked_mul(arity)
        .ok_or_else(|| format!("{rows} rows of arity {arity} are too many"))?;
    let mut data = vec![Datum::Null; cells];
    let mut strings = String::new();
    let mut arenas = (Vec::new(), Vec::new());
    for c in 0..arity {
        decode_column(
            &mut cur,
            &mut data,
            &mut strings,
            &mut arenas,
            rows,
            arity,
            c,
        )?;
    }
    if cur.remaining() > 0 {
        return Err(format!(
            "{} bytes left over after the last column",
            cur.remaining()
        ));
    }
    Batch::from_parts_with_arrays(arity, keys, data, strings, arenas.0, arenas.1)
        .map_err(|e| format!("internal error (a bug in Braid): {e}"))
}

fn decode_column(
    cur: &mut Cursor<'_>,
    data: &mut [Datum],
    strings: &mut String,
    arenas: &mut (Vec<f64>, Vec<i64>),
    rows: usize,
    arity: usize,
    c: usize,
) -> Result<(), String> {
    let n = c + 1;
    let tag = cur
        .byte()
        .map_err(|e| format!("column {n}: {e} before its tag"))?;
    let kind = tag & !HAS_NULLS;
    let name = match kind {
        ALL_NULL => "all-null",
        INT | INT_DELTA => "int",
        FLOAT => "float",
        BOOL => "bool",
        STR => "string",
        MIXED => "mixed",
        _ => return Err(format!("column {n}: unknown tag {tag:#04x}")),
    };
    let fail = |e: &str| format!("{name} column {n}: {e}");
    let nulls = if tag & HAS_NULLS == 0 {
        None
    } else if kind == ALL_NULL || kind == MIXED {
        return Err(fail("null bitmap on a column that cannot have one"));
    } else {
        Some(cur.bytes(rows.div_ceil(8)).map_err(fail)?)
    };
    // Row r's cell is cells[r] (`arity` is at least 1 here: there is a column).
    let cells = data.iter_mut().skip(c).step_by(arity);
    match kind {
        ALL_NULL => {}
        INT | INT_DELTA => {
            let delta = kind == INT_DELTA;
            let mut prev = 0i64;
            for (r, cell) in cells.enumerate() {
                if is_null(nulls, r) {
                    continue;
                }
                let mut v = unzigzag(cur.varint().map_err(fail)?);
                if delta {
                    v = prev.wrapping_add(v);
                    prev = v;
                }
                *cell = Datum::Int(v);
            }
        }
        FLOAT => {
            for (r, cell) in cells.enumerate() {
                if !is_null(nulls, r) {
                    *cell = Datum::Float(read_f64(cur).map_err(fail)?);
                }
            }
        }
        BOOL => {
            let values = (0..rows).filter(|&r| !is_null(nulls, r)).count();
            let bits = cur.bytes(values.div_ceil(8)).map_err(fail)?;
            let mut i = 0;
            for (r, cell) in cells.enumerate() {
                if !is_null(nulls, r) {
                    *cell = Datum::Bool(bits[i / 8] & (1 << (i % 8)) != 0);
                    i += 1;
                }
            }
        }
        STR => {
            for (r, cell) in cells.enumerate() {
                if !is_null(nulls, r) {
                    *cell = read_str(cur, strings).map_err(fail)?;
                }
            }
        }
        _ => {
            for cell in cells {
                *cell = match cur.byte().map_err(fail)? {
                    M_NULL => Datum::Null,
                    M_INT => Datum::Int(unzigzag(cur.varint().map_err(fail)?)),
                    M_FLOAT => Datum::Float(read_f64(cur).map_err(fail)?),
                    M_FALSE => Datum::Bool(false),
                    M_TRUE => Datum::Bool(true),
                    M_STR => read_str(cur, strings).map_err(fail)?,
                    M_FLOATS => {
                        let (len, off) = array_start(cur, arenas.0.len()).map_err(fail)?;
                        for _ in 0..len {
                            arenas.0.push(read_f64(cur).map_err(fail)?);
                        }
                        Datum::Floats(off, len as u32)
                    }
                    M_INTS => {
                        let (len, off) = array_start(cur, arenas.1.len()).map_err(fail)?;
                        for _ in 0..len {
                            arenas.1.push(unzigzag(cur.varint().map_err(fail)?));
                        }
                        Datum::Ints(off, len as u32)
                    }
                    t => return Err(fail(&format!("unknown value type {t}"))),
                };
            }
        }
    }
    Ok(())
}

/// An array's element count (bounded by the bytes left: every element takes one at
/// least) and its offset in an arena of `arena` elements.
fn array_start(cur: &mut Cursor<'_>, arena: usize) -> Result<(usize, u32), &'static str> {
    let len = usize::try_from(cur.varint()?).map_err(|_| TRUNCATED)?;
    if len > cur.remaining() {
        return Err(TRUNCATED);
    }
    let off = u32::try_from(arena).map_err(|_| "arrays over 2^32 elements")?;
    u32::try_from(arena + len).map_err(|_| "arrays over 2^32 elements")?;
    Ok((len, off))
}

fn read_f64(cur: &mut Cursor<'_>) -> Result<f64, &'static str> {
    let b = cur.bytes(8)?;
    Ok(f64::from_bits(u64::from_le_bytes(
        b.try_into().expect("8 bytes"),
    )))
}

/// Reads a length-prefixed string into the arena.
fn read_str(cur: &mut Cursor<'_>, strings: &mut String) -> Result<Datum, &'static str> {
    let len = usize::try_from(cur.varint()?).map_err(|_| TRUNCATED)?;
    let s = std::str::from_utf8(cur.bytes(len)?).map_err(|_| "invalid UTF-8")?;
    let off = u32::try_from(strings.len()).map_err(|_| "strings over 4 GiB")?;
    let len = u32::try_from(len).map_err(|_| "a string over 4 GiB")?;
    off.checked_add(len).ok_or("strings over 4 GiB")?;
    strings.push_str(s);
    Ok(Datum::Str(off, len))
}

#[cfg(test)]
mod tests {
    //! Round trips of random batches (every column encoding, seqs and lanes), through
    //! memory and through files; truncation at every byte and random corruption (an
    //! error, never a panic); the version 1 header; and the size of Linear Road windows
    //! against their CSV text.

    use super::*;
    use braid_plan::batch::{Scalar, Value};
    use braid_plan::plan::{Plan, SourceSpec};
    use braid_plan::types::Schema;
    use proptest::prelude::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh file name in the temp directory.
    fn temp_path(what: &str) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!(
            "braid-binary-{}-{what}-{n}.bin",
            std::process::id()
        ))
    }

    fn source(path: &Path, arity: usize) -> Source {
        let names: Vec<String> = (0..arity).map(|c| format!("c{c}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Plan::source(
            "s",
            SourceSpec::Binary {
                path: path.to_path_buf(),
            },
            Schema::ints(&names),
        )
        .leaf_source()
        .clone()
    }

    /// Keys and values, with floats compared by bits (`Scalar` orders by `total_cmp`).
    fn rows_of(b: &Batch) -> Vec<(RowKey, Vec<Scalar>)> {
        b.rows().map(|r| (r.key(), r.to_scalars())).collect()
    }

    fn batch_of(arity: usize, keys: &[RowKey], columns: &[Vec<Scalar>]) -> Batch {
        let mut b = Batch::new(arity);
        for (r, key) in keys.iter().enumerate() {
            b.start_row(*key);
            for col in columns {
                b.push_value(col[r].as_value());
            }
        }
        b
    }

    /// Writes `windows` to a file and returns its bytes.
    fn file_bytes(arity: usize, windows: &[(u64, Batch)]) -> Vec<u8> {
        let path = temp_path("w");
        let mut w = BinaryWriter::create(&path, arity).unwrap();
        for (epoch, b) in windows {
            w.write(*epoch, b).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    /// Reads a file of these bytes to its end (or first error).
    fn read_bytes(bytes: &[u8], arity: usize) -> Result<Vec<(u64, Batch)>> {
        let path = temp_path("r");
        std::fs::write(&path, bytes).unwrap();
        let result = (|| -> Result<Vec<(u64, Batch)>> {
            let mut feed = BinaryFeed::open(&path, &source(&path, arity))?;
            let mut out = Vec::new();
            loop {
                match feed.next()? {
                    Next::Window(e, b) => out.push((e, b)),
                    Next::Wait => unreachable!("a binary feed never waits"),
                    Next::Done => return Ok(out),
                }
            }
        })();
        std::fs::remove_file(&path).unwrap();
        result
    }

    fn int() -> BoxedStrategy<i64> {
        prop_oneof![
            -100i64..100,
            any::<i64>(),
            Just(i64::MIN),
            Just(i64::MAX),
            Just(0),
            Just(-1),
        ]
        .boxed()
    }

    fn float() -> BoxedStrategy<f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            -1e6f64..1e6,
        ]
        .boxed()
    }

    fn string() -> BoxedStrategy<String> {
        prop_oneof![Just(String::new()), "\\PC{0,6}", Just("ä€😀x".to_string())].boxed()
    }

    fn value(kind: u8) -> BoxedStrategy<Scalar> {
        match kind {
            0 => int().prop_map(Scalar::Int).boxed(),
            1 => float().prop_map(Scalar::Float).boxed(),
            2 => any::<bool>().prop_map(Scalar::Bool).boxed(),
            3 => string().prop_map(Scalar::Str).boxed(),
            4 => prop::collection::vec(float(), 0..6)
                .prop_map(Scalar::Floats)
                .boxed(),
            5 => prop::collection::vec(int(), 0..6)
                .prop_map(Scalar::Ints)
                .boxed(),
            _ => Just(Scalar::Null).boxed(),
        }
    }

    /// A column of `rows` values: one type (with or without nulls), several types, all
    /// null, or sorted ints (for the delta encoding).
    fn column(rows: usize) -> BoxedStrategy<Vec<Scalar>> {
        let one_type = (0u8..6, any::<bool>()).prop_flat_map(move |(kind, nullable)| {
            let v = if nullable {
                prop_oneof![3 => value(kind), 1 => Just(Scalar::Null)].boxed()
            } else {
                value(kind)
            };
            prop::collection::vec(v, rows)
        });
        let mixed = prop::collection::vec((0u8..7).prop_flat_map(value), rows);
        let sorted = (int(), prop::collection::vec(0i64..1000, rows)).prop_map(|(start, steps)| {
            let mut t = start;
            steps
                .into_iter()
                .map(|s| {
                    t = t.wrapping_add(s);
                    Scalar::Int(t)
                })
                .collect()
        });
        prop_oneof![
            4 => one_type,
            2 => mixed,
            1 => Just(vec![Scalar::Null; rows]),
            2 => sorted,
        ]
        .boxed()
    }

    fn keys(rows: usize) -> BoxedStrategy<Vec<RowKey>> {
        let seq = prop_oneof![
            any::<u64>(),
            0u64..1000,
            Just(RowKey::END_OF_EPOCH),
            Just(RowKey::FINISH)
        ];
        let lane = prop_oneof![3 => Just(0u64), 1 => any::<u64>()];
        (
            prop::collection::vec((seq, lane), rows),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(keys, zero_lanes, ascending)| {
                keys.into_iter()
                    .enumerate()
                    .map(|(i, (seq, lane))| RowKey {
                        seq: if ascending { 1000 + i as u64 } else { seq },
                        lane: if zero_lanes { 0 } else { lane },
                    })
                    .collect()
            })
            .boxed()
    }

    fn batch() -> impl Strategy<Value = Batch> {
        (0usize..5, 0usize..40).prop_flat_map(|(arity, rows)| {
            (keys(rows), prop::collection::vec(column(rows), arity))
                .prop_map(move |(keys, columns)| batch_of(arity, &keys, &columns))
        })
    }

    fn round_trip(b: &Batch) -> Batch {
        let mut payload = Vec::new();
        encode(b, &mut payload);
        decode(&payload, b.len(), b.arity()).unwrap()
    }

    proptest! {
        #[test]
        fn random_batches_round_trip(b in batch()) {
            prop_assert_eq!(rows_of(&round_trip(&b)), rows_of(&b));
        }

        #[test]
        fn files_round_trip(windows in prop::collection::vec((any::<u64>(), batch()), 0..4)) {
            // One arity per file: reshape every window to the first one's arity.
            let arity = windows.first().map_or(2, |(_, b)| b.arity());
            let windows: Vec<(u64, Batch)> = windows
                .into_iter()
                .filter(|(_, b)| b.arity() == arity)
                .collect();
            let read = read_bytes(&file_bytes(arity, &windows), arity).unwrap();
            prop_assert_eq!(read.len(), windows.len());
            for ((e1, b1), (e2, b2)) in read.iter().zip(&windows) {
                prop_assert_eq!(e1, e2);
                prop_assert_eq!(rows_of(b1), rows_of(b2));
            }
        }

        /// Corrupt payloads (and row counts) decode to an error or a batch, never panic.
        #[test]
        fn corrupt_payloads_do_not_panic(
            b in batch(),
            flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
            rows in prop_oneof![3 => Just(None), 1 => any::<u32>().prop_map(Some)],
        ) {
            let mut payload = Vec::new();
            encode(&b, &mut payload);
            if !payload.is_empty() {
                for (at, x) in &flips {
                    let i = at % payload.len();
                    payload[i] ^= x;
                }
            }
            let rows = rows.map_or(b.len(), |r| r as usize);
            if let Ok(d) = decode(&payload, rows, b.arity()) {
                prop_assert_eq!(d.len(), rows);
            }
        }

        /// Corrupt files (header, window heads, payloads) read to an error or to the end,
        /// never panic.
        #[test]
        fn corrupt_files_do_not_panic(
            windows in prop::collection::vec(batch(), 1..3),
            flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
        ) {
            let arity = windows[0].arity();
            let windows: Vec<(u64, Batch)> = windows
                .into_iter()
                .filter(|b| b.arity() == arity)
                .enumerate()
                .map(|(e, b)| (e as u64, b))
                .collect();
            let mut bytes = file_bytes(arity, &windows);
            for (at, x) in &flips {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
            let _ = read_bytes(&bytes, arity);
        }
    }

    /// A small file of three windows with every column encoding.
    fn small_file() -> (usize, Vec<(u64, Batch)>) {
        let keys: Vec<RowKey> = (0..3)
            .map(|i| RowKey {
                seq: 10 + i,
                lane: i * 7,
            })
            .collect();
        let columns = vec![
            vec![Scalar::Int(5), Scalar::Int(-300), Scalar::Int(i64::MIN)],
            vec![Scalar::Int(100), Scalar::Int(101), Scalar::Null],
            vec![Scalar::Float(-0.0), Scalar::Null, Scalar::Float(1.5)],
            vec![Scalar::Bool(true), Scalar::Bool(false), Scalar::Bool(true)],
            vec![
                Scalar::Str("ä€".into()),
                Scalar::Str(String::new()),
                Scalar::Null,
            ],
            vec![Scalar::Int(1), Scalar::Str("x".into()), Scalar::Bool(false)],
            vec![Scalar::Null; 3],
        ];
        let b = batch_of(columns.len(), &keys, &columns);
        let empty = Batch::new(columns.len());
        (columns.len(), vec![(0, b.clone()), (1, empty), (7, b)])
    }

    #[test]
    fn truncation_at_every_byte_is_an_error() {
        let (arity, windows) = small_file();
        let bytes = file_bytes(arity, &windows);
        // Offsets where a whole number of windows ends: those prefixes are valid files.
        let header = format!("{MAGIC} {arity}\n").len();
        let mut ends = vec![header];
        let mut at = header;
        while at < bytes.len() {
            let len = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap());
            at += WINDOW_HEAD + len as usize;
            ends.push(at);
        }
        assert_eq!(at, bytes.len());
        for cut in 0..bytes.len() {
            match read_bytes(&bytes[..cut], arity) {
                Ok(read) => {
                    let k = ends
                        .iter()
                        .position(|&e| e == cut)
                        .unwrap_or_else(|| panic!("a file cut at {cut} read without error"));
                    assert_eq!(read.len(), k, "cut at {cut}");
                    for ((e1, b1), (e2, b2)) in read.iter().zip(&windows) {
                        assert_eq!((e1, rows_of(b1)), (e2, rows_of(b2)));
                    }
                }
                Err(Error::Input { line, message, .. }) if cut >= header => {
                    let window = ends.iter().filter(|&&e| e <= cut).count() as u64;
                    assert_eq!(line, window, "cut at {cut}: {message}");
                    assert!(
                        message.starts_with(&format!("window {window}: truncated")),
                        "cut at {cut}: {message}"
                    );
                }
                Err(Error::Input { line: 1, .. }) => {}
                Err(e) => panic!("cut at {cut}: unexpected error {e}"),
            }
        }
        assert_eq!(read_bytes(&bytes, arity).unwrap().len(), 3);
    }

    #[test]
    fn corrupt_windows_say_what_is_wrong() {
        let keys = [RowKey::default(); 2];
        let columns = vec![
            vec![Scalar::Int(1), Scalar::Int(2)],
            vec![Scalar::Str("ab".into()), Scalar::Str("c".into())],
        ];
        let b = batch_of(2, &keys, &columns);
        let mut payload = Vec::new();
        encode(&b, &mut payload);
        // seqs (2 bytes), lane flag, int column tag and 2 values, string tag, "ab".
        assert_eq!(payload[6], STR);
        payload[8] = 0xff;
        let e = decode(&payload, 2, 2).unwrap_err();
        assert_eq!(e, "string column 2: invalid UTF-8");
        let e = decode(&payload[..5], 2, 2).unwrap_err();
        assert_eq!(e, "int column 1: truncated");
        payload[3] = 0x7f;
        let e = decode(&payload, 2, 2).unwrap_err();
        assert_eq!(e, "column 1: unknown tag 0x7f");

        let mut bytes = file_bytes(2, &[(0, b.clone()), (1, b.clone())]);
        let last = bytes.len() - 3;
        bytes[last] = 0xff;
        match read_bytes(&bytes, 2) {
            Err(Error::Input {
                line: 2, message, ..
            }) => assert_eq!(message, "window 2: string column 2: invalid UTF-8"),
            other => panic!("{:?}", other.map(|w| w.len())),
        }
    }

    #[test]
    fn version_1_files_are_refused_with_a_way_out() {
        let path = temp_path("v1");
        std::fs::write(&path, b"BRAID-BATCH 1 15\n\0\0\0\0").unwrap();
        let e = BinaryFeed::open(&path, &source(&path, 15)).err().unwrap();
        std::fs::remove_file(&path).unwrap();
        let Error::Input { line, message, .. } = e else {
            panic!("{e}");
        };
        assert_eq!(line, 1);
        assert!(message.contains("version 1"), "{message}");
        assert!(message.contains("braid convert"), "{message}");
        assert!(message.contains("braid lrb generate --binary"), "{message}");
    }

    #[test]
    fn sorted_int_columns_use_deltas() {
        let keys: Vec<RowKey> = (0..100).map(|seq| RowKey { seq, lane: 0 }).collect();
        let times: Vec<Scalar> = (0..100).map(|i| Scalar::Int(1_000_000 + i)).collect();
        let b = batch_of(1, &keys, &[times]);
        let mut payload = Vec::new();
        encode(&b, &mut payload);
        // 100 seqs and the lane flag, then the tag.
        assert_eq!(payload[101], INT_DELTA);
        // The first value takes 3 bytes, the other 99 one each.
        assert_eq!(payload.len(), 101 + 1 + 3 + 99);
    }

    /// A deterministic stand-in for Linear Road input: position reports and a few
    /// queries, in time order.
    fn lr_window(rows: usize, time: i64, rng: &mut u64) -> Batch {
        let mut next = |n: i64| {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            (*rng % n as u64) as i64
        };
        let mut b = Batch::with_capacity(15, rows);
        for i in 0..rows {
            let ty = if next(100) < 98 { 0 } else { 2 + next(3) };
            let query = |q: i64| if ty == 0 { -1 } else { q };
            let row = [
                ty,
                time,
                next(200_000),
                next(101),
                next(10),
                next(5),
                next(2),
                next(100),
                next(528_000),
                query(next(10_000)),
                query(next(100)),
                query(next(100)),
                query(next(7)),
                query(next(1440)),
                query(1 + next(69)),
            ];
            b.push_ints(
                RowKey {
                    seq: time as u64 * 10_000 + i as u64,
                    lane: 0,
                },
                &row,
            );
        }
        b
    }

    fn csv_len(b: &Batch) -> usize {
        b.rows()
            .map(|r| {
                let fields: Vec<String> = (0..r.arity()).map(|c| r.get(c).to_string()).collect();
                fields.join(",").len() + 1
            })
            .sum()
    }

    #[test]
    fn linear_road_windows_are_smaller_than_their_csv() {
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        let (mut encoded, mut csv, mut rows) = (0, 0, 0);
        let mut payload = Vec::new();
        for time in (0..10_800).step_by(1200) {
            let b = lr_window(4096, time, &mut rng);
            encode(&b, &mut payload);
            encoded += WINDOW_HEAD + payload.len();
            csv += csv_len(&b);
            rows += b.len();
            assert_eq!(
                rows_of(&decode(&payload, b.len(), 15).unwrap()),
                rows_of(&b)
            );
        }
        let per_row = encoded as f64 / rows as f64;
        let csv_per_row = csv as f64 / rows as f64;
        eprintln!("Linear Road-shaped rows: {per_row:.1} bytes (CSV {csv_per_row:.1})");
        assert!(encoded < csv, "{encoded} bytes encoded, {csv} bytes of CSV");
        // One byte per key, and at most 3 per value (vid, pos), most of them 1.
        assert!(per_row < 24.0, "{per_row} bytes per row");
    }

    #[test]
    fn a_batch_of_the_wrong_arity_is_not_written() {
        let path = temp_path("arity");
        let mut w = BinaryWriter::create(&path, 2).unwrap();
        assert!(matches!(
            w.write(0, &Batch::new(3)),
            Err(Error::Internal(_))
        ));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn from_parts_checks_strings() {
        let key = RowKey::default();
        let ok = Batch::from_parts(1, vec![key], vec![Datum::Str(0, 2)], "ä".into());
        assert_eq!(ok.unwrap().row(0).get(0), Value::Str("ä"));
        assert!(Batch::from_parts(1, vec![key], vec![Datum::Str(1, 1)], "ä".into()).is_err());
        assert!(Batch::from_parts(1, vec![key], vec![Datum::Str(0, 3)], "ä".into()).is_err());
        assert!(Batch::from_parts(2, vec![key], vec![Datum::Null], String::new()).is_err());
    }
}
