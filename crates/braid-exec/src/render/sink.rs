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

pub(crate) fn render<'s>(
    input: Windows<'s>,
    sink: &Sink,
    registry: &braid_plan::function::Registry,
    place: Place,
    output: usize,
    shared: Arc<Shared>,
) -> Result<Windows<'s>> {
    let stamp = sink.stamp_emit;
    if sink.spec == SinkSpec::Discard {
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
    Ok(
        input.unary_frontier::<WindowBuilder, _, _, _>(to_worker(0), &name, move |_, _| {
            move |(input, frontier), _output| {
                let mut wrote = false;
                input.for_each(|cap, data| {
                    let epoch = cap.least().copied().unwrap_or(0);
                    let emit_ms = stamp.then(|| shared.start.elapsed().as_millis() as u64);
                    for w in data.drain(..) {
                        let b: &Batch = &w.batch;
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

#[allow(dead_code)]
fn _assert_window_is_exchange_data() {
    fn is<T: timely::ExchangeData>() {}
    is::<Window>();
}
