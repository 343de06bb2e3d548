//! `Sink`: CSV to stdout, a file or a TCP server; discard; or collect in memory.
//! Writing sinks gather rows on worker 0; discard counts on every worker.

use super::stash::{EpochStash, HeldBarriers};
use super::{to_worker, Barriers, Place, Window, WindowBuilder, Windows};
use crate::checkpoint::{SinkMark, Store};
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::source::Counters;
use braid_plan::batch::Batch;
use braid_plan::output::OutRow;
use braid_plan::plan::{Plan, Sink, SinkSpec};
use braid_plan::text::write_csv_row;
use braid_plan::types::DataType;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;

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
    barriers: Barriers<'s>,
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
                        end_to_end(&shared, data.iter().map(|w| (w.born, w.mark, w.len())));
                        data.clear();
                    });
                    // The progress line's "epoch out" (and its lag) for discarded output.
                    if let Some(t) = frontier.frontier().first() {
                        let e = shared.ticks.epoch(*t);
                        shared.counters.epoch_out.fetch_max(e, Ordering::Relaxed);
                    }
                }
            },
        ));
    }
    let schema = sink.input.schema(registry)?;
    let types: Vec<DataType> = schema.fields.iter().map(|f| f.ty).collect();
    if let Some(store) = shared.checkpoints.clone() {
        let target = match &sink.spec {
            SinkSpec::File(path) if place.index == 0 => Some(open_committed_file(
                sink, path, &schema, output, &shared, &store,
            )?),
            SinkSpec::Native(name) if crate::checkpoint::committed_native(&sink.spec, registry) => {
                match place.index {
                    0 => Some(open_committed_native(
                        name, registry, output, &shared, &store,
                    )?),
                    _ => None,
                }
            }
            SinkSpec::Kafka(k) if place.index == 0 => Some(Committed::Kafka(Box::new(
                super::kafka::TopicInTransactions::open(k, &schema, output, &store)?,
            ))),
            SinkSpec::File(_) | SinkSpec::Kafka(_) => None,
            _ => {
                return Err(Error::Internal(format!(
                    "sink {:?} in a run with checkpoints",
                    sink.spec
                )))
            }
        };
        return committed(input, barriers, sink, target, types, output, shared, store);
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
            SinkSpec::Collect
            | SinkSpec::Discard
            | SinkSpec::Native(_)
            | SinkSpec::Kafka(_)
            | SinkSpec::Columnar(..) => None,
        };
        if let (true, Some(w)) = (sink.header, writer.as_mut()) {
            let names: Vec<String> = schema.fields.iter().map(|f| f.name.clone()).collect();
            write_header(w, &names, stamp).map_err(|e| Error::io("writing the header", e))?;
        }
    }
    let native = match &sink.spec {
        SinkSpec::Native(name) if place.index == 0 => Some(registry.sink(name)?.clone()),
        _ => None,
    };
    let mut kafka = match &sink.spec {
        SinkSpec::Kafka(k) if place.index == 0 => {
            Some(super::kafka::KafkaWriter::open(k, &schema)?)
        }
        _ => None,
    };
    let mut columnar = match &sink.spec {
        SinkSpec::Columnar(path, format) if place.index == 0 => Some(
            super::columnar::ColumnarWriter::create(path, *format, &schema)?,
        ),
        _ => None,
    };
    let collect = sink.spec == SinkSpec::Collect;
    let name = format!("Sink({:?})", sink.spec);
    // Rows this sink may still write (its LIMIT); `None`: no limit.
    let mut left = sink.limit;
    if left == Some(0) && place.index == 0 {
        shared.sink_done();
    }
    Ok(
        input.unary_frontier::<WindowBuilder, _, _, _>(to_worker(0), &name, move |_, _| {
            // The stamps of the windows written in this activation (timed once flushed).
            let mut stamps: Vec<(u64, u64, usize)> = Vec::new();
            move |(input, frontier), _output| {
                let mut wrote = false;
                input.for_each(|cap, data| {
                    let at = shared.ticks.epoch(cap.least().copied().unwrap_or(0));
                    // Since the sources' schedule started (the first source loop: a paced
                    // source's event time 0 is due then), so that it compares with event
                    // times; the run's start until then.
                    let emit_ms = stamp.then(|| {
                        let since = shared.schedule.get().copied().unwrap_or(shared.start);
                        since.elapsed().as_millis() as u64
                    });
                    for w in data.drain(..) {
                        let epoch = shared.granule.epoch(at, w.epoch);
                        if w.born != crate::qos::UNSTAMPED {
                            stamps.push((w.born, w.mark, w.len()));
                        }
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
                        } else if let Some(c) = columnar.as_mut() {
                            if let Err(e) = c.write(b) {
                                shared.fatal(e);
                                columnar = None;
                            }
                        } else if let Some(k) = kafka.as_mut() {
                            if let Err(e) = k.write(b) {
                                shared.fatal(e);
                                kafka = None;
                            }
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
                end_to_end(&shared, stamps.iter().copied());
                stamps.clear();
                if let Some(t) = frontier.frontier().first() {
                    let e = shared.ticks.epoch(*t);
                    shared.counters.epoch_out.fetch_max(e, Ordering::Relaxed);
                }
                // The input has ended: every message is delivered before the run ends.
                if frontier.frontier().is_empty() {
                    if let Some(Err(e)) = kafka.take().map(|mut k| k.flush()) {
                        shared.fatal(e);
                    }
                    if let Some(Err(e)) = columnar.take().map(|mut c| c.finish()) {
                        shared.fatal(e);
                    }
                }
            }
        }),
    )
}

/// Where a sink in a run with checkpoints writes (worker 0), and what it has written:
/// a file (its length and rows), or a sink written in Rust that can be cut back to a
/// row count (a stream's log in the server).
enum Committed {
    File(std::io::BufWriter<std::fs::File>, SinkMark),
    Native(Arc<dyn braid_plan::function::SinkFn>, SinkMark),
    Kafka(Box<super::kafka::TopicInTransactions>),
}

/// The output file of a run with checkpoints: resuming, cut back to the committed
/// length (rows written after the last commit are taken back); else created.
fn open_committed_file(
    sink: &Sink,
    path: &std::path::Path,
    schema: &braid_plan::types::Schema,
    output: usize,
    shared: &Shared,
    store: &Store,
) -> Result<Committed> {
    let io = |what: &str, e| Error::io(format!("{what} output file {}", path.display()), e);
    let (f, mut mark) = match store.read_sink(output)? {
        Some(mark) => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| io("opening", e))?;
            f.set_len(mark.bytes).map_err(|e| io("truncating", e))?;
            Counters::add(&shared.counters.rows_out, mark.rows);
            (f, mark)
        }
        None => (
            std::fs::File::create(path).map_err(|e| io("creating", e))?,
            SinkMark { bytes: 0, rows: 0 },
        ),
    };
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    use std::io::Seek;
    w.seek(std::io::SeekFrom::End(0))
        .map_err(|e| io("seeking", e))?;
    if sink.header && mark.bytes == 0 {
        let names: Vec<String> = schema.fields.iter().map(|f| f.name.clone()).collect();
        let mut head = Vec::new();
        write_header(&mut head, &names, sink.stamp_emit).map_err(|e| io("writing", e))?;
        w.write_all(&head).map_err(|e| io("writing", e))?;
        mark.bytes = head.len() as u64;
    }
    store.output(path);
    Ok(Committed::File(w, mark))
}

