//! Braid's binary batch file: a header line `BRAID-BATCH 1 <arity>\n`, then windows,
//! each `u64 epoch` (little endian), `u64 length` and that many bytes of the bincode
//! 1.3 encoding of a [`Batch`]. Reading it costs a memcpy-like decode per window.

use super::{Feed, Next, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::Batch;
use braid_plan::plan::Source;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &str = "BRAID-BATCH 1";

/// Writes windows to a binary batch file.
pub struct BinaryWriter {
    out: BufWriter<std::fs::File>,
}

impl BinaryWriter {
    /// Creates the file and writes its header.
    pub fn create(path: &Path, arity: usize) -> Result<BinaryWriter> {
        let f = std::fs::File::create(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        writeln!(out, "{MAGIC} {arity}")
            .map_err(|e| Error::io("writing a binary batch header", e))?;
        Ok(BinaryWriter { out })
    }

    /// Appends one window.
    pub fn write(&mut self, epoch: u64, batch: &Batch) -> Result<()> {
        let bytes = bincode::serialize(batch)
            .map_err(|e| Error::Internal(format!("encoding a batch: {e}")))?;
        let io = |e| Error::io("writing a binary batch file", e);
        self.out.write_all(&epoch.to_le_bytes()).map_err(io)?;
        self.out
            .write_all(&(bytes.len() as u64).to_le_bytes())
            .map_err(io)?;
        self.out.write_all(&bytes).map_err(io)
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
    windows: u64,
    buf: Vec<u8>,
}

impl BinaryFeed {
    /// Opens the file and checks its header against the source's arity.
    pub fn open(path: &Path, source: &Source) -> Result<BinaryFeed> {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let mut input = BufReader::with_capacity(1 << 20, f);
        let mut header = Vec::new();
        let mut byte = [0u8; 1];
        while header.len() < 64 {
            match input.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => header.push(byte[0]),
                Ok(_) => break,
                Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
            }
        }
        let header = String::from_utf8_lossy(&header).into_owned();
        let expected = format!("{MAGIC} {}", source.schema.arity());
        if header != expected {
            return Err(Error::Input {
                source_name: source.name.clone(),
                line: 1,
                column: 1,
                message: format!("header is {header:?}, expected {expected:?} (a Braid binary batch file of this schema)"),
            });
        }
        Ok(BinaryFeed {
            input,
            name: source.name.clone(),
            windows: 0,
            buf: Vec::new(),
        })
    }
}

impl Feed for BinaryFeed {
    fn next(&mut self) -> Result<Next> {
        let mut head = [0u8; 16];
        match self.input.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(Next::Done),
            Err(e) => return Err(Error::io(format!("reading {}", self.name), e)),
        }
        let epoch = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(head[8..].try_into().expect("8 bytes")) as usize;
        self.buf.resize(len, 0);
        self.input
            .read_exact(&mut self.buf)
            .map_err(|e| Error::io(format!("reading {}", self.name), e))?;
        self.windows += 1;
        let batch: Batch = bincode::deserialize(&self.buf).map_err(|e| Error::Input {
            source_name: self.name.clone(),
            line: self.windows,
            column: 0,
            message: format!("window {} is not a valid batch: {e}", self.windows),
        })?;
        Ok(Next::Window(epoch, batch))
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
