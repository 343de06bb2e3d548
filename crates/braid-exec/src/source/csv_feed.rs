//! CSV sources (file, stdin, TCP): a thread parses records into windows.

use super::{Counters, Feed, Next, ReadOptions, RejectLog, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::plan::Source;
use braid_plan::reference::epoch_of;
use braid_plan::types::{DataType, Schema};
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};

enum Msg {
    Window(u64, Batch),
    Fatal(Error),
}

/// A CSV source read on its own thread.
pub(crate) struct CsvFeed {
    rx: Receiver<Msg>,
    log: Arc<Mutex<RejectLog>>,
    name: String,
}

/// Parses one field as `ty`. Empty text is null where allowed.
pub fn parse_field(bytes: &[u8], ty: DataType, nullable: bool) -> Result<Value<'_>, String> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| format!("bytes are not UTF-8, expected {ty}"))?;
    let t = text.trim();
    if t.is_empty() {
        return if nullable {
            Ok(Value::Null)
        } else {
            Err(format!("empty, expected {ty}"))
        };
    }
    let shown = || t.chars().take(40).collect::<String>();
    match ty {
        DataType::Int64 => t
            .parse()
            .map(Value::Int)
            .map_err(|_| format!("{:?} is not an int64", shown())),
        DataType::Float64 => t
            .parse()
            .map(Value::Float)
            .map_err(|_| format!("{:?} is not a float64", shown())),
        DataType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "t" | "1" => Ok(Value::Bool(true)),
            "false" | "f" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("{:?} is not a bool (true/false)", shown())),
        },
        DataType::String => Ok(Value::Str(text)),
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
        let log = Arc::new(Mutex::new(RejectLog::new(
            &source.name,
            opts,
            counters.clone(),
        )?));
        let (tx, rx) = sync_channel(64);
        let parser = Parser {
            source: source.clone(),
            strict: opts.strict,
            log: log.clone(),
            counters,
            tx,
        };
        std::thread::Builder::new()
            .name(format!("braid-read-{}", source.name))
            .spawn(move || parser.run(reader, header))
            .map_err(|e| Error::io("starting a reader thread", e))?;
        Ok(CsvFeed {
            rx,
            log,
            name: source.name.clone(),
        })
    }

    /// Listens on `addr` and parses line-delimited CSV from `opts.tcp_clients` clients,
    /// one after the other. A client that disconnects mid-line loses only that line,
    /// which is counted as malformed.
    pub fn spawn_tcp(
        source: &Source,
        addr: &str,
        opts: &ReadOptions,
        counters: Arc<Counters>,
    ) -> Result<CsvFeed> {
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| Error::io(format!("listening on {addr} for source {}", source.name), e))?;
        let clients = opts.tcp_clients.max(1);
        let (chunk_tx, chunk_rx) = sync_channel::<Vec<u8>>(64);
        let feed = CsvFeed::spawn(
            source,
            Box::new(ChanReader {
                rx: chunk_rx,
                cur: Vec::new(),
                pos: 0,
            }),
            false,
            opts,
            counters,
        )?;
        let log = feed.log.clone();
        std::thread::Builder::new()
            .name(format!("braid-tcp-{}", source.name))
            .spawn(move || {
                let mut line_no = 0u64;
                for _ in 0..clients {
                    let Ok((stream, _)) = listener.accept() else {
                        break;
                    };
                    let mut r = BufReader::with_capacity(1 << 16, stream);
                    let mut chunk: Vec<u8> = Vec::with_capacity(1 << 16);
                    loop {
                        let before = chunk.len();
                        match r.read_until(b'\n', &mut chunk) {
                            Ok(0) => break,
                            Ok(_) if chunk.last() == Some(&b'\n') => {
                                line_no += 1;
                                if chunk.len() >= 1 << 16
                                    && chunk_tx.send(std::mem::take(&mut chunk)).is_err()
                                {
                                    return;
                                }
                            }
                            Ok(_) | Err(_) => {
                                // Connection closed (or broke) in the middle of a line.
                                line_no += 1;
                                let partial = chunk.split_off(before);
                                if let Ok(mut l) = log.lock() {
                                    l.add(
                                        line_no,
                                        0,
                                        "connection closed mid-line".into(),
                                        &partial,
                                    );
                                }
                                chunk.push(b'\n'); // keeps line numbers aligned
                                break;
                            }
                        }
                    }
                    if !chunk.is_empty() && chunk_tx.send(chunk).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("starting a TCP reader thread", e))?;
        Ok(feed)
    }
}