/// Cuts every sink of `plan` written in Rust that counts its committed rows (a
/// server's stream log) back to the rows checkpoint `store` resumes from counted (none
/// when nothing was committed), as [`open_committed_native`] does when the dataflow is
/// built: called first, it makes the cut before anyone can read past it.
pub(crate) fn cut_back_native_sinks(
    plan: &Plan,
    registry: &braid_plan::function::Registry,
    store: &Store,
) -> Result<()> {
    let sinks = match plan {
        Plan::Together(plans) => plans.as_slice(),
        one => std::slice::from_ref(one),
    };
    for (output, p) in sinks.iter().enumerate() {
        if let Plan::Sink(s) = p {
            if let SinkSpec::Native(name) = &s.spec {
                if crate::checkpoint::committed_native(&s.spec, registry) {
                    cut_back(name, registry, output, store)?;
                }
            }
        }
    }
    Ok(())
}

/// Cuts sink `name` (output `output`) back to the rows checkpoint `store` resumes from
/// counted (none when nothing was committed); the rows kept.
fn cut_back(
    name: &str,
    registry: &braid_plan::function::Registry,
    output: usize,
    store: &Store,
) -> Result<u64> {
    let rows = store.read_sink(output)?.map_or(0, |m| m.rows);
    registry
        .sink(name)?
        .truncate(rows)
        .map_err(|e| Error::io(format!("cutting sink {name} back to {rows} rows"), e))?;
    Ok(rows)
}

