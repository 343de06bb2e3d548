//! `Sink`: CSV to stdout, a file or a TCP server; discard; or collect in memory.
//! Writing sinks gather rows on worker 0; discard counts on every worker.

use super::{to_worker, Place, Window, WindowBuilder, Windows};
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::source::Counters;
use braid_plan::batch::{Batch, Row};
use braid_plan::output::OutRow;
use braid_plan::plan::{Sink, SinkSpec};
use braid_plan::types::DataType;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;

/// Formats a row as a CSV line (no newline); strings are quoted when needed, and a
/// column whose type in `types` is a timestamp or date is written as ISO text.
pub fn write_csv_row(
    out: &mut impl Write,
    row: &Row<'_>,
    types: &[DataType],
    emit_ms: Option<u64>,
) -> std::io::Result<()> {
    for c in 0..row.arity() {
        if c > 0 {
            out.write_all(b",")?;
        }
        match row.get(c) {
            braid_plan::batch::Value::Str(s) if s.contains([',', '"', '\n', '\r']) => {
                write!(out, "\"{}\"", s.replace('"', "\"\""))?;
            }
            braid_plan::batch::Value::Int(v) if types.get(c).is_some_and(|t| t.is_time()) => {
                out.write_all(braid_plan::time::format(v, types[c]).as_bytes())?;
            }
            v => write!(out, "{v}")?,
        }
    }
    if let Some(ms) = emit_ms {
        write!(out, ",{ms}")?;
    }
    out.write_all(b"\n")
}

/// The CSV line of a sink's column names (`header = true`), with `emit_ms` last when
/// each line is stamped with its emit time.
fn write_header(out: &mut impl Write, names: &[String], stamp: bool) -> std::io::Result<()> {
    let quote = |n: &str| match n.contains([',', '"', '\n', '\r']) {
        true => format!("\"{}\"", n.replace('"', "\"\"")),
        false => n.to_string(),
    };
    let mut cells: Vec<String> = names.iter().map(|n| quote(n)).collect();
    if stamp {
        cells.push("emit_ms".into());
    }
    writeln!(out, "{}", cells.join(","))
}