impl Feed for CsvFeed {
    fn next(&mut self) -> Result<Next> {
        match self.rx.try_recv() {
            Ok(Msg::Window(e, b)) => Ok(Next::Window(e, b)),
            Ok(Msg::Fatal(e)) => Err(e),
            Err(TryRecvError::Empty) => Ok(Next::Wait),
            Err(TryRecvError::Disconnected) => Ok(Next::Done),
        }
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

/// Reads the chunks of a channel as one byte stream.
struct ChanReader {
    rx: Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for ChanReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.cur.len() {
            match self.rx.recv() {
                Ok(c) => {
                    self.cur = c;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

struct Parser {
    source: Source,
    strict: bool,
    log: Arc<Mutex<RejectLog>>,
    counters: Arc<Counters>,
    tx: SyncSender<Msg>,
}

impl Parser {
    fn reject(&self, line: u64, column: u64, reason: String, rec: &csv::ByteRecord) -> bool {
        let text = rec.iter().collect::<Vec<_>>().join(&b","[..]);
        if self.strict {
            let _ = self.tx.send(Msg::Fatal(Error::Input {
                source_name: self.source.name.clone(),
                line,
                column,
                message: format!(
                    "{reason} (record {:?})",
                    String::from_utf8_lossy(&text[..text.len().min(200)])
                ),
            }));
            return false;
        }
        if let Ok(mut l) = self.log.lock() {
            l.add(line, column, reason, &text);
        }
        true
    }

    fn run(self, reader: Box<dyn Read + Send>, header: bool) {
        let schema: &Schema = &self.source.schema;
        let arity = schema.arity();
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(header)
            .flexible(true)
            .buffer_capacity(1 << 16)
            .from_reader(reader);
        if header {
            match rdr.byte_headers() {
                Ok(h) => {
                    let names: Vec<String> = h
                        .iter()
                        .map(|f| String::from_utf8_lossy(f).trim().to_string())
                        .collect();
                    let ok = names.len() == arity
                        && names
                            .iter()
                            .zip(&schema.fields)
                            .all(|(n, f)| n.eq_ignore_ascii_case(&f.name));
                    if !ok {
                        let _ = self.tx.send(Msg::Fatal(Error::Input {
                            source_name: self.source.name.clone(),
                            line: 1,
                            column: 1,
                            message: format!(
                                "header has columns {}, expected {}",
                                names.join(", "),
                                schema.column_list()
                            ),
                        }));
                        return;
                    }
                }
                Err(e) => {
                    let _ = self.tx.send(Msg::Fatal(Error::Input {
                        source_name: self.source.name.clone(),
                        line: 1,
                        column: 1,
                        message: format!("cannot read the header: {e}"),
                    }));
                    return;
                }
            }
        }
        let tcol = schema.event_time;
        let mut rec = csv::ByteRecord::new();
        let mut window = Batch::with_capacity(arity, self.source.window);
        let mut epoch = 0u64;
        let mut seq = 0u64;
        let mut last_time = i64::MIN;
        loop {
            match rdr.read_byte_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    if let csv::ErrorKind::Io(_) = e.kind() {
                        let _ = self.tx.send(Msg::Fatal(Error::Input {
                            source_name: self.source.name.clone(),
                            line,
                            column: 0,
                            message: format!("read failed: {e}"),
                        }));
                        return;
                    }
                    if !self.reject(line, 0, e.to_string(), &rec) {
                        return;
                    }
                    continue;
                }
            }
            let line = rec.position().map_or(0, |p| p.line());
            if rec.len() != arity {
                if rec.len() == 1 && rec.get(0).is_some_and(|f| f.is_empty()) {
                    continue; // a blank line
                }
                if !self.reject(
                    line,
                    0,
                    format!("expected {arity} fields, found {}", rec.len()),
                    &rec,
                ) {
                    return;
                }
                continue;
            }
            let column_of = |i: usize| -> u64 {
                (0..i)
                    .map(|j| rec.get(j).map_or(0, |f| f.len()) + 1)
                    .sum::<usize>() as u64
                    + 1
            };
            // Event time first: it decides the window.
            let time = match tcol {
                Some(c) => match parse_field(&rec[c], DataType::Int64, false) {
                    Ok(Value::Int(t)) => Some(t),
                    Ok(_) => None,
                    Err(reason) => {
                        let reason = format!("field `{}`: {reason}", schema.fields[c].name);
                        if !self.reject(line, column_of(c), reason, &rec) {
                            return;
                        }
                        continue;
                    }
                },
                None => None,
            };
            if let Some(t) = time {
                if t < last_time {
                    let reason =
                        format!("event time {t} is before the previous record's {last_time}");
                    if !self.reject(line, column_of(tcol.unwrap_or(0)), reason, &rec) {
                        return;
                    }
                    continue;
                }
            }
            let e = epoch_of(&self.source, time, seq);
            if !window.is_empty() && (e != epoch || window.len() >= self.source.window) {
                let full =
                    std::mem::replace(&mut window, Batch::with_capacity(arity, self.source.window));
                Counters::add(&self.counters.rows_in, full.len() as u64);
                if self.tx.send(Msg::Window(epoch, full)).is_err() {
                    return;
                }
            }
            epoch = e;
            window.start_row(RowKey { seq, lane: 0 });
            let mut failed = None;
            for (i, f) in schema.fields.iter().enumerate() {
                match parse_field(&rec[i], f.ty, f.nullable) {
                    Ok(v) => window.push_value(v),
                    Err(reason) => {
                        failed = Some((i, format!("field `{}`: {reason}", f.name)));
                        break;
                    }
                }
            }
            match failed {
                None => {
                    seq += 1;
                    if let Some(t) = time {
                        last_time = t;
                    }
                }
                Some((i, reason)) => {
                    window.abandon_row(); // drops the half-built row
                    if !self.reject(line, column_of(i), reason, &rec) {
                        return;
                    }
                }
            }
        }
        if !window.is_empty() {
            Counters::add(&self.counters.rows_in, window.len() as u64);
            let _ = self.tx.send(Msg::Window(epoch, window));
        }
        if let Ok(mut l) = self.log.lock() {
            l.flush();
        }
    }
}