/// A sink written in Rust under checkpoints: resuming, cut back to the rows the last
/// commit counted (none when nothing was committed: the run starts over).
fn open_committed_native(
    name: &str,
    registry: &braid_plan::function::Registry,
    output: usize,
    shared: &Shared,
    store: &Store,
) -> Result<Committed> {
    let f = registry.sink(name)?.clone();
    let rows = cut_back(name, registry, output, store)?;
    Counters::add(&shared.counters.rows_out, rows);
    Ok(Committed::Native(f, SinkMark { bytes: 0, rows }))
}

impl Committed {
    /// Writes the windows of epoch `epoch`, in order.
    fn write(
        &mut self,
        epoch: u64,
        windows: &[Window],
        types: &[DataType],
        emit_ms: Option<u64>,
        line: &mut Vec<u8>,
        shared: &Shared,
    ) -> std::io::Result<()> {
        match self {
            Committed::File(w, mark) => {
                for win in windows {
                    for r in win.batch.rows() {
                        line.clear();
                        write_csv_row(line, &r, types, emit_ms)?;
                        w.write_all(line)?;
                        mark.bytes += line.len() as u64;
                        mark.rows += 1;
                    }
                    Counters::add(&shared.counters.rows_out, win.batch.len() as u64);
                }
                w.flush()
            }
            Committed::Native(f, mark) => {
                for win in windows {
                    let epoch = shared.counters.epoch_in.load(Ordering::Relaxed);
                    f.write(&win.batch, shared.start.elapsed(), epoch)?;
                    mark.rows += win.batch.len() as u64;
                    Counters::add(&shared.counters.rows_out, win.batch.len() as u64);
                }
                f.flush()
            }
            Committed::Kafka(k) => {
                let rows: usize = windows.iter().map(|w| w.batch.len()).sum();
                Counters::add(&shared.counters.rows_out, rows as u64);
                k.write(epoch, windows)
            }
        }
    }

    /// What is written so far, flushed, as checkpoint `c`'s: a Kafka sink commits its
    /// transaction (which holds the epochs up to `c`).
    fn mark(&mut self, c: u64) -> std::io::Result<SinkMark> {
        match self {
            Committed::File(w, mark) => w.flush().map(|()| *mark),
            Committed::Native(f, mark) => f.flush().map(|()| *mark),
            Committed::Kafka(k) => k.mark(c),
        }
    }

    /// The input has ended: a Kafka sink commits the epochs after the last checkpoint.
    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Committed::Kafka(k) => k.finish(),
            _ => Ok(()),
        }
    }
}