pub(crate) fn render<'s>(
    input: Windows<'s>,
    sink: &Sink,
    registry: &braid_plan::function::Registry,
    place: Place,
    output: usize,
    shared: Arc<Shared>,
) -> Result<Windows<'s>> {
    let stamp = sink.stamp_emit;
    if sink.spec == SinkSpec::Discard && sink.limit.is_none() {
        return Ok(input.unary_frontier::<WindowBuilder, _, _, _>(
            Pipeline,
            "Sink(discard)",
            move |_, _| {
                move |(input, frontier), _output| {
                    input.for_each(|_, data| {
                        let n: usize = data.iter().map(|w| w.batch.len()).sum();
                        Counters::add(&shared.counters.rows_out, n as u64);
                        data.clear();
                    });
                    // The progress line's "epoch out" (and its lag) for discarded output.
                    if let Some(t) = frontier.frontier().first() {
                        shared.counters.epoch_out.fetch_max(*t, Ordering::Relaxed);
                    }
                }
            },
        ));
    }
    let mut writer: Option<Box<dyn Write>> = None;
    if place.index == 0 {
        writer = match &sink.spec {
            SinkSpec::Stdout => Some(Box::new(std::io::BufWriter::new(std::io::stdout()))),
            SinkSpec::File(p) => Some(Box::new(std::io::BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(p)
                    .map_err(|e| Error::io(format!("creating output file {}", p.display()), e))?,
            ))),
            SinkSpec::Tcp(addr) => Some(Box::new(std::io::BufWriter::new(
                std::net::TcpStream::connect(addr)
                    .map_err(|e| Error::io(format!("connecting to sink {addr}"), e))?,
            ))),
            SinkSpec::Collect | SinkSpec::Discard | SinkSpec::Native(_) => None,
        };
        if let (true, Some(w)) = (sink.header, writer.as_mut()) {
            let schema = sink.input.schema(registry)?;
            let names: Vec<String> = schema.fields.iter().map(|f| f.name.clone()).collect();
            write_header(w, &names, stamp).map_err(|e| Error::io("writing the header", e))?;
        }
    }
    let native = match &sink.spec {
        SinkSpec::Native(name) if place.index == 0 => Some(registry.sink(name)?.clone()),
        _ => None,
    };
    let collect = sink.spec == SinkSpec::Collect;
    let types: Vec<DataType> = sink
        .input
        .schema(registry)?
        .fields
        .iter()
        .map(|f| f.ty)
        .collect();
    let name = format!("Sink({:?})", sink.spec);
    // Rows this sink may still write (its LIMIT); `None`: no limit.
    let mut left = sink.limit;
    if left == Some(0) && place.index == 0 {
        shared.sink_done();
    }
    Ok(
        input.unary_frontier::<WindowBuilder, _, _, _>(to_worker(0), &name, move |_, _| {
            move |(input, frontier), _output| {
                let mut wrote = false;
                input.for_each(|cap, data| {
                    let epoch = cap.least().copied().unwrap_or(0);
                    let emit_ms = stamp.then(|| shared.start.elapsed().as_millis() as u64);
                    for w in data.drain(..) {
                        // A cancelled or failed run writes nothing more: what is still
                        // coming was made from an input cut short (windows closed early),
                        // or after the fault that failed it.
                        let Some(take) = allowed(&shared, &mut left, w.batch.len()) else {
                            continue;
                        };
                        let prefix;
                        let b: &Batch = if take < w.batch.len() {
                            prefix = first_rows(&w.batch, take);
                            &prefix
                        } else {
                            &w.batch
                        };
                        Counters::add(&shared.counters.rows_out, b.len() as u64);
                        if let Some(n) = native.as_ref() {
                            if let Err(e) = n.write(
                                b,
                                shared.start.elapsed(),
                                shared.counters.epoch_in.load(Ordering::Relaxed),
                            ) {
                                shared.error(format!("writing output: {e}"));
                            }
                            wrote = true;
                        } else if collect {
                            if let Ok(mut c) = shared.collected.lock() {
                                if c.len() <= output {
                                    c.resize_with(output + 1, Vec::new);
                                }
                                c[output].extend(b.rows().map(|r| OutRow {
                                    epoch,
                                    key: r.key(),
                                    values: r.to_scalars(),
                                }));
                            }
                        } else if let Some(wr) = writer.as_mut() {
                            for r in b.rows() {
                                if let Err(e) = write_csv_row(wr, &r, &types, emit_ms) {
                                    shared.io_error("writing output".into(), e);
                                    writer = None;
                                    break;
                                }
                            }
                            wrote = true;
                        }
                    }
                });
                if wrote {
                    if let Some(Err(e)) = writer.as_mut().map(|wr| wr.flush()) {
                        shared.io_error("writing output".into(), e);
                        writer = None;
                    }
                }
                if let Some(t) = frontier.frontier().first() {
                    shared.counters.epoch_out.fetch_max(*t, Ordering::Relaxed);
                }
            }
        }),
    )
}

/// How many of a window's `n` rows the sink writes: all of them, or what its LIMIT has
/// left (counted down in `left`; the sink takes itself off when it reaches 0). `None`
/// once the run is cancelled or has failed, or the limit was reached.
fn allowed(shared: &Shared, left: &mut Option<u64>, n: usize) -> Option<usize> {
    if shared.cancel.is_cancelled() || shared.failed() || *left == Some(0) {
        return None;
    }
    let Some(l) = left.as_mut() else {
        return Some(n);
    };
    let take = (*l).min(n as u64);
    *l -= take;
    if *l == 0 {
        shared.sink_done();
    }
    Some(take as usize)
}

/// The first `k` rows of `b`.
fn first_rows(b: &Batch, k: usize) -> Batch {
    let mut out = Batch::with_capacity(b.arity(), k);
    for (i, r) in b.rows().take(k).enumerate() {
        out.push_row_of(b, i, r.key());
    }
    out
}

#[allow(dead_code)]
fn _assert_window_is_exchange_data() {
    fn is<T: timely::ExchangeData>() {}
    is::<Window>();
}