/// A sink in a run with checkpoints: it writes each epoch's rows once the epoch is
/// complete, in epoch order, so that what is written after epoch `c` is a clean cut;
/// at each checkpoint barrier it records that length ([`Store::write_sink`]; the
/// committer syncs a file to disk before the checkpoint counts). Resuming, the output
/// was cut back to the committed length: a reader never gets a row twice.
#[allow(clippy::too_many_arguments)]
fn committed<'s>(
    input: Windows<'s>,
    barriers: Barriers<'s>,
    sink: &Sink,
    target: Option<Committed>,
    types: Vec<DataType>,
    output: usize,
    shared: Arc<Shared>,
    store: Arc<Store>,
) -> Result<Windows<'s>> {
    let stamp = sink.stamp_emit;
    let mut target = target;
    let name = format!("Sink({:?})", sink.spec);
    let mut line = Vec::new();
    Ok(input.binary_frontier::<_, WindowBuilder, _, _, _, _>(
        barriers,
        to_worker(0),
        Pipeline,
        &name,
        move |_, _| {
            let mut stash: EpochStash<Vec<Window>> = EpochStash::new();
            let mut held = HeldBarriers::default();
            // Records what is written as checkpoint `c`'s.
            let commit = move |c: u64, target: &mut Option<Committed>, shared: &Shared| {
                let Some(t) = target.as_mut() else {
                    return;
                };
                let done = t
                    .mark(c)
                    .map_err(|e| Error::io("writing output", e))
                    .and_then(|mark| store.write_sink(c, output, mark));
                if let Err(e) = done {
                    shared.fatal(e);
                }
            };
            move |(input, frontier), (barrier_in, barrier_frontier), _output| {
                input.for_each(|cap, data| {
                    if let Some(windows) = stash.at(&cap, Vec::new) {
                        windows.append(data);
                    }
                });
                barrier_in.for_each(|cap, data| held.hold(&cap, data, &shared));
                let done = |t: u64| !frontier.less_equal(&t) && !barrier_frontier.less_equal(&t);
                while let Some((t, _cap, windows)) = stash.pop_done(done) {
                    // Checkpoints whose epochs' times all came before these rows'.
                    while let Some((c, _held)) = held.pop(|end| end < t) {
                        commit(c, &mut target, &shared);
                    }
                    if shared.failed() || shared.cancel.is_cancelled() {
                        continue;
                    }
                    // Since the sources' schedule started (the first source loop: a paced
                    // source's event time 0 is due then), so that it compares with event
                    // times; the run's start until then.
                    let emit_ms = stamp.then(|| {
                        let since = shared.schedule.get().copied().unwrap_or(shared.start);
                        since.elapsed().as_millis() as u64
                    });
                    let epoch = shared.ticks.epoch(t);
                    let Some(t) = target.as_mut() else {
                        continue;
                    };
                    if let Err(e) = t.write(epoch, &windows, &types, emit_ms, &mut line, &shared) {
                        shared.io_error("writing output".into(), e);
                        target = None;
                        continue;
                    }
                    end_to_end(&shared, windows.iter().map(|w| (w.born, w.mark, w.len())));
                }
                while let Some((c, _held)) = held.pop(done) {
                    commit(c, &mut target, &shared);
                }
                if let Some(t) = frontier.frontier().first() {
                    shared.counters.epoch_out.fetch_max(*t, Ordering::Relaxed);
                }
                let ended =
                    frontier.frontier().is_empty() && barrier_frontier.frontier().is_empty();
                if ended && !shared.failed() && !shared.cancel.is_cancelled() {
                    if let Some(Err(e)) = target.as_mut().map(Committed::finish) {
                        shared.io_error("writing output".into(), e);
                        target = None;
                    }
                }
            }
        },
    ))
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

/// Notes the end-to-end latency of windows written now, by their stamps (born, mark)
/// and rows (each row one sample), and the latency from a constrained part's start.
fn end_to_end(shared: &Shared, stamps: impl IntoIterator<Item = (u64, u64, usize)>) {
    if !shared.stamps {
        return;
    }
    let now = shared.now_ns();
    let l = &shared.latencies;
    for (born, mark, rows) in stamps {
        if born != crate::qos::UNSTAMPED {
            l.end_to_end
                .record_rows(now.saturating_sub(born), rows as u64);
        }
        if mark != crate::qos::UNSTAMPED {
            l.segment_end
                .record_rows(now.saturating_sub(mark), rows as u64);
        }
    }
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
